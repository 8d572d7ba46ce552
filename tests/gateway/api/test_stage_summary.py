"""stage_summary: quantiles from histogram buckets, error rates from the
handled counters, recent windows from snapshot differences. Each registry is
a fresh CollectorRegistry with the real metric names, filled with known
observations; expectations are worked out by hand in the comments."""
from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram

from services.gateway.api.stage_summary import (
    History,
    Snapshot,
    bucket_quantile,
    summarize,
    take_snapshot,
)

pytestmark = pytest.mark.unit

BUCKETS = (0.01, 0.1, 1.0)


def registry() -> tuple[CollectorRegistry, Histogram, Counter, Counter]:
    reg = CollectorRegistry()
    stage = Histogram("graphmesh_stage_duration_seconds", "stages", ("stage", "status"), buckets=BUCKETS, registry=reg)
    labels = ("grpc_type", "grpc_service", "grpc_method", "grpc_code")
    server = Counter("grpc_server_handled_total", "server", labels, registry=reg)
    client = Counter("grpc_client_handled_total", "client", labels, registry=reg)
    return reg, stage, server, client


def test_quantile_interpolates_inside_the_bucket_holding_the_rank():
    # 10 observations: 4 in (0, 0.01], 4 in (0.01, 0.1], 2 in (0.1, 1].
    buckets = {0.01: 4, 0.1: 8, 1.0: 10, math.inf: 10}
    # p50: rank 5, second bucket, 1 of its 4 -> 0.01 + 0.09 * 1/4 = 0.0325
    assert bucket_quantile(0.5, buckets) == pytest.approx(0.0325)
    # p95: rank 9.5, third bucket, 1.5 of its 2 -> 0.1 + 0.9 * 0.75 = 0.775
    assert bucket_quantile(0.95, buckets) == pytest.approx(0.775)
    # p20: rank 2 in the first bucket, which starts at 0 -> 0.01 * 2/4 = 0.005
    assert bucket_quantile(0.2, buckets) == pytest.approx(0.005)


def test_quantile_in_the_inf_bucket_is_the_highest_finite_bound_and_empty_is_none():
    assert bucket_quantile(0.95, {0.01: 1, 1.0: 1, math.inf: 10}) == 1.0
    assert bucket_quantile(0.5, {0.01: 0, math.inf: 0}) is None
    assert bucket_quantile(0.5, {}) is None


def test_stage_rows_merge_statuses_and_count_degraded():
    reg, stage, _, _ = registry()
    for seconds in (0.005, 0.005, 0.05, 0.5):
        stage.labels("expand", "ok").observe(seconds)
    stage.labels("expand", "degraded").observe(0.05)
    stage.labels("fuse", "ok").observe(0.002)
    summary = summarize(take_snapshot(reg, at=10.0))
    assert summary["windowSeconds"] is None
    rows = {row["stage"]: row for row in summary["stages"]}
    assert set(rows) == {"expand", "fuse"}
    expand = rows["expand"]
    # 5 observations: buckets 0.01 -> 2, 0.1 -> 4, 1 -> 5.
    # p50: rank 2.5 in (0.01, 0.1]: 0.01 + 0.09 * 0.5/2 = 0.0325 s
    assert expand["count"] == 5 and expand["p50Ms"] == pytest.approx(32.5)
    # p95: rank 4.75 in (0.1, 1]: 0.1 + 0.9 * 0.75 = 0.775 s
    assert expand["p95Ms"] == pytest.approx(775.0)
    assert expand["meanMs"] == pytest.approx((0.005 * 2 + 0.05 + 0.5 + 0.05) / 5 * 1000)
    assert expand["degraded"] == 1 and expand["degradedRate"] == pytest.approx(0.2)
    assert expand["statuses"] == {"degraded": 1, "ok": 4}
    assert rows["fuse"]["degraded"] == 0 and rows["fuse"]["p50Ms"] == pytest.approx(5.0)  # 0.01 * 0.5/1


def test_rpc_rows_count_server_errors_only_as_errors():
    reg, _, server, client = registry()
    search = ("unary", "graphmesh.gateway.v1.GatewayService", "Search")
    server.labels(*search, "OK").inc(6)
    server.labels(*search, "INVALID_ARGUMENT").inc(2)  # the caller's mistake, not an error of the service
    server.labels(*search, "UNAVAILABLE").inc(2)
    client.labels("unary", "graphmesh.expander.v1.ExpanderService", "Expand", "DEADLINE_EXCEEDED").inc(1)
    client.labels("unary", "graphmesh.expander.v1.ExpanderService", "Expand", "OK").inc(3)
    rows = summarize(take_snapshot(reg, at=1.0))["rpcs"]
    assert [(r["side"], r["method"]) for r in rows] == [("client", "Expand"), ("server", "Search")]
    expand, search_row = rows
    assert search_row["count"] == 10 and search_row["errors"] == 2 and search_row["errorRate"] == pytest.approx(0.2)
    assert search_row["codes"] == {"INVALID_ARGUMENT": 2, "OK": 6, "UNAVAILABLE": 2}
    assert expand["errors"] == 1 and expand["errorRate"] == pytest.approx(0.25)


def test_recent_summary_counts_only_what_happened_since_the_baseline():
    reg, stage, server, _ = registry()
    method = ("unary", "graphmesh.gateway.v1.GatewayService", "Answer")
    stage.labels("rerank", "ok").observe(0.5)
    server.labels(*method, "INTERNAL").inc(4)
    history = History(window_seconds=300)
    first = take_snapshot(reg, at=100.0)
    assert history.report(first)["recent"] is None  # nothing to compare with yet
    assert history.report(first)["sinceStart"]["rpcs"][0]["errors"] == 4
    history.add(first)
    stage.labels("rerank", "ok").observe(0.005)
    server.labels(*method, "OK").inc(1)
    second = history.report(take_snapshot(reg, at=160.0))
    recent = second["recent"]
    assert recent["windowSeconds"] == pytest.approx(60.0)
    assert [(r["stage"], r["count"]) for r in recent["stages"]] == [("rerank", 1)]
    assert recent["stages"][0]["p95Ms"] == pytest.approx(9.5)  # rank 0.95 in (0, 0.01]
    assert recent["rpcs"][0]["count"] == 1 and recent["rpcs"][0]["errors"] == 0
    assert second["sinceStart"]["rpcs"][0]["count"] == 5


def test_history_forgets_snapshots_older_than_the_window():
    history = History(window_seconds=60)
    for at in (0.0, 30.0, 100.0):
        history.add(Snapshot(at))
    assert history.baseline(100.0) is None  # 30 s is 70 s old; only the one taken now is left
    assert history.baseline(120.0).at == 100.0
    assert History(window_seconds=60).baseline(5.0) is None
    with pytest.raises(ValueError):
        History(window_seconds=0)


def test_stages_without_observations_in_the_window_are_left_out():
    reg, stage, _, _ = registry()
    stage.labels("expand", "ok").observe(0.05)
    before = take_snapshot(reg, at=0.0)
    after = take_snapshot(reg, at=5.0)
    assert summarize(after, before)["stages"] == []
    assert summarize(after, before)["rpcs"] == []
