"""gRPC channels for calls between services: plaintext, or TLS / mTLS when
GRAPHMESH_TLS_* is set (services.common.settings.TlsSettings)."""
from __future__ import annotations

from pathlib import Path

import grpc

from services.common.metrics import ClientMetricsInterceptor
from services.common.settings import TlsSettings

_CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ("grpc.keepalive_time_ms", 30_000),
]


def channel(address: str, tls: TlsSettings | None = None) -> grpc.aio.Channel:
    """A channel to ``address`` ("host:port") with client metrics: TLS when
    ``tls`` (default: the GRAPHMESH_TLS_* environment, read on each call) is
    enabled, presenting this process's certificate under mTLS.

    Raises:
        OSError: a configured certificate file cannot be read.
    """
    tls = tls if tls is not None else TlsSettings()
    interceptors = [ClientMetricsInterceptor()]
    if not tls.enabled:
        return grpc.aio.insecure_channel(address, options=_CHANNEL_OPTIONS, interceptors=interceptors)
    return grpc.aio.secure_channel(address, channel_credentials(tls), options=_CHANNEL_OPTIONS + _name_override(tls),
                                   interceptors=interceptors)


def channel_credentials(tls: TlsSettings) -> grpc.ChannelCredentials:
    """The client side of ``tls``: the CA to trust, and this process's
    certificate under mTLS."""
    return grpc.ssl_channel_credentials(
        root_certificates=_read(tls.ca_file),
        private_key=_read(tls.key_file) if tls.client_auth else None,
        certificate_chain=_read(tls.cert_file) if tls.client_auth else None,
    )


def _name_override(tls: TlsSettings) -> list[tuple[str, str]]:
    return [("grpc.ssl_target_name_override", tls.server_name)] if tls.server_name else []


def server_credentials(tls: TlsSettings) -> grpc.ServerCredentials:
    """The server side of ``tls``: its certificate, and under mTLS the CA
    that client certificates must be signed by.

    Raises:
        OSError: a certificate file cannot be read.
    """
    return grpc.ssl_server_credentials(
        [(_read(tls.key_file), _read(tls.cert_file))],
        root_certificates=_read(tls.ca_file) if tls.client_auth else None,
        require_client_auth=tls.client_auth,
    )


def _read(path: str) -> bytes | None:
    return Path(path).read_bytes() if path else None


class _WithMetadata(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Adds fixed metadata (an API key) to every call of a blocking channel."""

    def __init__(self, metadata: list[tuple[str, str]]) -> None:
        self._metadata = metadata

    def _details(self, details):
        return details._replace(metadata=list(details.metadata or []) + self._metadata)

    def intercept_unary_unary(self, continuation, client_call_details, request):
        return continuation(self._details(client_call_details), request)

    def intercept_unary_stream(self, continuation, client_call_details, request):
        return continuation(self._details(client_call_details), request)


def blocking_channel(address: str, metadata: list[tuple[str, str]] | None = None,
                     options: list[tuple[str, int]] | None = None, tls: TlsSettings | None = None) -> grpc.Channel:
    """A synchronous channel (CLI, health probe) to ``address``: TLS as
    ``channel``; ``metadata`` (e.g. an API key header) sent with every call.

    Raises:
        OSError: a configured certificate file cannot be read.
    """
    tls = tls if tls is not None else TlsSettings()
    opts = list(options or [])
    if tls.enabled:
        ch = grpc.secure_channel(address, channel_credentials(tls), options=opts + _name_override(tls))
    else:
        ch = grpc.insecure_channel(address, options=opts)
    return grpc.intercept_channel(ch, _WithMetadata(metadata)) if metadata else ch
