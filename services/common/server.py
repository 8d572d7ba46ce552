"""Shared bootstrap for every GraphMesh service.

``create_server`` builds a grpc.aio server with the metrics and error
interceptors, the standard health service and reflection, and returns it with
its bound port. ``serve`` adds the Prometheus endpoint and graceful
shutdown on SIGTERM/SIGINT: health goes NOT_SERVING, in-flight RPCs drain for
``grace_seconds``, then the service's ``on_stop`` hook closes its pools.
"""
from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

import grpc
from pydantic import ValidationError
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from prometheus_client import start_http_server

from services.common.errors import ConfigError, DownstreamError, InvalidArgument, NotFound, abort_downstream, abort_invalid_argument, abort_with
from services.common.mesh_auth import MeshSettings, MeshTokenInterceptor
from services.common.metrics import ServerMetricsInterceptor
from services.common.redaction import KeyRedactingFilter
from services.common.clients import server_credentials
from services.common.settings import ServiceSettings, TlsSettings, TracingSettings
from services.common.text import load_configured_dictionary
from services.common.tracing import TraceIdLogFilter, setup_tracing, shutdown_tracing

log = logging.getLogger("graphmesh")

Registrar = Callable[[grpc.aio.Server], None]


class _Undecodable:
    """Stands for request bytes protobuf could not parse (e.g. invalid UTF-8
    in a string field); the handler answers INVALID_ARGUMENT for it."""

    def __init__(self, error: Exception) -> None:
        self.error = error


def _safe(deserializer: Callable | None) -> Callable | None:
    """``deserializer`` that returns an _Undecodable instead of raising
    (grpc itself would answer UNKNOWN / INTERNAL for a parse error)."""
    if deserializer is None:
        return None

    def parse(data: bytes) -> Any:
        try:
            return deserializer(data)
        except Exception as err:  # noqa: BLE001 - DecodeError and kin
            return _Undecodable(err)

    return parse


def _check_decoded(request: Any) -> None:
    if isinstance(request, _Undecodable):
        raise InvalidArgument("request", f"not a valid protobuf message: {request.error}")


class ErrorTranslationInterceptor(grpc.aio.ServerInterceptor):
    """Maps exceptions of unary and server-streaming handlers to statuses:
    ``InvalidArgument`` -> INVALID_ARGUMENT with a BadRequest naming the
    field; ``DownstreamError`` -> the downstream service's own code and
    details; ``NotImplementedError`` -> UNIMPLEMENTED; anything else ->
    INTERNAL without a stack trace (the trace goes to the log). Request
    bytes that do not parse (invalid UTF-8 in a string field, a truncated
    message) are INVALID_ARGUMENT naming the field "request". Exceptions of
    ``unavailable`` types (a store that cannot be reached) are UNAVAILABLE
    with reason "STORE_UNAVAILABLE": the call may be retried later.

    Args:
        unavailable: exception types that mean a dependency is unreachable.
    """

    def __init__(self, unavailable: tuple[type[BaseException], ...] = ()) -> None:
        self._unavailable = unavailable

    async def intercept_service(self, continuation: Callable, handler_call_details: Any) -> Any:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method
        if handler.unary_unary is not None:
            inner = handler.unary_unary

            async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                try:
                    _check_decoded(request)
                    return await inner(request, context)
                except Exception as err:  # noqa: BLE001 - translated below
                    await _abort_for(err, context, method, self._unavailable)

            return grpc.unary_unary_rpc_method_handler(
                unary, request_deserializer=_safe(handler.request_deserializer), response_serializer=handler.response_serializer)
        if handler.unary_stream is not None:
            inner_stream = handler.unary_stream

            async def stream(request: Any, context: grpc.aio.ServicerContext) -> Any:
                try:
                    _check_decoded(request)
                    async for item in inner_stream(request, context):
                        yield item
                except Exception as err:  # noqa: BLE001 - translated below
                    await _abort_for(err, context, method, self._unavailable)

            return grpc.unary_stream_rpc_method_handler(
                stream, request_deserializer=_safe(handler.request_deserializer), response_serializer=handler.response_serializer)
        return handler


async def _abort_for(err: Exception, context: grpc.aio.ServicerContext, method: str,
                     unavailable: tuple[type[BaseException], ...] = ()) -> NoReturn:
    """Aborts the RPC with the status that ``err`` stands for (see
    ErrorTranslationInterceptor); re-raises aborts already under way."""
    if isinstance(err, (grpc.aio.AbortError, asyncio.CancelledError)):
        raise err
    if isinstance(err, InvalidArgument):
        await abort_invalid_argument(context, err.field, err.description)
    if isinstance(err, DownstreamError):
        await abort_downstream(context, err)
    if isinstance(err, NotFound):
        await abort_with(context, grpc.StatusCode.NOT_FOUND, "NOT_FOUND", str(err))
    if isinstance(err, NotImplementedError):
        # The generated base servicer's answer for an RPC this service does
        # not offer (e.g. IngestTriples on retriever_pg).
        await abort_with(context, grpc.StatusCode.UNIMPLEMENTED, "UNIMPLEMENTED", f"{method} is not offered by this service")
    if unavailable and isinstance(err, unavailable):
        log.warning("%s: a store is unavailable: %s: %s", method, type(err).__name__, err)
        await abort_with(context, grpc.StatusCode.UNAVAILABLE, "STORE_UNAVAILABLE",
                         f"a store this service needs is unavailable ({type(err).__name__}); retry later")
    log.error("unhandled error in %s", method, exc_info=err)
    await abort_with(context, grpc.StatusCode.INTERNAL, "INTERNAL", "internal error; see the service log")


@dataclass
class Service:
    """A servicer bundle ready to serve.

    Attributes:
        name: short name, e.g. "fuser" (used in logs).
        full_names: fully qualified gRPC service names it registers, for
            health and reflection, e.g. ["graphmesh.fuser.v1.FuserService"].
        register: adds the servicers to a server.
        on_start / on_stop: async hooks (warm-ups; close pools and clients).
        extra_tasks: coroutines started beside the server, each given the
            bound gRPC port (the gateway's REST transcoder).
        endpoints: futures of further ports the service binds, by name
            ("rest"), set once each listens: callers wait on them instead
            of sleeping.
        interceptors: further server interceptors (the gateway's auth), run
            after the metrics interceptor (so refusals are counted) and
            before error translation.
        max_message_bytes: largest request or response message, bytes.
        unavailable_errors: exception types meaning a store cannot be
            reached; answered UNAVAILABLE instead of INTERNAL.
        public: the port serves callers outside the mesh (the gateway),
            so the mesh token is not asked for (services.common.mesh_auth).
    """

    name: str
    full_names: list[str]
    register: Registrar
    on_start: Callable[[], Awaitable[None]] | None = None
    on_stop: Callable[[], Awaitable[None]] | None = None
    extra_tasks: list[Callable[[int], Awaitable[Any]]] = field(default_factory=list)
    endpoints: dict[str, asyncio.Future] = field(default_factory=dict)
    interceptors: list[grpc.aio.ServerInterceptor] = field(default_factory=list)
    max_message_bytes: int = 64 * 1024 * 1024
    unavailable_errors: tuple[type[BaseException], ...] = ()
    public: bool = False


async def create_server(service: Service, host: str = "127.0.0.1", port: int = 0,
                        tls: TlsSettings | None = None, max_concurrent_rpcs: int = 0,
                        max_concurrent_streams: int = 100,
                        mesh_token: str = "") -> tuple[grpc.aio.Server, int, health.aio.HealthServicer]:
    """Builds and starts the gRPC server for ``service``; TLS (mTLS with
    ``tls.client_auth``) when ``tls`` is enabled, plaintext otherwise.
    With ``mesh_token`` set and ``service.public`` false, RPCs other than
    health and reflection must carry it (UNAUTHENTICATED otherwise).
    At most ``max_concurrent_rpcs`` RPCs run at once (0 = no limit; beyond
    it grpc answers RESOURCE_EXHAUSTED "Concurrent RPC limit exceeded") and
    a client connection holds at most ``max_concurrent_streams`` streams.

    Returns:
        (server, bound port, health servicer). Port 0 binds a free port.
    Raises:
        RuntimeError: when the address cannot be bound.
    """
    mesh = [MeshTokenInterceptor(mesh_token)] if mesh_token and not service.public else []
    server = grpc.aio.server(
        interceptors=[ServerMetricsInterceptor(), *mesh, *service.interceptors, ErrorTranslationInterceptor(service.unavailable_errors)],
        options=[("grpc.max_receive_message_length", service.max_message_bytes),
                 ("grpc.max_send_message_length", service.max_message_bytes),
                 ("grpc.max_concurrent_streams", max_concurrent_streams),
                 # Our clients ping every 30 s (services.common.clients); gRPC's
                 # default server policy (5 min, 2 strikes) answers a call that
                 # waits longer than about 90 s on the LLM with GOAWAY
                 # too_many_pings, which fails the call.
                 ("grpc.http2.min_recv_ping_interval_without_data_ms", 20_000),
                 ("grpc.http2.max_ping_strikes", 0)],
        maximum_concurrent_rpcs=max_concurrent_rpcs or None,
    )
    service.register(server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection([*service.full_names, health.SERVICE_NAME, reflection.SERVICE_NAME], server)
    if tls is not None and tls.enabled:
        bound = server.add_secure_port(f"{host}:{port}", server_credentials(tls))
    else:
        bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise RuntimeError(f"cannot bind {host}:{port}")
    await server.start()
    for name in [*service.full_names, ""]:
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return server, bound, health_servicer


async def serve(service: Service, settings: ServiceSettings, ready: asyncio.Event | None = None) -> None:
    """Runs ``service`` until SIGTERM or SIGINT, then shuts down gracefully.

    Starts the Prometheus endpoint on ``settings.metrics_port`` (unless -1),
    runs ``on_start`` before accepting RPCs and ``on_stop`` after draining.
    Prints ``READY <service> grpc=<port> metrics=<port>`` once serving.
    """
    if service.on_start is not None:
        await service.on_start()
    server, port, health_servicer = await create_server(service, settings.host, settings.port, TlsSettings(),
                                                        settings.max_concurrent_rpcs, settings.max_concurrent_streams,
                                                        MeshSettings().resolved_token())
    metrics_port = -1
    if settings.metrics_port >= 0:
        http_server, _ = start_http_server(settings.metrics_port, addr=settings.host)
        metrics_port = http_server.server_port
    tasks = [asyncio.create_task(task(port)) for task in service.extra_tasks]
    print(f"READY {service.name} grpc={port} metrics={metrics_port}", flush=True)
    if ready is not None:
        ready.set()

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("%s: shutting down", service.name)
    await health_servicer.enter_graceful_shutdown()
    await server.stop(settings.grace_seconds)
    for task in tasks:
        task.cancel()
    if service.on_stop is not None:
        await service.on_stop()


def main(name: str, build: Callable[[], Awaitable[tuple[Service, ServiceSettings]]]) -> None:
    """Entry point of ``python -m services.<name>``: sets up tracing (spans
    exported when OTEL_EXPORTER_OTLP_ENDPOINT is set), builds the service
    (its async factory opens stores and clients), loads the user dictionary
    named by its settings, and serves it until SIGTERM. A bad setting or an
    unreadable dictionary stops the process with one line, no traceback."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s [trace %(trace_id)s] %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(KeyRedactingFilter())
        handler.addFilter(TraceIdLogFilter())

    async def run() -> None:
        try:
            setup_tracing(name, TracingSettings().otlp_endpoint)
            service, settings = await build()
        except (ValidationError, ConfigError) as err:
            # A bad setting (environment variable, key file) is the
            # operator's to fix: say which, without a traceback.
            raise SystemExit(f"error: invalid settings: {err}") from None
        load_configured_dictionary(settings.user_dict)
        try:
            await serve(service, settings)
        finally:
            shutdown_tracing()

    asyncio.run(run())
