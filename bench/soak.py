"""Soak (not a test): steady loopback load of Search and Answer for
``--minutes`` (default 10) against the benchmark stack (bench/harness.py),
sampling every process's resident memory (RSS), open file descriptors and
TCP connections every ``--every`` seconds. Reports per process the RSS at
the start and end of the load, its least-squares slope (MiB per 10 minutes,
over the load after the first minute of warm-up) and the descriptor and
connection counts before and after.

    python bench/soak.py [--minutes 10] [--concurrency 4] [--home DIR] [--keep]
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import LAW_CORPUS, Stack, dev_questions, open_fds, rss_kib, run_load  # noqa: E402

PROCESSES = ["gateway", "expander", "retriever_pg", "retriever_graph", "reranker", "fuser", "judge", "neo4j", "postgres"]


def connections(pid: int) -> int:
    """TCP and unix sockets held by ``pid``."""
    import psutil

    try:
        return len(psutil.Process(pid).net_connections(kind="all"))
    except (psutil.Error, OSError):
        return 0


def postgres_total_rss(stack: Stack) -> int:
    """RSS of the postmaster and its backends together, KiB."""
    import psutil

    try:
        root = psutil.Process(stack.process_of("postgres"))
        return sum(p.memory_info().rss for p in [root, *root.children(recursive=True)]) // 1024
    except (psutil.Error, OSError):
        return 0


def slope_mib_per_10min(points: list[tuple[float, int]]) -> float:
    """Least-squares slope of (seconds, KiB) points, in MiB per 10 minutes."""
    if len(points) < 3:
        return 0.0
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return 0.0 if den == 0 else sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den * 600 / 1024


def main() -> None:
    from _common import save

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", default=str(Path.home() / ".cache" / "graphmesh" / "bench-faults"))
    parser.add_argument("--docs", type=int, default=5000)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--every", type=float, default=10.0)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()

    stack = Stack(Path(args.home), fake_llm=True, stand_in_reranker=True)
    stack.start()
    try:
        print(f"ingest: {stack.ingest(LAW_CORPUS, args.docs)}", flush=True)
        pids = {name: stack.process_of(name) for name in PROCESSES}

        def snapshot() -> dict:
            out = {}
            for name, pid in pids.items():
                rss = postgres_total_rss(stack) if name == "postgres" else rss_kib(pid)
                out[name] = {"rss_kib": rss, "fds": open_fds(pid), "conns": connections(pid)}
            return out

        series: list[tuple[float, dict]] = []
        done = threading.Event()
        started = time.monotonic()

        def sampler() -> None:
            while not done.is_set():
                series.append((time.monotonic() - started, snapshot()))
                done.wait(args.every)

        before = snapshot()
        thread = threading.Thread(target=sampler, daemon=True)
        thread.start()
        samples = asyncio.run(run_load(dev_questions(100), args.minutes * 60, args.concurrency, deadline=10.0))
        done.set()
        thread.join()
        time.sleep(5)  # idle connections close
        after = snapshot()
    finally:
        if not args.keep:
            stack.down()
    rows = {}
    for name in PROCESSES:
        points = [(t, snap[name]["rss_kib"]) for t, snap in series if t >= 60]
        rows[name] = {
            "rss_mib_start": round(series[0][1][name]["rss_kib"] / 1024, 1),
            "rss_mib_end": round(series[-1][1][name]["rss_kib"] / 1024, 1),
            "rss_slope_mib_per_10min": round(slope_mib_per_10min(points), 2),
            "fds_before": before[name]["fds"], "fds_after": after[name]["fds"],
            "conns_before": before[name]["conns"], "conns_after": after[name]["conns"],
        }
        print(f"{name:16s} RSS {rows[name]['rss_mib_start']:7.1f} -> {rows[name]['rss_mib_end']:7.1f} MiB "
              f"(slope {rows[name]['rss_slope_mib_per_10min']:+.2f} MiB/10 min)  fds {rows[name]['fds_before']} -> "
              f"{rows[name]['fds_after']}  conns {rows[name]['conns_before']} -> {rows[name]['conns_after']}", flush=True)
    ok = sum(s.code == "OK" for s in samples)
    save("soak", {"minutes": args.minutes, "concurrency": args.concurrency, "requests": len(samples), "ok": ok,
                  "errors": len(samples) - ok, "rps": round(ok / (args.minutes * 60), 2), "processes": rows,
                  "series": [{"t": round(t, 1), **{n: v["rss_kib"] for n, v in snap.items()}} for t, snap in series]})


if __name__ == "__main__":
    main()
