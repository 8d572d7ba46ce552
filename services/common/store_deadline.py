"""The caller's remaining deadline, as plain seconds, for store queries.

The retrievers bound every PostgreSQL statement (``statement_timeout``) and
every Neo4j transaction (the driver's transaction ``timeout``) by what is
left of the RPC's deadline, so a query the caller has given up on stops
costing the store. No gRPC here: ``services.common.server`` opens a
``deadline_scope(seconds)`` around each RPC handler (seconds =
``context.time_remaining()`` less a margin), and the stores ask
``QueryBudget.seconds()`` when they start a query. The scope is a context
variable, so it reaches every query of the request, including those run in
``asyncio.gather`` tasks and ``asyncio.to_thread``, without a deadline
argument on each of the stores' methods.

A store whose query the store itself cancelled for running out of that time
raises ``StoreTimeout``; the RPC answers DEADLINE_EXCEEDED.
"""
from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

#: Absolute end (time.monotonic) of the current RPC's store budget; None
#: outside an RPC or when the caller set no deadline.
_END: ContextVar[float | None] = ContextVar("graphmesh_store_deadline", default=None)

#: Shortest bound handed to a store, seconds: both stores read 0 as "no
#: timeout", so a budget that is (nearly) spent is one millisecond, not 0.
MIN_SECONDS = 0.001


class StoreTimeout(Exception):
    """A store cancelled a query because its time ran out (the caller's
    remaining deadline, or the ceiling when that was smaller).

    Attributes:
        store: "PostgreSQL" or "Neo4j".
        seconds: the bound the query ran under, seconds.
    """

    def __init__(self, store: str, seconds: float | None, detail: str = "") -> None:
        bound = f"{seconds:.3f} s" if seconds is not None else "its bound"
        message = (f"{store} query cancelled after {bound} (the caller's remaining deadline,"
                   " or the store's ceiling when smaller)")
        super().__init__(f"{message}: {detail}" if detail else message)
        self.store = store
        self.seconds = seconds


def rpc_budget(time_remaining: float | None, margin: float) -> float | None:
    """Seconds the stores may use for an RPC with ``time_remaining`` seconds
    left (None = the caller set no deadline): less ``margin`` seconds, at
    most a tenth of what is left, so the RPC can still answer
    DEADLINE_EXCEEDED itself before the caller's deadline; at least
    MIN_SECONDS. None when ``time_remaining`` is None."""
    if time_remaining is None:
        return None
    return max(MIN_SECONDS, time_remaining - min(max(0.0, margin), time_remaining / 10))


@contextmanager
def deadline_scope(seconds: float | None) -> Iterator[None]:
    """Store queries started inside the block may take at most ``seconds``
    from now (None: no deadline; each store's ceiling still applies).
    Scopes nest; the inner one wins while it is open."""
    token = _END.set(None if seconds is None else time.monotonic() + max(MIN_SECONDS, seconds))
    try:
        yield
    finally:
        _END.reset(token)


def remaining() -> float | None:
    """Seconds left of the current scope's deadline (at least MIN_SECONDS),
    None outside a scope or when it has no deadline."""
    end = _END.get()
    if end is None:
        return None
    return max(MIN_SECONDS, end - time.monotonic())


@dataclass(frozen=True, slots=True)
class QueryBudget:
    """How long one store query may take.

    Attributes:
        read_ceiling: most seconds for a read, also when the caller set no
            deadline (None = no ceiling).
        write_ceiling: most seconds for a write or maintenance statement
            (ingest, delete, index builds; None = no ceiling: they are
            bounded by the caller's deadline only, and run unbounded at
            startup).
    """

    read_ceiling: float | None = 30.0
    write_ceiling: float | None = None

    def seconds(self, write: bool = False) -> float | None:
        """Seconds the query about to start may take: the current RPC's
        remaining deadline, at most the ceiling; None = unbounded."""
        ceiling = self.write_ceiling if write else self.read_ceiling
        left = remaining()
        if left is None:
            return ceiling
        return left if ceiling is None else min(left, ceiling)


def milliseconds(seconds: float) -> int:
    """``seconds`` as whole milliseconds, rounded up, at least 1 (0 would
    mean "no timeout" to PostgreSQL and Neo4j)."""
    return max(1, math.ceil(seconds * 1000))
