"""Sentence vectors at ingest (not a test): what embedding each chunk's
``sentence.maxsim`` sentences at ingest costs there and saves a question.

One stack of its own (bench/harness.py, fresh GRAPHMESH_HOME and a fresh
embedding cache), in one run:

1. ingests the articles of the laws that ``--questions`` scenario dev
   questions cite (their gold), with the default ``ingest.sentence_vectors``
   on; the Ingest replies' stage timings give the chunk embedding ("embed")
   and the sentence embedding ("sentence_vectors") milliseconds: the ingest
   cost is their ratio;
2. asks the questions at concurrency 1, each with a fresh prefix so no query
   embedding is cached (cold), three ways: sentences embedded at ingest
   ("ingested"); the expander restarted on an empty cache, so every sentence
   is embedded while the question waits ("at question", what a chunk costs
   the first question that ranks it when the setting is off); the channel
   switched off (``disabled_stages``), the floor;
3. prints Search p50/p95 end to end and of the ``sentence.maxsim`` stage,
   and the share of sentences found cached, per way; saves them to
   bench/results/.

    python bench/sentence_vectors.py [--questions 60]
"""
from __future__ import annotations

import argparse
import gzip
import json
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import LAW_CORPUS, LAW_DEV, PORTS, Stack  # noqa: E402
from _common import percentiles, save  # noqa: E402


def law_slice(limit: int) -> tuple[list[str], list[str]]:
    """(questions, JSONL lines of every article of the laws their gold
    articles belong to)."""
    questions = [json.loads(line) for line in LAW_DEV.read_text(encoding="utf-8").splitlines()[:limit]]
    gold = {str(g) for q in questions for g in q["gold"]}
    articles = [json.loads(line) for line in gzip.open(LAW_CORPUS, "rt", encoding="utf-8")]
    laws = {a["law"] for a in articles if str(a["id"]) in gold}
    lines = [json.dumps(a, ensure_ascii=False) for a in articles if a["law"] in laws]
    return [q["query"] for q in questions], lines


def ingest(lines: list[str], batch: int = 300) -> dict:
    import grpc

    from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc

    stage_ms = {"embed": 0.0, "sentence_vectors": 0.0, "store": 0.0}
    started = time.perf_counter()
    with grpc.insecure_channel(f"127.0.0.1:{PORTS['gateway']}") as ch:
        stub = gateway_pb2_grpc.GatewayServiceStub(ch)
        for begin in range(0, len(lines), batch):
            reply = stub.Ingest(gateway_pb2.IngestRequest(jsonl="\n".join(lines[begin : begin + batch]).encode(),
                                                          domain_pack="law_zh"), timeout=900)
            for timing in reply.timings:
                if timing.stage in stage_ms:
                    stage_ms[timing.stage] += timing.duration_ms
    return {"documents": len(lines), "seconds": round(time.perf_counter() - started, 1),
            **{f"{k}_s": round(v / 1000, 1) for k, v in stage_ms.items()},
            "sentence_over_chunk_embedding": round(stage_ms["sentence_vectors"] / max(stage_ms["embed"], 1e-9), 3)}


def ask(questions: list[str], disabled: list[str]) -> dict:
    """Each question once, concurrency 1, a fresh prefix each (cold query
    embedding)."""
    import grpc

    from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc

    e2e, stage, sentences, cached = [], [], 0, 0
    with grpc.insecure_channel(f"127.0.0.1:{PORTS['gateway']}") as ch:
        stub = gateway_pb2_grpc.GatewayServiceStub(ch)
        for question in questions:
            request = gateway_pb2.SearchRequest(query=f"{uuid.uuid4().hex[:6]} {question}", top_k=10, disabled_stages=disabled)
            t0 = time.perf_counter()
            reply = stub.Search(request, timeout=60)
            e2e.append((time.perf_counter() - t0) * 1000)
            for timing in reply.timings:
                if timing.stage == "sentence.maxsim" and timing.detail:
                    stage.append(timing.duration_ms)
                    parts = timing.detail.split(", ")
                    sentences += int(parts[0].split()[0])
                    cached += int(parts[1].split()[0])
    return {"search_ms": percentiles(e2e), "maxsim_stage_ms": percentiles(stage) if stage else {},
            "sentences": sentences, "cached_share": round(cached / sentences, 3) if sentences else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=60)
    args = parser.parse_args()
    questions, lines = law_slice(args.questions)
    home = Path(tempfile.mkdtemp(prefix="gm-sentvec-"))
    stack = Stack(home, env={"GRAPHMESH_EXPANDER_EMBEDDING__CACHE": str(home / "emb-1.sqlite")})
    stack.start()
    try:
        figures = {"questions": len(questions), "ingest": ingest(lines)}
        print("ingest", figures["ingest"], flush=True)
        ask(questions[:3], [])  # connections and caches of the first call
        figures["ingested"] = ask(questions, [])
        print("sentences embedded at ingest", figures["ingested"], flush=True)
        stack.kill("expander", signal.SIGTERM)
        time.sleep(2)
        stack.service_env["GRAPHMESH_EXPANDER_EMBEDDING__CACHE"] = str(home / "emb-2.sqlite")
        stack.restart_service("expander")
        figures["at_question"] = ask(questions, [])
        print("sentences embedded at question time", figures["at_question"], flush=True)
        figures["channel_off"] = ask(questions, ["sentence.maxsim"])
        print("sentence.maxsim off", figures["channel_off"], flush=True)
    finally:
        stack.down()
    print("saved", save("sentence_vectors", figures))


if __name__ == "__main__":
    main()
