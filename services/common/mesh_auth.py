"""Authentication of calls between GraphMesh's own services: a shared mesh
token.

Behind the gateway, each service's gRPC port takes writes (IngestDocuments,
DeleteCollection) and costly reads from whoever can reach it. When a mesh
token is configured (``GRAPHMESH_MESH_TOKEN``, or ``GRAPHMESH_MESH_TOKEN_FILE``
naming a file that holds it), every service but the gateway's public port
refuses an RPC without it (UNAUTHENTICATED), and every channel made by
``services.common.clients.channel`` sends it as metadata
``x-graphmesh-mesh-token``. Health and reflection stay open, so probes and
``grpcurl list`` work. ``graphmesh up`` generates a token for its local
stack; compose and Kubernetes read it from a secret (docs/security.md).
The token is compared in constant time and never logged
(services.common.redaction). mTLS (GRAPHMESH_TLS_*) is the stronger choice
where certificates can be issued; the two combine.
"""
from __future__ import annotations

import hmac
import logging
import secrets
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import grpc
from pydantic_settings import SettingsConfigDict

from services.common.errors import ConfigError
from services.common.settings import GraphMeshSettings

log = logging.getLogger("graphmesh.mesh_auth")

#: Metadata key the token travels in.
MESH_TOKEN_METADATA = "x-graphmesh-mesh-token"
#: Services every caller may use without the token.
OPEN_SERVICES = frozenset({"grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection",
                           "grpc.reflection.v1.ServerReflection"})
#: Shortest token accepted (characters): 128 bits of hex.
MIN_TOKEN_CHARS = 32


class MeshSettings(GraphMeshSettings):
    """Attributes (env prefix GRAPHMESH_MESH_, shared by every service):
    token: the mesh token itself ("" = read ``token_file``).
    token_file: a file holding the token (a mounted secret); "" = none.
    With neither set, calls between services are not authenticated.
    """

    model_config = SettingsConfigDict(env_prefix="GRAPHMESH_MESH_")

    token: str = ""
    token_file: str = ""

    def resolved_token(self) -> str:
        """The configured token, "" when none.

        Raises:
            ConfigError: the file cannot be read, or the token is shorter
                than MIN_TOKEN_CHARS.
        """
        token = self.token.strip()
        if not token and self.token_file:
            try:
                token = Path(self.token_file).read_text(encoding="utf-8").strip()
            except OSError as err:
                raise ConfigError(f"GRAPHMESH_MESH_TOKEN_FILE: cannot read {self.token_file}: {err.strerror}") from None
        if token and len(token) < MIN_TOKEN_CHARS:
            raise ConfigError(f"the mesh token must be at least {MIN_TOKEN_CHARS} characters")
        return token


def new_mesh_token() -> str:
    """A fresh random token: 32 bytes as 64 hex characters."""
    return secrets.token_hex(32)


def refusing_handler(handler: grpc.RpcMethodHandler, code: grpc.StatusCode, message: str,
                     trailer: tuple = (), on_refuse: Callable[[str], None] | None = None) -> grpc.RpcMethodHandler:
    """A handler of the same kind as ``handler`` (unary or streaming) that
    aborts every call with ``code`` and ``message``, first calling
    ``on_refuse`` with the caller's address (gRPC's peer string,
    "ipv4:127.0.0.1:53412"): the interceptor that refuses never sees it."""

    async def refuse(request: Any, context: grpc.aio.ServicerContext) -> None:
        if on_refuse is not None:
            on_refuse(context.peer())
        await context.abort(code, message, trailing_metadata=trailer)

    async def refuse_stream(request: Any, context: grpc.aio.ServicerContext) -> Any:
        # A server-streaming method must be served by an async generator.
        if on_refuse is not None:
            on_refuse(context.peer())
        await context.abort(code, message, trailing_metadata=trailer)
        yield  # never reached: abort raises

    kinds = (("unary_unary", grpc.unary_unary_rpc_method_handler, refuse),
             ("unary_stream", grpc.unary_stream_rpc_method_handler, refuse_stream),
             ("stream_unary", grpc.stream_unary_rpc_method_handler, refuse),
             ("stream_stream", grpc.stream_stream_rpc_method_handler, refuse_stream))
    factory, behaviour = next((f, b) for attr, f, b in kinds if getattr(handler, attr) is not None)
    return factory(behaviour, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer)


class MeshTokenInterceptor(grpc.aio.ServerInterceptor):
    """Refuses (UNAUTHENTICATED) every RPC that does not carry ``token`` in
    metadata MESH_TOKEN_METADATA; services in ``open_services`` pass."""

    def __init__(self, token: str, open_services: Iterable[str] = OPEN_SERVICES) -> None:
        self._token = token.encode()
        self._open = frozenset(open_services)

    async def intercept_service(self, continuation: Callable, handler_call_details: grpc.HandlerCallDetails) -> Any:
        method = handler_call_details.method
        handler = await continuation(handler_call_details)
        if handler is None or method.split("/")[1] in self._open:
            return handler
        presented = dict(handler_call_details.invocation_metadata or ()).get(MESH_TOKEN_METADATA, "")
        if isinstance(presented, str) and hmac.compare_digest(presented.encode(), self._token):
            return handler
        log.warning("%s refused: no valid mesh token", method)
        return refusing_handler(handler, grpc.StatusCode.UNAUTHENTICATED,
                                "this port serves GraphMesh's own services only: call the gateway (mesh token missing or wrong)")


class MetadataClientInterceptor(grpc.aio.UnaryUnaryClientInterceptor, grpc.aio.UnaryStreamClientInterceptor):
    """Adds ``pairs`` (metadata keys and values) to every call of an aio channel."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self._pairs = list(pairs)

    def _details(self, details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        metadata = grpc.aio.Metadata(*(details.metadata or ()), *self._pairs)
        return grpc.aio.ClientCallDetails(details.method, details.timeout, metadata, details.credentials,
                                          details.wait_for_ready)

    async def intercept_unary_unary(self, continuation, client_call_details, request):
        return await continuation(self._details(client_call_details), request)

    async def intercept_unary_stream(self, continuation, client_call_details, request):
        return await continuation(self._details(client_call_details), request)


class MeshTokenClientInterceptor(MetadataClientInterceptor):
    """Adds the mesh token to every call of an aio channel."""

    def __init__(self, token: str) -> None:
        super().__init__([(MESH_TOKEN_METADATA, token)])
