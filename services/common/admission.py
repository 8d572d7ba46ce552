"""Admission control: at most N calls in flight, a bounded queue behind them.

Used where many callers share one gRPC connection (the REST edge's channel
to the gateway, the gateway's channel to each downstream service). A gRPC
server limits the streams one connection may hold
(``grpc.max_concurrent_streams``, 100 by default here) and a client that
opens more than that at once, before the server's SETTINGS frame is seen,
gets streams reset ("Stream removed", UNAVAILABLE). Keeping the calls in
flight per channel below that limit turns the excess into a wait in the
client, and a queue that is really full into an explicit "busy" answer with
a retry hint, never a reset stream.
"""
from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator


class Overloaded(Exception):
    """The queue is full, or a call waited past its deadline for a slot.

    Attributes:
        retry_after: seconds the caller should wait before trying again.
        waited: True when the call queued and ran out of time (DEADLINE
            semantics), False when it was turned away at once (busy).
    """

    def __init__(self, message: str, retry_after: int = 1, waited: bool = False) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.waited = waited


class Admission:
    """At most ``max_in_flight`` holders of a slot at once and at most
    ``max_queued`` waiting for one; a caller beyond that is refused at once.

    Args:
        max_in_flight: slots (>= 1).
        max_queued: callers that may wait (>= 0).
        name: what is admitted, for messages ("REST requests").
    """

    def __init__(self, max_in_flight: int, max_queued: int, name: str = "calls") -> None:
        if max_in_flight < 1 or max_queued < 0:
            raise ValueError("max_in_flight must be >= 1 and max_queued >= 0")
        self.max_in_flight = max_in_flight
        self.max_queued = max_queued
        self.name = name
        self._slots = asyncio.Semaphore(max_in_flight)
        self._waiting = 0
        self._in_flight = 0

    @property
    def in_flight(self) -> int:
        """Slots held now."""
        return self._in_flight

    @property
    def waiting(self) -> int:
        """Callers waiting for a slot now."""
        return self._waiting

    @contextlib.asynccontextmanager
    async def slot(self, timeout: float | None = None) -> AsyncIterator[float]:
        """Holds a slot for the body of the ``async with``; yields the
        seconds spent waiting for it.

        Raises:
            Overloaded: the queue is full (``waited`` False), or no slot came
                within ``timeout`` seconds (``waited`` True).
        """
        start = time.monotonic()
        if self._slots.locked():
            if self._waiting >= self.max_queued:
                raise Overloaded(f"too many {self.name} in flight ({self.max_in_flight}) and queued "
                                 f"({self.max_queued}); retry shortly")
            self._waiting += 1
            try:
                await asyncio.wait_for(self._slots.acquire(), timeout)
            except asyncio.TimeoutError:
                raise Overloaded(f"no free slot for {self.name} within the deadline", waited=True) from None
            finally:
                self._waiting -= 1
        else:
            await self._slots.acquire()
        self._in_flight += 1
        try:
            yield time.monotonic() - start
        finally:
            self._in_flight -= 1
            self._slots.release()
