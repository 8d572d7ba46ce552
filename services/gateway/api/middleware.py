"""HTTP concerns of the REST transcoder that are not transcoding: errors of
routing and size in the API's JSON error shape, the edge's security rules
(Host allow-list, cross-site writes, media type; services.gateway.api.edge_rules),
the CORS allow-list, closing connections that are slow to send a request, and
one log line (not a traceback) for a request aiohttp cannot parse."""
from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from services.gateway.api.auth import extract_key
from services.gateway.api.edge_rules import (cross_site_refusal, host_allowed, media_type_refusal, normalised_origin,
                                              repeated_header_refusal)

log = logging.getLogger("graphmesh.gateway.rest")


class MalformedRequestLog(logging.Filter):
    """aiohttp's server logs a request it cannot parse (no Host header, a
    bad request line) at ERROR with a traceback, after answering it 400:
    the client's fault, and a hostile client could fill the log with them.
    Such a record becomes one WARNING line naming what was wrong; every
    other record passes unchanged."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, HttpProcessingError):
            said = " ".join(str(error.message).split()) or type(error).__name__
            record.msg, record.args = "%s: %s", (record.getMessage(), said)
            record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
            record.exc_info, record.exc_text = None, None
        return True


def quiet_malformed_requests(logger: logging.Logger | None = None) -> None:
    """Adds MalformedRequestLog to aiohttp's server logger (``logger``), once."""
    logger = logger or logging.getLogger("aiohttp.server")
    if not any(isinstance(f, MalformedRequestLog) for f in logger.filters):
        logger.addFilter(MalformedRequestLog())

#: Methods and request headers a browser may use across origins: every method a route answers
#: (DELETE a collection or an operation, PATCH an entity), not only reads and POSTs.
CORS_METHODS = "GET, POST, PATCH, DELETE, OPTIONS"
CORS_HEADERS = "Authorization, X-API-Key, Content-Type, Accept, X-Timeout-Seconds"


@dataclass(frozen=True)
class RestOptions:
    """Attributes:
    cors_origins: origins allowed to call from a browser ("*" = any);
        they may also send unsafe (writing) requests.
    max_request_bytes: largest request body, bytes (HTTP 413 beyond).
    gate: the API-key gate (services.gateway.api.auth.Gate) of the routes that
        are not RPCs (GET /v1/stages:summary); None when auth is off. The
        RPC routes are checked by the gRPC server itself.
    allowed_hosts: Host names served besides IP literals and localhost
        (edge_rules.host_allowed; "*" = any); others get 403 (DNS rebinding).
    max_in_flight / max_queued: REST calls sent to the gateway at once and
        waiting behind them; a request beyond both gets 429 + Retry-After.
    header_timeout: seconds a connection may stay without a complete
        request head (from its start or its last response) before it is closed.
    body_timeout: seconds a request's body may take to arrive (HTTP 408 beyond).
    max_query_chars: longest query the gateway accepts (its ``max_query_chars``): a chat request's earlier
        turns are cut to fit beside the question (openai_compat.requests.question_of).
    """

    cors_origins: Sequence[str] = field(default_factory=tuple)
    max_request_bytes: int = 64 * 1024 * 1024
    gate: Any = None
    allowed_hosts: Sequence[str] = field(default_factory=tuple)
    max_in_flight: int = 64
    max_queued: int = 1024
    header_timeout: float = 10.0
    body_timeout: float = 60.0
    max_query_chars: int = 10_000


def error_body(status: int, code: str, message: str, details: list | None = None) -> web.Response:
    """A JSON error in the google.rpc.Status shape every route uses."""
    body = {"error": {"code": status, "status": code, "message": message, "details": details or []}}
    return web.json_response(body, status=status, dumps=lambda o: json.dumps(o, ensure_ascii=False))


def route_errors(max_request_bytes: int) -> Callable:
    """A middleware answering an unknown path (404), method (405) or a body
    over ``max_request_bytes`` (413) in the same JSON error shape as every
    RPC error, not aiohttp's plain text."""

    @web.middleware
    async def middleware(request: web.Request, handler: Callable) -> web.StreamResponse:
        try:
            return await handler(request)
        except web.HTTPNotFound:
            return error_body(404, "NOT_FOUND", f"no route {request.method} {request.path}")
        except web.HTTPMethodNotAllowed as err:
            return error_body(405, "METHOD_NOT_ALLOWED",
                              f"{request.method} is not allowed on {request.path}; use {', '.join(sorted(err.allowed_methods))}")
        except web.HTTPRequestEntityTooLarge:
            return error_body(413, "RESOURCE_EXHAUSTED", f"request body is larger than the maximum of {max_request_bytes} bytes")

    return middleware


def _origin_allowed(origin: str | None, allowed: set[str]) -> bool:
    # spelt as edge_rules.cross_site_refusal reads it: a preflight refused http://LOCALHOST:3000/ while the
    # POST it guards went through
    return origin is not None and ("*" in allowed or normalised_origin(origin) in allowed)


def cors(origins: Sequence[str]) -> Callable:
    """A middleware answering preflight requests from the allowed
    ``origins`` ("*" = any) with the methods and headers they may use;
    other origins get 403 and no CORS headers (the browser blocks them).
    The headers of every other response are ``cors_headers``'. The headers
    a preflight asks for are allowed (an allowed page's ``traceparent`` of
    OpenTelemetry's browser instrumentation was refused by a fixed list)."""
    allowed = {normalised_origin(o) for o in origins}

    @web.middleware
    async def middleware(request: web.Request, handler: Callable) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        if request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers:
            if not _origin_allowed(origin, allowed):
                return error_body(403, "PERMISSION_DENIED", f"origin {origin!r} is not allowed")
            return web.Response(status=204, headers=_cors_headers(origin, preflight=True,
                                                                  asked=request.headers.get("Access-Control-Request-Headers", "")))
        return await handler(request)

    return middleware


def cors_headers(options: RestOptions) -> Callable:
    """An ``on_response_prepare`` handler adding the Access-Control-*
    headers to every response of a request from an allowed origin, to a
    served Host, as the response's headers are sent: the edge's 403 and 415
    too, and a streamed answer (server-sent events, JSON lines, a streamed
    chat completion), which sends its headers before its handler returns,
    so a middleware adding them afterwards left every stream unreadable to
    an allowed page. Callers that send no Origin see no change."""
    allowed = {normalised_origin(o) for o in options.cors_origins}

    async def add(request: web.Request, response: web.StreamResponse) -> None:
        origin = request.headers.get("Origin")
        if _origin_allowed(origin, allowed) and host_allowed(request.headers.get("Host"), options.allowed_hosts) \
                and "Access-Control-Allow-Origin" not in response.headers:
            response.headers.update(_cors_headers(origin, preflight=False))

    return add


def _cors_headers(origin: str, preflight: bool, asked: str = "") -> dict[str, str]:
    headers = {"Access-Control-Allow-Origin": origin, "Vary": "Origin",
               "Access-Control-Expose-Headers": "X-Trace-Id, Retry-After"}
    if preflight:
        names = list(dict.fromkeys(h.strip() for h in [*CORS_HEADERS.split(","), *asked.split(",")] if h.strip()))
        headers |= {"Access-Control-Allow-Methods": CORS_METHODS, "Access-Control-Allow-Headers": ", ".join(names),
                    "Access-Control-Max-Age": "600"}
    return headers


def edge_guard(options: RestOptions) -> Callable:
    """A middleware applying the edge's security rules before any route:
    a Host outside the allow-list is 403 (DNS rebinding), an unsafe request
    from another site is 403 (CSRF), a header those rules read sent twice
    (two Origins) is 400, and an unsafe request that is not
    ``application/json`` is 415. With auth on (``options.gate``), a request
    with a body to /v1/ without a valid key is 401 before its body is read:
    a trial's three 57 MB bodies without a key, each read and parsed before
    the gRPC side refused it, slowed a keyed search from 0.05 to 6.9 s.
    Each in the API's JSON error shape."""

    @web.middleware
    async def middleware(request: web.Request, handler: Callable) -> web.StreamResponse:
        if not host_allowed(request.headers.get("Host"), options.allowed_hosts):
            return error_body(403, "PERMISSION_DENIED",
                              f"host {request.headers.get('Host', '')[:100]!r} is not served here; add it to "
                              "GRAPHMESH_GATEWAY_REST__ALLOWED_HOSTS to allow it")
        refusal = repeated_header_refusal(request.headers)
        if refusal is None and request.method != "OPTIONS":
            refusal = cross_site_refusal(request.method, request.headers, options.cors_origins)
            if refusal is None and (request.body_exists or request.method != "DELETE"):
                refusal = media_type_refusal(request.method, request.headers.get("Content-Type"))
        if refusal is not None:
            details = []
            if refusal.field:
                details = [{"@type": "type.googleapis.com/google.rpc.BadRequest",
                            "fieldViolations": [{"field": refusal.field, "description": refusal.message}]}]
            return error_body(refusal.status, refusal.code, refusal.message, details)
        if options.gate is not None and request.body_exists and request.path.startswith("/v1/") \
                and await options.gate.keys.averify(extract_key(request.headers.items())) is None:
            log.info("%s %s refused: UNAUTHENTICATED (key none/invalid) from %s", request.method, request.path, request.remote)
            return error_body(401, "UNAUTHENTICATED",
                              "a valid API key is required: authorization: Bearer KEY, or x-api-key: KEY")
        return await handler(request)

    return middleware


async def close_slow_connections(server: web.Server, header_timeout: float, every: float | None = None) -> None:
    """Closes, until cancelled, each connection of ``server`` that has held
    no request in progress and delivered no new complete request head for
    ``header_timeout`` seconds (a client sending its headers a line a
    second, or an idle keep-alive). aiohttp has no header timeout of its
    own; its protocol objects' counters are read here (``_request_count``,
    ``_current_request``, ``_messages``), checked by
    tests/gateway/api/test_edge_security.py."""
    every = every or max(header_timeout / 4, 0.05)
    seen: dict[int, tuple[int, float]] = {}
    while True:
        await asyncio.sleep(every)
        now = time.monotonic()
        alive = set()
        for protocol in list(server.connections):
            key = id(protocol)
            alive.add(key)
            busy = getattr(protocol, "_current_request", None) is not None or bool(getattr(protocol, "_messages", ()))
            count = getattr(protocol, "_request_count", 0)
            if busy:
                seen.pop(key, None)
                continue
            last = seen.get(key)
            if last is None or last[0] != count:
                seen[key] = (count, now)
            elif now - last[1] >= header_timeout:
                log.info("closing a connection with no complete request for %.0f s", header_timeout)
                protocol.force_close()
                if protocol.transport is not None:
                    protocol.transport.close()
                seen.pop(key, None)
        for key in set(seen) - alive:
            del seen[key]
