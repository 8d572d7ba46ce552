"""python -m services.retriever_graph"""
from services.common.server import main
from services.retriever_graph.server import build

main("retriever_graph", build)
