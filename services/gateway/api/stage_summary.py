"""Per-stage latency and RPC error rates from the gateway's own Prometheus
registry, for people who run no Prometheus or Grafana (the console's
Stages panel, GET /v1/stages:summary). Pure: no I/O, no clock of its own.

- ``take_snapshot`` reads the cumulative values of
  ``graphmesh_stage_duration_seconds{stage,status}`` (histogram buckets, sum)
  and of ``grpc_server_handled_total`` / ``grpc_client_handled_total``
  (by service, method and code) from a prometheus_client registry.
- ``summarize(current, baseline)`` turns the difference of two snapshots (or
  one snapshot since the process started) into JSON-ready rows: per stage the
  count, p50 / p95 estimated from the buckets as PromQL's
  ``histogram_quantile`` does (linear interpolation inside the bucket holding
  the rank; a rank in the +Inf bucket gets the highest finite bound), the
  mean and the degraded share; per RPC the count, the server-side errors and
  their share, and the count of every code.
- ``History`` keeps the snapshots of the last ``window_seconds`` so that a
  summary can say what happened *recently*, not only since start.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

STAGE_METRIC = "graphmesh_stage_duration_seconds"
#: Sample name -> side of the call it counts.
HANDLED_METRICS = {"grpc_server_handled_total": "server", "grpc_client_handled_total": "client"}
#: Codes counted as errors of the service itself (not of the caller): the
#: same set as the GraphMeshHighErrorRate alert (deploy/grafana/generate.py
#: SERVER_ERRORS).
SERVER_ERROR_CODES = frozenset({"UNKNOWN", "INTERNAL", "UNAVAILABLE", "DEADLINE_EXCEEDED", "DATA_LOSS", "UNIMPLEMENTED"})

StageKey = tuple[str, str]            # (stage, status)
RpcKey = tuple[str, str, str, str]    # (side, service, method, code)


@dataclass(frozen=True)
class Snapshot:
    """Cumulative metric values at one moment.

    Attributes:
        at: when it was taken, seconds on the caller's (monotonic) clock.
        buckets: (stage, status) -> {upper bound in seconds (inf included): cumulative count}.
        sums: (stage, status) -> sum of observed seconds.
        handled: (side, service, method, code) -> RPCs completed.
    """

    at: float
    buckets: dict[StageKey, dict[float, float]] = field(default_factory=dict)
    sums: dict[StageKey, float] = field(default_factory=dict)
    handled: dict[RpcKey, float] = field(default_factory=dict)


def take_snapshot(registry: Any, at: float) -> Snapshot:
    """The stage histogram and RPC counters of ``registry`` (anything with
    prometheus_client's ``collect()``: a CollectorRegistry) at time ``at``."""
    snap = Snapshot(at)
    for family in registry.collect():
        for sample in family.samples:
            labels = sample.labels
            if sample.name == f"{STAGE_METRIC}_bucket":
                key = (labels.get("stage", ""), labels.get("status", ""))
                snap.buckets.setdefault(key, {})[float(labels["le"])] = sample.value
            elif sample.name == f"{STAGE_METRIC}_sum":
                snap.sums[(labels.get("stage", ""), labels.get("status", ""))] = sample.value
            elif sample.name in HANDLED_METRICS:
                key = (HANDLED_METRICS[sample.name], labels.get("grpc_service", ""), labels.get("grpc_method", ""),
                       labels.get("grpc_code", ""))
                snap.handled[key] = sample.value
    return snap


def bucket_quantile(q: float, buckets: dict[float, float]) -> float | None:
    """The ``q``-quantile (0 < q < 1) of a histogram given as {upper bound:
    cumulative count} (the +Inf bucket included), in the bounds' unit;
    None when it holds no observation. Estimated like PromQL's
    histogram_quantile: linear inside the bucket that holds rank q * count,
    the first bucket starting at 0; a rank in the +Inf bucket returns the
    highest finite bound."""
    bounds = sorted(buckets)
    total = buckets[bounds[-1]] if bounds else 0.0
    if total <= 0:
        return None
    rank = q * total
    lower, below = 0.0, 0.0
    for upper in bounds:
        count = buckets[upper]
        if count >= rank:
            if math.isinf(upper):
                return lower
            if count == below:
                return upper
            return lower + (upper - lower) * (rank - below) / (count - below)
        lower, below = upper, count
    return lower


def _minus(now: dict, then: dict | None) -> dict:
    """now - then per key, never below 0 (a counter reset counts from 0)."""
    then = then or {}
    return {k: max(0.0, v - then.get(k, 0.0)) for k, v in now.items()}


def stage_rows(current: Snapshot, baseline: Snapshot | None = None) -> list[dict[str, Any]]:
    """One row per stage seen between ``baseline`` (None = process start) and
    ``current``: {"stage", "count", "p50Ms", "p95Ms", "meanMs", "degraded",
    "degradedRate", "statuses": {status: count}}; latencies in milliseconds
    over every status (None when the stage ran no time in the window);
    sorted by stage name; stages with no observation in the window left out."""
    merged: dict[str, dict[float, float]] = {}
    sums: dict[str, float] = {}
    statuses: dict[str, dict[str, int]] = {}
    for key, buckets in current.buckets.items():
        delta = _minus(buckets, baseline.buckets.get(key) if baseline else None)
        stage, status = key
        target = merged.setdefault(stage, {})
        for upper, count in delta.items():
            target[upper] = target.get(upper, 0.0) + count
        seen = delta.get(math.inf, 0.0)
        statuses.setdefault(stage, {})
        if seen:
            statuses[stage][status] = statuses[stage].get(status, 0) + int(round(seen))
        previous_sum = baseline.sums.get(key, 0.0) if baseline else 0.0
        sums[stage] = sums.get(stage, 0.0) + max(0.0, current.sums.get(key, 0.0) - previous_sum)
    rows = []
    for stage in sorted(merged):
        count = int(round(merged[stage].get(math.inf, 0.0)))
        if count == 0:
            continue
        p50, p95 = bucket_quantile(0.5, merged[stage]), bucket_quantile(0.95, merged[stage])
        degraded = statuses[stage].get("degraded", 0)
        rows.append({
            "stage": stage, "count": count,
            "p50Ms": None if p50 is None else p50 * 1000, "p95Ms": None if p95 is None else p95 * 1000,
            "meanMs": sums[stage] / count * 1000, "degraded": degraded, "degradedRate": degraded / count,
            "statuses": dict(sorted(statuses[stage].items())),
        })
    return rows


def rpc_rows(current: Snapshot, baseline: Snapshot | None = None) -> list[dict[str, Any]]:
    """One row per (side, service, method) that completed RPCs between
    ``baseline`` (None = process start) and ``current``: {"side" ("server":
    RPCs this process served, "client": its calls to other services),
    "service", "method", "count", "errors" (codes in SERVER_ERROR_CODES),
    "errorRate" (errors / count), "codes": {code: count}}; sorted by side,
    service, method."""
    delta = _minus(current.handled, baseline.handled if baseline else None)
    grouped: dict[tuple[str, str, str], dict[str, int]] = {}
    for (side, service, method, code), count in delta.items():
        if count:
            codes = grouped.setdefault((side, service, method), {})
            codes[code] = codes.get(code, 0) + int(round(count))
    rows = []
    for (side, service, method), codes in sorted(grouped.items()):
        count = sum(codes.values())
        errors = sum(n for code, n in codes.items() if code in SERVER_ERROR_CODES)
        rows.append({"side": side, "service": service, "method": method, "count": count, "errors": errors,
                     "errorRate": errors / count, "codes": dict(sorted(codes.items()))})
    return rows


def summarize(current: Snapshot, baseline: Snapshot | None = None) -> dict[str, Any]:
    """{"windowSeconds": seconds between the snapshots (None = since the
    process started), "stages": stage_rows, "rpcs": rpc_rows}."""
    return {"windowSeconds": None if baseline is None else max(0.0, current.at - baseline.at),
            "stages": stage_rows(current, baseline), "rpcs": rpc_rows(current, baseline)}


class History:
    """Snapshots of the last ``window_seconds`` (at most ``max_snapshots``),
    oldest first; the oldest one still in the window is the baseline of the
    "recent" summary."""

    def __init__(self, window_seconds: float = 300.0, max_snapshots: int = 64) -> None:
        if window_seconds <= 0:
            raise ValueError("window_seconds must be > 0")
        self.window_seconds = window_seconds
        self._snaps: deque[Snapshot] = deque(maxlen=max_snapshots)

    def add(self, snap: Snapshot) -> None:
        """Keeps ``snap`` and forgets snapshots older than the window before it."""
        self._snaps.append(snap)
        while self._snaps and snap.at - self._snaps[0].at > self.window_seconds:
            self._snaps.popleft()

    def baseline(self, now: float) -> Snapshot | None:
        """The oldest kept snapshot taken before ``now`` and at most
        ``window_seconds`` earlier; None when there is none."""
        for snap in self._snaps:
            if snap.at < now and now - snap.at <= self.window_seconds:
                return snap
        return None

    def report(self, current: Snapshot) -> dict[str, Any]:
        """{"recent": summary since the baseline (None without one),
        "sinceStart": summary since the process started}. ``current`` is not
        kept: snapshots are added by the caller's sampler."""
        base = self.baseline(current.at)
        return {"recent": summarize(current, base) if base else None, "sinceStart": summarize(current)}

