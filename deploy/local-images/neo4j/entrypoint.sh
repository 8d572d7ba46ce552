#!/bin/sh
# NEO4J_AUTH=neo4j/PASSWORD (or "none") and NEO4J_server_memory_heap_max__size
# as the public image reads them. The launcher binds Bolt to loopback only, so
# socat forwards the container's port 7687 to it; the JVM is PID 1 and gets
# SIGTERM (its shutdown hook closes the store).
set -eu
auth=${NEO4J_AUTH:-none}
if [ "$auth" != "none" ]; then
  case "$auth" in
    neo4j/*) GRAPHMESH_NEO4J_PASSWORD=${auth#neo4j/}; export GRAPHMESH_NEO4J_PASSWORD ;;
    *) echo "NEO4J_AUTH must be neo4j/PASSWORD or none" >&2; exit 2 ;;
  esac
else
  unset GRAPHMESH_NEO4J_PASSWORD || true
fi
heap=${NEO4J_server_memory_heap_max__size:-1G}
socat TCP-LISTEN:7687,fork,reuseaddr TCP:127.0.0.1:7688 &
exec java "-Xmx$heap" -XX:+ExitOnOutOfMemoryError \
  -cp "/opt/neo4j-launcher/neo4j-launcher-0.1.0.jar:/opt/neo4j-launcher/lib/*" \
  io.graphmesh.neo4j.Launcher /data 7688
