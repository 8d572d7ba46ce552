"""gRPC channels for calls between services."""
from __future__ import annotations

import grpc

from services.common.metrics import ClientMetricsInterceptor

_CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ("grpc.keepalive_time_ms", 30_000),
]


def channel(address: str) -> grpc.aio.Channel:
    """An insecure channel to ``address`` ("host:port") with client metrics."""
    return grpc.aio.insecure_channel(address, options=_CHANNEL_OPTIONS, interceptors=[ClientMetricsInterceptor()])
