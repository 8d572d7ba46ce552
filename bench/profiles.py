"""Where a Search's CPU goes, per service (not a test): py-spy profiles of
every service of a stack of its own under load, with each service's CPU
milliseconds per query.

1. Starts bench/harness.py's stack (fresh GRAPHMESH_HOME and embedding
   cache) and ingests the laws the first ``--questions`` scenario dev
   questions cite (harness.cited_law_slice).
2. Sends the questions once to warm connections and caches; then, while
   ``py-spy record`` samples every service (``--rate`` Hz, non-blocking, so
   the services are never paused), a closed loop of ``--concurrency`` Search
   calls for ``--seconds``, each question with a fresh prefix so no query
   embedding is cached (cold).
3. Per service and per store (PostgreSQL with its backends, Neo4j): CPU
   ms per query (user + system over the load, divided by the queries
   answered); per service the functions where its samples are: self time (the leaf frame) and, for GraphMesh's own functions,
   inclusive time, as shares of the service's samples and as ms per query.

Writes one speedscope profile per service (open it at speedscope.app, or
any viewer of that format, for the flame graph) and the summary under
bench/results/profiles-<time>/; prints the summary.

    pip install py-spy   # the bench extra does not carry it
    python bench/profiles.py [--questions 100] [--seconds 40] [--concurrency 4] [--rate 97]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import PORTS, Stack, cited_law_slice, run_load  # noqa: E402
from _common import save  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
#: Frames of our own code: the inclusive view lists these.
OWN_CODE = ("/services/", "/domains/")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its live descendants (a
    PostgreSQL postmaster's backends, the JVM under the Neo4j launcher)."""
    import psutil

    root = psutil.Process(pid)
    total = 0.0
    for proc in [root, *root.children(recursive=True)]:
        try:
            times = proc.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def frame_label(frame: dict) -> str:
    """"function (path relative to the repository or site-packages:line)"."""
    path = frame.get("file", "")
    for marker in ("site-packages/", "/work/", "python3.11/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{frame.get('name', '?')} ({path}:{frame.get('line', 0)})"


def summarise(speedscope: Path, top: int) -> dict:
    """Self and inclusive shares of one py-spy speedscope file (its weights
    are seconds on CPU; idle threads are not sampled): {"samples": n,
    "cpu_seconds": s, "self": [(label, share)], "own_inclusive": [(label, share)]}."""
    data = json.loads(speedscope.read_text())
    frames = data["shared"]["frames"]
    own = [any(m in f.get("file", "") for m in OWN_CODE) for f in frames]
    leaf: Counter[int] = Counter()
    inclusive: Counter[int] = Counter()
    total = 0.0
    count = 0
    for profile in data["profiles"]:
        count += len(profile["samples"])
        for stack, weight in zip(profile["samples"], profile["weights"]):
            total += weight
            if stack:
                leaf[stack[-1]] += weight
            for index in set(stack):
                if own[index]:
                    inclusive[index] += weight
    share = (lambda c: round(c / total, 4)) if total else (lambda c: 0.0)
    return {"samples": count, "cpu_seconds": round(total, 2),
            "self": [(frame_label(frames[i]), share(c)) for i, c in leaf.most_common(top)],
            "own_inclusive": [(frame_label(frames[i]), share(c)) for i, c in inclusive.most_common(top)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rate", type=int, default=97, help="py-spy samples per second")
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(py_spy).exists():
        raise SystemExit("py-spy not found: pip install py-spy")
    out = RESULTS / f"profiles-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    out.mkdir(parents=True, exist_ok=True)
    questions, lines = cited_law_slice(args.questions)
    home = Path(tempfile.mkdtemp(prefix="gm-profiles-"))
    stack = Stack(home, env={"GRAPHMESH_EXPANDER_EMBEDDING__CACHE": str(home / "embeddings.sqlite")})
    stack.start()
    try:
        stack.ingest_lines(lines)
        asyncio.run(run_load(questions, 600, 1, max_requests=len(questions), rpcs=("Search",)))
        cold = [f"{uuid.uuid4().hex[:6]} {q}" for _ in range(50) for q in questions]
        pids = {name: stack.pids[name] for name in PORTS}
        stores = {"postgres": stack.process_of("postgres"), "neo4j": stack.pids["neo4j"]}
        recorders = {name: subprocess.Popen(
            [py_spy, "record", "--pid", str(pid), "--rate", str(args.rate), "--duration", str(int(args.seconds)),
             "--nonblocking", "--format", "speedscope", "--output", str(out / f"{name}.speedscope.json")],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for name, pid in pids.items()}
        time.sleep(1.0)  # the recorders attach
        before = {name: cpu_seconds(pid) for name, pid in {**pids, **stores}.items()}
        started = time.monotonic()
        samples = asyncio.run(run_load(cold, args.seconds - 2, args.concurrency, rpcs=("Search",)))
        wall = time.monotonic() - started
        after = {name: cpu_seconds(pid) for name, pid in {**pids, **stores}.items()}
        for name, proc in recorders.items():
            _, err = proc.communicate(timeout=args.seconds + 60)
            if proc.returncode != 0:
                print(f"py-spy on {name} failed: {err.decode(errors='replace')[-500:]}", flush=True)
    finally:
        stack.down()
    answered = sum(s.code == "OK" for s in samples)
    figures = {"questions": len(questions), "documents": len(lines), "concurrency": args.concurrency,
               "seconds": round(wall, 1), "answered": answered, "errors": len(samples) - answered,
               "queries_per_second": round(answered / wall, 1), "services": {}}
    print(f"{answered} Search calls in {wall:.1f} s ({answered / wall:.1f}/s, concurrency {args.concurrency}), "
          f"{figures['errors']} errors", flush=True)
    for name in pids:
        cpu_ms = (after[name] - before[name]) * 1000 / max(answered, 1)
        path = out / f"{name}.speedscope.json"
        summary = summarise(path, args.top) if path.exists() else {"samples": 0, "self": [], "own_inclusive": []}
        figures["services"][name] = {"cpu_ms_per_query": round(cpu_ms, 2), **summary}
        print(f"\n== {name}: {cpu_ms:.2f} CPU ms per query, {summary['samples']} samples", flush=True)
        for label, share in summary["self"]:
            print(f"   self {share:6.1%}  {share * cpu_ms:6.2f} ms  {label}")
        for label, share in summary["own_inclusive"][: args.top // 2]:
            print(f"   incl {share:6.1%}  {share * cpu_ms:6.2f} ms  {label}")
    figures["stores_cpu_ms_per_query"] = {name: round((after[name] - before[name]) * 1000 / max(answered, 1), 2)
                                          for name in stores}
    total = sum(s["cpu_ms_per_query"] for s in figures["services"].values())
    figures["mesh_cpu_ms_per_query"] = round(total, 2)
    stored = sum(figures["stores_cpu_ms_per_query"].values())
    print(f"\nstores: {figures['stores_cpu_ms_per_query']} CPU ms per query")
    print(f"mesh: {total:.2f} CPU ms per query in the services, {total + stored:.2f} with the stores; profiles in {out}")
    (out / "summary.json").write_text(json.dumps(figures, ensure_ascii=False, indent=1))
    save("profiles", figures)


if __name__ == "__main__":
    main()
