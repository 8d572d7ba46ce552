"""Crash-safe ingestion trials (not a test): kill a part of the stack at a
random point of a large ingest, bring it back, run the same ingest again,
then check both stores directly (services/common/store_check.py) for exactly the
expected documents, chunks, vectors, postings and graph nodes and edges.

    python bench/crash_trials.py [--trials 10] [--docs 2000] [--seed 16] [--mode fresh|changed] [--home DIR] [--keep]

Each trial (its seed recorded) wipes both stores, then:

- "fresh": ingests the first ``docs`` law articles, killing the target
  after a random delay inside the ingest;
- "changed": ingests them cleanly, then ingests a changed version (a third of
  the articles rewritten: text extended to several chunks, cut short, or
  moved to another chapter), killing the target during that second ingest.

Targets, in turn: the gateway, retriever_pg, retriever_graph (SIGKILL, then
restarted), PostgreSQL (SIGKILL of the postmaster, then started: crash
recovery), Neo4j (SIGKILL, then started). The batch size is 250 records per
Ingest call, or the whole set in one call (retriever_pg's bulk path, which
drops and rebuilds the HNSW index). After the repair the same ingest is run
again until it succeeds (at most 10 tries: a client retrying), and the stores
are checked against the last ingest's documents. Figures are printed and
saved under bench/results/.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import LAW_CORPUS, PORTS, Stack, read_lines  # noqa: E402

TARGETS = ["gateway", "retriever_pg", "retriever_graph", "postgres", "neo4j"]


def changed_version(lines: list[str], rng: random.Random) -> list[str]:
    """A third of the records changed: text tripled (more chunks), cut to
    its first sentence, or moved to another chapter."""
    out = []
    for line in lines:
        record = json.loads(line)
        if rng.random() < 1 / 3:
            kind = rng.choice(["grow", "shrink", "move"])
            text = record.get("text") or ""
            if kind == "grow":
                record["text"] = "\n".join([text] * 6) + "（修订）"
            elif kind == "shrink":
                record["text"] = text.split("。", 1)[0] + "。（删减）"
            else:
                record["chapter"] = "第九十九章 附则（调整）"
        out.append(json.dumps(record, ensure_ascii=False))
    return out


def ingest(lines: list[str], batch: int, progress: list, stop_on_error: bool = True) -> dict:
    """Ingest calls of ``batch`` records; appends each finished call's index
    to ``progress``. Returns totals and the first error (code name)."""
    import grpc

    from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc

    totals = {"stored": 0, "unchanged": 0, "failures": 0, "error": ""}
    with grpc.insecure_channel(f"127.0.0.1:{PORTS['gateway']}") as ch:
        stub = gateway_pb2_grpc.GatewayServiceStub(ch)
        for n, start in enumerate(range(0, len(lines), batch)):
            try:
                reply = stub.Ingest(gateway_pb2.IngestRequest(domain_pack="law_zh", jsonl="\n".join(lines[start : start + batch]).encode()),
                                    timeout=900)
            except grpc.RpcError as err:
                totals["error"] = f"{err.code().name}: {err.details()[:200]}"
                if stop_on_error:
                    return totals
                continue
            totals["stored"] += reply.stored
            totals["unchanged"] += reply.unchanged
            totals["failures"] += len(reply.failures)
            if reply.failures and not totals["error"]:
                totals["error"] = f"failures: {reply.failures[0].reason[:200]}"
            progress.append(n)
    return totals


async def wipe(stack: Stack) -> None:
    import asyncpg
    from neo4j import AsyncGraphDatabase

    conn = await asyncpg.connect(stack.pg_dsn)
    try:
        await conn.execute("TRUNCATE chunk_terms, chunks, documents")
    finally:
        await conn.close()
    driver = AsyncGraphDatabase.driver(stack.neo4j_uri, auth=stack.neo4j_auth)
    try:
        await driver.execute_query("MATCH (n) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 5000 ROWS")
    except Exception:  # noqa: BLE001 - older servers: one transaction
        await driver.execute_query("MATCH (n) DETACH DELETE n")
    finally:
        await driver.close()


def kill(stack: Stack, target: str) -> None:
    if target == "postgres":
        stack.stop_postgres(signal.SIGKILL)
    else:
        stack.kill(target, signal.SIGKILL)


def repair(stack: Stack, target: str) -> None:
    if target == "postgres":
        for attempt in range(30):  # backends exit once they see the postmaster gone
            try:
                stack.start_postgres()
                return
            except Exception:  # noqa: BLE001 - retried, then raised
                if attempt == 29:
                    raise
                time.sleep(1)
    elif target == "neo4j":
        for _ in range(100):
            if not stack._stack._alive(stack.pids["neo4j"]):
                break
            time.sleep(0.1)
        stack.start_neo4j()
    else:
        stack.restart_service(target)


def trial(stack: Stack, number: int, seed: int, lines: list[str], calibrated: float, batch: int = 0,
          target: str = "", mode: str = "") -> dict:
    from services.common.store_check import check_stores, expected_documents, summary

    rng = random.Random(seed)
    target = target or TARGETS[number % len(TARGETS)]
    mode = mode or ("changed" if number % 2 else "fresh")
    batch = batch or rng.choice([250, 250, len(lines)])
    asyncio.run(wipe(stack))
    final = lines
    if mode == "changed":
        first = ingest(lines, 250, [])
        if first["error"]:
            raise RuntimeError(f"trial {number}: the clean first ingest failed: {first['error']}")
        final = changed_version(lines, rng)
    delay = rng.uniform(0.1, 0.9) * calibrated
    progress: list[int] = []
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(ingest(final, batch, progress)), daemon=True)
    started = time.monotonic()
    thread.start()
    thread.join(delay)
    killed_while_running = thread.is_alive()
    kill(stack, target)
    killed_at = time.monotonic() - started
    thread.join(900)
    calls = (len(final) + batch - 1) // batch
    repair_started = time.monotonic()
    repair(stack, target)
    repair_s = time.monotonic() - repair_started
    tries, again = 0, {"error": "not run"}
    while again["error"] and tries < 10:
        tries += 1
        again = ingest(final, 250, [], stop_on_error=True)
        if again["error"]:
            time.sleep(2)
    expected = expected_documents(final)
    problems = asyncio.run(check_stores(stack.pg_dsn, stack.neo4j_uri, expected, auth=stack.neo4j_auth))
    row = {
        "trial": number, "seed": seed, "target": target, "mode": mode, "batch": batch,
        "killed_after_s": round(killed_at, 2), "ingest_still_running": killed_while_running,
        "calls_done_before_kill": len(progress), "calls": calls, "interrupted_ingest": result,
        "repair_s": round(repair_s, 1), "reingest_tries": tries, "reingest": again,
        "expected": summary(expected), "problems": problems[:50], "problem_count": len(problems),
    }
    print(f"trial {number:2d} seed {seed} {target:16s} {mode:8s} batch {batch:5d}: killed after {killed_at:5.1f} s "
          f"({len(progress)}/{calls} calls done, interrupted: {result.get('error') or 'finished'}), "
          f"re-ingest tries {tries} ({again.get('error') or 'ok'}), problems {len(problems)}", flush=True)
    return row


def main() -> None:
    from _common import save

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", default=str(Path.home() / ".cache" / "graphmesh" / "bench-crash"))
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--first", type=int, default=0, help="number of the first trial (targets go round in turn)")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--target", choices=TARGETS, default="", help="kill this part in every trial")
    parser.add_argument("--kill-within", type=float, default=0.0,
                        help="kill at a random point of the first this many seconds (default: of a warm ingest's duration)")
    parser.add_argument("--mode", choices=["fresh", "changed"], default="",
                        help="every trial in this mode (default: fresh and changed in turn)")
    parser.add_argument("--batch", type=int, default=0,
                        help="records per Ingest call of the interrupted ingest (default: drawn; the whole set = the bulk path)")
    args = parser.parse_args()
    lines = [line for _, line in zip(range(args.docs), read_lines(LAW_CORPUS))]
    stack = Stack(Path(args.home))
    stack.start()
    rows = []
    try:
        asyncio.run(wipe(stack))
        ingest(lines, 250, [])  # warms every service (models, caches)
        asyncio.run(wipe(stack))
        t0 = time.monotonic()
        ingest(lines, 250, [])
        calibrated = time.monotonic() - t0
        print(f"calibration: a clean ingest of {len(lines)} documents takes {calibrated:.1f} s", flush=True)
        for number in range(args.first, args.first + args.trials):
            rows.append(trial(stack, number, args.seed * 1000 + number, lines, args.kill_within or calibrated,
                              args.batch, args.target, args.mode))
    finally:
        if not args.keep:
            stack.down()
    save("crash_trials", {"docs": args.docs, "trials": len(rows),
                          "clean": sum(r["problem_count"] == 0 and not r["reingest"]["error"] for r in rows),
                          "rows": rows})


if __name__ == "__main__":
    main()
