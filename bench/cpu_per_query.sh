#!/bin/bash
# CPU per Search by process (every GraphMesh service, PostgreSQL's and Neo4j's
# processes) over a cold closed-loop run of bench/throughput.py (concurrency 8,
# 45 s, scenario + consult dev questions, a fresh prefix per question), read
# from /proc/<pid>/stat (user + system ticks, children included) before and after.
#   GRAPHMESH_HOME=<stack>/.graphmesh bash bench/cpu_per_query.sh LABEL
# Run from the repository root with the stack up (graphmesh up). Linux only.
set -euo pipefail
cd "$(dirname "$0")/.."
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
PY=${PY:-.venv/bin/python}
source bench/_proc_cpu.sh
cpu_snapshot > "$TMP/before"
PYTHONPATH=.:gen/python "$PY" bench/throughput.py --cold --concurrency 8 --seconds 45 --dataset ../shared/data/law-zh/queries-scenario-dev.jsonl ../shared/data/law-zh/queries-consult-dev.jsonl > "$TMP/run.json" 2>&1
cpu_snapshot > "$TMP/after"
ok=$(grep '"ok"' "$TMP/run.json" | grep -o '[0-9]*')
rps=$(grep '"requests_per_s"' "$TMP/run.json" | grep -o '[0-9.]*')
echo "${1:-run}: ok $ok req/s $rps"
cpu_report "$TMP/before" "$TMP/after" "$ok" ms/query
