"""The domain pack's query adapter in one search: channel pg.adapted.

A pack may carry a learned map of query vectors for some question types
(``domains.pack.QueryAdapter``; law_zh: lay consultations, whose everyday
words no statute uses). Once the question's type and embedding are known,
the mapped vector goes to retriever_pg as ``adapted_embedding``, and the
chunks nearest it come back as pg.adapted, fused at the pack's weight beside
the question's own vector (docs/retrieval.md, "A query adapter for lay
questions"). Pure: no gRPC.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import domains
from domains.pack import QueryAdapter, load_query_adapter
from services.common import names
from services.gateway.search.understanding import Understanding


def configured_adapter(path: str) -> QueryAdapter | None:
    """The adapter of ``GatewaySettings.query_adapter_file`` (one that replaces
    every pack's, to measure a refitted or cross-validated adapter), or None
    for "" (each pack's own).

    Raises:
        ValueError, OSError: the file is not a query adapter (``load_query_adapter``).
    """
    return load_query_adapter(Path(path)) if path else None


def adapted_embedding(understood: Understanding, packs: Sequence[str], disabled: frozenset[str] = frozenset(),
                      override: QueryAdapter | None = None) -> list[float]:
    """The question's embedding mapped by the adapter that applies to its type
    and embedding model (``override`` when given, else the first of ``packs``'
    own: ``domains.query_adapter``); [] without an embedding, with pg.adapted
    switched off, or when no adapter applies."""
    if not understood.embedding or names.PG_ADAPTED in disabled:
        return []
    model = understood.info.embedding_model
    if override is not None:
        adapter = override if override.applies(understood.question_type, model) else None
    else:
        adapter = domains.query_adapter(packs, understood.question_type, model)
    return adapter.adapt(understood.embedding) if adapter is not None else []
