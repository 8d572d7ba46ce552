"""GraphMesh as an MCP server (Model Context Protocol): tools that call the
gateway's public gRPC API (services/mcp_server/server.py), with the pure
request/reply mapping in services/mcp_server/tools.py. Started by
``graphmesh mcp`` (stdio or streamable HTTP); docs/integrations.md."""
