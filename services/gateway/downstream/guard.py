"""Deadlines, stage timings and the one guarded call to a downstream service.

Every call the gateway makes to another service goes through ``guarded``:
it bounds the call by the caller's remaining deadline (and the stage's own
cap), records the stage's timing and status, and decides what a failure
means. A failure of an optional service marks the stage DEGRADED, puts the
service in ``degraded`` once, counts it in ``graphmesh_degraded_total`` and
returns the fallback; status codes the caller must see (INVALID_ARGUMENT by
default) are raised unchanged.
"""
from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import TypeVar

import grpc
from prometheus_client import Counter

from graphmesh.common.v1 import types_pb2
from services.common.errors import DownstreamError
from services.common.metrics import STAGE_SECONDS

OK = types_pb2.STAGE_STATUS_OK
SKIPPED = types_pb2.STAGE_STATUS_SKIPPED
DEGRADED = types_pb2.STAGE_STATUS_DEGRADED

DEGRADED_TOTAL = Counter(
    "graphmesh_degraded_total", "Requests answered without a service that failed or timed out.", ("service",)
)

#: Codes raised to the caller by default: the request itself is wrong.
CALLER_ERRORS = frozenset({grpc.StatusCode.INVALID_ARGUMENT})

T = TypeVar("T")


class Deadline:
    """Absolute deadline of one request (monotonic clock)."""

    def __init__(self, seconds: float) -> None:
        self._end = time.monotonic() + seconds

    def left(self, cap: float = float("inf")) -> float:
        """Seconds left, at most ``cap``, at least 1 ms."""
        return max(0.001, min(cap, self._end - time.monotonic()))

    @property
    def expired(self) -> bool:
        """Whether no time is left."""
        return self._end - time.monotonic() <= 0.001


@dataclass
class Trace:
    """Stage timings and degraded services collected during one request."""

    timings: list[types_pb2.StageTiming] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)

    def record(self, stage: str, started: float, status: int = OK, detail: str = "") -> types_pb2.StageTiming:
        """Appends the timing of ``stage`` (from a perf_counter start) and
        observes it in graphmesh_stage_duration_seconds{stage,status}."""
        seconds = time.perf_counter() - started
        timing = types_pb2.StageTiming(stage=stage, duration_ms=seconds * 1000, status=status, detail=detail)
        self.timings.append(timing)
        STAGE_SECONDS.labels(stage, types_pb2.StageStatus.Name(status).removeprefix("STAGE_STATUS_").lower()).observe(seconds)
        return timing

    def skip(self, stage: str, detail: str) -> None:
        """Records ``stage`` as SKIPPED (switched off, or nothing to do)."""
        self.timings.append(types_pb2.StageTiming(stage=stage, status=SKIPPED, detail=detail))

    def degrade(self, service: str, stage: str, started: float, detail: str) -> None:
        """Records ``stage`` as DEGRADED and ``service`` as degraded (once)."""
        if service not in self.degraded:
            self.degraded.append(service)
            DEGRADED_TOTAL.labels(service).inc()
        self.record(stage, started, DEGRADED, detail)


async def guarded(
    trace: Trace,
    stage: str,
    service: str,
    call: Callable[[float], Awaitable[T]],
    fallback: T,
    deadline: Deadline,
    cap: float,
    *,
    raise_codes: Collection[grpc.StatusCode] = CALLER_ERRORS,
    skip_codes: Collection[grpc.StatusCode] = (),
    record_ok: bool = True,
    failures: list[DownstreamError] | None = None,
) -> T:
    """Runs ``call(timeout)`` for ``stage`` against ``service``.

    Args:
        call: the downstream call; receives its timeout in seconds (the
            deadline's remaining time, at most ``cap``).
        fallback: what the stage yields when the service fails.
        raise_codes: status codes re-raised (as DownstreamError) instead of
            degrading: the caller's own mistakes.
        skip_codes: status codes that mean "not offered here"
            (UNIMPLEMENTED): the stage is SKIPPED, nothing is degraded.
        record_ok: whether to record the stage's timing on success (callers
            that add their own detail record it themselves).
        failures: when given, each degrading failure is appended to it (a
            timeout as DEADLINE_EXCEEDED), for callers that must say why.
    Returns:
        The call's result, or ``fallback`` when it failed, timed out
        (stage DEGRADED, ``service`` in ``trace.degraded``) or was skipped.
    Raises:
        DownstreamError: the service answered one of ``raise_codes``.
    """
    started = time.perf_counter()
    timeout = deadline.left(cap)
    try:
        # The grace lets the service's own DEADLINE_EXCEEDED arrive first.
        result = await asyncio.wait_for(call(timeout), timeout + 0.25)
    except DownstreamError as err:
        if err.code in raise_codes:
            trace.record(stage, started, DEGRADED, err.describe())
            raise
        if err.code in skip_codes:
            trace.skip(stage, err.describe())
            return fallback
        trace.degrade(service, stage, started, err.describe())
        if failures is not None:
            failures.append(err)
        return fallback
    except asyncio.TimeoutError:
        detail = f"timed out after {timeout:.1f}s"
        trace.degrade(service, stage, started, detail)
        if failures is not None:
            failures.append(DownstreamError(service, grpc.StatusCode.DEADLINE_EXCEEDED, detail))
        return fallback
    if record_ok:
        trace.record(stage, started)
    return result
