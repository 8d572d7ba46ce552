"""Prometheus metrics with the go-grpc-prometheus names, and the pipeline
stage histogram.

Server side: grpc_server_started_total, grpc_server_handled_total,
grpc_server_handling_seconds. Client side: grpc_client_started_total,
grpc_client_handled_total, grpc_client_handling_seconds. Labels: grpc_type,
grpc_service, grpc_method (and grpc_code on handled).
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import grpc
from prometheus_client import Counter, Gauge, Histogram

from services.common.stream_handlers import wrap_stream

_LABELS = ("grpc_type", "grpc_service", "grpc_method")
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

SERVER_STARTED = Counter("grpc_server_started_total", "RPCs started on the server.", _LABELS)
SERVER_HANDLED = Counter(
    "grpc_server_handled_total", "RPCs completed on the server, by code.", (*_LABELS, "grpc_code")
)
SERVER_SECONDS = Histogram(
    "grpc_server_handling_seconds", "Server-side RPC latency (seconds).", _LABELS, buckets=_BUCKETS
)
CLIENT_STARTED = Counter("grpc_client_started_total", "RPCs started by this client.", _LABELS)
CLIENT_HANDLED = Counter(
    "grpc_client_handled_total", "RPCs completed by this client, by code.", (*_LABELS, "grpc_code")
)
CLIENT_SECONDS = Histogram(
    "grpc_client_handling_seconds", "Client-side RPC latency (seconds).", _LABELS, buckets=_BUCKETS
)
STAGE_SECONDS = Histogram(
    "graphmesh_stage_duration_seconds",
    "Wall time of each pipeline stage in the gateway (seconds).",
    ("stage", "status"),
    buckets=_BUCKETS,
)


def split_method(full_method: str) -> tuple[str, str]:
    """'/pkg.Service/Method' -> ('pkg.Service', 'Method')."""
    _, service, method = full_method.split("/", 2)
    return service, method


class ServerMetricsInterceptor(grpc.aio.ServerInterceptor):
    """Counts and times unary-unary and unary-stream RPCs."""

    async def intercept_service(self, continuation: Callable, handler_call_details: grpc.HandlerCallDetails) -> Any:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        service, method = split_method(handler_call_details.method)
        if handler.unary_unary is not None:
            inner = handler.unary_unary
            labels = ("unary", service, method)

            async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                SERVER_STARTED.labels(*labels).inc()
                started = time.perf_counter()
                code = grpc.StatusCode.OK
                try:
                    return await inner(request, context)
                except BaseException as err:
                    code = failure_code(err, context)
                    raise
                finally:
                    if code is grpc.StatusCode.OK and context.code() not in (None, grpc.StatusCode.OK):
                        code = context.code()
                    SERVER_HANDLED.labels(*labels, _code_name(code)).inc()
                    SERVER_SECONDS.labels(*labels).observe(time.perf_counter() - started)

            return grpc.unary_unary_rpc_method_handler(
                unary,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            labels = ("server_stream", service, method)

            @asynccontextmanager
            async def measured(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[None]:
                SERVER_STARTED.labels(*labels).inc()
                started = time.perf_counter()
                code = grpc.StatusCode.OK
                try:
                    yield
                except BaseException as err:
                    code = failure_code(err, context)
                    raise
                finally:
                    SERVER_HANDLED.labels(*labels, _code_name(code)).inc()
                    SERVER_SECONDS.labels(*labels).observe(time.perf_counter() - started)

            return grpc.unary_stream_rpc_method_handler(
                wrap_stream(handler.unary_stream, measured),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler


def failure_code(err: BaseException, context: grpc.aio.ServicerContext) -> grpc.StatusCode:
    """The status an RPC that raised ``err`` ends with: the one it aborted
    with; for a cancelled call (the client went away, or its deadline
    passed: grpc cancels the handler, or closes a streaming one) CANCELLED or
    DEADLINE_EXCEEDED, by the time left; else UNKNOWN. Counted as UNKNOWN,
    every closed browser tab counted as a server error."""
    code = context.code()
    if code not in (None, grpc.StatusCode.OK):
        return code
    # a streaming handler the client cancelled between two messages is closed (GeneratorExit), not cancelled
    if isinstance(err, (asyncio.CancelledError, GeneratorExit)):
        left = context.time_remaining()
        return grpc.StatusCode.DEADLINE_EXCEEDED if left is not None and left <= 0 else grpc.StatusCode.CANCELLED
    return grpc.StatusCode.UNKNOWN


def _code_name(code: Any) -> str:
    if isinstance(code, grpc.StatusCode):
        return code.name
    try:
        return grpc.StatusCode(code).name  # type: ignore[call-arg]
    except Exception:
        return str(code)


class ClientMetricsInterceptor(grpc.aio.UnaryUnaryClientInterceptor):
    """Counts and times outgoing unary RPCs."""

    async def intercept_unary_unary(self, continuation: Callable, client_call_details: Any, request: Any) -> Any:
        method = client_call_details.method
        if isinstance(method, bytes):
            method = method.decode()
        service, name = split_method(method)
        labels = ("unary", service, name)
        CLIENT_STARTED.labels(*labels).inc()
        started = time.perf_counter()
        code = grpc.StatusCode.UNKNOWN
        try:
            call = await continuation(client_call_details, request)
            # Waits for the outcome without raising it: the caller awaits the
            # call for that, and interceptors before this one (tracing) see a
            # call object, not an exception.
            code = await call.code()
            return call
        except grpc.aio.AioRpcError as err:
            code = err.code()
            raise
        finally:
            CLIENT_HANDLED.labels(*labels, code.name).inc()
            CLIENT_SECONDS.labels(*labels).observe(time.perf_counter() - started)


VECTOR_SEARCH_PLANS = Counter(
    "graphmesh_pg_vector_search_total",
    "Vector searches in PostgreSQL by plan: hnsw (the index, iterative scan when scoped), exact (a small "
    "scope scanned exactly), hnsw_then_exact (the index found too few in scope, then the exact scan).",
    ("plan",),
)

KEYWORD_POSTINGS_LOOKUPS = Counter(
    "graphmesh_pg_keyword_postings_total",
    "Posting lists the keyword channels asked of retriever_pg's keyword cache, by result: hit (in memory) or "
    "miss (read from chunk_terms).",
    ("result",),
)
KEYWORD_POSTINGS_BYTES = Gauge(
    "graphmesh_pg_keyword_postings_bytes",
    "Bytes of keyword posting lists held in retriever_pg's memory (GRAPHMESH_RETRIEVER_PG_STORE__KEYWORD_CACHE_MB).",
)
