"""REST/JSON transcoding of the gateway's gRPC API.

Routes come from the ``google.api.http`` annotations of GatewayService
(e.g. POST /v1/query:search with body "*", GET
/v1/{parent=collections/*}/documents; path templates in ``rest_paths``).
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
import re
from collections.abc import Callable
from typing import Any

import grpc
from aiohttp import web
from google.api import annotations_pb2
from google.protobuf import json_format
from google.protobuf.message import Message
from grpc_status import rpc_status

from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
from services.common.clients import channel
from services.gateway.rest_paths import aiohttp_path, fill_message

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
    """(HTTP verb, path template, RPC name) for every annotated GatewayService method."""
    return [(verb, path, name) for verb, path, name, _ in _rules()]


def _rules() -> list[tuple[str, str, str, bool]]:
    """(verb, path template, RPC name, whether the route has a body)."""
    routes = []
    service = gateway_pb2.DESCRIPTOR.services_by_name["GatewayService"]
    for method in service.methods:
        rule = method.GetOptions().Extensions[annotations_pb2.http]
        verb = rule.WhichOneof("pattern")
        if verb:
            routes.append((verb.upper(), getattr(rule, verb), method.name, bool(rule.body)))
    return routes


def _error(status: int, code: str, message: str, details: list | None = None) -> web.Response:
    body = {"error": {"code": status, "status": code, "message": message, "details": details or []}}
    return web.json_response(body, status=status, dumps=lambda o: json.dumps(o, ensure_ascii=False))


def _rpc_error(err: grpc.aio.AioRpcError) -> web.Response:
    status = rpc_status.from_call(err)
    details = []
    if status is not None:
        for detail in status.details:
            try:
                details.append(json.loads(json_format.MessageToJson(detail)))
            except Exception:  # unknown detail type: report its type only
                details.append({"@type": detail.type_url})
    return _error(HTTP_STATUS.get(err.code(), 500), err.code().name, err.details() or "", details)


@web.middleware
async def json_route_errors(request: web.Request, handler: Callable) -> web.StreamResponse:
    """An unknown path (404) or method (405) answers in the same JSON error
    shape as every RPC error, not aiohttp's plain text."""
    try:
        return await handler(request)
    except web.HTTPNotFound:
        return _error(404, "NOT_FOUND", f"no route {request.method} {request.path}")
    except web.HTTPMethodNotAllowed as err:
        return _error(405, "METHOD_NOT_ALLOWED", f"{request.method} is not allowed on {request.path}; use {', '.join(sorted(err.allowed_methods))}")


def build_app(grpc_target: str) -> web.Application:
    """An aiohttp app transcoding REST calls to the gateway at ``grpc_target``."""
    app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=[json_route_errors])
    state: dict[str, Any] = {}

    async def on_startup(_: web.Application) -> None:
        state["channel"] = channel(grpc_target)
        state["stub"] = gateway_pb2_grpc.GatewayServiceStub(state["channel"])

    async def on_cleanup(_: web.Application) -> None:
        await state["channel"].close()

    def handler(rpc_name: str, has_body: bool) -> Callable:
        method = gateway_pb2.DESCRIPTOR.services_by_name["GatewayService"].methods_by_name[rpc_name]
        request_cls = _message_class(method.input_type.name)

        async def handle(request: web.Request) -> web.StreamResponse:
            raw = await request.read()
            try:
                text = raw.decode("utf-8") if raw.strip() else "{}"
                if not text.lstrip().startswith("{"):  # null, [], 5, "x": not a request
                    return _bad_request("body", "must be a JSON object")
                message: Message = json_format.Parse(text, request_cls())
                bad = fill_message(message, dict(request.match_info), request.query if not has_body else {})
                if bad:
                    return _bad_request(*bad)
            except UnicodeDecodeError:
                return _bad_request("body", "must be UTF-8 JSON")
            except json_format.ParseError as err:
                return _bad_request(_field_of(str(err)), str(err))
            timeout = _timeout_header(request)
            if method.server_streaming:
                return await _stream(request, getattr(state["stub"], rpc_name)(message, timeout=timeout))
            try:
                reply = await getattr(state["stub"], rpc_name)(message, timeout=timeout)
            except grpc.aio.AioRpcError as err:
                return _rpc_error(err)
            body = json_format.MessageToJson(reply, ensure_ascii=False, preserving_proto_field_name=False)
            return web.Response(text=body, content_type="application/json")

        return handle

    # Literal routes first: GET /v1/collections must not be taken for a template.
    for verb, path, rpc_name, has_body in sorted(_rules(), key=lambda r: "{" in r[1]):
        app.router.add_route(verb, aiohttp_path(path), handler(rpc_name, has_body))
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
                response = web.StreamResponse(headers={"Content-Type": "text/event-stream" if sse else "application/x-ndjson",
                                                       "Cache-Control": "no-cache"})
                await response.prepare(request)
            body = json_format.MessageToJson(event, ensure_ascii=False, indent=None)
            await response.write((f"data: {body}\n\n" if sse else f"{body}\n").encode())
    except grpc.aio.AioRpcError as err:
        if response is None:
            return _rpc_error(err)
        error = {"error": {"code": HTTP_STATUS.get(err.code(), 500), "status": err.code().name, "message": err.details() or ""}}
        line = json.dumps(error, ensure_ascii=False)
        await response.write((f"data: {line}\n\n" if sse else f"{line}\n").encode())
    except (asyncio.CancelledError, ConnectionResetError):
        call.cancel()
        raise
    if response is None:  # a stream with no events
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream" if sse else "application/x-ndjson"})
        await response.prepare(request)
    await response.write_eof()
    return response


def _message_class(name: str) -> type[Message]:
    return getattr(gateway_pb2, name)


def _bad_request(field: str, description: str) -> web.Response:
    violation = {
        "@type": "type.googleapis.com/google.rpc.BadRequest",
        "fieldViolations": [{"field": field, "description": description}],
    }
    return _error(400, "INVALID_ARGUMENT", f"{field}: {description}", [violation])


_FAILED_FIELD = re.compile(r"Failed to parse (\w+) field")


def _field_of(parse_error: str) -> str:
    # json_format messages look like: Message type "x" has no field named "foo" at ...
    marker = 'has no field named "'
    failed = _FAILED_FIELD.search(parse_error)
    if failed and not failed.group(1).isdigit():
        return failed.group(1)
    if marker in parse_error:
        return parse_error.split(marker, 1)[1].split('"', 1)[0]
    if 'for field "' in parse_error.lower():
        return parse_error.lower().split('for field "', 1)[1].split('"', 1)[0]
    return "body"


def _timeout_header(request: web.Request) -> float | None:
    value = request.headers.get("grpc-timeout") or request.headers.get("X-Timeout-Seconds")
    try:
        return float(value.rstrip("S")) if value else None
    except ValueError:
        return None


async def run_rest(grpc_port: int, host: str, port: int, bound: asyncio.Future | None = None) -> None:
    """Serves the REST app on host:port until cancelled. Port 0 binds a free
    port; the port actually bound is set on ``bound`` once the site listens
    (and printed as ``READY gateway-rest http://host:port``)."""
    # handler_cancellation: a client that disconnects cancels its handler,
    # and so the gRPC call and the LLM request behind it.
    runner = web.AppRunner(build_app(f"127.0.0.1:{grpc_port}"), access_log=None, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    actual = runner.addresses[0][1]
    print(f"READY gateway-rest http://{host}:{actual}", flush=True)
    if bound is not None and not bound.done():
        bound.set_result(actual)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
