"""``python -m services.mcp_server`` = ``graphmesh mcp``."""
import sys

from services.cli.main import main

sys.exit(main(["mcp", *sys.argv[1:]]))
