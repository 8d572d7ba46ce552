"""Sentence vectors at ingest (not a test): what embedding each chunk's
``sentence.maxsim`` sentences at ingest costs there and saves a question.

One stack of its own (bench/harness.py, fresh GRAPHMESH_HOME and a fresh
embedding cache), in one run:

1. ingests the articles of the laws that ``--questions`` scenario dev
   questions cite (their gold), with ``ingest.sentence_vectors`` on and
   ``sentence_vectors_mode=inline``; the Ingest replies' stage timings give the chunk embedding ("embed")
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
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import PORTS, Stack, cited_law_slice  # noqa: E402
from _common import percentiles, save  # noqa: E402


def ingest(stack: Stack, lines: list[str]) -> dict:
    """Ingests ``lines`` 300 per call; the seconds of the chunk embedding,
    sentence embedding and store stages and the ratio of the first two."""
    started = time.perf_counter()
    stage_ms = stack.ingest_lines(lines, batch=300)["stage_ms"]
    seconds = {stage: round(stage_ms.get(stage, 0.0) / 1000, 1) for stage in ("embed", "sentence_vectors", "store")}
    return {"documents": len(lines), "seconds": round(time.perf_counter() - started, 1),
            **{f"{k}_s": v for k, v in seconds.items()},
            "sentence_over_chunk_embedding": round(stage_ms.get("sentence_vectors", 0.0) / max(stage_ms.get("embed", 0.0), 1e-9), 3)}


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
    questions, lines = cited_law_slice(args.questions)
    home = Path(tempfile.mkdtemp(prefix="gm-sentvec-"))
    # Inline, so the Ingest replies time the sentence embedding (the default
    # embeds them in the background after the corpus is in).
    stack = Stack(home, env={"GRAPHMESH_EXPANDER_EMBEDDING__CACHE": str(home / "emb-1.sqlite"),
                             "GRAPHMESH_GATEWAY_INGEST__SENTENCE_VECTORS_MODE": "inline"})
    stack.start()
    try:
        figures = {"questions": len(questions), "ingest": ingest(stack, lines)}
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
