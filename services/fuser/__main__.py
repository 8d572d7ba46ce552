"""python -m services.fuser"""
from services.common.server import main
from services.fuser.server import build

main("fuser", build)
