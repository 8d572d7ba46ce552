"""Sentence vectors embedded after the corpus is in: a background worker of
the gateway that embeds stored chunks' sentence units (the units of
``sentence.maxsim``) passage-side once no ingest has run for a while, and
drops the vectors; the expander's embedding cache keeps them, so a
question's MaxSim stage finds them there. Questions come first: a call
starts only while no search runs, and calls are small (BACKGROUND_BATCH
units), so a question waits for at most one of them.

Why not inline: embedding the sentences costs about as much as embedding
the chunks (the sentences are the chunks' text again), so an Ingest call
that embeds them before it returns makes a corpus searchable only after
twice the embedding work (docs/benchmarks.md, "Sentence vectors after the
corpus is in"). A sentence not embedded yet is embedded, and cached, by the
first question that ranks its chunk: the ranking is the same, only that
question is slower. What is pending is held in memory only; a gateway that
stops leaves it to the questions, and to the next ingest of the same
documents (DocumentIngest queues an unchanged document's sentences again).
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from prometheus_client import Counter, Gauge

from graphmesh.expander.v1 import expander_pb2
from services.gateway.downstream.interfaces import Expander

log = logging.getLogger(__name__)

BACKFILL_PENDING = Gauge("graphmesh_sentence_backfill_pending",
                         "Sentence units waiting to be embedded in the background (GRAPHMESH_GATEWAY_INGEST__SENTENCE_VECTORS_MODE=background).")
BACKFILL_SENTENCES = Counter("graphmesh_sentence_backfill_sentences_total",
                             "Sentence units the background worker handled, by outcome: embedded, or dropped (the queue "
                             "was full, or the expander failed every try).", ("outcome",))

#: Seconds one background Embed call may take.
CALL_SECONDS = 120.0
#: Most units per background Embed call: about 50 ms of the expander's CPU
#: for law sentences, the longest a question waits behind the worker.
BACKGROUND_BATCH = 32
#: Seconds between looks while searches run.
_SEARCH_POLL_SECONDS = 0.02


class SentenceBackfill:
    """A queue of sentence units and the task that embeds them while no
    ingest runs.

    Args:
        expander: embeds the units (``Embed``, passage side).
        batch: most units per Embed call (at most BACKGROUND_BATCH are sent).
        idle_seconds: how long no ingest must have run before a call is made.
        max_pending: most units queued; more are dropped (and counted).
        retry_seconds: wait after a failed call before it is tried again.
        tries: calls a batch gets before it is dropped.
        searches_in_flight: the number of searches running in the gateway
            (SearchFlow.in_flight); no call starts while it is above 0.
        clock: monotonic seconds (tests pass their own).
    """

    def __init__(self, expander: Expander, batch: int, idle_seconds: float = 2.0, max_pending: int = 1_000_000,
                 retry_seconds: float = 5.0, tries: int = 5, searches_in_flight: Callable[[], int] = lambda: 0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if batch < 1 or idle_seconds < 0 or max_pending < 1 or retry_seconds < 0 or tries < 1:
            raise ValueError("batch, max_pending and tries must be >= 1; idle_seconds and retry_seconds >= 0")
        self.expander = expander
        self.batch = min(batch, BACKGROUND_BATCH)
        self.searches_in_flight = searches_in_flight
        self.idle_seconds = idle_seconds
        self.max_pending = max_pending
        self.retry_seconds = retry_seconds
        self.tries = tries
        self._clock = clock
        self._pending: deque[str] = deque()
        self._queued: set[str] = set()
        self._busy = 0
        self._last_busy = clock()
        self._wake = asyncio.Event()
        self._worker: asyncio.Task | None = None
        self.embedded = 0
        self.dropped = 0

    @property
    def pending(self) -> int:
        """Units waiting."""
        return len(self._pending)

    def add(self, texts: Iterable[str]) -> int:
        """Queues ``texts`` (those already waiting once), starting the worker
        on the running loop if needed; returns how many were queued. Beyond
        ``max_pending`` the rest are dropped."""
        added = 0
        for text in texts:
            if text in self._queued:
                continue
            if len(self._pending) >= self.max_pending:
                self.dropped += 1
                BACKFILL_SENTENCES.labels("dropped").inc()
                continue
            self._pending.append(text)
            self._queued.add(text)
            added += 1
        BACKFILL_PENDING.set(len(self._pending))
        if self._pending and (self._worker is None or self._worker.done()):
            self._worker = asyncio.get_running_loop().create_task(self._run(), name="sentence-backfill")
        self._wake.set()
        return added

    @contextmanager
    def busy(self) -> Iterator[None]:
        """Marks an ingest running: no background call starts meanwhile, nor
        within ``idle_seconds`` after it."""
        self._busy += 1
        try:
            yield
        finally:
            self._busy -= 1
            self._last_busy = self._clock()
            self._wake.set()

    def _idle_for(self) -> float:
        """Seconds to wait before the worker may call (0: now)."""
        if self._busy:
            return self.idle_seconds or 0.05
        wait = max(0.0, self._last_busy + self.idle_seconds - self._clock())
        if wait == 0 and self.searches_in_flight() > 0:
            return _SEARCH_POLL_SECONDS
        return wait

    async def _run(self) -> None:
        failures = 0
        while self._pending:
            wait = self._idle_for()
            if wait > 0:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), wait)
                except asyncio.TimeoutError:
                    pass
                continue
            texts = [self._pending[i] for i in range(min(self.batch, len(self._pending)))]
            request = expander_pb2.EmbedRequest(texts=texts, kind=expander_pb2.EMBED_KIND_PASSAGE)
            try:
                await self.expander.embed(request, CALL_SECONDS)
            except Exception as err:  # noqa: BLE001 - whatever the failure (DownstreamError or other), the worker goes on
                failures += 1
                if failures < self.tries:
                    log.info("background sentence vectors: %s; trying again in %.0f s", err, self.retry_seconds)
                    await asyncio.sleep(self.retry_seconds)
                    continue
                log.warning("background sentence vectors: %d units dropped after %d tries (%s); questions embed them",
                            len(texts), failures, err)
                self._take(len(texts), "dropped")
                failures = 0
                continue
            failures = 0
            self._take(len(texts), "embedded")

    def _take(self, count: int, outcome: str) -> None:
        for _ in range(count):
            self._queued.discard(self._pending.popleft())
        if outcome == "embedded":
            self.embedded += count
        else:
            self.dropped += count
        BACKFILL_SENTENCES.labels(outcome).inc(count)
        BACKFILL_PENDING.set(len(self._pending))

    async def drained(self, timeout: float) -> bool:
        """Waits until nothing is pending or ``timeout`` seconds pass; True
        when nothing is pending."""
        end = time.monotonic() + timeout
        while self._pending and time.monotonic() < end:
            await asyncio.sleep(0.01)
        return not self._pending

    async def close(self) -> None:
        """Stops the worker; what is pending is left to the questions."""
        if self._worker is not None and not self._worker.done():
            self._worker.cancel()
            try:
                await self._worker
            except asyncio.CancelledError:
                pass
        self._worker = None
