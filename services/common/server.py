"""Shared bootstrap for every GraphMesh service.

``create_server`` builds a grpc.aio server with the metrics and error
interceptors, the standard health service and reflection, and returns it with
its bound port. ``serve`` adds the Prometheus endpoint and graceful
shutdown on SIGTERM/SIGINT: health goes NOT_SERVING, in-flight RPCs drain for
``grace_seconds``, then the service's ``on_stop`` hook closes its pools.

A service with a ``warm_up`` hook (one cheap real query against its store or
model) starts NOT_SERVING: other RPCs are answered UNAVAILABLE (reason
WARMING_UP, retryable) until the warm-up succeeds, retried with backoff
(``WarmUpPolicy``); only then does health say SERVING, so the first user
request is not the slow one. A service with ``store_deadline_margin`` runs
each RPC in a ``store_deadline.deadline_scope`` of the caller's remaining
deadline, and a store query cancelled for running out of it
(``StoreTimeout``) is answered DEADLINE_EXCEEDED.
"""
from __future__ import annotations

import asyncio
import math
import logging
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
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
from services.common.settings import ServiceSettings, TlsSettings, TracingSettings, WarmUpSettings
from services.common.store_deadline import StoreTimeout, deadline_scope, rpc_budget
from services.common.stream_handlers import wrap_stream
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
    ``StoreTimeout`` (a store cancelled a query that ran out of the caller's
    deadline) is DEADLINE_EXCEEDED with reason "STORE_TIMEOUT".

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
            unavailable = self._unavailable

            @asynccontextmanager
            async def translated(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[None]:
                try:
                    _check_decoded(request)
                    yield
                except Exception as err:  # noqa: BLE001 - translated below
                    await _abort_for(err, context, method, unavailable)

            return grpc.unary_stream_rpc_method_handler(
                wrap_stream(handler.unary_stream, translated),
                request_deserializer=_safe(handler.request_deserializer), response_serializer=handler.response_serializer)
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
    if isinstance(err, StoreTimeout):
        log.info("%s: %s", method, err)
        await abort_with(context, grpc.StatusCode.DEADLINE_EXCEEDED, "STORE_TIMEOUT", str(err))
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

#: Internal services close each client connection after 5 minutes; calls
#: in flight get a grace to finish of 30 s, or the service's longest call
#: (Service.longest_call_s: the judge's LLM rounds) when that is longer.
#: Clients balance round robin over the addresses a name resolves to
#: (services.common.clients) and resolve again when a connection closes,
#: so replicas added later get their share. The gateway is left out: its
#: callers' streams (AnswerStream waiting on an LLM) may run longer than
#: any grace, and they reach it through a load balancer of their own.
CONNECTION_AGE_MS = 300_000
CONNECTION_AGE_GRACE_MS = 30_000


def connection_age_options(longest_call_s: float = 0.0) -> list[tuple[str, int]]:
    """gRPC server options closing a connection after CONNECTION_AGE_MS,
    with a grace that lets a call of ``longest_call_s`` seconds finish."""
    grace = max(CONNECTION_AGE_GRACE_MS, math.ceil(longest_call_s * 1000))
    return [("grpc.max_connection_age_ms", CONNECTION_AGE_MS), ("grpc.max_connection_age_grace_ms", grace)]


#: Methods answered while a service warms up (health checks, reflection).

_ALWAYS_OPEN = ("/grpc.health.v1.Health/", "/grpc.reflection.")


def _wrap_handler(handler: Any, unary: Callable, stream: Callable) -> Any:
    """``handler`` with its unary-unary / unary-stream behaviour replaced by
    ``unary(inner)`` / ``stream(inner)``; other kinds unchanged."""
    if handler.unary_unary is not None:
        return grpc.unary_unary_rpc_method_handler(
            unary(handler.unary_unary), request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)
    if handler.unary_stream is not None:
        return grpc.unary_stream_rpc_method_handler(
            stream(handler.unary_stream), request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)
    return handler


class StoreDeadlineInterceptor(grpc.aio.ServerInterceptor):
    """Runs each unary and server-streaming handler inside a
    ``store_deadline.deadline_scope`` of the RPC's remaining deadline
    (``context.time_remaining()``, seconds) less ``margin`` seconds (at most
    a tenth of it), so the stores bound their queries by it; an RPC without
    a deadline gets an open scope (the stores' ceilings apply).

    Args:
        margin: seconds kept back so that a store timeout is still answered
            DEADLINE_EXCEEDED by this service before the caller gives up.
    """

    def __init__(self, margin: float) -> None:
        self._margin = margin

    async def intercept_service(self, continuation: Callable, handler_call_details: Any) -> Any:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        margin = self._margin

        def unary(inner: Callable) -> Callable:
            async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
                with deadline_scope(rpc_budget(context.time_remaining(), margin)):
                    return await inner(request, context)
            return call

        @asynccontextmanager
        async def scoped(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[None]:
            with deadline_scope(rpc_budget(context.time_remaining(), margin)):
                yield

        def stream(inner: Callable) -> Callable:
            return wrap_stream(inner, scoped)

        return _wrap_handler(handler, unary, stream)


class ReadinessGate(grpc.aio.ServerInterceptor):
    """Until ``ready`` is set, answers every RPC but health checks and
    reflection with UNAVAILABLE, reason "WARMING_UP" (retryable: the mesh's
    clients retry UNAVAILABLE, and a breaker sees a service that is not up
    yet), so no user request reaches a cold store.

    Attributes:
        ready: whether RPCs pass.
        message: the text of the UNAVAILABLE answer.
    """

    def __init__(self, name: str) -> None:
        self.ready = False
        self.message = f"{name} is warming up; retry shortly"

    async def intercept_service(self, continuation: Callable, handler_call_details: Any) -> Any:
        handler = await continuation(handler_call_details)
        if handler is None or handler_call_details.method.startswith(_ALWAYS_OPEN):
            return handler
        gate = self

        def unary(inner: Callable) -> Callable:
            async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
                if not gate.ready:
                    await abort_with(context, grpc.StatusCode.UNAVAILABLE, "WARMING_UP", gate.message)
                return await inner(request, context)
            return call

        @asynccontextmanager
        async def gated(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[None]:
            if not gate.ready:
                await abort_with(context, grpc.StatusCode.UNAVAILABLE, "WARMING_UP", gate.message)
            yield

        def stream(inner: Callable) -> Callable:
            return wrap_stream(inner, gated)

        return _wrap_handler(handler, unary, stream)


@dataclass(frozen=True, slots=True)
class WarmUpPolicy:
    """How a warm-up is retried (``WarmUpSettings`` as a value).

    Attributes:
        attempts: most attempts; 0 = until one succeeds.
        backoff: seconds before the second attempt, doubled after each
            failure up to ``max_backoff`` seconds.
        timeout: seconds one attempt may take before it counts as failed.
    """

    attempts: int = 0
    backoff: float = 0.5
    max_backoff: float = 5.0
    timeout: float = 30.0

    @classmethod
    def of(cls, settings: WarmUpSettings) -> "WarmUpPolicy":
        """The policy of a service's ``readiness`` settings group."""
        return cls(settings.attempts, settings.backoff, settings.max_backoff, settings.timeout)


class Readiness:
    """Runs a service's warm-up and then says SERVING: health is NOT_SERVING
    and the ``gate`` closed until one attempt succeeds. A failed attempt
    (any exception, or one running past ``policy.timeout``) is logged and
    retried after a backoff; the process never exits because of it. When
    ``policy.attempts`` are used up the service stays NOT_SERVING (logged
    as an error).

    Args:
        name: the service's short name (logs).
        health: the server's health servicer.
        full_names: service names whose status it sets (and "").
        warm_up: the warm-up, one cheap real query.
        policy: retries.
    """

    def __init__(self, name: str, health: health.aio.HealthServicer, full_names: list[str],
                 warm_up: Callable[[], Awaitable[None]], policy: WarmUpPolicy) -> None:
        self.name = name
        self.gate = ReadinessGate(name)
        self._health = health
        self._names = [*full_names, ""]
        self._warm_up = warm_up
        self.policy = policy
        self.failures = 0
        self.task: asyncio.Task | None = None
        #: Set once the first attempt has ended (succeeded or failed).
        self.first_attempt = asyncio.Event()

    async def set_status(self, status: int) -> None:
        """Sets every name's health status."""
        for name in self._names:
            await self._health.set(name, status)

    async def run(self) -> bool:
        """Attempts the warm-up until one succeeds (then SERVING, gate open)
        or the attempts are used up. Returns whether it succeeded."""
        delay = self.policy.backoff
        attempt = 0
        while True:
            attempt += 1
            started = time.perf_counter()
            try:
                await asyncio.wait_for(self._warm_up(), self.policy.timeout)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # noqa: BLE001 - any failure is retried
                self.failures += 1
                self.first_attempt.set()
                if self.policy.attempts and attempt >= self.policy.attempts:
                    log.error("%s: warm-up failed %d times (last: %s: %s); staying NOT_SERVING",
                              self.name, attempt, type(err).__name__, err)
                    return False
                log.warning("%s: warm-up attempt %d failed (%s: %s); retrying in %.1f s",
                            self.name, attempt, type(err).__name__, err, delay)
                await asyncio.sleep(delay)
                delay = min(self.policy.max_backoff, delay * 2)
                continue
            self.gate.ready = True
            await self.set_status(health_pb2.HealthCheckResponse.SERVING)
            self.first_attempt.set()
            log.info("%s: warm-up done in %.2f s (attempt %d); SERVING",
                     self.name, time.perf_counter() - started, attempt)
            return True

    def start(self) -> asyncio.Task:
        """Starts ``run`` in the background; returns its task."""
        self.task = asyncio.create_task(self.run(), name=f"{self.name}-warm-up")
        return self.task

    async def stop(self) -> None:
        """Cancels a warm-up still running."""
        if self.task is not None and not self.task.done():
            self.task.cancel()
            try:
                await self.task
            except asyncio.CancelledError:
                pass


@dataclass
class Service:
    """A servicer bundle ready to serve.

    Attributes:
        name: short name, e.g. "fuser" (used in logs).
        full_names: fully qualified gRPC service names it registers, for
            health and reflection, e.g. ["graphmesh.fuser.v1.FuserService"].
        register: adds the servicers to a server.
        on_start / on_stop: async hooks run before the server starts (model
            loading) and after it drained (close pools and clients).
        warm_up: one cheap real query against the service's store or model,
            run after the port is bound and before health says SERVING
            (retried per ``WarmUpPolicy``; see ``Readiness``). None = SERVING
            at once.
        store_deadline_margin: when set, each RPC's handler runs in a
            store deadline scope of the caller's remaining deadline less this
            many seconds (``StoreDeadlineInterceptor``).
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
        longest_call_s: seconds the slowest legitimate call may take (0 =
            short calls only); a connection closed for its age lets a call
            in flight run this long (connection_age_options).
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
    longest_call_s: float = 0.0
    warm_up: Callable[[], Awaitable[None]] | None = None
    store_deadline_margin: float | None = None
    readiness: Readiness | None = field(default=None, init=False, repr=False)


async def create_server(service: Service, host: str = "127.0.0.1", port: int = 0,
                        tls: TlsSettings | None = None, max_concurrent_rpcs: int = 0,
                        max_concurrent_streams: int = 100,
                        mesh_token: str = "",
                        warm_up_policy: WarmUpPolicy | None = None) -> tuple[grpc.aio.Server, int, health.aio.HealthServicer]:
    """Builds and starts the gRPC server for ``service``; TLS (mTLS with
    ``tls.client_auth``) when ``tls`` is enabled, plaintext otherwise.
    With ``mesh_token`` set and ``service.public`` false, RPCs other than
    health and reflection must carry it (UNAUTHENTICATED otherwise).
    At most ``max_concurrent_rpcs`` RPCs run at once (0 = no limit; beyond
    it grpc answers RESOURCE_EXHAUSTED "Concurrent RPC limit exceeded") and
    a client connection holds at most ``max_concurrent_streams`` streams.
    A service with a ``warm_up`` starts NOT_SERVING (health answers, other
    RPCs get UNAVAILABLE) and runs its first warm-up attempt before this
    returns; after a failed one the retries go on in the background
    (``service.readiness``, per ``warm_up_policy``, default
    ``WarmUpPolicy()``). Other services are SERVING at once.

    Returns:
        (server, bound port, health servicer). Port 0 binds a free port.
    Raises:
        RuntimeError: when the address cannot be bound.
    """
    mesh = [MeshTokenInterceptor(mesh_token)] if mesh_token and not service.public else []
    health_servicer = health.aio.HealthServicer()
    readiness = None
    if service.warm_up is not None:
        readiness = Readiness(service.name, health_servicer, service.full_names, service.warm_up,
                              warm_up_policy or WarmUpPolicy())
    gate = [readiness.gate] if readiness is not None else []
    deadlines = [StoreDeadlineInterceptor(service.store_deadline_margin)] if service.store_deadline_margin is not None else []
    server = grpc.aio.server(
        interceptors=[ServerMetricsInterceptor(), *mesh, *gate, *service.interceptors, *deadlines,
                      ErrorTranslationInterceptor(service.unavailable_errors)],
        options=[("grpc.max_receive_message_length", service.max_message_bytes),
                 ("grpc.max_send_message_length", service.max_message_bytes),
                 ("grpc.max_concurrent_streams", max_concurrent_streams),
                 # Our clients ping every 30 s (services.common.clients); gRPC's
                 # default server policy (5 min, 2 strikes) answers a call that
                 # waits longer than about 90 s on the LLM with GOAWAY
                 # too_many_pings, which fails the call.
                 ("grpc.http2.min_recv_ping_interval_without_data_ms", 20_000),
                 ("grpc.http2.max_ping_strikes", 0),
                 *([] if service.public else connection_age_options(service.longest_call_s))],
        maximum_concurrent_rpcs=max_concurrent_rpcs or None,
    )
    service.register(server)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection([*service.full_names, health.SERVICE_NAME, reflection.SERVICE_NAME], server)
    if tls is not None and tls.enabled:
        bound = server.add_secure_port(f"{host}:{port}", server_credentials(tls))
    else:
        bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise RuntimeError(f"cannot bind {host}:{port}")
    if readiness is not None:
        await readiness.set_status(health_pb2.HealthCheckResponse.NOT_SERVING)
    await server.start()
    if readiness is not None:
        service.readiness = readiness
        readiness.start()
        # The first attempt ends before this returns: a store that answers
        # makes the service SERVING at once; otherwise the retries go on in
        # the background, NOT_SERVING meanwhile.
        await readiness.first_attempt.wait()
    else:
        for name in [*service.full_names, ""]:
            await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return server, bound, health_servicer


async def serve(service: Service, settings: ServiceSettings, ready: asyncio.Event | None = None) -> None:
    """Runs ``service`` until SIGTERM or SIGINT, then shuts down gracefully.

    Starts the Prometheus endpoint on ``settings.metrics_port`` (unless -1),
    runs ``on_start`` before accepting RPCs and ``on_stop`` after draining.
    Prints ``READY <service> grpc=<port> metrics=<port>`` once the port is
    bound (health says SERVING once a ``warm_up`` has succeeded).
    """
    if service.on_start is not None:
        await service.on_start()
    server, port, health_servicer = await create_server(service, settings.host, settings.port, TlsSettings(),
                                                        settings.max_concurrent_rpcs, settings.max_concurrent_streams,
                                                        MeshSettings().resolved_token(), WarmUpPolicy.of(settings.readiness))
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
    if service.readiness is not None:
        await service.readiness.stop()
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
