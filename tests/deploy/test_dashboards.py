"""Grafana dashboards and alert rules: generated outputs are fresh, every
PromQL expression parses, and the metric names and labels an independent
parser finds in them are exactly those deploy/grafana/metrics.json lists
(which tests/deploy/test_metrics_exported.py checks against the services)."""
from __future__ import annotations

import importlib.util
import json
import sys

import promql_parser
import pytest
import yaml

from tests.deploy.manifests import K8S, REPO

GRAFANA = REPO / "deploy" / "grafana"
TARGET_LABELS = {"namespace", "instance", "job", "pod", "le", "service_target"}
SUFFIXES = ("_bucket", "_sum", "_count")
# Series Prometheus makes itself for every target, not exported by the services.
PROMETHEUS_SERIES = {"up"}


def load_generator():
    spec = importlib.util.spec_from_file_location("graphmesh_dashboards", GRAFANA / "generate.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through it
    spec.loader.exec_module(module)
    return module


def dashboards() -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in sorted((GRAFANA / "dashboards").glob("*.json"))}


def rule_groups() -> list[dict]:
    return yaml.safe_load((REPO / "deploy/prometheus/rules/graphmesh.rules.yml").read_text())["groups"]


def expressions() -> list[tuple[str, str, str]]:
    """(source, PromQL as Prometheus sees it, original) of every dashboard target, variable query and alert."""
    out = []
    for name, board in dashboards().items():
        for panel in board["panels"]:
            for target in panel.get("targets", []):
                out.append((f"{name}: {panel['title']}", target["expr"].replace("$__rate_interval", "5m"), target["expr"]))
        for var in board["templating"]["list"]:
            if var["type"] == "query":  # label_values(selector, label): check the selector
                inner = var["query"]["query"][len("label_values("):].rsplit(",", 1)[0]
                out.append((f"{name}: ${var['name']}", inner, var["query"]["query"]))
    for group in rule_groups():
        for rule in group["rules"]:
            out.append((f"alert {rule['alert']}", rule["expr"], rule["expr"]))
    return out


def walk(expr: str) -> tuple[list[tuple[str, set[str]]], set[str]]:
    """Vector selectors (name, matcher labels) and grouping labels of ``expr``."""
    selectors, grouping = [], set()

    def visit(node):
        if isinstance(node, promql_parser.VectorSelector):
            selectors.append((node.name, {m.name for m in node.matchers.matchers}))
        elif isinstance(node, promql_parser.MatrixSelector):
            vs = node.vector_selector
            selectors.append((vs.name, {m.name for m in vs.matchers.matchers}))
        elif isinstance(node, promql_parser.AggregateExpr) and node.modifier is not None:
            grouping.update(node.modifier.labels)
        elif isinstance(node, promql_parser.BinaryExpr) and node.modifier is not None:
            matching = node.modifier.matching
            if matching is not None:
                grouping.update(matching.labels)
        return True

    promql_parser.walk(promql_parser.parse(expr), visit)
    return selectors, grouping


def base_name(name: str, known: dict) -> str:
    return next((name[: -len(s)] for s in SUFFIXES if name.endswith(s) and name[: -len(s)] in known), name)


def test_generated_dashboards_rules_and_metric_list_are_fresh():
    stale = [str(path.relative_to(REPO)) for path, text in load_generator().render().items()
             if not path.exists() or path.read_text(encoding="utf-8") != text]
    assert not stale, f"run `make dashboards` and commit: {stale}"


def test_every_expression_parses_and_uses_only_the_listed_metrics_and_labels():
    listed = json.loads((GRAFANA / "metrics.json").read_text())["metrics"]
    found: dict[str, set[str]] = {}
    for source, expr, _ in expressions():
        try:
            selectors, grouping = walk(expr)
        except ValueError as err:
            raise AssertionError(f"{source}: invalid PromQL: {err}\n{expr}") from None
        assert selectors, source
        labels_here = set(TARGET_LABELS)
        for name, matchers in selectors:
            if name in PROMETHEUS_SERIES:
                continue
            metric = base_name(name, listed)
            assert metric in listed, f"{source}: {name} is not in metrics.json"
            unknown = matchers - set(listed[metric]["labels"]) - TARGET_LABELS
            assert not unknown, f"{source}: {metric} has no label(s) {unknown} in metrics.json"
            found.setdefault(metric, set()).update(matchers - TARGET_LABELS)
            labels_here |= set(listed[metric]["labels"])
        assert grouping <= labels_here, f"{source}: groups by {grouping - labels_here}, which none of its metrics has"
        for name, _ in selectors:
            if name in PROMETHEUS_SERIES:
                continue
            found[base_name(name, listed)].update(grouping & set(listed[base_name(name, listed)]["labels"]))
    assert set(found) == set(listed), f"listed but unused: {set(listed) - set(found)}"
    for metric, labels in found.items():
        assert labels == set(listed[metric]["labels"]), f"{metric}: expressions use {labels}, metrics.json says {listed[metric]['labels']}"


def test_dashboards_have_namespace_and_instance_variables_that_every_panel_honours():
    for name, board in dashboards().items():
        variables = {v["name"] for v in board["templating"]["list"]}
        assert {"datasource", "namespace", "instance"} <= variables, name
        for panel in board["panels"]:
            for target in panel.get("targets", []):
                for selector, matchers in walk(target["expr"].replace("$__rate_interval", "5m"))[0]:
                    assert {"namespace", "instance"} <= matchers, f"{name}: {panel['title']}: {selector}"
            if panel["type"] != "row":
                assert panel["datasource"]["uid"] == "${datasource}", f"{name}: {panel['title']}"


@pytest.mark.parametrize("metric,labels,quantiles", [
    ("graphmesh_stage_duration_seconds", {"stage"}, {0.5, 0.95, 0.99}),
    ("grpc_server_handled_total", {"grpc_service", "grpc_method", "grpc_code"}, set()),
    ("grpc_server_handling_seconds", {"grpc_service", "grpc_method"}, {0.95}),
    ("graphmesh_degraded_total", {"service"}, set()),
    ("graphmesh_answer_strategy_total", {"strategy"}, set()),
    ("graphmesh_fallback_attempts_total", {"strategy", "outcome", "reason"}, set()),
    ("graphmesh_answer_cleanup_total", {"kind"}, set()),
    ("graphmesh_llm_calls_total", {"purpose", "outcome"}, set()),
    ("graphmesh_ingest_records_total", {"kind", "outcome"}, set()),
    ("graphmesh_reranker_batch_size", set(), {0.5, 0.95}),
    ("graphmesh_reranker_queue_seconds", set(), {0.5, 0.95, 0.99}),
    ("graphmesh_reranker_pairs_total", set(), set()),
])
def test_the_operators_panels_are_there(metric, labels, quantiles):
    panels = [(p, t["expr"]) for b in dashboards().values() for p in b["panels"] for t in p.get("targets", []) if metric in t["expr"]]
    assert panels, f"no panel reads {metric}"
    grouped = set().union(*(walk(expr.replace("$__rate_interval", "5m"))[1] for _, expr in panels))
    assert labels <= grouped, f"{metric}: no panel breaks it down by {labels - grouped}"
    seen = {float(e.split("histogram_quantile(")[1].split(",")[0]) for _, e in panels if "histogram_quantile(" in e}
    assert quantiles <= seen, f"{metric}: quantiles {quantiles - seen} missing"


def test_alerts_cover_error_rate_and_p95_stage_latency_in_both_deployments():
    rules = {r["alert"]: r for g in rule_groups() for r in g["rules"]}
    assert "grpc_server_handled_total" in rules["GraphMeshHighErrorRate"]["expr"]
    assert "histogram_quantile(0.95" in rules["GraphMeshStageLatencyHigh"]["expr"] and "graphmesh_stage_duration_seconds_bucket" in rules["GraphMeshStageLatencyHigh"]["expr"]
    assert all(r["labels"]["severity"] in ("warning", "critical") and r["annotations"]["summary"] for r in rules.values())
    k8s = yaml.safe_load((K8S / "components" / "monitoring" / "prometheusrule.yaml").read_text())
    assert k8s["spec"]["groups"] == rule_groups()


def _lost_fields(original, loaded, path: str = "") -> list[str]:
    """Paths of ``original`` (JSON) that ``loaded`` lacks or holds with another value."""
    if isinstance(original, dict):
        if not isinstance(loaded, dict):
            return [f"{path} (not an object)"]
        return [p for k, v in original.items()
                for p in ([f"{path}/{k}"] if k not in loaded else _lost_fields(v, loaded[k], f"{path}/{k}"))]
    if isinstance(original, list):
        if not isinstance(loaded, list) or len(original) != len(loaded):
            return [f"{path} (list)"]
        return [p for i, (a, b) in enumerate(zip(original, loaded)) for p in _lost_fields(a, b, f"{path}[{i}]")]
    return [] if original == loaded else [f"{path}: {original!r} became {loaded!r}"]


@pytest.mark.parametrize("name", sorted(dashboards()))
def test_each_dashboard_loads_into_grafanas_own_types_without_losing_a_field(name):
    """The Grafana Foundation SDK's dashboard model (generated from Grafana's
    schema) reads the dashboard and writes it back: a field its schema does not
    know, or a value of the wrong shape, would not survive the round trip."""
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.cog.plugins import register_default_plugins
    from grafana_foundation_sdk.models.dashboard import Dashboard, Panel

    register_default_plugins()  # panel and query types (timeseries, prometheus) decode to their own models
    original = dashboards()[name]
    loaded = Dashboard.from_json(original)
    assert _lost_fields(original, json.loads(json.dumps(loaded, cls=JSONEncoder))) == []
    panels = [p for p in loaded.panels if isinstance(p, Panel) and p.targets]
    assert panels and all(type(t).__module__.endswith(".prometheus") for p in panels for t in p.targets)
    assert all(p.datasource is not None and p.datasource.uid == "${datasource}" for p in panels)
