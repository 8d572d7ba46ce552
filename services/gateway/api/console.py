"""The gateway's own HTTP routes beside the transcoded RPCs: the web console
(a single page of static files, services/gateway/static/console/, talking
only to the public REST routes) and GET /v1/stages:summary (per-stage
latency and RPC error rates from this process's Prometheus registry; not a
gRPC RPC, so it is not in the OpenAPI document).

Routes:
    GET /                    the console page (index.html)
    GET /console/{name}      its scripts and style sheet (flat folder; known types only)
    GET /v1/stages:summary   {"recent": summary | null, "sinceStart": summary}, see
                             services/gateway/api/stage_summary.py; needs an API key when
                             auth is on (401 / 429 in the API's JSON error shape)
    GET /healthz             {"status": "SERVING"} (200) or another grpc.health.v1 status, or
                             "UNREACHABLE" (503): the gateway's own gRPC health, for an HTTP
                             load balancer's probe; no API key needed, as for gRPC Health
"""
from __future__ import annotations

import asyncio
import contextlib
import re
import time
from pathlib import Path
from typing import Any

import grpc
from aiohttp import web
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client import REGISTRY

from services.gateway.api.middleware import error_body
from services.gateway.api.stage_summary import History, take_snapshot

CONSOLE = Path(__file__).resolve().parent.parent / "static" / "console"
#: Content types of the files the console is made of; nothing else is served.
TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".png": "image/png", ".svg": "image/svg+xml"}
#: A console file's name: letters, digits, "_" and "-", then one extension.
ASSET_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}\.[a-z]{2,4}")
#: The page loads only its own files and talks only to its own origin.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'")
#: Seconds /healthz waits for the gateway's gRPC health answer.
HEALTH_TIMEOUT_S = 2.0
#: How often the metrics are sampled, and how far back "recent" reaches (seconds).
SAMPLE_SECONDS, WINDOW_SECONDS = 15.0, 300.0


def _file(path: Path) -> web.FileResponse:
    charset = "; charset=utf-8" if path.suffix in (".html", ".js", ".css", ".svg") else ""
    return web.FileResponse(path, headers={
        "Content-Type": TYPES[path.suffix] + charset, "Cache-Control": "no-cache",
        "X-Content-Type-Options": "nosniff", "Content-Security-Policy": CSP})


def add_console_routes(app: web.Application, gate: Any = None, registry: Any = REGISTRY,
                       sample_seconds: float = SAMPLE_SECONDS, window_seconds: float = WINDOW_SECONDS,
                       grpc_channel: Any = None) -> None:
    """Adds the console, the stages summary and, given ``grpc_channel`` (a callable returning the
    grpc.aio channel to the gateway's gRPC server, open once the app has started), /healthz to ``app``.
    ``gate`` (an auth.Gate, None when auth is off) guards the summary; ``registry`` is
    sampled at start and every ``sample_seconds`` so that "recent" covers
    up to the last ``window_seconds``."""
    history = History(window_seconds)
    tasks: list[asyncio.Task] = []

    async def index(_: web.Request) -> web.StreamResponse:
        return _file(CONSOLE / "index.html")

    async def asset(request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        if not ASSET_NAME.fullmatch(name):  # NUL bytes, separators, dot files: nothing the console has
            raise web.HTTPNotFound()
        path = (CONSOLE / name).resolve()
        if path.parent != CONSOLE or path.suffix not in TYPES or not path.is_file():
            raise web.HTTPNotFound()
        return _file(path)

    async def stages(request: web.Request) -> web.StreamResponse:
        if gate is not None:
            decision = await gate.check(request.headers.items())
            if decision.code is not None:
                refused = error_body(decision.http_status, decision.code.name, decision.message)
                if decision.retry_after:
                    refused.headers["Retry-After"] = decision.retry_after
                return refused
        return web.json_response(history.report(take_snapshot(registry, time.monotonic())))

    async def healthz(_: web.Request) -> web.StreamResponse:
        try:
            reply = await health_pb2_grpc.HealthStub(grpc_channel()).Check(health_pb2.HealthCheckRequest(),
                                                                           timeout=HEALTH_TIMEOUT_S)
        except grpc.aio.AioRpcError as err:
            return web.json_response({"status": "UNREACHABLE", "code": err.code().name}, status=503)
        status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
        return web.json_response({"status": status}, status=200 if reply.status == reply.SERVING else 503)

    async def sample() -> None:
        while True:
            history.add(take_snapshot(registry, time.monotonic()))
            await asyncio.sleep(sample_seconds)

    async def on_startup(_: web.Application) -> None:
        tasks.append(asyncio.create_task(sample()))

    async def on_cleanup(_: web.Application) -> None:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    app.router.add_get("/", index)
    app.router.add_get("/console/{name}", asset)
    app.router.add_get("/v1/stages:summary", stages)
    if grpc_channel is not None:
        app.router.add_get("/healthz", healthz)
    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
