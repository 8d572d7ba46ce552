"""python -m services.gateway"""
from services.common.server import main
from services.gateway.server import build

main("gateway", build)
