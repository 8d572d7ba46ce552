"""A circuit breaker per downstream service, so a dead service costs the
gateway no timeout per request.

``CircuitBreaker`` is pure (the clock is injected): closed -> open after
``failures`` consecutive failures, or when at least ``min_calls`` of the last
``window`` calls ended and ``failure_rate`` of them failed; open -> half-open
once ``cool_down`` seconds have passed, which lets one probe call through
(and one more each further ``cool_down`` while probes are still out, so a
probe that hangs does not hold the circuit open for its whole timeout); a
probe's success closes the circuit, its failure opens it again for another
``cool_down``.

``BreakerClient`` wraps any client of ``services.gateway.downstream.interfaces`` (a gRPC
adapter or a fake): while the circuit is open every call raises at once,
``DownstreamError(UNAVAILABLE, "circuit open ...")`` for a service (which
``guard.guarded`` turns into a DEGRADED stage and the fallback) and
``LlmError("circuit_open")`` for the LLM (the generator answers
extractively). Only failures that say the service is unwell count:
UNAVAILABLE, INTERNAL, UNKNOWN, DATA_LOSS, and DEADLINE_EXCEEDED / an LLM
timeout when the call had at least ``slow_call_floor`` seconds (a caller's
own tiny deadline says nothing about the service). The caller's mistakes
(INVALID_ARGUMENT, NOT_FOUND, UNIMPLEMENTED, FAILED_PRECONDITION ...) and
cancelled calls count neither way.
"""
from __future__ import annotations

import asyncio
import inspect
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from prometheus_client import Counter

from services.common.errors import ERROR_DOMAIN, DownstreamError
from services.common.llm import LlmError

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"

BREAKER_TRANSITIONS = Counter(
    "graphmesh_circuit_transitions_total", "Circuit breaker state changes, by downstream service and new state.",
    ("service", "state"))
BREAKER_REJECTED = Counter(
    "graphmesh_circuit_rejected_total", "Calls refused at once because the service's circuit was open.", ("service",))

#: Status codes of a downstream call that count as the service failing.
FAILURE_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN,
                           grpc.StatusCode.DATA_LOSS})
#: LLM failure reasons (services.common.llm.LlmError.reason) that count.
LLM_FAILURE_REASONS = frozenset({"rate_limited", "server_error", "connection", "malformed"})


@dataclass(frozen=True)
class BreakerConfig:
    """Thresholds of one circuit breaker.

    Attributes:
        failures: consecutive failures that open the circuit (>= 1).
        failure_rate: share of failed calls among the last ``window`` that
            opens it, once ``min_calls`` of them are known (0 < rate <= 1).
        window / min_calls: size of that sliding window, in calls.
        cool_down: seconds the circuit stays open before one probe is let
            through (half-open).
        slow_call_floor: a timeout counts as a failure only when the call had
            at least this many seconds.
    """

    failures: int = 5
    failure_rate: float = 0.5
    window: int = 20
    min_calls: int = 10
    cool_down: float = 2.0
    slow_call_floor: float = 1.0


class CircuitBreaker:
    """State of one downstream service's circuit (see the module docstring).

    Args:
        name: the service ("retriever_pg", "llm"), for metrics.
        config: thresholds.
        clock: monotonic seconds (injected in tests).
    """

    def __init__(self, name: str, config: BreakerConfig | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name = name
        self.config = config or BreakerConfig()
        self._clock = clock
        self._state = CLOSED
        self._opened_at = 0.0
        self._consecutive = 0
        self._recent: deque[bool] = deque(maxlen=self.config.window)  # True = failed
        self._probe_out = False
        self._probe_at = 0.0

    @property
    def state(self) -> str:
        """"closed", "open" or "half_open" (an open circuit whose cool-down
        has passed reads as half-open)."""
        if self._state == OPEN and self._clock() - self._opened_at >= self.config.cool_down:
            return HALF_OPEN
        return self._state

    def allow(self) -> bool:
        """Whether a call may go out now. In half-open, one caller (the
        probe) is allowed, then no other until the probe's outcome is
        recorded or ``cool_down`` more seconds have passed."""
        state = self.state
        if state == CLOSED:
            return True
        if state == OPEN:
            return False
        if self._state == OPEN:  # cool-down just passed
            self._move(HALF_OPEN)
        now = self._clock()
        if self._probe_out and now - self._probe_at < self.config.cool_down:
            return False
        self._probe_out, self._probe_at = True, now
        return True

    def record_success(self) -> None:
        """The call answered (or failed in a way that is not the service's)."""
        self._probe_out = False
        self._consecutive = 0
        self._recent.append(False)
        if self._state != CLOSED:
            self._recent.clear()
            self._move(CLOSED)

    def record_failure(self) -> None:
        """The call failed in a way that says the service is unwell."""
        self._probe_out = False
        self._consecutive += 1
        self._recent.append(True)
        if self._state == HALF_OPEN or self._should_open():
            self._opened_at = self._clock()
            self._move(OPEN)

    def release(self) -> None:
        """The call was cancelled by its caller: no outcome; a half-open
        probe slot is freed for the next caller."""
        self._probe_out = False

    def _should_open(self) -> bool:
        if self._state != CLOSED:
            return False
        if self._consecutive >= self.config.failures:
            return True
        known = len(self._recent)
        return known >= self.config.min_calls and sum(self._recent) / known >= self.config.failure_rate

    def _move(self, state: str) -> None:
        if state != self._state:
            self._state = state
            BREAKER_TRANSITIONS.labels(self.name, state).inc()
            if state == CLOSED:
                self._consecutive = 0


def circuit_open_error(service: str, cool_down: float) -> DownstreamError:
    """The DownstreamError of a call refused by an open circuit: UNAVAILABLE
    with ErrorInfo reason "CIRCUIT_OPEN" (passed to the caller unchanged if
    the request cannot be answered without the service)."""
    message = f"circuit open (retried after {cool_down:g}s)"
    info = any_pb2.Any()
    info.Pack(error_details_pb2.ErrorInfo(reason="CIRCUIT_OPEN", domain=ERROR_DOMAIN, metadata={"service": service}))
    status = status_pb2.Status(code=grpc.StatusCode.UNAVAILABLE.value[0], message=message, details=[info])
    return DownstreamError(service, grpc.StatusCode.UNAVAILABLE, message, status)


class BreakerClient:
    """``client`` (any object of services.gateway.downstream.interfaces) with every async
    method passed through ``breaker``. Attributes that are not coroutine or
    async-generator functions (``name``, ``enabled``) and ``close`` pass
    through unchanged.

    Args:
        client: the wrapped client.
        breaker: its circuit.
        llm: True for the LLM client (refusals raise LlmError, failures are
            read from LlmError reasons).
    """

    def __init__(self, client: Any, breaker: CircuitBreaker, llm: bool = False) -> None:
        self._client = client
        self.breaker = breaker
        self._llm = llm

    def __getattr__(self, attr: str) -> Any:
        target = getattr(self._client, attr)
        if attr == "close" or attr.startswith("_"):
            return target
        if inspect.isasyncgenfunction(target):
            return self._stream(target)
        if inspect.iscoroutinefunction(target):
            return self._unary(target)
        return target

    def _refusal(self) -> Exception:
        BREAKER_REJECTED.labels(self.breaker.name).inc()
        if self._llm:
            return LlmError("circuit_open", f"circuit open (retried after {self.breaker.config.cool_down:g}s)")
        return circuit_open_error(self.breaker.name, self.breaker.config.cool_down)

    def _record(self, err: BaseException | None, started: float) -> None:
        b = self.breaker
        if err is None:
            b.record_success()
            return
        slow = time.monotonic() - started >= b.config.slow_call_floor
        if isinstance(err, DownstreamError):
            failed = err.code in FAILURE_CODES or (err.code == grpc.StatusCode.DEADLINE_EXCEEDED and slow)
        elif isinstance(err, LlmError):
            failed = err.reason in LLM_FAILURE_REASONS or (err.reason == "timeout" and slow)
        elif isinstance(err, asyncio.TimeoutError):
            failed = slow
        else:
            b.release()
            return
        b.record_failure() if failed else b.record_success()

    def _unary(self, target: Callable) -> Callable:
        async def call(*args: Any, **kwargs: Any) -> Any:
            if not self.breaker.allow():
                raise self._refusal()
            started = time.monotonic()
            try:
                result = await target(*args, **kwargs)
            except asyncio.CancelledError:
                # guarded's own timeout cancels a call that hangs: that is the
                # service's doing when the call had time enough.
                if time.monotonic() - started >= self.breaker.config.slow_call_floor:
                    self.breaker.record_failure()
                else:
                    self.breaker.release()
                raise
            except Exception as err:
                self._record(err, started)
                raise
            self._record(None, started)
            return result

        return call

    def _stream(self, target: Callable) -> Callable:
        async def stream(*args: Any, **kwargs: Any):
            if not self.breaker.allow():
                raise self._refusal()
            started = time.monotonic()
            got_any = False
            try:
                async for item in target(*args, **kwargs):
                    got_any = True
                    yield item
            except (asyncio.CancelledError, GeneratorExit):
                self.breaker.record_success() if got_any else self.breaker.release()
                raise
            except Exception as err:
                self._record(err, started)
                raise
            self._record(None, started)

        return stream
