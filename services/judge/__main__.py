"""python -m services.judge"""
from services.common.server import main
from services.judge.server import build

main("judge", build)
