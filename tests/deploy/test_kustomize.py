"""deploy/k8s: both overlays and the base with every combination of the
components render with the pinned kustomize, every object validates against
the pinned Kubernetes schemas (Prometheus Operator kinds against their
vendored CRD schemas), and the rendered objects keep the promises of
docs/operate.md (hardening, probes, PDBs, GPU scheduling, HPA metrics)."""
from __future__ import annotations

import copy
import json
import re

import pytest
import yaml

from tests.deploy.manifests import COMPONENTS, K8S, REPO, SERVICES, render_all, setting_names, validate_object

EXTERNAL_SECRETS = {"graphmesh-stores", "graphmesh-llm", "graphmesh-api-keys", "graphmesh-mesh"}  # created by the operator (docs/operate.md)
ADAPTER_RULES = K8S / "components" / "gpu-reranker" / "prometheus-adapter-rules.yaml"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict[str, list[dict]]:
    return render_all(tmp_path_factory.mktemp("kustomize"))


def of_kind(objs: list[dict], kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in objs if o["kind"] == kind}


def config_map(objs: list[dict]) -> dict:
    return next(o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("graphmesh-config"))


def pod_specs(objs: list[dict]) -> dict[str, dict]:
    return {f"{o['kind']}/{o['metadata']['name']}": o["spec"]["template"]["spec"] for o in objs if o["kind"] in ("Deployment", "StatefulSet")}


def test_every_overlay_and_every_component_combination_renders(rendered):
    assert len(rendered) == 2 + 2 ** len(COMPONENTS)
    for label, objs in rendered.items():
        assert {"Deployment", "Service", "ServiceAccount", "ConfigMap"} <= {o["kind"] for o in objs}, label
        assert set(of_kind(objs, "Deployment")) >= set(SERVICES), label


def test_every_rendered_object_validates_against_its_schema(rendered):
    seen: dict[str, str] = {}
    for label, objs in rendered.items():
        for obj in objs:
            seen.setdefault(json.dumps(obj, sort_keys=True), label)
    for text, label in seen.items():
        try:
            validate_object(json.loads(text))
        except AssertionError as err:
            raise AssertionError(f"{label}: {err}") from None
    assert len(seen) > 50  # distinct objects across all renders


def test_the_validators_reject_what_the_schemas_forbid(rendered):
    objs = rendered["overlay/prod"]
    deployment = copy.deepcopy(of_kind(objs, "Deployment")["gateway"])
    deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["grpc"]["portt"] = 1
    with pytest.raises(AssertionError, match="portt"):
        validate_object(deployment)
    monitor = copy.deepcopy(of_kind(objs, "ServiceMonitor")["graphmesh"])
    monitor["spec"]["endpoints"][0]["honorLabels"] = "yes"
    with pytest.raises(AssertionError, match="honorLabels"):
        validate_object(monitor)


def test_services_are_hardened_probed_sized_and_drain_within_the_grace_period(rendered):
    for label, objs in rendered.items():
        deployments, services = of_kind(objs, "Deployment"), of_kind(objs, "Service")
        accounts, config = of_kind(objs, "ServiceAccount"), config_map(objs)["data"]
        for name in SERVICES:
            spec = deployments[name]["spec"]["template"]["spec"]
            (c,) = spec["containers"]
            where = f"{label} {name}"
            assert spec["serviceAccountName"] in accounts, where
            assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] != 0, where
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True, where
            assert sc["capabilities"]["drop"] == ["ALL"] and sc["runAsNonRoot"] is True, where
            ports = {p["name"]: p["containerPort"] for p in c["ports"]}
            assert {"grpc", "metrics"} <= set(ports) and ports["metrics"] == ports["grpc"] + 1000, where
            for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
                assert c[probe]["grpc"]["port"] == ports["grpc"], f"{where} {probe}"
            for kind in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(c["resources"][kind]), where
            prefix = "GRAPHMESH_" + name.replace("-", "_").upper()
            assert config[f"{prefix}_PORT"] == str(ports["grpc"]) and config[f"{prefix}_METRICS_PORT"] == str(ports["metrics"]), where
            assert config[f"{prefix}_HOST"] == "0.0.0.0", where
            pre_stop = int(c["lifecycle"]["preStop"]["exec"]["command"][-1])
            drain = float(config[f"{prefix}_GRACE_SECONDS"])
            assert spec["terminationGracePeriodSeconds"] >= pre_stop + drain + 5, where
            svc_ports = {p["name"]: p for p in services[name]["spec"]["ports"]}
            expected = {"grpc", "metrics", "http"} if name == "gateway" else {"grpc", "metrics"}
            assert set(svc_ports) == expected and all(p["targetPort"] in ports for p in svc_ports.values()), where
            assert config_map(objs)["metadata"]["name"] in [e["configMapRef"]["name"] for e in c["envFrom"]], where


def test_every_pod_meets_the_restricted_pod_security_profile(rendered):
    for label, objs in rendered.items():
        for name, spec in pod_specs(objs).items():
            pod_sc = spec.get("securityContext", {})
            assert pod_sc.get("seccompProfile", {}).get("type") == "RuntimeDefault", f"{label} {name}"
            assert not spec.get("hostNetwork") and not spec.get("hostPID"), f"{label} {name}"
            assert not any("hostPath" in v for v in spec.get("volumes", [])), f"{label} {name}"
            for c in spec["containers"]:
                sc = c.get("securityContext", {})
                assert sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is True, f"{label} {name}"
                assert sc.get("allowPrivilegeEscalation") is False and not sc.get("privileged"), f"{label} {name}"
                assert sc.get("capabilities", {}).get("drop") == ["ALL"], f"{label} {name}"


def test_a_disruption_budget_covers_every_workload_that_can_run_more_than_one_pod(rendered):
    for label, objs in rendered.items():
        pdbs = of_kind(objs, "PodDisruptionBudget").values()
        hpas = {h["spec"]["scaleTargetRef"]["name"]: h["spec"] for h in of_kind(objs, "HorizontalPodAutoscaler").values()}
        for name, dep in of_kind(objs, "Deployment").items():
            most = max(dep["spec"].get("replicas", 1), hpas.get(name, {}).get("maxReplicas", 1))
            labels = dep["spec"]["template"]["metadata"]["labels"]
            covered = [p for p in pdbs if p["spec"]["selector"]["matchLabels"].items() <= labels.items()]
            if most > 1:
                assert covered, f"{label}: {name} can run {most} pods and has no PodDisruptionBudget"
            for p in covered:  # never a budget that blocks every eviction of a single pod
                assert "maxUnavailable" in p["spec"] or p["spec"]["minAvailable"] < dep["spec"].get("replicas", 1), f"{label} {name}"


def test_configuration_names_are_real_settings_and_secrets_exist_or_are_documented(rendered):
    known = setting_names()
    for label, objs in rendered.items():
        unknown = [k for k in config_map(objs)["data"] if k not in known]
        assert not unknown, f"{label}: not a GraphMesh setting: {unknown}"
        secrets = {o["metadata"]["name"] for o in objs if o["kind"] == "Secret"}
        for name, spec in pod_specs(objs).items():
            for c in spec["containers"]:
                for env in c.get("env", []):
                    if name.split("/")[1] in SERVICES:
                        assert env["name"] in known or not env["name"].startswith("GRAPHMESH_"), f"{label} {name} {env['name']}"
                    ref = env.get("valueFrom", {}).get("secretKeyRef")
                    if ref:
                        assert ref["name"] in secrets or ref["name"] in EXTERNAL_SECRETS, f"{label} {name} {ref}"
            for vol in spec.get("volumes", []):
                if "secret" in vol:
                    assert vol["secret"]["secretName"] in secrets | EXTERNAL_SECRETS, f"{label} {name}"


def test_gpu_reranker_gets_a_gpu_its_model_and_an_hpa_on_adapter_metrics(rendered):
    import promql_parser

    rules = yaml.safe_load(ADAPTER_RULES.read_text())["rules"]["custom"]
    served = {r["name"]["as"] for r in rules}
    for rule in rules:  # the adapter's query templates are valid PromQL once filled in
        promql_parser.parse(rule["metricsQuery"].replace("<<.Series>>", rule["seriesQuery"].split("{")[0])
                            .replace("{<<.LabelMatchers>>}", '{namespace="graphmesh"}').replace("<<.GroupBy>>", "pod"))
    metrics = json.loads((REPO / "deploy" / "grafana" / "metrics.json").read_text())["metrics"]
    for rule in rules:
        series = re.sub(r"_bucket$", "", rule["seriesQuery"].split("{")[0])
        assert series in metrics, f"adapter rule reads {series}, which no dashboard lists (deploy/grafana/metrics.json)"
    with_gpu = [label for label in rendered if "gpu-reranker" in label or label == "overlay/prod"]
    assert len(with_gpu) == 2 ** (len(COMPONENTS) - 1) + 1
    for label in with_gpu:
        objs = rendered[label]
        spec = of_kind(objs, "Deployment")["reranker"]["spec"]["template"]["spec"]
        (c,) = spec["containers"]
        assert c["resources"]["limits"]["nvidia.com/gpu"] == "1", label
        assert c["image"].split("/")[-1].startswith("graphmesh-reranker:"), label
        assert spec["nodeSelector"] and any(t["key"] == "nvidia.com/gpu" for t in spec["tolerations"]), label
        assert any(m["mountPath"] == "/models" and m["readOnly"] for m in c["volumeMounts"]), label
        assert config_map(objs)["data"]["GRAPHMESH_RERANKER_DEVICE"] == "cuda", label
        hpa = of_kind(objs, "HorizontalPodAutoscaler")["reranker"]["spec"]
        assert hpa["scaleTargetRef"]["name"] == "reranker"
        names = {m["pods"]["metric"]["name"] for m in hpa["metrics"] if m["type"] == "Pods"}
        assert names and names <= served, f"{label}: HPA metrics {names - served} have no prometheus-adapter rule"


def test_prod_runs_the_request_path_redundantly_on_external_stores_with_keys(rendered):
    objs = rendered["overlay/prod"]
    deployments = of_kind(objs, "Deployment")
    assert deployments["gateway"]["spec"]["replicas"] >= 2
    gateway_hpa = of_kind(objs, "HorizontalPodAutoscaler")["gateway"]["spec"]
    assert gateway_hpa["minReplicas"] >= 2 and gateway_hpa["metrics"][0]["resource"]["name"] == "cpu"
    assert not of_kind(objs, "StatefulSet") and "graphmesh-stores" not in {o["metadata"]["name"] for o in objs if o["kind"] == "Secret"}
    config = config_map(objs)["data"]
    assert config["GRAPHMESH_GATEWAY_AUTH__ENABLED"] == "true" and config["GRAPHMESH_GATEWAY_AUTH__API_KEYS_FILE"].startswith("/etc/graphmesh/")
    mounts = deployments["gateway"]["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    assert any(config["GRAPHMESH_GATEWAY_AUTH__API_KEYS_FILE"].startswith(m["mountPath"] + "/") for m in mounts)
    assert {o["kind"] for o in objs} >= {"ServiceMonitor", "PrometheusRule", "Namespace"}


def test_dev_is_self_contained_with_one_replica_each(rendered):
    objs = rendered["overlay/dev"]
    assert all(d["spec"]["replicas"] == 1 for d in of_kind(objs, "Deployment").values())
    assert set(of_kind(objs, "StatefulSet")) == {"postgres", "neo4j"}
    assert "llm" in of_kind(objs, "Deployment")
    assert config_map(objs)["data"]["GRAPHMESH_GATEWAY_LLM__BASE_URL"] == "http://llm:8080/v1"
    secret = next(o for o in objs if o["kind"] == "Secret" and o["metadata"]["name"].startswith("graphmesh-stores"))
    assert {"pg-dsn", "neo4j-uri", "neo4j-user", "neo4j-password", "pg-password"} <= set(secret["data"])


def test_monitoring_scrapes_every_service_and_ships_the_generated_dashboards(rendered):
    objs = rendered["base+monitoring"]
    monitor = of_kind(objs, "ServiceMonitor")["graphmesh"]["spec"]
    selected = [s for s in of_kind(objs, "Service").values()
                if monitor["selector"]["matchLabels"].items() <= s["metadata"]["labels"].items()
                and s["metadata"]["labels"]["app.kubernetes.io/name"] in monitor["selector"]["matchExpressions"][0]["values"]]
    assert sorted(s["metadata"]["name"] for s in selected) == sorted(SERVICES)
    port = monitor["endpoints"][0]["port"]
    assert all(port in {p["name"] for p in s["spec"]["ports"]} for s in selected)
    assert monitor["endpoints"][0]["honorLabels"] is True  # keeps graphmesh_degraded_total's own "service" label
    dashboards = of_kind(objs, "ConfigMap")["graphmesh-dashboards"]
    assert dashboards["metadata"]["labels"]["grafana_dashboard"] == "1"
    committed = {p.name: p.read_text() for p in (REPO / "deploy" / "grafana" / "dashboards").glob("*.json")}
    assert dashboards["data"] == committed


def test_services_authenticate_each_other_and_only_their_callers_reach_them(rendered):
    """Every service pod reads the mesh token from a Secret; a default-deny
    NetworkPolicy covers the GraphMesh pods, and each service but the
    gateway admits its gRPC port only from the pods that call it."""
    callers = {"expander": {"gateway", "reranker", "retriever-graph"}, "retriever-pg": {"gateway"}, "retriever-graph": {"gateway", "expander"},
               "reranker": {"gateway"}, "fuser": {"gateway"}, "judge": {"gateway"}}
    for label, objs in rendered.items():
        for name, spec in pod_specs(objs).items():
            if name.split("/")[1] not in SERVICES:
                continue
            env = {e["name"]: e for c in spec["containers"] for e in c.get("env", [])}
            ref = env["GRAPHMESH_MESH_TOKEN"]["valueFrom"]["secretKeyRef"]
            assert ref["name"].startswith("graphmesh-mesh") and not ref.get("optional"), f"{label} {name}"
        policies = of_kind(objs, "NetworkPolicy")
        deny = policies["graphmesh-default-deny-ingress"]["spec"]
        assert deny["podSelector"]["matchLabels"] == {"app.kubernetes.io/part-of": "graphmesh"} and "ingress" not in deny
        for service, allowed in callers.items():
            rules = policies[f"{service}-ingress"]["spec"]["ingress"]
            grpc_rule = next(r for r in rules if any(p["port"] < 51000 for p in r["ports"]))
            peers = {p["podSelector"]["matchLabels"]["app.kubernetes.io/name"] for p in grpc_rule["from"]}
            assert peers == allowed, f"{label} {service}: {peers}"
        if "stores" in label or label.endswith("dev"):
            assert {"postgres-ingress", "neo4j-ingress"} <= set(policies), label


def test_the_gateway_balances_over_every_pod_of_the_services_it_calls(rendered):
    # A ClusterIP Service pins a gRPC (HTTP/2) connection to one pod, so
    # replicas would idle; headless Services answer every ready pod and the
    # client balances round robin (services.common.clients.SERVICE_CONFIG).
    for label, objs in rendered.items():
        services = of_kind(objs, "Service")
        config = config_map(objs)["data"]
        for name in ("expander", "retriever-pg", "retriever-graph", "reranker", "fuser", "judge"):
            assert services[name]["spec"].get("clusterIP") == "None", (label, name)
            address = config[f"GRAPHMESH_{name.upper().replace('-', '_')}_ADDR"]
            assert address.split(":")[0].rsplit("/", 1)[-1] == name, (label, address)
        assert services["gateway"]["spec"].get("clusterIP") != "None", label  # reached through its own load balancer
