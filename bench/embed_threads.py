"""CPU and wall time of the e5onnx embedder per text by threads: one query a
call (what Search does: one ONNX Runtime run on ``small_call_threads``
intra-op threads, here set to the arm's threads) and passages 32 a call
(what ingest does: one text per run, ``threads`` runs at once). Each arm builds its own embedder in this
process; process CPU time counts every thread's work.

    python bench/embed_threads.py [--queries 96] [--passages 128] [--threads 1 2]

Less than a minute on 2 cores. Read: under concurrent Search load CPU is
what runs out, so a call's CPU, not its wall time, sets throughput; the
expander runs a one-text call on ``small_call_threads`` (1) and a larger
call's texts ``threads`` (2) at once. Figures: docs/benchmarks.md, "Query embeddings on
one thread".
"""
from __future__ import annotations

import argparse
import gzip
import json
import time

from _common import LAW_CORPUS, LAW_DEV, save
from services.expander.embedding import build_embedder


def timed(embedder, texts: list[str], per_call: int, *, query: bool) -> dict:
    """Wall and process-CPU milliseconds per text, ``per_call`` texts a call."""
    embedder.embed(texts[:4], query=query)  # first call: graph set-up
    wall, cpu = time.perf_counter(), time.process_time()
    for start in range(0, len(texts), per_call):
        embedder.embed(texts[start:start + per_call], query=query)
    return {"wall_ms": round((time.perf_counter() - wall) * 1000 / len(texts), 2),
            "cpu_ms": round((time.process_time() - cpu) * 1000 / len(texts), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=96)
    parser.add_argument("--passages", type=int, default=128)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    queries = [json.loads(line)["query"] for line in LAW_DEV.read_text(encoding="utf-8").splitlines()[:args.queries]]
    passages = []
    with gzip.open(LAW_CORPUS, "rt", encoding="utf-8") as f:
        for line in f:
            passages.append(json.loads(line)["text"])
            if len(passages) >= args.passages:
                break
    rows = []
    for threads in args.threads:
        embedder = build_embedder("e5onnx", threads=threads, small_call_threads=threads)
        rows.append({"threads": threads, "query_1_per_call": timed(embedder, queries, 1, query=True),
                     "passages_32_per_call": timed(embedder, passages, 32, query=False)})
    print("threads | query, 1 a call: wall / CPU ms | passages, 32 a call: wall / CPU ms")
    for r in rows:
        q, p = r["query_1_per_call"], r["passages_32_per_call"]
        print(f"{r['threads']:7d} | {q['wall_ms']:6.1f} / {q['cpu_ms']:6.1f} | {p['wall_ms']:6.1f} / {p['cpu_ms']:6.1f}")
    save("embed_threads", {"queries": len(queries), "passages": len(passages), "rows": rows})


if __name__ == "__main__":
    main()
