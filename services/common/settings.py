"""Settings shared by every service, read from environment variables.

Each service subclasses ``ServiceSettings`` with its own prefix, e.g.
``GRAPHMESH_GATEWAY_PORT``. Addresses of the other services are shared
(``GRAPHMESH_<SERVICE>_ADDR``) so one environment configures the whole mesh.
"""
from __future__ import annotations

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

# Default ports of the local stack: gRPC port, metrics port is +1000.
DEFAULT_PORTS = {
    "gateway": 50051,
    "expander": 50052,
    "retriever_pg": 50053,
    "retriever_graph": 50054,
    "reranker": 50055,
    "fuser": 50056,
    "judge": 50057,
}
REST_DEFAULT_PORT = 8080


class ServiceSettings(BaseSettings):
    """Bootstrap settings of one service.

    Attributes:
        host: interface the gRPC server binds (default 127.0.0.1).
        port: gRPC port; 0 picks a free one.
        metrics_port: Prometheus port; 0 picks a free one, -1 disables it.
        grace_seconds: how long in-flight RPCs may drain on SIGTERM (seconds).
        max_query_chars: longest accepted query (characters): a pasted case
            description runs to several thousand.
        user_dict: path of the jieba user dictionary every tokenising
            process loads at start (env ``GRAPHMESH_USER_DICT``, shared by all
            services; see services.common.lexicon); "" = jieba's own.
    """

    model_config = SettingsConfigDict(extra="ignore")

    host: str = "127.0.0.1"
    port: int = 0
    metrics_port: int = -1
    grace_seconds: float = 5.0
    max_query_chars: int = Field(10_000, ge=1)
    user_dict: str = Field("", validation_alias=AliasChoices("GRAPHMESH_USER_DICT"))



class TlsSettings(BaseSettings):
    """Transport security of every service's gRPC port and of the channels
    between services (env prefix GRAPHMESH_TLS_, shared by all services).
    Off when ``cert_file`` is empty.

    Attributes:
        cert_file / key_file: PEM certificate chain and private key this
            process presents (as a server, and as a client under mTLS).
        ca_file: PEM CA bundle that signs the other services' certificates.
        client_auth: mTLS: servers require a client certificate signed by
            ``ca_file``, and clients present theirs.
        server_name: name to check in server certificates instead of the
            address's host (e.g. when services are reached by IP).
    """

    model_config = SettingsConfigDict(env_prefix="GRAPHMESH_TLS_", extra="ignore")

    cert_file: str = ""
    key_file: str = ""
    ca_file: str = ""
    client_auth: bool = False
    server_name: str = ""

    @property
    def enabled(self) -> bool:
        """Whether TLS is configured."""
        return bool(self.cert_file)


class TracingSettings(BaseSettings):
    """Attributes:
    otlp_endpoint: OTLP/gRPC collector spans are exported to
        (``OTEL_EXPORTER_OTLP_ENDPOINT``, the standard variable, e.g.
        http://collector:4317); "" = no export (spans still give each
        request its trace id).
    """

    model_config = SettingsConfigDict(extra="ignore")

    otlp_endpoint: str = Field("", validation_alias=AliasChoices("OTEL_EXPORTER_OTLP_ENDPOINT"))


class MeshAddresses(BaseSettings):
    """Addresses of every service, from GRAPHMESH_<SERVICE>_ADDR."""

    model_config = SettingsConfigDict(env_prefix="GRAPHMESH_", extra="ignore")

    gateway_addr: str = f"127.0.0.1:{DEFAULT_PORTS['gateway']}"
    expander_addr: str = f"127.0.0.1:{DEFAULT_PORTS['expander']}"
    retriever_pg_addr: str = f"127.0.0.1:{DEFAULT_PORTS['retriever_pg']}"
    retriever_graph_addr: str = f"127.0.0.1:{DEFAULT_PORTS['retriever_graph']}"
    reranker_addr: str = f"127.0.0.1:{DEFAULT_PORTS['reranker']}"
    fuser_addr: str = f"127.0.0.1:{DEFAULT_PORTS['fuser']}"
    judge_addr: str = f"127.0.0.1:{DEFAULT_PORTS['judge']}"
