"""The GraphMesh MCP server: the tools of services/mcp_server/tools.py on the
official MCP Python SDK (``mcp``, its MCPServer API), each a call of the
gateway's public gRPC API.

    search            Search             ranked evidence passages
    answer            Answer             an answer with [n] citations, or a no-answer
    search_entities   SearchEntities     library entities for a name or attributes
    list_collections  ListCollections    collections and their counts
    get_document      GetDocument        one document's record
    ingest_text       Ingest (one JSONL document record)
    delete_document   DeleteDocuments    one document, from every store

The gateway is the one at GRAPHMESH_GATEWAY_ADDR (TLS per GRAPHMESH_TLS_*,
as every client of the mesh); the API key the server was started with
(GRAPHMESH_API_KEY, or a key file) is sent with every call as
``authorization: Bearer KEY``, which is how the gateway's auth
(services/gateway/api/auth.py) reads it. With the gateway's auth on, a
server started without a key can call nothing, writes included; with auth
off, anyone who can reach the MCP server can ingest. Transports: stdio (the
client starts ``graphmesh mcp``) and streamable HTTP (``graphmesh mcp
--transport http --port 8765``: http://127.0.0.1:8765/mcp; bound to
loopback with the SDK's DNS-rebinding protection unless --host says
otherwise).
"""
from __future__ import annotations

import asyncio
import logging
import sys
from typing import Annotated

import grpc
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import ToolAnnotations
from pydantic import ConfigDict, Field, model_validator

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.common.clients import channel
from services.common.errors import InvalidArgument
from services.common.spelling import closest
from services.mcp_server import tools
from services.mcp_server.tools import (AnswerResult, CollectionsResult, DeleteResult, Document, EntitiesResult,
                                       IngestResult, SearchResult)

log = logging.getLogger("graphmesh.mcp")

#: Seconds a tool call may take at the gateway (an LLM answer included).
DEFAULT_TIMEOUT = 120.0
INSTRUCTIONS = (
    "GraphMesh is a retrieval service over a document collection (Chinese first: laws, manuals, policies). "
    "Call list_collections to see what is stored, search to find passages, answer for a cited answer "
    "(quote its [n] marks with the listed sources; when it abstains, say the sources do not answer), "
    "search_entities for named things, get_document for a document's record, ingest_text to add a text, "
    "delete_document to remove one.")

Query = Annotated[str, Field(description="The question or search text, in the documents' language (1 to 10,000 characters).",
                             min_length=1, max_length=10_000)]
Collections = Annotated[list[str], Field(description="Collections to search (list_collections); empty = the default collection.",
                                         max_length=20)]
Filter = Annotated[str, Field(description='Metadata filter, terms joined by AND: key = "v", key IN ("a", "b"), key >= 2020 '
                                          '(e.g. status = "现行有效" AND year >= 2020); empty = none.', max_length=2000)]


class GatewayClient:
    """Calls the gateway's GatewayService with the server's API key.
    The channel is opened on first use, in the event loop of the caller."""

    def __init__(self, address: str, api_key: str = "", timeout: float = DEFAULT_TIMEOUT) -> None:
        self.address, self.timeout = address, timeout
        self._metadata = [("authorization", f"Bearer {api_key}")] if api_key else []
        self._channel: grpc.aio.Channel | None = None
        self._stub: gateway_pb2_grpc.GatewayServiceStub | None = None

    async def call(self, rpc: str, request, fields: dict[str, str] | None = None):
        """The reply of GatewayService.``rpc``.

        Raises:
            ToolError: the call failed; its message is tools.error_message's
                (``fields`` renaming the request's fields to the tool's arguments).
        """
        if self._stub is None:
            self._channel = channel(self.address)
            self._stub = gateway_pb2_grpc.GatewayServiceStub(self._channel)
        try:
            return await getattr(self._stub, rpc)(request, timeout=self.timeout, metadata=self._metadata)
        except grpc.RpcError as err:
            raise ToolError(tools.error_message(err, fields)) from None

    async def close(self) -> None:
        """Closes the channel (if opened)."""
        if self._channel is not None:
            await self._channel.close()
            self._channel = self._stub = None


def _invalid(err: InvalidArgument) -> ToolError:
    return ToolError(f"INVALID_ARGUMENT: field {err.field}: {err.description}")


READ = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)


def unknown_arguments(arguments: object, known: list[str]) -> str:
    """Why ``arguments`` (a tool call's) hold names the tool does not take,
    each with the argument it looks like ("topk: not an argument; did you
    mean top_k?"), and the tool's arguments; "" when they hold none."""
    if not isinstance(arguments, dict):
        return ""
    said = []
    for name in (str(k) for k in arguments if k not in known):
        close = closest(name, known, max_edits=3)
        said.append(f"{name}: not an argument" + (f"; did you mean {close}?" if close else ""))
    return f"{'; '.join(said)} (arguments: {', '.join(known)})" if said else ""


def strict(tool: Tool) -> Tool:
    """``tool`` refusing arguments it does not take: a misspelt ``topk``
    fails the call naming it and the argument it looks like
    (``unknown_arguments``) instead of being dropped while ``top_k`` keeps
    its default; its input schema says ``additionalProperties: false``."""
    loose = tool.fn_metadata.arg_model
    known = list(loose.model_fields)

    def refuse_unknown(cls, data):
        problem = unknown_arguments(data, known)
        if problem:
            raise ValueError(problem)
        return data

    model = type(loose.__name__, (loose,), {"model_config": ConfigDict(**loose.model_config, extra="forbid"),
                                             "__module__": loose.__module__,
                                             "_refuse_unknown": model_validator(mode="before")(classmethod(refuse_unknown))})
    tool.fn_metadata.arg_model = model
    tool.parameters = model.model_json_schema(by_alias=True)
    return tool


class _StrictTools:
    """Collects the tool functions ``build_server`` defines, as strict Tools."""

    def __init__(self) -> None:
        self.tools: list[Tool] = []

    def tool(self, description: str, annotations: ToolAnnotations):
        def register(fn):
            self.tools.append(strict(Tool.from_function(fn, description=description, annotations=annotations)))
            return fn
        return register


def build_server(gateway: GatewayClient, name: str = "graphmesh") -> MCPServer:
    """The MCP server with the seven tools, each calling ``gateway``; a call
    with an argument a tool does not take fails naming it (``strict``)."""
    mcp = _StrictTools()

    @mcp.tool(description=tools.DESCRIPTIONS["search"], annotations=READ)
    async def search(query: Query,
                     top_k: Annotated[int, Field(description="Passages to return (1 to 100).", ge=1, le=100)] = 5,
                     collections: Collections = [],  # noqa: B006 - pydantic copies defaults
                     filter: Filter = "") -> SearchResult:
        try:
            request = tools.search_request(query, top_k, collections, filter)
        except InvalidArgument as err:
            raise _invalid(err) from None
        return tools.search_result(await gateway.call("Search", request))

    @mcp.tool(description=tools.DESCRIPTIONS["answer"], annotations=READ)
    async def answer(query: Query,
                     top_k: Annotated[int, Field(description="Evidence passages to answer from (1 to 100).", ge=1, le=100)] = 10,
                     collections: Collections = [],  # noqa: B006
                     filter: Filter = "") -> AnswerResult:
        try:
            request = tools.answer_request(query, top_k, collections, filter)
        except InvalidArgument as err:
            raise _invalid(err) from None
        return tools.answer_result(await gateway.call("Answer", request))

    @mcp.tool(description=tools.DESCRIPTIONS["search_entities"], annotations=READ)
    async def search_entities(
            query: Annotated[str, Field(description="An entity name, alias, misspelling or attribute list (1 to 2,000 characters).",
                                        min_length=1, max_length=2000)],
            top_k: Annotated[int, Field(description="Entities to return (1 to 100).", ge=1, le=100)] = 10,
            collections: Collections = []) -> EntitiesResult:  # noqa: B006
        request = gateway_pb2.SearchEntitiesRequest(query=query, top_k=top_k, collections=[c for c in collections if c.strip()])
        return tools.entities_result(await gateway.call("SearchEntities", request))

    @mcp.tool(description=tools.DESCRIPTIONS["list_collections"], annotations=READ)
    async def list_collections() -> CollectionsResult:
        return tools.collections_result(await gateway.call("ListCollections", gateway_pb2.ListCollectionsRequest()))

    @mcp.tool(description=tools.DESCRIPTIONS["get_document"], annotations=READ)
    async def get_document(
            document_id: Annotated[str, Field(description='The document id (search results\' document_id), or its full name '
                                                          '"collections/{collection}/documents/{id}".', min_length=1, max_length=2000)],
            collection: Annotated[str, Field(description='Its collection; "-" = find the id in any collection.',
                                             max_length=63)] = "-") -> Document:
        request = gateway_pb2.GetDocumentRequest(name=tools.document_name(document_id, collection))
        return tools.document_result(await gateway.call("GetDocument", request))

    @mcp.tool(description=tools.DESCRIPTIONS["ingest_text"],
              annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=False))
    async def ingest_text(
            text: Annotated[str, Field(description="The document's text (plain text; headings and paragraphs kept).",
                                       min_length=1, max_length=tools.MAX_INGEST_CHARS)],
            document_id: Annotated[str, Field(description="The document's id, unique across collections; the same id "
                                                          "replaces the stored document.", min_length=1, max_length=500)],
            collection: Annotated[str, Field(description="Collection to store it in (created when new): an ASCII letter or "
                                                         "digit, then up to 62 of A-Z a-z 0-9 _ -.", max_length=63)] = "default",
            title: Annotated[str, Field(description="The document's title (optional).", max_length=500)] = "",
            metadata: Annotated[dict[str, str | int | float], Field(
                description="Metadata kept with the document, filterable in search (e.g. {\"year\": \"2024\"}; a "
                            "number is kept as its text).")] = {},  # noqa: B006
    ) -> IngestResult:
        try:
            request = tools.ingest_request(text, document_id, collection, title, metadata)
        except InvalidArgument as err:
            raise _invalid(err) from None
        return tools.ingest_result(await gateway.call("Ingest", request, tools.INGEST_TEXT_FIELDS), request)

    @mcp.tool(description=tools.DESCRIPTIONS["delete_document"],
              annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False))
    async def delete_document(
            document_id: Annotated[str, Field(description='The document id (search results\' document_id), or its full name '
                                                          '"collections/{collection}/documents/{id}".', min_length=1, max_length=2000)],
            collection: Annotated[str, Field(description='Its collection; "-" = the id in whichever collection holds it.',
                                             max_length=63)] = "-") -> DeleteResult:
        try:
            request = tools.delete_request(document_id, collection)
        except InvalidArgument as err:
            raise _invalid(err) from None
        return tools.delete_result(await gateway.call("DeleteDocuments", request))

    return MCPServer(name, title="GraphMesh", instructions=INSTRUCTIONS, version=_version(), tools=mcp.tools)


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("graphmesh")
    except Exception:  # not installed as a distribution (a source checkout)
        return "0"


def run(transport: str = "stdio", host: str = "127.0.0.1", port: int = 8765, path: str = "/mcp",
        address: str | None = None, api_key: str = "") -> int:
    """Serves the MCP server until stopped: over stdio, or streamable HTTP
    at http://host:port/path. ``address`` defaults to GRAPHMESH_GATEWAY_ADDR.
    Logs go to stderr (stdout is the stdio transport's)."""
    from services.common.settings import MeshAddresses

    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    gateway = GatewayClient(address or MeshAddresses().gateway_addr, api_key)
    server = build_server(gateway)
    if transport == "stdio":
        server.run("stdio")
    elif transport == "http":
        if host not in ("127.0.0.1", "localhost", "::1"):
            log.warning("MCP over HTTP on %s: anyone who reaches it calls the gateway with this server's API key", host)
        return asyncio.run(_serve_http(server, host, port, path))
    else:
        raise ValueError(f"unknown transport {transport!r}: stdio or http")
    return 0


async def _serve_http(server: MCPServer, host: str, port: int, path: str) -> int:
    """Serves ``server``'s streamable HTTP app with uvicorn (as the SDK's
    ``run("streamable-http")`` does) on a socket bound first, and prints the
    READY line only once it serves. Returns 0 when stopped, 3 when the port
    cannot be bound (taken, or not an address of this machine), said in one
    line on stderr."""
    import socket

    import uvicorn

    try:
        listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
    except OSError as err:
        print(f"error: cannot listen on {host}:{port}: {err.strerror or err}", file=sys.stderr)
        return 3
    app = server.streamable_http_app(streamable_http_path=path, host=host)
    http = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level=server.settings.log_level.lower()))
    serving = asyncio.ensure_future(http.serve(sockets=[listener]))
    while not http.started and not serving.done():
        await asyncio.sleep(0.05)
    if http.started:
        print(f"READY graphmesh-mcp http://{host}:{port}{path}", file=sys.stderr, flush=True)
    await serving
    return 0
