"""Turns on one ONNX Runtime session, shortest call first.

An embedding call runs as several ONNX Runtime batches. Holding the session
for a whole call made a question's sentence embeddings (one call of about
a hundred sentences, a few batches) wait behind an ingest's call of
thousands (hundreds of batches, seconds): during a corpus load the sentence
MaxSim stage took 3-10 s, and timed out. With :class:`LeastWorkFirstLock`
a call takes the session one batch at a time, and at each hand-over the
waiting call with the least work left goes first, so a short call waits for
one batch of a long one at most. A long call can wait while short ones keep
coming: questions go before bulk work.
"""
from __future__ import annotations

import heapq
import itertools
import threading


class LeastWorkFirstLock:
    """A mutex handed, at each release, to the waiter with the least work
    left (ties: the earliest). Thread-safe; not re-entrant.

    ``acquire(work)``: ``work`` is the caller's remaining work in any unit
    shared by all callers (padded tokens for the embedder); blocks until the
    lock is free and no waiter has less work. ``release()`` hands it on.
    """

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._held = False
        self._waiting: list[tuple[float, int]] = []
        self._arrivals = itertools.count()

    def acquire(self, work: float) -> None:
        with self._changed:
            if not self._held and not self._waiting:
                self._held = True
                return
            turn = (float(work), next(self._arrivals))
            heapq.heappush(self._waiting, turn)
            while self._held or self._waiting[0] != turn:
                self._changed.wait()
            heapq.heappop(self._waiting)
            self._held = True

    def release(self) -> None:
        """Raises RuntimeError when the lock is not held."""
        with self._changed:
            if not self._held:
                raise RuntimeError("release of a LeastWorkFirstLock that is not held")
            self._held = False
            if self._waiting:
                self._changed.notify_all()

    def waiting(self) -> int:
        """How many callers wait for the lock now."""
        with self._changed:
            return len(self._waiting)
