"""Dynamic batching of (query, passage) pairs across concurrent Rerank calls.

Modelled on text-embeddings-inference (core/src/queue.rs): every pair is a
queue entry with its token count; one batching task takes entries from the
front while the batch stays under a token budget, counted padded for padded
models (longest entry x entries), and under a most-entries cap; entries whose
caller has gone (cancelled RPC) are dropped, not scored. TEI forms a batch as
soon as the backend is free; here the first entry of a batch may also wait up
to ``max_wait_s`` for others to join it, so calls arriving within a few
milliseconds of each other share one forward pass even on an idle server.
The queue is bounded: a call whose pairs do not fit raises ``QueueFull``
(the servicer answers RESOURCE_EXHAUSTED), as TEI answers 429 past
``max_concurrent_requests``.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from services.reranker import metrics

log = logging.getLogger("graphmesh.reranker")

ScoreBatch = Callable[[list[tuple[str, str]]], Awaitable[list[float]]]


class QueueFull(RuntimeError):
    """The batching queue has no room for the call's pairs."""


@dataclass(slots=True)
class _Entry:
    query: str
    passage: str
    tokens: int
    future: asyncio.Future
    queued_at: float = field(default_factory=time.perf_counter)


class DynamicBatcher:
    """Coalesces pairs from concurrent calls into batches for ``score_batch``.

    Args:
        score_batch: async scorer of a list of (query, passage) pairs,
            returning one float per pair in order.
        max_batch_tokens: token budget of a batch (padded count when
            ``padded``); a single entry over it still forms a batch alone.
        max_batch_pairs: most entries per batch.
        max_wait_s: longest wait of a batch's first entry for others (seconds).
        queue_size: most entries waiting.
        padded: count a batch as longest entry x entries (True) or as the sum.
    """

    def __init__(self, score_batch: ScoreBatch, max_batch_tokens: int, max_batch_pairs: int,
                 max_wait_s: float, queue_size: int, padded: bool = True) -> None:
        self._score_batch = score_batch
        self.max_batch_tokens = max_batch_tokens
        self.max_batch_pairs = max_batch_pairs
        self.max_wait_s = max_wait_s
        self.queue_size = queue_size
        self.padded = padded
        self._queue: deque[_Entry] = deque()
        self._arrived = asyncio.Event()
        self._task: asyncio.Task | None = None

    @property
    def depth(self) -> int:
        """Entries waiting."""
        return len(self._queue)

    def start(self) -> None:
        """Starts the batching task on the running loop (idempotent)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="reranker-batcher")

    async def stop(self) -> None:
        """Stops the batching task; waiting calls get CancelledError."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        while self._queue:
            self._queue.popleft().future.cancel()
        metrics.QUEUE_DEPTH.set(0)

    async def submit(self, query: str, passages: Sequence[str], tokens: Sequence[int]) -> list[float]:
        """Queues one call's pairs and waits for their scores.

        Args:
            query: the (already fitted) query.
            passages: the (already fitted) passages.
            tokens: tokens of each pair (the budget's unit).
        Returns:
            one score per passage, in order.
        Raises:
            QueueFull: fewer than len(passages) free places in the queue.
            Exception: whatever ``score_batch`` raised for a batch holding
                one of these pairs.
        """
        if not passages:
            return []
        if len(self._queue) + len(passages) > self.queue_size:
            raise QueueFull(f"{len(self._queue)} pairs queued; room for {self.queue_size - len(self._queue)}, "
                            f"{len(passages)} asked")
        self.start()
        loop = asyncio.get_running_loop()
        futures = []
        for passage, n in zip(passages, tokens):
            entry = _Entry(query, passage, max(1, int(n)), loop.create_future())
            self._queue.append(entry)
            futures.append(entry.future)
        metrics.QUEUE_DEPTH.set(len(self._queue))
        self._arrived.set()
        try:
            return list(await asyncio.gather(*futures))
        except BaseException:
            for f in futures:
                f.cancel()  # the batching task drops cancelled entries
            raise

    def _batch_cost(self, count: int, longest: int, total: int) -> int:
        return longest * count if self.padded else total

    def _full_batch_ready(self) -> bool:
        """True when the queue already holds a batch that cannot grow."""
        count = longest = total = 0
        for entry in self._queue:
            if entry.future.done():
                continue
            if count and self._batch_cost(count + 1, max(longest, entry.tokens), total + entry.tokens) > self.max_batch_tokens:
                return True
            count += 1
            longest = max(longest, entry.tokens)
            total += entry.tokens
            if count >= self.max_batch_pairs:
                return True
        return False

    def _take_batch(self) -> tuple[list[_Entry], int]:
        batch: list[_Entry] = []
        longest = total = 0
        while self._queue:
            entry = self._queue[0]
            if entry.future.done():  # caller gone
                self._queue.popleft()
                continue
            if batch and self._batch_cost(len(batch) + 1, max(longest, entry.tokens), total + entry.tokens) > self.max_batch_tokens:
                break
            self._queue.popleft()
            batch.append(entry)
            longest = max(longest, entry.tokens)
            total += entry.tokens
            if len(batch) >= self.max_batch_pairs:
                break
        metrics.QUEUE_DEPTH.set(len(self._queue))
        return batch, self._batch_cost(len(batch), longest, total)

    async def _wait_for_company(self) -> None:
        """Waits until a full batch is queued or the oldest entry has waited
        ``max_wait_s``."""
        oldest = self._queue[0].queued_at
        while not self._full_batch_ready():
            left = oldest + self.max_wait_s - time.perf_counter()
            if left <= 0:
                return
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), timeout=left)
            except asyncio.TimeoutError:
                return

    async def _run(self) -> None:
        while True:
            while not self._queue:
                self._arrived.clear()
                await self._arrived.wait()
            if self.max_wait_s > 0:
                await self._wait_for_company()
            batch, cost = self._take_batch()
            if not batch:
                continue
            now = time.perf_counter()
            for entry in batch:
                metrics.QUEUE_SECONDS.observe(now - entry.queued_at)
            metrics.BATCH_SIZE.observe(len(batch))
            metrics.BATCH_TOKENS.observe(cost)
            try:
                scores = await self._score_batch([(e.query, e.passage) for e in batch])
                if len(scores) != len(batch):
                    raise RuntimeError(f"scorer returned {len(scores)} scores for {len(batch)} pairs")
            except asyncio.CancelledError:
                for entry in batch:
                    entry.future.cancel()
                raise
            except Exception as err:  # one failed batch fails its callers, not the batcher
                log.warning("batch of %d pairs failed: %s", len(batch), err)
                for entry in batch:
                    if not entry.future.done():
                        entry.future.set_exception(err)
                continue
            metrics.PAIRS.inc(len(batch))
            for entry, score in zip(batch, scores):
                if not entry.future.done():
                    entry.future.set_result(float(score))
