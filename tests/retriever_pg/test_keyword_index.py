"""keyword_index: BM25 and the hit count over postings in memory, against
the formulas computed by hand chunk by chunk; BM25 over some collections
scores them as if they were alone (their N, df and avgdl)."""
from __future__ import annotations

import math
import random

import numpy as np
import pytest

from services.retriever_pg.keyword_index import ChunkTable, Postings, bm25, hit_count

pytestmark = pytest.mark.unit


def corpus(seed: int, chunks: int = 60, vocabulary: int = 12):
    """A random corpus: {chunk_id: (collection, {term: tf}, doc_len)}."""
    rng = random.Random(seed)
    out = {}
    for i in range(chunks):
        terms = {f"t{rng.randrange(vocabulary)}": rng.randint(1, 3) for _ in range(rng.randint(1, 5))}
        out[f"c{rng.randrange(10**6):06d}-{i}"] = (rng.choice(["a", "b"]), terms, sum(terms.values()) + rng.randint(0, 4))
    return out


def index(chunks):
    table = ChunkTable()
    lists: dict[str, tuple[list[int], list[int]]] = {}
    for chunk_id, (collection, terms, doc_len) in chunks.items():
        row = table.row(chunk_id, doc_len, collection)
        for term, tf in terms.items():
            lists.setdefault(term, ([], []))[0].append(row)
            lists[term][1].append(tf)
    postings = {t: Postings(np.asarray(r, dtype=np.int32), np.asarray(f, dtype=np.int32)) for t, (r, f) in lists.items()}
    return table, postings


def by_hand_bm25(chunks, terms, collections, k1=1.2, b=0.75):
    """BM25 of ``collections``' chunks as if they were the whole corpus: N, df and avgdl theirs."""
    scoped = {c: v for c, v in chunks.items() if collections is None or v[0] in collections}
    n = len(scoped)
    avgdl = sum(d for _, _, d in scoped.values()) / n
    df = {t: sum(t in ts for _, ts, _ in scoped.values()) for t in terms}
    scores = {}
    for chunk_id, (collection, ts, doc_len) in scoped.items():
        held = [t for t in terms if t in ts]
        if held:
            scores[chunk_id] = sum(
                math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) * ts[t] * (k1 + 1)
                / (ts[t] + k1 * (1 - b + b * doc_len / avgdl)) for t in held)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0])), n, avgdl


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("collections", [None, ["a"], ["b", "missing"]])
def test_bm25_ranks_and_scores_as_the_formula(seed, collections):
    chunks = corpus(seed)
    table, postings = index(chunks)
    terms = ["t1", "t3", "t7", "absent"]
    postings["absent"] = Postings(np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32))
    expected, n, avgdl = by_hand_bm25(chunks, terms, collections)
    got = bm25(table, postings, terms, 10, collections, n=n, avgdl=avgdl, k1=1.2, b=0.75)
    assert [h.chunk_id for h in got] == [c for c, _ in expected[:10]]
    assert [h.score for h in got] == pytest.approx([s for _, s in expected[:10]], rel=1e-12)
    for h in got:
        assert h.matched == tuple(t for t in terms if t in chunks[h.chunk_id][1])


def test_bm25_breaks_ties_by_chunk_id_at_the_cut():
    chunks = {cid: ("a", {"x": 1}, 5) for cid in ["c9", "c2", "c5", "c1"]}
    table, postings = index(chunks)
    got = bm25(table, postings, ["x"], 2, None, n=4, avgdl=5.0, k1=1.2, b=0.75)
    assert [h.chunk_id for h in got] == ["c1", "c2"]


def test_bm25_keeps_n_at_least_df():
    # A cached N below a term's df (another writer added chunks) must not
    # give a negative idf: N is raised to df, as in the SQL channel.
    chunks = {f"c{i}": ("a", {"x": 1}, 3) for i in range(5)}
    table, postings = index(chunks)
    [first, *_] = bm25(table, postings, ["x"], 5, None, n=2, avgdl=3.0, k1=1.2, b=0.75)
    assert first.score == pytest.approx(math.log(1 + 0.5 / 5.5) * 2.2 / (1 + 1.2))


@pytest.mark.parametrize("seed", range(8))
def test_hit_count_orders_by_hits_then_length_then_id(seed):
    chunks = corpus(seed)
    table, postings = index(chunks)
    terms = ["t2", "t5", "t0"]
    expected = sorted(((sum(t in ts for t in terms), doc_len, cid) for cid, (_, ts, doc_len) in chunks.items()
                       if any(t in ts for t in terms)), key=lambda h: (-h[0], h[1], h[2]))
    got = hit_count(table, postings, terms, 7, None)
    assert [(h.score, h.chunk_id) for h in got] == [(float(hits), cid) for hits, _, cid in expected[:7]]
    for h in got:
        assert h.matched == tuple(sorted(t for t in terms if t in chunks[h.chunk_id][1]))


def test_hit_count_scope_leaves_out_other_collections():
    chunks = {"c1": ("a", {"x": 1, "y": 1}, 2), "c2": ("b", {"x": 1, "y": 1}, 2), "c3": ("a", {"x": 1}, 1)}
    table, postings = index(chunks)
    assert [h.chunk_id for h in hit_count(table, postings, ["x", "y"], 5, ["a"])] == ["c1", "c3"]
    assert hit_count(table, postings, ["x"], 5, ["nowhere"]) == []


def test_sums_by_row_agree_whether_counted_densely_or_by_sorting():
    from services.retriever_pg.keyword_index import _sum_by_row

    rng = np.random.default_rng(3)
    rows = rng.integers(0, 50, size=40).astype(np.int32)
    weights = rng.random(40)
    dense = _sum_by_row(rows, weights, 50)        # 50 <= 16 x 40: an array of every row
    by_sorting = _sum_by_row(rows, weights, 10**6)  # a large table: the postings sorted
    assert dense[0].tolist() == by_sorting[0].tolist() == sorted(set(rows.tolist()))
    assert dense[1] == pytest.approx(by_sorting[1]) and dense[2].tolist() == by_sorting[2].tolist()
    assert _sum_by_row(rows, None, 50)[1] is None
