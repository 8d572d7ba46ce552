"""OpenTelemetry tracing across the services.

Each service's entry point calls ``setup_tracing`` before it builds its
server and channels: gRPC servers and clients are instrumented
(opentelemetry-instrumentation-grpc), so a trace started at the gateway
continues through every downstream call. Spans are exported over OTLP/gRPC
only when an endpoint is configured (``OTEL_EXPORTER_OTLP_ENDPOINT``, the
standard OpenTelemetry variable); without one, spans are still made (they
give every request its trace id) and dropped.

``current_trace_id`` is the id the gateway returns in its ``x-trace-id``
response metadata; ``TraceIdLogFilter`` puts it on every log record.
"""
from __future__ import annotations

import logging
import secrets
from contextlib import asynccontextmanager
from contextvars import ContextVar

import grpc
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from services.common.stream_handlers import wrap_stream

#: A request's trace id when no span is active (tracing not set up, e.g. a
#: service built in-process by tests): set by the gateway per request.
_fallback_trace_id: ContextVar[str] = ContextVar("graphmesh_trace_id", default="")
_provider: TracerProvider | None = None


def setup_tracing(service: str, otlp_endpoint: str = "") -> TracerProvider:
    """Installs the tracer provider of ``service`` ("gateway", ...) and the
    gRPC server and client instrumentation; exports to ``otlp_endpoint``
    ("http://collector:4317") when given. Idempotent per process.

    Returns:
        the provider (``shutdown()`` flushes pending spans).
    """
    global _provider
    if _provider is not None:
        return _provider
    from opentelemetry.instrumentation.grpc import GrpcAioInstrumentorClient

    provider = TracerProvider(resource=Resource.create({"service.name": f"graphmesh-{service}"}))
    if otlp_endpoint:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=otlp_endpoint, insecure=otlp_endpoint.startswith("http://"))))
    trace.set_tracer_provider(provider)
    logging.getLogger("opentelemetry.context").addFilter(CancelledDetachFilter())
    server_instrumentor().instrument(tracer_provider=provider)
    GrpcAioInstrumentorClient().instrument(tracer_provider=provider)
    _provider = provider
    return provider


def server_instrumentor():
    """OpenTelemetry's grpc.aio server instrumentation, health checks left
    out: its interceptor iterates every server-streaming handler with
    ``async for``, and grpcio's health Watch is a coroutine that writes
    (INTERNAL on every service's Watch), and a probe every few seconds is
    no trace anyone reads."""
    from opentelemetry.instrumentation.grpc import GrpcAioInstrumentorServer
    from opentelemetry.instrumentation.grpc.filters import health_check, negate

    return GrpcAioInstrumentorServer(filter_=negate(health_check()))


class CancelledDetachFilter(logging.Filter):
    """Drops OpenTelemetry's "Failed to detach context" error for a call the
    client cancelled: the gRPC instrumentation resets its span's context
    from the cancelled task's cleanup, in another context than it was set
    in (a ValueError naming a token "created in a different Context"). The
    span still ends; each cancel logged two tracebacks (376 for 200
    cancelled streams in a trial). Any other detach failure is kept."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not (record.getMessage() == "Failed to detach context" and isinstance(error, ValueError)
                    and "different Context" in str(error))


def shutdown_tracing() -> None:
    """Flushes and stops span export (at the end of ``serve``)."""
    if _provider is not None:
        _provider.shutdown()


def current_trace_id() -> str:
    """The trace id of the request being served, 32 hex characters: the
    active span's, else the per-request fallback, else ""."""
    context = trace.get_current_span().get_span_context()
    if context.is_valid:
        return format(context.trace_id, "032x")
    return _fallback_trace_id.get()


def start_request_trace() -> str:
    """The current trace id, or a new random one (W3C format) remembered for
    this request when no span is active; returned for response metadata."""
    trace_id = current_trace_id()
    if not trace_id:
        trace_id = secrets.token_hex(16)
        _fallback_trace_id.set(trace_id)
    return trace_id


class TraceIdLogFilter(logging.Filter):
    """Adds ``trace_id`` (or "-") to every log record, for the log format."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.trace_id = current_trace_id() or "-"
        return True


class TraceIdInterceptor(grpc.aio.ServerInterceptor):
    """A grpc.aio server interceptor that sends each call's trace id as the
    ``x-trace-id`` response (initial) metadata, for unary and
    server-streaming RPCs."""

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        if handler.unary_unary is not None:
            inner = handler.unary_unary

            async def unary(request, context):
                await context.send_initial_metadata((("x-trace-id", start_request_trace()),))
                return await inner(request, context)

            return grpc.unary_unary_rpc_method_handler(
                unary, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer)
        if handler.unary_stream is not None:
            @asynccontextmanager
            async def traced(request, context):
                await context.send_initial_metadata((("x-trace-id", start_request_trace()),))
                yield

            return grpc.unary_stream_rpc_method_handler(
                wrap_stream(handler.unary_stream, traced), request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)
        return handler
