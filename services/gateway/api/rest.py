"""REST/JSON transcoding of the gateway's gRPC API.

Routes come from the ``google.api.http`` annotations of GatewayService
and google.longrunning.Operations (e.g. POST /v1/query:search with body
"*", GET /v1/{parent=collections/*}/documents, GET
/v1/{name=operations/**}; ``rest_routes``, path templates in ``paths``).
Each request is parsed into the RPC's request message (the JSON body, the
path variables, and for a route without body the query parameters;
unknown fields rejected), sent to the gateway's own
gRPC port over loopback (so metrics, deadlines and errors are the same as for
gRPC callers), and the reply is written as JSON (proto3 JSON mapping). Errors
follow the google.rpc.Status JSON shape with the HTTP code of AIP-193.
"""
from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
from aiohttp import web
from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from google.rpc import status_pb2

from services.common.admission import Admission, Overloaded
from services.common.clients import channel
from services.gateway.api.console import add_console_routes
from services.gateway.api.edge_rules import DEADLINE_MESSAGE, request_timeout
from services.gateway.api.openai_compat import add_openai_routes, openai_errors
from services.gateway.api.middleware import (RestOptions, close_slow_connections, cors, cors_headers, edge_guard, error_body,
                                             quiet_malformed_requests, route_errors)
from services.gateway.api.paths import aiohttp_path, fill_message
from services.gateway.api.rest_parse_errors import carries_bytes, field_of, parse_description, shape_error
from services.gateway.api.rest_routes import SERVICES, Route, request_class, routes, stubs

log = logging.getLogger("graphmesh.gateway.rest")

# gRPC code -> HTTP status (google.rpc.Code mapping, AIP-193).
HTTP_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: 400, grpc.StatusCode.FAILED_PRECONDITION: 400, grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNAUTHENTICATED: 401, grpc.StatusCode.PERMISSION_DENIED: 403, grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409, grpc.StatusCode.ABORTED: 409, grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.CANCELLED: 499, grpc.StatusCode.UNIMPLEMENTED: 501, grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504, grpc.StatusCode.INTERNAL: 500, grpc.StatusCode.UNKNOWN: 500,
    grpc.StatusCode.DATA_LOSS: 500,
}


def http_routes() -> list[tuple[str, str, str]]:
    """(HTTP verb, path template, RPC name) for every annotated method of
    GatewayService and google.longrunning.Operations."""
    return [(r.verb, r.path, r.rpc) for r in routes()]


def reply_json(message: Message, indent: int | None = 2) -> str:
    """A reply as proto3 JSON (camelCase names) with every field printed,
    zeros and empty lists included: a fused score of 0.0 reads "fusedScore": 0
    rather than a missing key, so clients see the same shape on every reply.
    Fields with presence (``optional``, oneof members, messages) still appear
    only when set."""
    return json_format.MessageToJson(message, ensure_ascii=False, indent=indent,
                                     always_print_fields_with_no_presence=True)


def _rpcerror_body(err: grpc.aio.AioRpcError) -> web.Response:
    """The JSON error of a failed call; its google.rpc.Status details when
    the trailer carries them (their message is the server's own: grpc's
    percent-decoded copy can differ, and rpc_status.from_call then raises)."""
    raw = next((v for k, v in (err.trailing_metadata() or ()) if k == "grpc-status-details-bin"), None)
    try:
        status = status_pb2.Status.FromString(raw) if isinstance(raw, bytes) else None
    except DecodeError:
        status = None
    details = []
    if status is not None:
        for detail in status.details:
            try:
                details.append(json.loads(json_format.MessageToJson(detail)))
            except Exception:  # unknown detail type: report its type only
                details.append({"@type": detail.type_url})
    message = status.message if status is not None and status.message else err.details() or ""
    if status is None and err.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
        # gRPC's own words ("Deadline Exceeded", "Stream removed") for a deadline the call itself ran out of
        message = DEADLINE_MESSAGE
    reply = error_body(HTTP_STATUS.get(err.code(), 500), err.code().name, message, details)
    reply.headers.update(_returned(err.trailing_metadata()) | _returned(err.initial_metadata()))
    return reply


def _returned(metadata) -> dict[str, str]:
    """The HTTP headers of the gRPC metadata the REST caller should see
    (trace id, Retry-After)."""
    return {RETURNED_METADATA[k]: str(v) for k, v in (metadata or ()) if k in RETURNED_METADATA}


#: Request headers passed on to the gRPC call as metadata (API keys).
FORWARDED_HEADERS = ("authorization", "x-api-key")
#: gRPC response metadata passed back as HTTP headers.
RETURNED_METADATA = {"x-trace-id": "X-Trace-Id", "retry-after": "Retry-After"}
OPENAPI = Path(__file__).resolve().parent.parent / "static" / "openapi.json"


def build_app(grpc_target: str, options: RestOptions | None = None) -> web.Application:
    """An aiohttp app transcoding REST calls to the gateway at ``grpc_target``,
    with the CORS allow-list and body-size limit of ``options``; it also
    serves the OpenAPI document at GET /openapi.json, the web console at
    GET / and GET /v1/stages:summary (services/gateway/api/console.py), and
    the OpenAI-compatible POST /v1/chat/completions and GET /v1/models
    (services/gateway/api/openai_compat/)."""
    options = options or RestOptions()
    app = web.Application(client_max_size=options.max_request_bytes,
                          middlewares=[openai_errors, route_errors(options.max_request_bytes), edge_guard(options),
                                       cors(options.cors_origins)])
    app.on_response_prepare.append(cors_headers(options))
    state: dict[str, Any] = {}

    async def on_startup(_: web.Application) -> None:
        state["channel"] = channel(grpc_target)
        state["stubs"] = stubs(state["channel"])
        state["stub"] = state["stubs"][SERVICES[0].full_name]
        # Every REST request rides this one connection: keep its streams
        # below the server's per-connection limit and queue the rest.
        state["admission"] = Admission(options.max_in_flight, options.max_queued, "REST requests")

    async def on_cleanup(_: web.Application) -> None:
        await state["channel"].close()

    def handler(route: Route) -> Callable:
        method, has_body = route.method, route.has_body
        request_cls = request_class(method)

        async def handle(request: web.Request) -> web.StreamResponse:
            try:  # a client that declares a body and never sends it is not held forever
                raw = await asyncio.wait_for(request.read(), options.body_timeout)
            except asyncio.TimeoutError:
                return error_body(408, "DEADLINE_EXCEEDED",
                                  f"request body not received within {options.body_timeout:g} s (GRAPHMESH_GATEWAY_REST__BODY_TIMEOUT)")
            try:
                text = raw.decode("utf-8-sig") if raw.strip() else "{}"
                if not text.lstrip().startswith("{"):  # null, [], 5, "x": not a request
                    return _bad_request("body", "must be a JSON object")
                message: Message = json_format.Parse(text, request_cls())
                if carries_bytes(request_cls.DESCRIPTOR) and (shape := shape_error(json.loads(text), request_cls.DESCRIPTOR)):
                    return _bad_request(*shape)  # base64 that json_format read by skipping characters
                bad = fill_message(message, dict(request.match_info), request.query if not has_body else {})
                if bad:
                    return _bad_request(*bad)
            except UnicodeDecodeError:
                return _bad_request("body", "must be UTF-8 JSON")
            except json_format.ParseError as err:
                shape = shape_error(_json_or_none(text), request_cls.DESCRIPTOR)
                if shape:
                    return _bad_request(*shape)
                return _bad_request(field_of(str(err), request_cls.DESCRIPTOR), parse_description(str(err)))
            except RecursionError:
                return _bad_request("body", "JSON nested too deeply")
            timeout, refusal = request_timeout(request.headers)
            if refusal is not None:
                return _bad_request(refusal.field, refusal.message)
            metadata = [(h, request.headers[h]) for h in FORWARDED_HEADERS if h in request.headers]
            try:
                async with state["admission"].slot(timeout) as waited:
                    remaining = None if timeout is None else max(timeout - waited, 0.001)
                    call = getattr(state["stubs"][method.containing_service.full_name], method.name)(
                        message, timeout=remaining, metadata=metadata)
                    if method.server_streaming:
                        return await _stream(request, call)
                    try:
                        reply = await call
                    except grpc.aio.AioRpcError as err:
                        return _rpcerror_body(err)
            except Overloaded as busy:
                return _overloaded(busy)
            body = reply_json(reply)
            return web.Response(text=body, content_type="application/json", headers=_returned(await call.initial_metadata()))

        return handle

    # Literal routes first: GET /v1/collections must not be taken for a template.
    for route in sorted(routes(), key=lambda r: "{" in r.path):
        app.router.add_route(route.verb, aiohttp_path(route.path), handler(route))

    async def openapi(_: web.Request) -> web.StreamResponse:
        return web.FileResponse(OPENAPI, headers={"Content-Type": "application/json"})

    app.router.add_get("/openapi.json", openapi)
    add_console_routes(app, options.gate, grpc_channel=lambda: state["channel"])  # GET /, /v1/stages:summary, /healthz
    add_openai_routes(app, state, options.body_timeout, max_query_chars=options.max_query_chars)  # POST /v1/chat/completions, GET /v1/models
    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    return app


async def _stream(request: web.Request, call) -> web.StreamResponse:
    """Relays a server-streaming call: server-sent events ("data: <json>")
    when the client accepts text/event-stream, else JSON lines
    (application/x-ndjson). An error before the first event is an ordinary
    JSON error reply; one after it is sent as a last {"error": ...} event.
    A client that disconnects cancels the gRPC call (and so the LLM call)."""
    sse = "text/event-stream" in request.headers.get("Accept", "")
    response: web.StreamResponse | None = None
    try:
        async for event in call:
            if response is None:
                response = web.StreamResponse(headers={"Content-Type": _STREAM_TYPES[sse],
                                                       "Cache-Control": "no-cache", **_returned(await call.initial_metadata())})
                await response.prepare(request)
            body = reply_json(event, indent=None)
            await response.write((f"data: {body}\n\n" if sse else f"{body}\n").encode())
    except grpc.aio.AioRpcError as err:
        if response is None:
            return _rpcerror_body(err)
        line = json.dumps(stream_error(err), ensure_ascii=False)
        try:
            await response.write((f"data: {line}\n\n" if sse else f"{line}\n").encode())
        except ConnectionResetError:  # the client left while the call ended: nobody to tell
            return response
    except asyncio.CancelledError:
        call.cancel()
        raise
    except ConnectionResetError:  # the client closed the connection: stop the call (and the LLM), quietly
        call.cancel()
        log.info("REST stream %s: the client went away", request.path)
        return response
    if response is None:  # a stream with no events
        response = web.StreamResponse(headers={"Content-Type": _STREAM_TYPES[sse]})
        await response.prepare(request)
    try:
        await response.write_eof()
    except ConnectionResetError:
        pass
    return response


def stream_error(err: grpc.aio.AioRpcError) -> dict:
    """The last event of a stream that failed after its first: ``_rpcerror_body``'s error (a deadline the
    call itself ran out of in our words, not gRPC's "Stream removed (Deadline Exceeded)")."""
    return json.loads(_rpcerror_body(err).text)


#: Media types of a relayed stream (by whether the client asked for SSE);
#: the charset named so that every client decodes the Chinese text as UTF-8.
_STREAM_TYPES = {True: "text/event-stream; charset=utf-8", False: "application/x-ndjson; charset=utf-8"}


def _json_or_none(text: str) -> object:
    """``text`` parsed as JSON, None when it is not JSON (json_format said why)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _bad_request(field: str, description: str) -> web.Response:
    violation = {
        "@type": "type.googleapis.com/google.rpc.BadRequest",
        "fieldViolations": [{"field": field, "description": description}],
    }
    return error_body(400, "INVALID_ARGUMENT", f"{field}: {description}", [violation])


def _overloaded(busy: Overloaded) -> web.Response:
    """429 with Retry-After when the admission queue is full; 504 when the
    request's own deadline ran out while it queued."""
    if busy.waited:
        return error_body(504, "DEADLINE_EXCEEDED", str(busy))
    reply = error_body(429, "RESOURCE_EXHAUSTED", str(busy))
    reply.headers["Retry-After"] = str(busy.retry_after)
    return reply


async def run_rest(grpc_port: int, host: str, port: int, bound: asyncio.Future | None = None,
                   options: RestOptions | None = None) -> None:
    """Serves the REST app on host:port until cancelled. Port 0 binds a free
    port; the port actually bound is set on ``bound`` once the site listens
    (and printed as ``READY gateway-rest http://host:port``)."""
    # handler_cancellation: a client that disconnects cancels its handler,
    # and so the gRPC call and the LLM request behind it.
    options = options or RestOptions()
    quiet_malformed_requests()
    runner = web.AppRunner(build_app(f"127.0.0.1:{grpc_port}", options), access_log=None, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    actual = runner.addresses[0][1]
    print(f"READY gateway-rest http://{host}:{actual}", flush=True)
    if bound is not None and not bound.done():
        bound.set_result(actual)
    reaper = asyncio.create_task(close_slow_connections(runner.server, options.header_timeout))
    try:
        await asyncio.Event().wait()
    finally:
        reaper.cancel()
        await runner.cleanup()
