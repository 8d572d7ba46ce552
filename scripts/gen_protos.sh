#!/usr/bin/env bash
# Regenerates the Python stubs (messages, gRPC, .pyi type hints) under gen/python
# from protos/. Run through `make proto`; `make proto-check` fails when the
# committed stubs differ from what this produces.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
export PATH="$(dirname "$PY"):$PATH"
OUT="${1:-gen/python}"
rm -rf "$OUT/graphmesh"
mkdir -p "$OUT"
mapfile -t PROTOS < <(cd protos && find graphmesh -name '*.proto' | sort)
"$PY" -m grpc_tools.protoc \
  -I protos -I third_party/googleapis \
  --python_out="$OUT" --grpc_python_out="$OUT" --mypy_out="$OUT" --mypy_grpc_out="$OUT" \
  "${PROTOS[@]}"
# Make every generated folder an importable package.
find "$OUT/graphmesh" -type d -exec touch {}/__init__.py \;
