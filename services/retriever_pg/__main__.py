"""python -m services.retriever_pg"""
from services.common.server import main
from services.retriever_pg.server import build

main("retriever_pg", build)
