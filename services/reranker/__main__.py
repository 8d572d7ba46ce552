"""python -m services.reranker"""
from services.common.server import main
from services.reranker.server import build

main("reranker", build)
