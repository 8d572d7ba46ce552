#!/bin/bash
# CPU by process over one ingest: every GraphMesh service, PostgreSQL's and
# Neo4j's processes, read from /proc/<pid>/stat (user + system ticks,
# children included) before and after `graphmesh ingest documents FILE`.
#   GRAPHMESH_HOME=<stack>/.graphmesh bash bench/ingest_cpu.sh FILE [ingest options]
# Run from the repository root with the stack up (graphmesh up). With the
# embedding cache warm the expander does little, and the stores' share of an
# ingest is what is left. Linux only.
set -euo pipefail
cd "$(dirname "$0")/.."
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
source bench/_proc_cpu.sh
cpu_snapshot > "$TMP/before"
started=$(date +%s.%N)
"${GRAPHMESH:-.venv/bin/graphmesh}" ingest documents "$@" | tail -1
ended=$(date +%s.%N)
cpu_snapshot > "$TMP/after"
echo "wall $(echo "$ended - $started" | bc) s"
cpu_report "$TMP/before" "$TMP/after" 1000 s
