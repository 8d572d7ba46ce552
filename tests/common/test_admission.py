"""services.common.admission: slots, the bounded queue, deadlines."""
from __future__ import annotations

import asyncio

import pytest

from services.common.admission import Admission, Overloaded

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.unit]


async def test_at_most_max_in_flight_run_and_the_rest_wait_their_turn():
    admission = Admission(3, 100)
    running, peak = 0, 0

    async def work() -> None:
        nonlocal running, peak
        async with admission.slot():
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.01)
            running -= 1

    await asyncio.gather(*(work() for _ in range(30)))
    assert peak == 3 and admission.in_flight == 0 and admission.waiting == 0


def holder_of(admission: Admission, release: asyncio.Event):
    """A coroutine function that holds a slot until ``release`` is set."""

    async def hold() -> None:
        async with admission.slot():
            await release.wait()

    return hold


async def test_a_full_queue_refuses_at_once_with_a_retry_hint():
    admission = Admission(1, 1)
    release = asyncio.Event()
    hold = holder_of(admission, release)
    holder = asyncio.create_task(hold())
    await asyncio.sleep(0)
    queued = asyncio.create_task(hold())
    await asyncio.sleep(0)
    with pytest.raises(Overloaded) as err:
        async with admission.slot():
            pass
    assert not err.value.waited and err.value.retry_after >= 1
    release.set()
    await asyncio.gather(holder, queued)
    assert admission.in_flight == 0


async def test_a_wait_longer_than_the_timeout_is_a_deadline_and_frees_nothing():
    admission = Admission(1, 10)
    release = asyncio.Event()
    holder = asyncio.create_task(holder_of(admission, release)())
    await asyncio.sleep(0)
    with pytest.raises(Overloaded) as err:
        async with admission.slot(timeout=0.05):
            pass
    assert err.value.waited and admission.waiting == 0
    release.set()
    await holder
    async with admission.slot(timeout=0.05) as waited:
        assert waited < 0.05
