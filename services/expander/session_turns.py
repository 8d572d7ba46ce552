"""Turns on one ONNX Runtime session: earliest deadline first.

An embedding call runs as several ONNX Runtime batches. Holding the session
for a whole call made a question's sentence embeddings (one call of about a
hundred sentences, a few batches, due within the question's deadline of
seconds) wait behind an ingest's call of 256 articles (hundreds of batches,
due within ten minutes): during a corpus load the sentence MaxSim stage took
3-10 s, and timed out. With :class:`EarliestDeadlineLock` a call takes the
session one batch at a time, and at each hand-over the waiting call due
first goes next. Questions go before the background sentence worker (120 s
calls) and ingests (600 s); among questions, which share one kind of
deadline, the one asked first goes first, so none is starved. (Least work
left first was tried: it starved a question with many sentences behind
shorter ones, and aging it by the work served to others let a long ingest
call, credited with the questions' work, go before them; docs/embedding.md.)
"""
from __future__ import annotations

import itertools
import math
import threading
from dataclasses import dataclass


@dataclass(frozen=True, eq=False)
class SessionCall:
    """One call's place in the turns; made by :meth:`EarliestDeadlineLock.call`.

    Attributes:
        deadline: when the call is due (``time.monotonic()`` seconds);
            ``math.inf`` for a call without one.
        order: tie-breaker, earlier calls first.
    """

    deadline: float
    order: int


class EarliestDeadlineLock:
    """A mutex handed, at each release, to the waiting call with the
    earliest deadline (ties, and calls without a deadline: the earliest
    call). Thread-safe; not re-entrant.

    Use: ``call = lock.call(deadline)``, then per batch ``lock.acquire(call)``
    ... ``lock.release()``.
    """

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._held = False
        self._waiting: list[SessionCall] = []
        self._orders = itertools.count()

    def call(self, deadline: float | None = None) -> SessionCall:
        """Begins a call due at ``deadline`` (``time.monotonic()``
        seconds; None: no deadline, after every call that has one)."""
        return SessionCall(math.inf if deadline is None else float(deadline), next(self._orders))

    def acquire(self, call: SessionCall) -> None:
        """Blocks until ``call`` gets the session for one batch."""
        with self._changed:
            if not self._held and not self._waiting:
                self._held = True
                return
            self._waiting.append(call)
            while self._held or min(self._waiting, key=_due) is not call:
                self._changed.wait()
            self._waiting.remove(call)
            self._held = True

    def release(self) -> None:
        """Raises RuntimeError when the lock is not held."""
        with self._changed:
            if not self._held:
                raise RuntimeError("release of an EarliestDeadlineLock that is not held")
            self._held = False
            if self._waiting:
                self._changed.notify_all()

    def waiting(self) -> int:
        """How many calls wait for the session now."""
        with self._changed:
            return len(self._waiting)


def _due(call: SessionCall) -> tuple[float, int]:
    return call.deadline, call.order
