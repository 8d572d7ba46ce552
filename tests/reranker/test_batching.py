"""DynamicBatcher (services/reranker/batching.py) with a small fake scorer
of our own interface: coalescing, the token budget, cancelled callers and
the bounded queue."""
from __future__ import annotations

import asyncio

import pytest

from services.reranker.batching import DynamicBatcher, QueueFull

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.unit]


class RecordingScorer:
    """Scores a pair by len(passage); records every batch; can be held."""

    def __init__(self) -> None:
        self.batches: list[list[tuple[str, str]]] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def score(self, pairs):
        self.batches.append(list(pairs))
        await self.gate.wait()
        return [float(len(p)) for _, p in pairs]


async def test_concurrent_calls_share_batches():
    scorer = RecordingScorer()
    batcher = DynamicBatcher(scorer.score, max_batch_tokens=10_000, max_batch_pairs=64, max_wait_s=0.2, queue_size=100)
    try:
        results = await asyncio.gather(*(batcher.submit(f"q{i}", ["a" * (i + 1), "b"], [10, 10]) for i in range(5)))
    finally:
        await batcher.stop()
    assert results[3] == [4.0, 1.0]
    assert sum(len(b) for b in scorer.batches) == 10
    assert len(scorer.batches) == 1  # five calls, one forward pass


async def test_padded_token_budget_splits_batches():
    scorer = RecordingScorer()
    # padded: longest (100) x pairs <= 300 -> at most 3 pairs per batch
    batcher = DynamicBatcher(scorer.score, max_batch_tokens=300, max_batch_pairs=64, max_wait_s=0.05, queue_size=100)
    try:
        await batcher.submit("q", ["x"] * 7, [100] * 7)
    finally:
        await batcher.stop()
    assert [len(b) for b in scorer.batches] == [3, 3, 1]


async def test_max_batch_pairs_caps_a_batch():
    scorer = RecordingScorer()
    batcher = DynamicBatcher(scorer.score, max_batch_tokens=10_000, max_batch_pairs=4, max_wait_s=0.0, queue_size=100)
    try:
        await batcher.submit("q", ["x"] * 9, [5] * 9)
    finally:
        await batcher.stop()
    assert [len(b) for b in scorer.batches] == [4, 4, 1]


async def test_full_queue_raises_and_cancelled_callers_are_not_scored():
    scorer = RecordingScorer()
    scorer.gate.clear()
    batcher = DynamicBatcher(scorer.score, max_batch_tokens=10_000, max_batch_pairs=2, max_wait_s=0.0, queue_size=4)
    try:
        first = asyncio.create_task(batcher.submit("busy", ["a", "b"], [1, 1]))  # taken into the held batch
        await asyncio.sleep(0.05)
        waiting = asyncio.create_task(batcher.submit("wait", ["c", "d", "e"], [1, 1, 1]))
        await asyncio.sleep(0.05)
        assert batcher.depth == 3
        with pytest.raises(QueueFull):
            await batcher.submit("late", ["f", "g"], [1, 1])
        waiting.cancel()
        await asyncio.sleep(0.01)
        scorer.gate.set()
        assert await first == [1.0, 1.0]
        assert await batcher.submit("after", ["hh"], [1]) == [2.0]
    finally:
        await batcher.stop()
    scored_queries = {q for b in scorer.batches for q, _ in b}
    assert "wait" not in scored_queries and "late" not in scored_queries


async def test_a_failing_batch_fails_its_callers_only():
    calls = 0

    async def flaky(pairs):
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("backend down")
        return [0.5] * len(pairs)

    batcher = DynamicBatcher(flaky, max_batch_tokens=100, max_batch_pairs=8, max_wait_s=0.0, queue_size=16)
    try:
        with pytest.raises(RuntimeError, match="backend down"):
            await batcher.submit("q", ["a"], [1])
        assert await batcher.submit("q", ["b"], [1]) == [0.5]
    finally:
        await batcher.stop()
