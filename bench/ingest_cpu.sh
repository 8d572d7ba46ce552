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
MS_PER_TICK=$(( 1000 / $(getconf CLK_TCK) ))
snap() {
  for p in $(pgrep -f "services\.(expander|gateway|retriever_pg|retriever_graph|fuser|reranker|judge)|postgres|neo4j"); do
    if [ -r /proc/$p/stat ]; then
      name=$(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | grep -o "services\.[a-z_]*\|postgres\|neo4j" | head -1 || true)
      awk -v p=$p -v n="$name" '{print p, n, $14+$15+$16+$17}' /proc/$p/stat
    fi
  done
}
snap > "$TMP/before"
started=$(date +%s.%N)
"${GRAPHMESH:-.venv/bin/graphmesh}" ingest documents "$@" | tail -1
ended=$(date +%s.%N)
snap > "$TMP/after"
echo "wall $(echo "$ended - $started" | bc) s"
awk -v ms="$MS_PER_TICK" '
  NR == FNR { before[$1] = $3; next }
  { used[$2] += ($3 - ($1 in before ? before[$1] : 0)) * ms }
  END { t = 0; for (k in used) { if (used[k] > 0) printf "  %-26s %8.1f s\n", k, used[k] / 1000; t += used[k] }
        printf "  %-26s %8.1f s\n", "all", t / 1000 }' "$TMP/before" "$TMP/after"
