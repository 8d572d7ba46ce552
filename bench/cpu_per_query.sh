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
MS_PER_TICK=$(( 1000 / $(getconf CLK_TCK) ))
# The processes are listed at each snapshot: a PostgreSQL backend the pool
# opens during the run counts from zero (it did not exist before).
snap() {
  for p in $(pgrep -f "services\.(expander|gateway|retriever_pg|retriever_graph|fuser|reranker|judge)|postgres|neo4j"); do
    if [ -r /proc/$p/stat ]; then
      name=$(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | grep -o "services\.[a-z_]*\|postgres\|neo4j" | head -1 || true)
      awk -v p=$p -v n="$name" '{print p, n, $14+$15+$16+$17}' /proc/$p/stat
    fi
  done
}
snap > "$TMP/before"
PYTHONPATH=.:gen/python "$PY" bench/throughput.py --cold --concurrency 8 --seconds 45 --dataset ../shared/data/law-zh/queries-scenario-dev.jsonl ../shared/data/law-zh/queries-consult-dev.jsonl > "$TMP/run.json" 2>&1
snap > "$TMP/after"
ok=$(grep '"ok"' "$TMP/run.json" | grep -o '[0-9]*')
rps=$(grep '"requests_per_s"' "$TMP/run.json" | grep -o '[0-9.]*')
echo "${1:-run}: ok $ok req/s $rps"
awk -v ok="$ok" -v ms="$MS_PER_TICK" '
  NR == FNR { before[$1] = $3; next }
  { used[$2] += ($3 - ($1 in before ? before[$1] : 0)) * ms }
  END { t = 0; for (k in used) { printf "  %-26s %6.1f ms/query\n", k, used[k] / ok; t += used[k] }
        printf "  %-26s %6.1f ms/query\n", "all", t / ok }' "$TMP/before" "$TMP/after"
