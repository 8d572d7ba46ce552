"""Shared helpers of the benchmarks (not tests): percentiles, the machine
description, the law dev set, and saving each benchmark's figures as JSON
under bench/results/ (git-ignored) beside printing them."""
from __future__ import annotations

import datetime as dt
import json
import os
import platform
import statistics
from pathlib import Path

from services.cli.evaluate import git_state

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
SHARED_DATA = REPO.parent / "shared" / "data"
LAW_DEV = SHARED_DATA / "law-zh" / "queries-scenario-dev.jsonl"
LAW_CORPUS = SHARED_DATA / "law-zh" / "corpus.jsonl.gz"


def percentiles(values: list[float]) -> dict[str, float]:
    """p50/p95/p99 and mean of ``values`` (nearest-rank), rounded to 0.1."""
    if not values:
        return {}
    s = sorted(values)

    def at(q: float) -> float:
        return round(s[min(len(s) - 1, int(q * len(s)))], 1)

    return {"p50": at(0.50), "p95": at(0.95), "p99": at(0.99), "mean": round(statistics.fmean(s), 1), "n": len(s)}


def machine() -> dict:
    """CPU count, CPU model, memory and Python of this machine."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        mem_kb = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal"))
    except (OSError, StopIteration):
        mem_kb = 0
    return {"cpus": os.cpu_count(), "cpu_model": model, "memory_gib": round(mem_kb / 2**20, 1), "python": platform.python_version()}


def save(name: str, figures: dict) -> Path:
    """Prints ``figures`` as JSON and writes them, with the machine and git
    commit, to bench/results/<name>-<UTC time>.json; returns the path."""
    created = dt.datetime.now(dt.timezone.utc)
    record = {"benchmark": name, "created": created.isoformat(timespec="seconds"), "git": git_state(), "machine": machine(), **figures}
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}-{created.strftime('%Y%m%dT%H%M%SZ')}.json"
    path.write_text(json.dumps(record, ensure_ascii=False, indent=1))
    print(json.dumps(record, ensure_ascii=False, indent=1))
    print(f"saved to {path}")
    return path


def first_gold_rank(keys: list[str], gold: set[str], depth: int = 10) -> int | None:
    """1-based rank of the first gold key among the distinct ``keys`` (a
    key repeated, e.g. a document of two chunks, counts once), or None when
    none is in the first ``depth``."""
    seen: list[str] = []
    for k in keys:
        if k not in seen:
            seen.append(k)
            if k in gold:
                return len(seen)
            if len(seen) >= depth:
                return None
    return None


def stop_processes(procs, timeout: float = 20.0) -> None:
    """SIGTERM to each of ``procs`` (subprocess.Popen) still running, in the
    order given, then waits ``timeout`` seconds for each; kills a straggler."""
    import signal
    import subprocess

    procs = list(procs)
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()


def stack_dsn(dsn: str = "") -> str:
    """``dsn`` when given, else the DSN of the local stack's embedded
    PostgreSQL (``graphmesh up``'s, under its state directory; started if it
    is not running)."""
    if dsn:
        return dsn
    from services.cli.stack import state_dir
    from services.retriever_pg.embedded import start_embedded_postgres

    return start_embedded_postgres(state_dir() / "pgdata")


async def fetch_rows(dsn: str, sql: str) -> list:
    """The records of one read-only ``sql`` (no parameters) on a fresh
    asyncpg connection to ``dsn``, closed afterwards."""
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetch(sql)
    finally:
        await conn.close()
