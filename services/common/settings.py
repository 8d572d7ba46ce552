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
        max_query_chars: longest accepted query (characters).
        user_dict: path of the jieba user dictionary every tokenising
            process loads at start (env ``GRAPHMESH_USER_DICT``, shared by all
            services; see services.common.lexicon); "" = jieba's own.
    """

    model_config = SettingsConfigDict(extra="ignore")

    host: str = "127.0.0.1"
    port: int = 0
    metrics_port: int = -1
    grace_seconds: float = 5.0
    max_query_chars: int = Field(2000, ge=1)
    user_dict: str = Field("", validation_alias=AliasChoices("GRAPHMESH_USER_DICT"))


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
