#!/usr/bin/env python3
"""Generates GraphMesh's Grafana dashboards, Prometheus alert rules and the
list of metrics they read, from the definitions in this file.

    python deploy/grafana/generate.py          # write every output
    python deploy/grafana/generate.py --check  # exit 1 when a committed output is stale

Outputs (all committed; `make dashboards` / `make dashboards-check`):
  deploy/grafana/dashboards/<uid>.json                 Grafana provisioning (compose)
  deploy/k8s/components/monitoring/dashboards/<uid>.json  the same, for the Grafana sidecar ConfigMap
  deploy/prometheus/rules/graphmesh.rules.yml          alert rules (compose Prometheus)
  deploy/k8s/components/monitoring/prometheusrule.yaml the same rules as a PrometheusRule
  deploy/grafana/metrics.json                          every metric name + label the above use

Every query is built through ``Q`` so the labels it filters or groups by
are recorded and checked against the metric's declared labels; a final scan
of every expression fails on a metric name that did not go through ``Q``.
Plain Python (json + PyYAML): no Grafana SDK needed.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
GRAFANA = ROOT / "deploy" / "grafana"
MONITORING = ROOT / "deploy" / "k8s" / "components" / "monitoring"
# Labels Prometheus attaches to every scraped series (target labels), not
# exported by the services: compose sets namespace="compose" statically.
TARGET_LABELS = {"namespace", "instance", "job", "pod", "le"}
SCOPE = 'namespace=~"$namespace", instance=~"$instance"'
RATE = "$__rate_interval"
GATEWAY = "graphmesh.gateway.v1.GatewayService"
SERVER_ERRORS = "UNKNOWN|INTERNAL|UNAVAILABLE|DEADLINE_EXCEEDED|DATA_LOSS|UNIMPLEMENTED"


@dataclass(frozen=True)
class Metric:
    """A metric as exported (histograms by their base name)."""

    name: str
    kind: str  # counter | histogram | gauge
    labels: tuple[str, ...] = ()


STAGE = Metric("graphmesh_stage_duration_seconds", "histogram", ("stage", "status"))
RPC_HANDLED = Metric("grpc_server_handled_total", "counter", ("grpc_type", "grpc_service", "grpc_method", "grpc_code"))
RPC_SECONDS = Metric("grpc_server_handling_seconds", "histogram", ("grpc_type", "grpc_service", "grpc_method"))
DEGRADED = Metric("graphmesh_degraded_total", "counter", ("service",))
STRATEGY = Metric("graphmesh_answer_strategy_total", "counter", ("strategy",))
FALLBACK = Metric("graphmesh_fallback_attempts_total", "counter", ("strategy", "outcome", "reason"))
CLEANUP = Metric("graphmesh_answer_cleanup_total", "counter", ("kind",))
ABSTAINED = Metric("graphmesh_answer_abstained_total", "counter", ("reason",))
CITATION_CHECKS = Metric("graphmesh_answer_citation_checks_total", "counter", ("outcome",))
LLM_CALLS = Metric("graphmesh_llm_calls_total", "counter", ("purpose", "outcome"))
LLM_FIRST_TOKEN = Metric("graphmesh_llm_first_token_seconds", "histogram", ("purpose",))
INGEST = Metric("graphmesh_ingest_records_total", "counter", ("kind", "outcome"))
RR_QUEUE = Metric("graphmesh_reranker_queue_seconds", "histogram")
RR_BATCH = Metric("graphmesh_reranker_batch_size", "histogram")
RR_TOKENS = Metric("graphmesh_reranker_batch_tokens", "histogram")
RR_PAIRS = Metric("graphmesh_reranker_pairs_total", "counter")
RR_DEPTH = Metric("graphmesh_reranker_queue_depth", "gauge")
RR_INFLIGHT = Metric("graphmesh_reranker_inflight_requests", "gauge")


class Q:
    """Records which metric and labels each expression uses, per output file."""

    def __init__(self) -> None:
        self.used: dict[str, dict] = {}
        self.current = ""

    def _use(self, m: Metric, labels: tuple[str, ...] | list[str]) -> None:
        own = [lab for lab in labels if lab not in TARGET_LABELS]
        unknown = set(own) - set(m.labels)
        if unknown:
            raise ValueError(f"{m.name} has no label(s) {sorted(unknown)}")
        entry = self.used.setdefault(m.name, {"type": m.kind, "labels": set(), "used_by": set()})
        entry["labels"].update(own)
        entry["used_by"].add(self.current)

    def sel(self, m: Metric, suffix: str = "", scope: str = SCOPE, **match: str) -> str:
        """``name{scope, label=~"value", ...}``; a value starting with "!" is a negative match."""
        self._use(m, list(match))
        parts = [scope] if scope else []
        for label, value in match.items():
            parts.append(f'{label}!~"{value[1:]}"' if value.startswith("!") else f'{label}=~"{value}"')
        return f"{m.name}{suffix}{{{', '.join(parts)}}}" if parts else f"{m.name}{suffix}"

    def rate(self, m: Metric, by: tuple[str, ...] = (), window: str = RATE, suffix: str = "", scope: str = SCOPE, **match: str) -> str:
        """``sum by (by) (rate(metric[window]))``; histograms count their ``_count`` series."""
        self._use(m, by)
        group = f" by ({', '.join(by)})" if by else ""
        return f"sum{group} (rate({self.sel(m, suffix or ('_count' if m.kind == 'histogram' else ''), scope, **match)}[{window}]))"

    def quantile(self, q: float, m: Metric, by: tuple[str, ...] = (), window: str = RATE, scope: str = SCOPE, **match: str) -> str:
        """The ``q`` quantile (0-1) of histogram ``m`` per ``by`` group, from its buckets."""
        self._use(m, by)
        group = ", ".join((*by, "le"))
        return f"histogram_quantile({q}, sum by ({group}) (rate({self.sel(m, '_bucket', scope, **match)}[{window}])))"

    def gauge(self, m: Metric, by: tuple[str, ...] = ("instance",), **match: str) -> str:
        """Gauge ``m`` summed per ``by`` group (per instance by default)."""
        self._use(m, by)
        return f"sum by ({', '.join(by)}) ({self.sel(m, **match)})"


def panel(title: str, targets: list[tuple[str, str]], unit: str = "short", kind: str = "timeseries", stack: bool = False, description: str = "") -> dict:
    """A Grafana panel; ``targets`` are (expr, legend) pairs."""
    custom = {"drawStyle": "line", "fillOpacity": 20 if stack else 5, "lineWidth": 1, "showPoints": "never",
              "stacking": {"mode": "normal" if stack else "none", "group": "A"}}
    return {
        "type": kind, "title": title, "description": description,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "fieldConfig": {"defaults": {"unit": unit, "custom": custom if kind == "timeseries" else {}}, "overrides": []},
        "options": {"legend": {"displayMode": "table", "placement": "bottom", "calcs": ["mean", "max"]}, "tooltip": {"mode": "multi", "sort": "desc"}},
        "targets": [{"refId": chr(65 + i), "expr": expr, "legendFormat": legend, "range": True} for i, (expr, legend) in enumerate(targets)],
    }


def dashboard(uid: str, title: str, description: str, rows: list[tuple[str, list[dict]]], q: Q) -> dict:
    """Lays out rows of panels two a row (24 columns), with the variables."""
    panels, y, pid = [], 0, 1
    for row_title, row_panels in rows:
        panels.append({"type": "row", "title": row_title, "collapsed": False, "id": pid, "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
        pid, y = pid + 1, y + 1
        for i, p in enumerate(row_panels):
            p = dict(p, id=pid, gridPos={"h": 8, "w": 12, "x": 12 * (i % 2), "y": y + 8 * (i // 2)})
            panels.append(p)
            pid += 1
        y += 8 * ((len(row_panels) + 1) // 2)
    q._use(RPC_HANDLED, ())  # the variables' label_values source
    variables = [
        {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus", "current": {}, "hide": 0},
        {"name": "namespace", "label": "Namespace", "type": "query", "datasource": {"type": "prometheus", "uid": "${datasource}"},
         "query": {"query": f"label_values({RPC_HANDLED.name}, namespace)", "refId": "namespace"},
         "includeAll": True, "multi": True, "allValue": ".*", "refresh": 2, "sort": 1, "current": {}, "hide": 0},
        {"name": "instance", "label": "Instance", "type": "query", "datasource": {"type": "prometheus", "uid": "${datasource}"},
         "query": {"query": f'label_values({RPC_HANDLED.name}{{namespace=~"$namespace"}}, instance)', "refId": "instance"},
         "includeAll": True, "multi": True, "allValue": ".*", "refresh": 2, "sort": 1, "current": {}, "hide": 0},
    ]
    return {"uid": uid, "title": title, "description": description, "tags": ["graphmesh"], "editable": True, "schemaVersion": 39,
            "version": 1, "time": {"from": "now-1h", "to": "now"}, "refresh": "30s", "timezone": "browser", "graphTooltip": 1,
            "templating": {"list": variables}, "annotations": {"list": []}, "links": [], "panels": panels}


def pipeline_dashboard(q: Q) -> dict:
    q.current = "dashboards/graphmesh-pipeline.json"
    latency = [panel(f"Stage latency p{int(p * 100)}", [(q.quantile(p, STAGE, ("stage",)), "{{stage}}")], "s") for p in (0.5, 0.95, 0.99)]
    latency.append(panel("Stage outcomes (ok / degraded / failed / skipped)", [(q.rate(STAGE, ("stage", "status")), "{{stage}} {{status}}")], "ops", stack=True))
    return dashboard("graphmesh-pipeline", "GraphMesh / Pipeline", "Gateway stages, degraded responses, fallback chain, answers, LLM and ingestion.", [
        ("Per-stage latency (graphmesh_stage_duration_seconds)", latency),
        ("Degraded responses", [
            panel("Responses built without a service", [(q.rate(DEGRADED, ("service",)), "{{service}}")], "ops", stack=True),
            panel("Degraded share of gateway RPCs", [(f"{q.rate(DEGRADED, ('service',))} / ignoring(service) group_left() clamp_min({q.rate(RPC_HANDLED, grpc_service=GATEWAY)}, 1e-9)", "{{service}}")], "percentunit"),
        ]),
        ("Answers and the fallback chain", [
            panel("Answering strategy mix", [(q.rate(STRATEGY, ("strategy",)), "{{strategy}}")], "ops", stack=True),
            panel("Fallback attempts by strategy, outcome, reason", [(q.rate(FALLBACK, ("strategy", "outcome", "reason")), "{{strategy}} {{outcome}} {{reason}}")], "ops"),
            panel("Answer clean-up (items removed)", [(q.rate(CLEANUP, ("kind",)), "{{kind}}")], "ops", stack=True),
            panel("No-answers (abstained) by reason", [(q.rate(ABSTAINED, ("reason",)), "{{reason}}")], "ops", stack=True),
            panel("Citation checks by outcome", [(q.rate(CITATION_CHECKS, ("outcome",)), "{{outcome}}")], "ops", stack=True),
            panel("LLM calls by purpose and outcome", [(q.rate(LLM_CALLS, ("purpose", "outcome")), "{{purpose}} {{outcome}}")], "ops"),
            panel("LLM first token p50 / p95 (streamed answers)", [(q.quantile(0.5, LLM_FIRST_TOKEN, ("purpose",)), "p50 {{purpose}}"),
                                                                   (q.quantile(0.95, LLM_FIRST_TOKEN, ("purpose",)), "p95 {{purpose}}")], "s"),
        ]),
        ("Ingestion", [
            panel("Records ingested (stored, unchanged)", [(q.rate(INGEST, ("kind", "outcome"), outcome="stored|unchanged"), "{{kind}} {{outcome}}")], "ops", stack=True),
            panel("Records failed", [(q.rate(INGEST, ("kind",), outcome="failed"), "{{kind}}")], "ops"),
        ]),
    ], q)


def rpc_dashboard(q: Q) -> dict:
    q.current = "dashboards/graphmesh-rpc.json"
    by = ("grpc_service", "grpc_method")
    return dashboard("graphmesh-rpc", "GraphMesh / RPC", "gRPC traffic of every service (go-grpc-prometheus names).", [
        ("Traffic", [
            panel("RPC rate by service and method", [(q.rate(RPC_HANDLED, by), "{{grpc_service}}/{{grpc_method}}")], "reqps"),
            panel("RPC rate by code", [(q.rate(RPC_HANDLED, ("grpc_service", "grpc_code")), "{{grpc_service}} {{grpc_code}}")], "reqps", stack=True),
        ]),
        ("Errors", [
            panel("Errors by service, method and code (non-OK)", [(q.rate(RPC_HANDLED, (*by, "grpc_code"), grpc_code="!OK"), "{{grpc_service}}/{{grpc_method}} {{grpc_code}}")], "reqps"),
            panel("Server-error ratio by service", [(f"{q.rate(RPC_HANDLED, ('grpc_service',), grpc_code=SERVER_ERRORS)} / clamp_min({q.rate(RPC_HANDLED, ('grpc_service',))}, 1e-9)", "{{grpc_service}}")], "percentunit"),
        ]),
        ("Latency (grpc_server_handling_seconds)", [
            panel(f"RPC latency p{int(p * 100)} by method", [(q.quantile(p, RPC_SECONDS, (*by, "grpc_type")), "{{grpc_service}}/{{grpc_method}} ({{grpc_type}})")], "s")
            for p in (0.5, 0.95, 0.99)
        ]),
    ], q)


def reranker_dashboard(q: Q) -> dict:
    q.current = "dashboards/graphmesh-reranker.json"
    return dashboard("graphmesh-reranker", "GraphMesh / Reranker", "Cross-encoder batching, queueing and throughput (GPU scaling signals).", [
        ("Throughput and load", [
            panel("Pairs scored per second", [(q.rate(RR_PAIRS, ("instance",)), "{{instance}}")], "ops", stack=True),
            panel("Requests in flight / queue depth", [(q.gauge(RR_INFLIGHT), "in flight {{instance}}"), (q.gauge(RR_DEPTH), "queued {{instance}}")], "short"),
        ]),
        ("Queueing and batches", [
            panel("Queue time p50 / p95 / p99", [(q.quantile(p, RR_QUEUE), f"p{int(p * 100)}") for p in (0.5, 0.95, 0.99)], "s"),
            panel("Batch size (pairs) p50 / p95", [(q.quantile(p, RR_BATCH), f"p{int(p * 100)}") for p in (0.5, 0.95)], "short"),
            panel("Batch tokens p50 / p95", [(q.quantile(p, RR_TOKENS), f"p{int(p * 100)}") for p in (0.5, 0.95)], "short"),
            panel("Rerank RPC latency p95", [(q.quantile(0.95, RPC_SECONDS, ("grpc_method",), grpc_service="graphmesh.reranker.v1.RerankerService"), "{{grpc_method}}")], "s"),
        ]),
    ], q)


# Alert thresholds (seconds / ratios); the runbook is docs/operate.md.
ERROR_RATIO = 0.05
STAGE_P95_SECONDS = 2.0
TOTAL_P95_SECONDS = 8.0
DEGRADED_RATIO = 0.2
TARGET_DOWN_FOR = "2m"
# Scrape targets by their "service" label: compose sets it per target
# (deploy/prometheus/prometheus.yml); the Prometheus Operator attaches the
# Kubernetes Service name, which is the same name (deploy/k8s/base).
SERVICES = ("gateway", "expander", "retriever-pg", "retriever-graph", "reranker", "reranker-gpu", "fuser", "judge")


def alert_rules(q: Q) -> list[dict]:
    """Prometheus rule groups (the same content in compose and in the PrometheusRule)."""
    q.current = "alerts"
    scope = ""
    errors = q.rate(RPC_HANDLED, ("namespace", "grpc_service"), "5m", scope=scope, grpc_code=SERVER_ERRORS)
    total = q.rate(RPC_HANDLED, ("namespace", "grpc_service"), "5m", scope=scope)
    rules = [
        {"alert": "GraphMeshHighErrorRate",
         "expr": f"{errors} / clamp_min({total}, 1e-9) > {ERROR_RATIO}", "for": "10m", "labels": {"severity": "critical"},
         "annotations": {"summary": "{{ $labels.grpc_service }} fails {{ $value | humanizePercentage }} of RPCs",
                         "description": f"Server-side gRPC errors ({SERVER_ERRORS}) above {ERROR_RATIO:.0%} for 10 minutes in {{{{ $labels.namespace }}}}."}},
        {"alert": "GraphMeshStageLatencyHigh",
         "expr": f"{q.quantile(0.95, STAGE, ('namespace', 'stage'), '5m', scope=scope, stage='!total|generate|strategy.*', status='ok')} > {STAGE_P95_SECONDS}",
         "for": "15m", "labels": {"severity": "warning"},
         "annotations": {"summary": "p95 of stage {{ $labels.stage }} is {{ $value | humanizeDuration }}",
                         "description": f"p95 latency of one pipeline stage above {STAGE_P95_SECONDS:g} s for 15 minutes."}},
        {"alert": "GraphMeshRequestLatencyHigh",
         "expr": f"{q.quantile(0.95, STAGE, ('namespace',), '5m', scope=scope, stage='total')} > {TOTAL_P95_SECONDS}",
         "for": "15m", "labels": {"severity": "warning"},
         "annotations": {"summary": "p95 of whole requests is {{ $value | humanizeDuration }}",
                         "description": f"p95 of the gateway's total stage above {TOTAL_P95_SECONDS:g} s for 15 minutes."}},
        {"alert": "GraphMeshDegradedResponses",
         "expr": (f"{q.rate(DEGRADED, ('namespace', 'service'), '10m', scope=scope)} / ignoring(service) group_left() "
                  f"clamp_min({q.rate(RPC_HANDLED, ('namespace',), '10m', scope=scope, grpc_service=GATEWAY)}, 1e-9) > {DEGRADED_RATIO}"),
         "for": "15m", "labels": {"severity": "warning"},
         "annotations": {"summary": "{{ $value | humanizePercentage }} of responses are built without {{ $labels.service }}",
                         "description": "A downstream service keeps failing or timing out; answers degrade instead of failing."}},
        # Prometheus's own `up` series: the other rules see nothing of a
        # service that is down, because a target that is not scraped has no
        # error counters and no latencies.
        {"alert": "GraphMeshTargetDown",
         "expr": f'up{{service=~"{"|".join(SERVICES)}"}} == 0', "for": TARGET_DOWN_FOR, "labels": {"severity": "critical"},
         "annotations": {"summary": "{{ $labels.service }} ({{ $labels.instance }}) cannot be scraped",
                         "description": f"Prometheus has not reached the service's metrics port for {TARGET_DOWN_FOR}: "
                                        "the process is down, restarting or unreachable."}},
    ]
    return [{"name": "graphmesh", "rules": rules}]


METRIC_TOKEN = re.compile(r"\b((?:graphmesh|grpc)_[a-z0-9_]+)")
SUFFIXES = ("_bucket", "_sum", "_count")


def _scan(exprs: list[str], known: set[str]) -> None:
    """Fails on a metric name in ``exprs`` that is not in ``known`` (label
    names of the declared metrics, e.g. grpc_service, are not metric names)."""
    labels = {lab for m in globals().values() if isinstance(m, Metric) for lab in m.labels}
    for expr in exprs:
        for token in set(METRIC_TOKEN.findall(expr)) - labels:
            base = next((token[: -len(s)] for s in SUFFIXES if token.endswith(s) and token[: -len(s)] in known), token)
            if base not in known:
                raise ValueError(f"expression uses {token}, which was not declared through Q: {expr}")


def render() -> dict[Path, str]:
    """Every output path -> its content."""
    q = Q()
    boards = [pipeline_dashboard(q), rpc_dashboard(q), reranker_dashboard(q)]
    groups = alert_rules(q)
    exprs = [t["expr"] for b in boards for p in b["panels"] for t in p.get("targets", [])]
    exprs += [v["query"]["query"] for b in boards for v in b["templating"]["list"] if v["type"] == "query"]
    exprs += [r["expr"] for g in groups for r in g["rules"]]
    _scan(exprs, set(q.used))
    out: dict[Path, str] = {}
    for b in boards:
        text = json.dumps(b, indent=2, ensure_ascii=False) + "\n"
        out[GRAFANA / "dashboards" / f"{b['uid']}.json"] = text
        out[MONITORING / "dashboards" / f"{b['uid']}.json"] = text
    header = "# Generated by deploy/grafana/generate.py: edit that file, then `make dashboards`.\n"
    out[ROOT / "deploy" / "prometheus" / "rules" / "graphmesh.rules.yml"] = header + yaml.safe_dump({"groups": groups}, sort_keys=False, allow_unicode=True, width=1000)
    rule = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
            "metadata": {"name": "graphmesh", "labels": {"app.kubernetes.io/name": "graphmesh", "role": "alert-rules"}},
            "spec": {"groups": groups}}
    out[MONITORING / "prometheusrule.yaml"] = header + yaml.safe_dump(rule, sort_keys=False, allow_unicode=True, width=1000)
    metrics = {name: {"type": e["type"], "labels": sorted(e["labels"]), "used_by": sorted(e["used_by"])} for name, e in sorted(q.used.items())}
    doc = {"comment": "Generated by deploy/grafana/generate.py: every metric name and exported label the dashboards and alert rules read. "
                      "Target labels added by Prometheus (namespace, instance, job, pod) and le are not listed.",
           "metrics": metrics}
    out[GRAFANA / "metrics.json"] = json.dumps(doc, indent=2) + "\n"
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail when a committed output differs")
    args = parser.parse_args(argv)
    stale = []
    for path, text in render().items():
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(str(path.relative_to(ROOT)))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    if stale:
        print("stale generated files (run `make dashboards` and commit):\n  " + "\n  ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
