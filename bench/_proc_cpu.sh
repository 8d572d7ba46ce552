# Sourced by bench/cpu_per_query.sh and bench/ingest_cpu.sh: CPU by process
# (every GraphMesh service, PostgreSQL's and Neo4j's processes) from
# /proc/<pid>/stat (user + system ticks, children included). Linux only.
MS_PER_TICK=$(( 1000 / $(getconf CLK_TCK) ))

# "pid name ticks" per process. The processes are listed at each snapshot: a
# PostgreSQL backend opened between two snapshots counts from zero.
cpu_snapshot() {
  for p in $(pgrep -f "services\.(expander|gateway|retriever_pg|retriever_graph|fuser|reranker|judge)|postgres|neo4j"); do
    if [ -r /proc/$p/stat ]; then
      name=$(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | grep -o "services\.[a-z_]*\|postgres\|neo4j" | head -1 || true)
      awk -v p=$p -v n="$name" '{print p, n, $14+$15+$16+$17}' /proc/$p/stat
    fi
  done
}

# cpu_report BEFORE AFTER DIVISOR UNIT: milliseconds used per process name
# between two snapshots, divided by DIVISOR (1000 for seconds; the number of
# queries for ms per query), printed with UNIT.
cpu_report() {
  awk -v d="$3" -v unit="$4" -v ms="$MS_PER_TICK" '
    NR == FNR { before[$1] = $3; next }
    { used[$2] += ($3 - ($1 in before ? before[$1] : 0)) * ms }
    END { t = 0; for (k in used) { if (used[k] > 0) printf "  %-26s %8.1f %s\n", k, used[k] / d, unit; t += used[k] }
          printf "  %-26s %8.1f %s\n", "all", t / d, unit }' "$1" "$2"
}
