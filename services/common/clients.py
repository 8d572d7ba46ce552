"""gRPC channels for calls between services: plaintext, or TLS / mTLS when
GRAPHMESH_TLS_* is set (services.common.settings.TlsSettings)."""
from __future__ import annotations

import json
from pathlib import Path

import grpc

from services.common.mesh_auth import MeshSettings, MeshTokenClientInterceptor, MetadataClientInterceptor
from services.common.metrics import ClientMetricsInterceptor
from services.common.settings import TlsSettings

#: RPCs that are safe to send twice: reads, and the ingest writes, which are
#: idempotent (documents keyed by id and skipped when their content hash is
#: stored; entities and triples MERGEd by key). Rewrite (an LLM call) and
#: Judge are left out: costly, and not worth a second try on the request path;
#: so are the deletes, whose second try would report nothing deleted.
IDEMPOTENT_RPCS = {
    "graphmesh.expander.v1.ExpanderService": ["Expand", "Embed", "NormalizeEntity"],
    "graphmesh.retriever.v1.RetrieverService": [
        "Retrieve", "Related", "GetDocumentHashes", "RetrieveEntities", "SuggestExpansions", "GetEntityLibrary",
        "ListDocuments", "ListCollections", "ExportEntities", "IngestDocuments", "IngestEntities", "IngestTriples"],
    "graphmesh.reranker.v1.RerankerService": ["Rerank"],
    "graphmesh.fuser.v1.FuserService": ["Fuse", "RankEntities"],
}

#: gRPC retry policy of those RPCs (gRFC A6): only UNAVAILABLE (the service
#: could not be reached or is restarting) is retried, at most 3 attempts in
#: all, backoff 50 ms doubling to at most 500 ms (with gRPC's jitter), always
#: within the call's own deadline. Retry throttling stops retries while more
#: than half of recent calls fail (a dead service gets no retry storm).
#: A request larger than gRPC's per-call retry buffer (256 KiB by default) is
#: not retried once sent.
RETRY_POLICY = {
    "maxAttempts": 3,
    "initialBackoff": "0.05s",
    "maxBackoff": "0.5s",
    "backoffMultiplier": 2,
    "retryableStatusCodes": ["UNAVAILABLE"],
}
#: Calls are spread over every address the target resolves to, round robin
#: (gRPC's default, pick_first, sends everything to the first one). So
#: several replicas of a service behind one name share its load: a list
#: ("ipv4:10.0.0.5:50052,10.0.0.6:50052") or a DNS name with several
#: records ("dns:///expander:50052", a Kubernetes headless Service or a
#: compose service with replicas). A replica that dies leaves the rotation
#: when its connection drops; calls in flight on it fail UNAVAILABLE and the
#: retry policy below sends them to another replica.
SERVICE_CONFIG = json.dumps({
    "loadBalancingConfig": [{"round_robin": {}}],
    "methodConfig": [{
        "name": [{"service": service, "method": method} for service, methods in IDEMPOTENT_RPCS.items()
                 for method in methods],
        "retryPolicy": RETRY_POLICY,
    }],
    "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1},
})

_CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ("grpc.keepalive_time_ms", 30_000),
    # Reconnect to a restarted service within about a second (gRPC's default
    # backoff grows to 120 s, so a service down for 15 s was found again up
    # to several seconds late).
    ("grpc.initial_reconnect_backoff_ms", 250),
    ("grpc.min_reconnect_backoff_ms", 250),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.enable_retries", 1),
    ("grpc.service_config", SERVICE_CONFIG),
]


def channel(address: str, tls: TlsSettings | None = None, mesh_token: str | None = None,
            metadata: list[tuple[str, str]] | None = None) -> grpc.aio.Channel:
    """A channel to ``address`` ("host:port") with client metrics and the
    retry policy of SERVICE_CONFIG for idempotent RPCs: TLS when
    ``tls`` (default: the GRAPHMESH_TLS_* environment, read on each call) is
    enabled, presenting this process's certificate under mTLS. Every call
    carries the mesh token (default: GRAPHMESH_MESH_TOKEN[_FILE], read on
    each call; "" sends none), see services.common.mesh_auth, and ``metadata``
    (an API key header, for a client of the gateway) when given.

    Raises:
        OSError: a configured certificate file cannot be read.
        ConfigError: the configured mesh token cannot be read.
    """
    tls = tls if tls is not None else TlsSettings()
    token = MeshSettings().resolved_token() if mesh_token is None else mesh_token
    interceptors: list = [ClientMetricsInterceptor(), *([MeshTokenClientInterceptor(token)] if token else []),
                          *([MetadataClientInterceptor(metadata)] if metadata else [])]
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
        ConfigError: the configured mesh token cannot be read.
    """
    tls = tls if tls is not None else TlsSettings()
    opts = list(options or [])
    if tls.enabled:
        ch = grpc.secure_channel(address, channel_credentials(tls), options=opts + _name_override(tls))
    else:
        ch = grpc.insecure_channel(address, options=opts)
    return grpc.intercept_channel(ch, _WithMetadata(metadata)) if metadata else ch
