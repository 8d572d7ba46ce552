"""Turns on one ONNX Runtime session: least work left first, with aging.

An embedding call runs as several ONNX Runtime batches. Holding the session
for a whole call made a question's sentence embeddings (one call of about
a hundred sentences, a few batches) wait behind an ingest's call of
thousands (hundreds of batches, seconds): during a corpus load the sentence
MaxSim stage took 3-10 s, and timed out. With :class:`LeastWorkFirstLock`
a call takes the session one batch at a time; at each hand-over the
waiting call with the least work left goes first, less the work the session
did for other calls since it began (aging). So a short call waits for about
one batch of a long one, and a long call is never starved by a stream of
short ones: once the session has served others as much work as it still
needs, it goes first.
"""
from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field


@dataclass(eq=False)
class SessionCall:
    """One call's place in the turns; made by :meth:`LeastWorkFirstLock.call`.

    Attributes:
        started_at: the lock's served work when the call began.
        own: work granted to this call so far.
        left: work the call still needs (updated at each acquire).
        order: tie-breaker, earlier calls first.
    """

    started_at: float
    order: int
    own: float = 0.0
    left: float = 0.0
    waiting: bool = field(default=False)


class LeastWorkFirstLock:
    """A mutex handed, at each release, to the waiting call whose work left,
    less the work served to other calls since it began, is least (ties:
    the earliest call). Thread-safe; not re-entrant. Work is in any unit
    shared by all callers (padded tokens for the embedder).

    Use: ``call = lock.call()``, then per batch ``lock.acquire(call, left,
    batch)`` ... ``lock.release()``.
    """

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._held = False
        self._served = 0.0
        self._waiting: list[SessionCall] = []
        self._orders = itertools.count()

    def call(self) -> SessionCall:
        """Begins a call (its aging counts from now)."""
        with self._changed:
            return SessionCall(started_at=self._served, order=next(self._orders))

    def acquire(self, call: SessionCall, left: float, batch: float) -> None:
        """Blocks until ``call`` gets the session for a batch of ``batch``
        work, ``left`` being all the work it still needs (this batch
        included)."""
        with self._changed:
            call.left = float(left)
            if not self._held and not self._waiting:
                self._grant(call, batch)
                return
            self._waiting.append(call)
            while self._held or self._next() is not call:
                self._changed.wait()
            self._waiting.remove(call)
            self._grant(call, batch)

    def release(self) -> None:
        """Raises RuntimeError when the lock is not held."""
        with self._changed:
            if not self._held:
                raise RuntimeError("release of a LeastWorkFirstLock that is not held")
            self._held = False
            if self._waiting:
                self._changed.notify_all()

    def waiting(self) -> int:
        """How many calls wait for the session now."""
        with self._changed:
            return len(self._waiting)

    def _next(self) -> SessionCall:
        served = self._served
        return min(self._waiting, key=lambda c: (c.left - (served - c.started_at - c.own), c.order))

    def _grant(self, call: SessionCall, batch: float) -> None:
        self._held = True
        self._served += batch
        call.own += batch
