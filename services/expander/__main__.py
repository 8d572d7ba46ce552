"""python -m services.expander"""
from services.common.server import main
from services.expander.server import build

main("expander", build)
