"""HTTP concerns of the REST transcoder that are not transcoding: errors of
routing and size in the API's JSON error shape, and the CORS allow-list."""
from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

#: Methods and request headers a browser may use across origins.
CORS_METHODS = "GET, POST, OPTIONS"
CORS_HEADERS = "Authorization, X-API-Key, Content-Type, Accept, X-Timeout-Seconds"


@dataclass(frozen=True)
class RestOptions:
    """Attributes:
    cors_origins: origins allowed to call from a browser ("*" = any).
    max_request_bytes: largest request body, bytes (HTTP 413 beyond).
    gate: the API-key gate (services.gateway.auth.Gate) of the routes that
        are not RPCs (GET /v1/stages:summary); None when auth is off. The
        RPC routes are checked by the gRPC server itself.
    """

    cors_origins: Sequence[str] = field(default_factory=tuple)
    max_request_bytes: int = 64 * 1024 * 1024
    gate: Any = None


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


def cors(origins: Sequence[str]) -> Callable:
    """A middleware answering preflight requests and adding the
    Access-Control-Allow-* headers for the allowed ``origins`` ("*" = any);
    requests from other origins get no CORS headers (the browser blocks
    them), and nothing changes for callers that send no Origin."""
    allowed = set(origins)

    @web.middleware
    async def middleware(request: web.Request, handler: Callable) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        ok = origin is not None and ("*" in allowed or origin in allowed)
        if request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers:
            if not ok:
                return error_body(403, "PERMISSION_DENIED", f"origin {origin!r} is not allowed")
            return web.Response(status=204, headers=_cors_headers(origin, preflight=True))
        response = await handler(request)
        if ok:
            response.headers.update(_cors_headers(origin, preflight=False))
        return response

    return middleware


def _cors_headers(origin: str, preflight: bool) -> dict[str, str]:
    headers = {"Access-Control-Allow-Origin": origin, "Vary": "Origin",
               "Access-Control-Expose-Headers": "X-Trace-Id, Retry-After"}
    if preflight:
        headers |= {"Access-Control-Allow-Methods": CORS_METHODS, "Access-Control-Allow-Headers": CORS_HEADERS,
                    "Access-Control-Max-Age": "600"}
    return headers
