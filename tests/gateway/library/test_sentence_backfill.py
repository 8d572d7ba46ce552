"""The background sentence worker: embeds only while no ingest runs, in
batches, each unit once; retries a failed call and drops a batch that
fails every try; stops cleanly; bounds its queue."""
from __future__ import annotations

import asyncio

import grpc
import pytest

from graphmesh.expander.v1 import expander_pb2
from services.gateway.library.sentence_backfill import SentenceBackfill
from tests.fakes import FakeExpander

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.unit]


def calls(expander: FakeExpander) -> list[list[str]]:
    return [list(r.texts) for rpc, r in expander.calls if rpc == "embed"]


class FailsFirst(FakeExpander):
    """Fails its first ``failures`` Embed calls."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    async def embed(self, request, timeout):
        self.fail = grpc.StatusCode.UNAVAILABLE if self.failures > 0 else None
        self.failures -= 1
        return await super().embed(request, timeout)


async def test_nothing_is_embedded_while_an_ingest_runs_then_all_in_batches():
    expander = FakeExpander()
    backfill = SentenceBackfill(expander, batch=2, idle_seconds=0.05)
    try:
        with backfill.busy():
            assert backfill.add(["甲", "乙", "丙", "甲"]) == 3  # 甲 once
            await asyncio.sleep(0.15)
            assert calls(expander) == []
        assert await backfill.drained(5)
        assert calls(expander) == [["甲", "乙"], ["丙"]]
        assert all(r.kind == expander_pb2.EMBED_KIND_PASSAGE for rpc, r in expander.calls)
        assert (backfill.embedded, backfill.dropped, backfill.pending) == (3, 0, 0)
    finally:
        await backfill.close()


async def test_a_failed_call_is_tried_again_and_nothing_is_lost():
    expander = FailsFirst(2)
    backfill = SentenceBackfill(expander, batch=8, idle_seconds=0, retry_seconds=0.01)
    try:
        backfill.add(["甲", "乙"])
        assert await backfill.drained(5)
        assert calls(expander) == [["甲", "乙"]] * 3
        assert (backfill.embedded, backfill.dropped) == (2, 0)
    finally:
        await backfill.close()


async def test_a_batch_failing_every_try_is_dropped_and_the_next_goes_on():
    expander = FailsFirst(3)
    backfill = SentenceBackfill(expander, batch=1, idle_seconds=0, retry_seconds=0.01, tries=3)
    try:
        backfill.add(["甲", "乙"])
        assert await backfill.drained(5)
        assert calls(expander) == [["甲"], ["甲"], ["甲"], ["乙"]]
        assert (backfill.embedded, backfill.dropped) == (1, 1)
    finally:
        await backfill.close()


async def test_the_queue_is_bounded():
    backfill = SentenceBackfill(FakeExpander(), batch=8, idle_seconds=10, max_pending=2)
    try:
        assert backfill.add(["甲", "乙", "丙"]) == 2
        assert (backfill.pending, backfill.dropped) == (2, 1)
    finally:
        await backfill.close()


async def test_close_stops_the_worker_and_leaves_the_rest():
    expander = FakeExpander(fail="hang")
    backfill = SentenceBackfill(expander, batch=8, idle_seconds=0)
    backfill.add(["甲"])
    await asyncio.sleep(0.05)  # the call hangs
    await backfill.close()
    assert backfill.pending == 1 and backfill.embedded == 0


async def test_questions_come_first_no_call_starts_while_a_search_runs():
    expander, searching = FakeExpander(), [1]
    backfill = SentenceBackfill(expander, batch=8, idle_seconds=0, searches_in_flight=lambda: searching[0])
    try:
        backfill.add(["甲"])
        await asyncio.sleep(0.15)
        assert calls(expander) == []
        searching[0] = 0
        assert await backfill.drained(5)
        assert calls(expander) == [["甲"]]
    finally:
        await backfill.close()


async def test_calls_are_small_whatever_the_ingest_batch():
    assert SentenceBackfill(FakeExpander(), batch=256).batch == 32
