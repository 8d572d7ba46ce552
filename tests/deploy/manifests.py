"""Helpers of the deployment checks: the pinned kustomize, rendering, schema
validation, and the GRAPHMESH_* setting names the services really read."""
from __future__ import annotations

import functools
import itertools
import json
import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "k8s"
SCHEMAS = Path(__file__).resolve().parent / "schemas"
COMPONENTS = ("gpu-reranker", "monitoring", "stores", "llm")
OVERLAYS = ("dev", "prod")
# Kubernetes version the manifests are validated against (kubernetes-validate
# ships the schemas; pinned in pyproject's dev extra). The oldest minor we
# support: native gRPC probes are GA since 1.27, the restricted Pod Security
# profile's fields all exist by 1.30.
K8S_VERSION = "1.30"
SERVICES = ("gateway", "expander", "retriever-pg", "retriever-graph", "reranker", "fuser", "judge")


def kustomize_bin() -> str:
    """Path of the pinned kustomize (``make kustomize``): $KUSTOMIZE, else
    .tools/kustomize-<KUSTOMIZE_VERSION of the Makefile>. Skips the calling
    test when it is missing outside CI; fails in CI."""
    path = os.environ.get("KUSTOMIZE")
    if not path:
        version = re.search(r"^KUSTOMIZE_VERSION := (\S+)$", (REPO / "Makefile").read_text(), re.M).group(1)
        path = str(REPO / ".tools" / f"kustomize-{version}")
    if not Path(path).is_file():
        message = f"pinned kustomize not found at {path}: run `make kustomize`"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def combinations() -> list[tuple[str, ...]]:
    """Every subset of the components (including none), over the base."""
    return [c for n in range(len(COMPONENTS) + 1) for c in itertools.combinations(COMPONENTS, n)]


def _build(kustomize: str, directory: Path) -> list[dict]:
    out = subprocess.run([kustomize, "build", str(directory)], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise AssertionError(f"kustomize build {directory} failed:\n{out.stderr}")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when built with it
    return [doc for doc in yaml.load_all(out.stdout, Loader=loader) if doc]


def render_all(tmp: Path) -> dict[str, list[dict]]:
    """Renders both overlays and base + every component combination.

    Returns:
        label ("overlay/dev", "base+stores+llm", ...) -> rendered objects.
    Raises:
        AssertionError: a build failed (with kustomize's message).
    """
    kustomize = kustomize_bin()
    targets: dict[str, Path] = {f"overlay/{o}": K8S / "overlays" / o for o in OVERLAYS}
    for combo in combinations():
        label = "+".join(("base", *combo))
        d = tmp / label
        d.mkdir(parents=True)
        lines = ["apiVersion: kustomize.config.k8s.io/v1beta1", "kind: Kustomization", "resources:",
                 f"- {os.path.relpath(K8S / 'base', d)}"]
        if combo:
            lines.append("components:")
            lines += [f"- {os.path.relpath(K8S / 'components' / c, d)}" for c in combo]
        (d / "kustomization.yaml").write_text("\n".join(lines) + "\n")
        targets[label] = d
    with ThreadPoolExecutor(max_workers=4) as pool:
        rendered = dict(zip(targets, pool.map(lambda d: _build(kustomize, d), targets.values())))
    return rendered


@functools.cache
def _crd_validator(kind: str) -> jsonschema.protocols.Validator:
    doc = json.loads((SCHEMAS / f"{kind.lower()}-monitoring.coreos.com-v1.json").read_text())
    return jsonschema.Draft7Validator(doc["openAPIV3Schema"])


def validate_object(obj: dict) -> None:
    """Validates one object: Kubernetes kinds against the pinned Kubernetes
    schemas (strict: unknown fields are errors), ServiceMonitor and
    PrometheusRule against the vendored Prometheus Operator CRD schemas.

    Raises:
        AssertionError: naming the object, the field path and the problem.
    """
    import kubernetes_validate
    from kubernetes_validate import utils

    if not hasattr(utils.schema_contents, "cache_info"):  # each schema file read once
        utils.schema_contents = functools.lru_cache(maxsize=None)(utils.schema_contents)
    name = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
    if obj.get("apiVersion") == "monitoring.coreos.com/v1":
        errors = sorted(_crd_validator(obj["kind"]).iter_errors(obj), key=lambda e: list(e.path))
        if errors:
            raise AssertionError(f"{name}: {'.'.join(map(str, errors[0].path))}: {errors[0].message}")
        return
    try:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    except kubernetes_validate.ValidationError as err:
        raise AssertionError(f"{name}: {'.'.join(map(str, err.path))}: {err.message}") from None
    except kubernetes_validate.SchemaNotFoundError as err:
        raise AssertionError(f"{name}: {err.message}") from None


def setting_names() -> set[str]:
    """Every environment variable a GraphMesh process reads: each settings
    class's prefix + field name (and + group__field for each group's
    field), the mesh addresses, the health probe's
    address and the jieba user dictionary."""
    from services.common.healthprobe import ENV_ADDR
    from services.common.lexicon import ENV_PATH as USER_DICT
    from pydantic import AliasChoices

    from services.common.mesh_auth import MeshSettings
    from services.common.settings import MeshAddresses, TlsSettings, TracingSettings, env_name, is_group
    from services.expander.config import ExpanderSettings
    from services.fuser.config import FuserSettings
    from services.gateway.config import GatewaySettings
    from services.judge.config import JudgeSettings
    from services.reranker.config import RerankerSettings
    from services.retriever_graph.config import RetrieverGraphSettings
    from services.retriever_pg.config import RetrieverPgSettings

    names = {ENV_ADDR, USER_DICT}
    for cls in (MeshAddresses, MeshSettings, ExpanderSettings, FuserSettings, GatewaySettings, JudgeSettings,
                RerankerSettings, RetrieverGraphSettings, RetrieverPgSettings, TlsSettings, TracingSettings):
        prefix = cls.model_config.get("env_prefix", "")
        for field, info in cls.model_fields.items():
            if isinstance(info.validation_alias, AliasChoices):  # e.g. GRAPHMESH_USER_DICT, OTEL_EXPORTER_OTLP_ENDPOINT
                names.update(str(choice).upper() for choice in info.validation_alias.choices)
            else:
                names.add(f"{prefix}{field}".upper())
            if is_group(info):  # GRAPHMESH_GATEWAY_LLM__BASE_URL
                names.update(env_name(cls, f"{field}.{sub}") for sub in info.annotation.model_fields)
    return names
