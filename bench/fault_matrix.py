"""Fault matrix under load (not a test): a bounded loopback load of Search
and Answer (law dev questions, closed loop) against a real stack started like
`graphmesh up` (bench/harness.py: its own ports and GRAPHMESH_HOME), while,
one at a time, each fault is injected and then repaired:

    kill:<service>    SIGKILL one of the seven services, then start it again
    postgres          stop PostgreSQL (pg_ctl -m fast), then start it again
    neo4j             stop Neo4j, then start it again
    llm_hang / llm_429 / llm_500 / llm_malformed   the fake LLM misbehaves, then heals
    reranker_slow     the reranker answers after 15 s, then at once again

    python bench/fault_matrix.py [--home DIR] [--docs 5000] [--before 10] [--during 15] [--after 15]
                                 [--concurrency 8] [--only kill:fuser,postgres] [--keep]

For each fault: requests/s (answered, degraded or not) before, during and
after; error codes; the share of answers that were degraded; seconds from the
repair (the part is healthy again) to the end of the last failed or degraded
request that started after it ("recovery"), and to the first clean answer.
The stack runs with the fake LLM (bench/fault_fakes.py) and the stand-in
reranker, so generation and reranking are on the request path. Figures are
printed and saved under bench/results/.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import LAW_CORPUS, Stack, dev_questions, run_load  # noqa: E402

SERVICES = ["gateway", "expander", "retriever_pg", "retriever_graph", "reranker", "fuser", "judge"]
FAULTS = [f"kill:{s}" for s in SERVICES] + [
    "postgres", "neo4j", "llm_hang", "llm_429", "llm_500", "llm_malformed", "reranker_slow"]
#: The service a fault takes away, as responses name it in ``degraded``.
AFFECTS = {**{f"kill:{s}": s for s in SERVICES}, "postgres": "retriever_pg", "neo4j": "retriever_graph",
           "llm_hang": "llm", "llm_429": "llm", "llm_500": "llm", "llm_malformed": "llm", "reranker_slow": "reranker"}


def inject(stack: Stack, fault: str) -> None:
    if fault.startswith("kill:"):
        stack.kill(fault.split(":", 1)[1], signal.SIGKILL)
    elif fault == "postgres":
        stack.stop_postgres()
    elif fault == "neo4j":
        stack.stop_neo4j()
    elif fault.startswith("llm_"):
        stack.set_fault(llm=fault.removeprefix("llm_"))
    elif fault == "reranker_slow":
        stack.set_fault(rerank_delay=15)


def repair(stack: Stack, fault: str) -> None:
    if fault.startswith("kill:"):
        stack.restart_service(fault.split(":", 1)[1])
    elif fault == "postgres":
        stack.start_postgres()
    elif fault == "neo4j":
        stack.start_neo4j()
    elif fault.startswith("llm_"):
        stack.set_fault(llm="ok")
    elif fault == "reranker_slow":
        stack.set_fault(rerank_delay=0)


def phase(samples, start: float, end: float) -> dict:
    """Figures of the requests that ended in [start, end)."""
    inside = [s for s in samples if start <= s.end < end]
    ok = [s for s in inside if s.code == "OK"]
    seconds = max(end - start, 1e-9)
    return {
        "seconds": round(seconds, 1),
        "rps": round(len(ok) / seconds, 2),
        "errors": dict(Counter(s.code for s in inside if s.code != "OK")),
        "degraded_share": round(sum(bool(s.degraded) for s in ok) / len(ok), 3) if ok else None,
        "degraded_by": dict(Counter(d for s in ok for d in s.degraded)),
        "by_rpc": {rpc: {"ok": sum(s.code == "OK" for s in inside if s.rpc == rpc),
                         "degraded": sum(bool(s.degraded) for s in ok if s.rpc == rpc),
                         "errors": dict(Counter(s.code for s in inside if s.rpc == rpc and s.code != "OK"))}
                   for rpc in sorted({s.rpc for s in inside})},
    }


#: Clean answers in a row (by completion) that mark a fault as recovered.
STEADY = 5


def recovery(samples, repaired: float, service: str) -> dict:
    """After ``repaired`` (requests that started after it, in order of
    completion; bad = an error, or ``service`` degraded): ``recovery_s`` is
    the time to the end of the last bad request before the first STEADY clean
    answers in a row (0 when they come first); ``first_clean_s`` the time
    to the first clean answer; ``last_bad_s`` the time to the last bad one
    at all (later ones are the steady state's own degradations, e.g. the
    graph retriever timing out under load with no fault)."""
    after = sorted((s for s in samples if s.start >= repaired), key=lambda s: s.end)

    def bad(s) -> bool:
        return s.code != "OK" or service in s.degraded

    last_bad_before_steady, run, steady = repaired, 0, False
    for s in after:
        if bad(s):
            run, last_bad_before_steady = 0, s.end
        else:
            run += 1
            if run >= STEADY:
                steady = True
                break
    first_good = next((s.end for s in after if not bad(s)), None)
    return {"recovery_s": round(last_bad_before_steady - repaired, 2) if steady else None,
            "first_clean_s": None if first_good is None else round(first_good - repaired, 2),
            "last_bad_s": round(max((s.end for s in after if bad(s)), default=repaired) - repaired, 2),
            "bad_after_repair": sum(bad(s) for s in after), "after_repair": len(after)}


def run_fault(stack: Stack, fault: str, questions, args) -> dict:
    marks: dict[str, float] = {}
    stop = asyncio.Event()
    failure: list[BaseException] = []

    def script(loop) -> None:
        try:
            time.sleep(args.before)
            marks["fault"] = time.monotonic()
            inject(stack, fault)
            time.sleep(args.during)
            marks["repair_started"] = time.monotonic()
            repair(stack, fault)
            marks["repaired"] = time.monotonic()
            time.sleep(args.after)
        except BaseException as err:  # noqa: BLE001 - reported below
            failure.append(err)
        finally:
            loop.call_soon_threadsafe(stop.set)

    async def go():
        loop = asyncio.get_running_loop()
        thread = threading.Thread(target=script, args=(loop,), daemon=True)
        started = time.monotonic()
        thread.start()
        total = args.before + args.during + args.after + 300
        samples = await run_load(questions, total, args.concurrency, stop, deadline=args.deadline)
        thread.join()
        return started, samples

    started, samples = asyncio.run(go())
    if failure:
        raise RuntimeError(f"{fault}: could not inject or repair: {failure[0]!r}")
    end = max(s.end for s in samples)
    service = AFFECTS[fault]
    if args.samples:
        with open(args.samples, "a") as out:
            for s in samples:
                out.write(json.dumps({"fault": fault, "t": round(s.start - started, 3), "d": round(s.end - s.start, 3),
                                      "rpc": s.rpc, "code": s.code, "degraded": s.degraded, "detail": s.detail},
                                     ensure_ascii=False) + "\n")
    row = {
        "fault": fault,
        "before": phase(samples, started, marks["fault"]),
        "during": phase(samples, marks["fault"], marks["repaired"]),
        "after": phase(samples, marks["repaired"], end),
        "repair_seconds": round(marks["repaired"] - marks["repair_started"], 1),
        **recovery(samples, marks["repaired"], service),
    }
    print(f"{fault:24s} rps {row['before']['rps']:6.2f} / {row['during']['rps']:6.2f} / {row['after']['rps']:6.2f}  "
          f"errors during {row['during']['errors']}  degraded during {row['during']['degraded_share']}  "
          f"recovery {row['recovery_s']} s (first clean {row['first_clean_s']} s)", flush=True)
    return row


def main() -> None:
    from _common import save

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", default=str(Path.home() / ".cache" / "graphmesh" / "bench-faults"))
    parser.add_argument("--docs", type=int, default=5000, help="law articles ingested (first N of the corpus)")
    parser.add_argument("--before", type=float, default=10.0)
    parser.add_argument("--during", type=float, default=15.0)
    parser.add_argument("--after", type=float, default=15.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--deadline", type=float, default=10.0, help="per-request deadline, seconds")
    parser.add_argument("--only", default="", help="comma-separated faults (default: all)")
    parser.add_argument("--keep", action="store_true", help="leave the stack running afterwards")
    parser.add_argument("--samples", default="", help="also append every request (JSON lines) to this file")
    args = parser.parse_args()

    faults = [f for f in args.only.split(",") if f] or FAULTS
    unknown = sorted(set(faults) - set(FAULTS))
    if unknown:
        raise SystemExit(f"unknown faults {unknown}; known: {FAULTS}")
    stack = Stack(Path(args.home), fake_llm=True, stand_in_reranker=True)
    t0 = time.monotonic()
    stack.start()
    print(f"stack up in {time.monotonic() - t0:.0f} s", flush=True)
    rows = []
    try:
        t0 = time.monotonic()
        ingested = stack.ingest(LAW_CORPUS, args.docs)
        print(f"ingested {ingested} in {time.monotonic() - t0:.0f} s", flush=True)
        questions = dev_questions(100)
        warm = asyncio.run(run_load(questions, 20, args.concurrency, deadline=args.deadline))
        print(f"warm-up: {len(warm)} requests in 20 s", flush=True)
        for fault in faults:
            rows.append(run_fault(stack, fault, questions, args))
            time.sleep(3)  # let breakers and pools settle before the next fault
    finally:
        if not args.keep:
            stack.down()
    save("fault_matrix", {"docs": args.docs, "concurrency": args.concurrency, "deadline_s": args.deadline,
                          "phases_s": [args.before, args.during, args.after], "rows": rows})


if __name__ == "__main__":
    main()
