"""Neo4j transaction timeouts from the caller's remaining deadline.

Each query of the graph retriever's stores runs as a transaction with the
driver's ``timeout`` (``neo4j.Query(..., timeout=)`` for ``execute_query``,
``unit_of_work(timeout=)`` for managed transaction functions) set from a
``QueryBudget`` (services.common.store_deadline): the RPC's remaining
deadline, at most the read ceiling. Neo4j terminates a transaction that runs
past it (it stops the query server-side and frees its memory and locks) and
answers ``Neo.ClientError.Transaction.TransactionTimedOut*``, which
``translate_timeouts`` raises as ``StoreTimeout`` (DEADLINE_EXCEEDED at the
servicer). No gRPC here.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from neo4j import Query, unit_of_work
from neo4j.exceptions import ClientError, TransientError

from services.common.store_deadline import MIN_SECONDS, QueryBudget, StoreTimeout

#: Status codes of a transaction Neo4j terminated for running past its
#: timeout (5.x: ...ClientConfiguration for a driver-set timeout; the
#: plain one for the server's db.transaction.timeout).
TIMEOUT_CODES = frozenset({
    "Neo.ClientError.Transaction.TransactionTimedOut",
    "Neo.ClientError.Transaction.TransactionTimedOutClientConfiguration",
})


def bound(budget: QueryBudget | None, write: bool = False) -> float | None:
    """Seconds the next transaction may take (None = no timeout: no budget,
    or no deadline and no ceiling), at least 1 ms (Neo4j reads 0 as "no
    timeout")."""
    if budget is None:
        return None
    seconds = budget.seconds(write)
    return None if seconds is None else max(MIN_SECONDS, seconds)


def timed(text: str, seconds: float | None) -> Query | str:
    """``text`` as a ``neo4j.Query`` with transaction timeout ``seconds``
    (plain text when None), for ``driver.execute_query`` / ``tx.run``."""
    return text if seconds is None else Query(text, timeout=seconds)  # type: ignore[arg-type]


def timed_work(work: Callable[..., Any], seconds: float | None) -> Callable[..., Any]:
    """Transaction function ``work`` for ``session.execute_read`` /
    ``execute_write`` with timeout ``seconds`` (unchanged when None)."""
    return work if seconds is None else unit_of_work(timeout=seconds)(work)


def is_timeout(err: BaseException) -> bool:
    """Whether ``err`` is Neo4j's answer for a transaction that ran past
    its timeout."""
    return isinstance(err, (ClientError, TransientError)) and getattr(err, "code", None) in TIMEOUT_CODES


@contextmanager
def translate_timeouts(seconds: float | None) -> Iterator[None]:
    """Raises StoreTimeout for a transaction Neo4j terminated at its
    timeout inside the block (``seconds``: the bound it ran under); other
    errors pass unchanged."""
    try:
        yield
    except (ClientError, TransientError) as err:
        if is_timeout(err):
            raise StoreTimeout("Neo4j", seconds, getattr(err, "message", None) or str(err)) from err
        raise
