"""``graphmesh eval --ablate``: the same queries with one stage switched off
(or, for a stage off by default, on) at a time, as a markdown table, so each
stage's contribution and cost are measured.

Rows come from the channel registry (``services.common.names``) and the
gateway's defaults (``DEFAULT_WEIGHTS``, ``DEFAULT_OFF``): "- X" for every
document channel the default profile runs with a weight above 0, "+ X" for
every channel it has off (``SearchRequest.enabled_stages``), then whole
stages and single-channel baselines."""
from __future__ import annotations

import asyncio
import sys

from services.cli.evaluate import run_queries, summarise
from services.common import names
from services.gateway.config import DEFAULT_OFF, DEFAULT_WEIGHTS

_LABELS = {
    names.PG_VECTOR: "dense; weighs 0 where the collections mix writing systems, pg.centred standing in",
    names.PG_ADAPTED: "query adapter for lay questions", names.PG_CENTRED: "dense, writing systems centred", names.PG_HYDE: "HyDE passage", names.PG_KEYWORD: "BM25",
    names.PG_FULLTEXT: "hit count, then length", names.PG_TRIGRAM: "short queries", names.PG_BOOST: "same document",
    names.GRAPH_HEADING: "heading lookup", names.GRAPH_FULLTEXT: "Neo4j full text",
    names.GRAPH_NEIGHBOUR: "reading-order neighbours", names.GRAPH_ARTICLE: "exact article lookup",
    names.PG_TRANSLATED: "keywords across writing systems", names.GRAPH_TERM: "defined terms", names.GRAPH_OFFENCE: "offences of a case", names.GRAPH_CITES: "citations",
    names.GRAPH_VERSION: "versions", names.GRAPH_PPR: "personalised PageRank",
}
#: Channels that need something the default stack lacks (an LLM) or weigh 0.
_NOT_RUN = {names.PG_HYDE}


def default_on() -> list[str]:
    """Document channels the default profile runs and weighs above 0."""
    return [c for c in names.DOCUMENT_CHANNELS
            if c not in DEFAULT_OFF and c not in _NOT_RUN and DEFAULT_WEIGHTS.get(c, 1.0) > 0]


def ablations() -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    """(label, stages switched off, stages switched on) per row; the first
    row is the full pipeline with the defaults."""
    rows: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [("full pipeline", (), ())]
    rows += [(f"- {c} ({_LABELS.get(c, c)})", (c,), ()) for c in default_on()]
    rows += [(f"+ {c} ({_LABELS.get(c, c)})", (), (c,)) for c in DEFAULT_OFF if c in names.DOCUMENT_CHANNELS]
    rows += [
        # weighs 0 in the fusion but acts after it (the fuser's cross-script check)
        (f"- {names.PG_TRANSLATED} ({_LABELS[names.PG_TRANSLATED]})", (names.PG_TRANSLATED,), ()),
        (f"- {names.SENTENCE_MAXSIM} (best sentence's similarity)", (names.SENTENCE_MAXSIM,), ()),
        ("- graph (whole retriever)", ("graph",), ()),
        ("only pg.keyword (BM25)",
         tuple(c for c in names.PG_CHANNELS if c != names.PG_KEYWORD) + ("graph", names.SENTENCE_MAXSIM), ()),
        ("only pg.vector (dense)",
         tuple(c for c in names.PG_CHANNELS if c != names.PG_VECTOR) + ("graph", names.SENTENCE_MAXSIM), ()),
    ]
    return rows


COLUMNS = ["recall@1", "recall@5", "recall@10", "mrr@10", "ndcg@10", "latency_ms_p50", "latency_ms_p95"]


def ablation_rows(address: str, dataset: list[dict], top_k: int, concurrency: int, timeout: float,
                  rows: list[tuple[str, tuple[str, ...], tuple[str, ...]]] | None = None,
                  collections: tuple[str, ...] = (), filters: tuple = ()) -> list[dict]:
    """Runs every ablation (``rows``, default ``ablations()``) over
    ``collections`` (the gateway's default when empty) with the metadata
    ``filters``: [{"configuration", "disabled", "enabled", **summarise()
    totals}], one per row; each row's table line goes to stderr as it
    completes, so a long run shows progress."""
    scope = {"collections": collections, "filters": filters}
    # One untimed pass over a few queries so caches are warm for every row.
    asyncio.run(run_queries(address, dataset[:20], top_k, concurrency, timeout, **scope))
    out = []
    for label, disabled, enabled in rows or ablations():
        result = asyncio.run(run_queries(address, dataset, top_k, concurrency, timeout, disabled_stages=disabled,
                                         enabled_stages=enabled, **scope))
        out.append({"configuration": label, "disabled": list(disabled), "enabled": list(enabled), **summarise(result)})
        print(table_line(out[-1]), file=sys.stderr, flush=True)
    return out


def table_line(row: dict) -> str:
    """One ablation row as a markdown table line (COLUMNS)."""
    return f"| {row['configuration']} | " + " | ".join(str(row.get(c, "")) for c in COLUMNS) + " |"


def ablation_table(rows: list[dict]) -> str:
    """The markdown table of ``ablation_rows``' rows."""
    head = ["| configuration | " + " | ".join(COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    return "\n".join(head + [table_line(r) for r in rows])
