"""Turns on one ONNX Runtime session: earliest deadline first.

An embedding call runs as many ONNX Runtime runs (e5_onnx: one per text).
Holding the session for a whole call made a question's sentence embeddings
(one call of about a hundred sentences, due within the question's deadline
of seconds) wait behind an ingest's call of 256 articles (due within ten
minutes): during a corpus load the sentence MaxSim stage took 3-10 s, and
timed out. With :class:`EarliestDeadlineTurns` a call takes a turn on the
session one run at a time, and at each hand-over the waiting call due first
goes next. Questions go before the background sentence worker (120 s calls)
and ingests (600 s); among questions, which share one kind of deadline, the
one asked first goes first, so none is starved. (Least work left first was
tried: it starved a question with many sentences behind shorter ones, and
aging it by the work served to others let a long ingest call, credited with
the questions' work, go before them; docs/embedding.md.)
"""
from __future__ import annotations

import itertools
import math
import threading
from dataclasses import dataclass


@dataclass(frozen=True, eq=False)
class SessionCall:
    """One call's place in the turns; made by :meth:`EarliestDeadlineTurns.call`.

    Attributes:
        deadline: when the call is due (``time.monotonic()`` seconds);
            ``math.inf`` for a call without one.
        order: tie-breaker, earlier calls first.
    """

    deadline: float
    order: int


class EarliestDeadlineTurns:
    """At most ``slots`` turns at once (a counting semaphore); each turn
    freed goes to the waiting call with the earliest deadline (ties, and
    calls without a deadline: the earliest call). One call may hold and
    wait for several turns at once (its worker threads, one each).
    Thread-safe; not re-entrant.

    Use: ``call = turns.call(deadline)``, then per run ``turns.acquire(call)``
    ... ``turns.release()``.

    Raises:
        ValueError: ``slots`` below 1.
    """

    def __init__(self, slots: int = 1) -> None:
        if slots < 1:
            raise ValueError("slots must be at least 1")
        self._changed = threading.Condition()
        self._slots = slots
        self._held = 0
        self._waiting: list[SessionCall] = []
        self._orders = itertools.count()

    def call(self, deadline: float | None = None) -> SessionCall:
        """Begins a call due at ``deadline`` (``time.monotonic()``
        seconds; None: no deadline, after every call that has one)."""
        return SessionCall(math.inf if deadline is None else float(deadline), next(self._orders))

    def acquire(self, call: SessionCall) -> None:
        """Blocks until ``call`` gets a turn on the session for one run."""
        with self._changed:
            if self._held < self._slots and not self._waiting:
                self._held += 1
                return
            self._waiting.append(call)
            while self._held >= self._slots or min(self._waiting, key=_due) is not call:
                self._changed.wait()
            self._waiting.remove(call)
            self._held += 1
            if self._held < self._slots and self._waiting:
                self._changed.notify_all()  # a turn is still free: the next call due may take it

    def release(self) -> None:
        """Raises RuntimeError when no turn is held."""
        with self._changed:
            if not self._held:
                raise RuntimeError("release of an EarliestDeadlineTurns turn that is not held")
            self._held -= 1
            if self._waiting:
                self._changed.notify_all()

    def waiting(self) -> int:
        """How many calls wait for the session now."""
        with self._changed:
            return len(self._waiting)


def _due(call: SessionCall) -> tuple[float, int]:
    return call.deadline, call.order
