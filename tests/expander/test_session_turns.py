"""LeastWorkFirstLock (services/expander/session_turns.py): the session goes
to the waiting call with the least work left, ties to the earliest."""
from __future__ import annotations

import threading
import time

import pytest

from services.expander.session_turns import LeastWorkFirstLock

pytestmark = pytest.mark.unit


def _wait_until(condition, within_s: float = 5.0) -> None:
    deadline = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def _queue_behind_holder(lock: LeastWorkFirstLock, works: list[float]) -> list[float]:
    """Holds the lock while callers with ``works`` queue (in that order),
    then releases; returns the works in the order the callers got it."""
    order: list[float] = []
    lock.acquire(0)

    def caller(work: float) -> None:
        lock.acquire(work)
        order.append(work)
        lock.release()

    threads = []
    for n, work in enumerate(works, 1):
        t = threading.Thread(target=caller, args=(work,))
        t.start()
        threads.append(t)
        _wait_until(lambda: lock.waiting() == n)
    lock.release()
    for t in threads:
        t.join(5)
    return order


def test_the_waiter_with_the_least_work_goes_first():
    assert _queue_behind_holder(LeastWorkFirstLock(), [100, 5, 50]) == [5, 50, 100]


def test_equal_work_goes_in_arrival_order():
    lock = LeastWorkFirstLock()
    order: list[str] = []
    lock.acquire(0)

    def caller(name: str) -> None:
        lock.acquire(7)
        order.append(name)
        lock.release()

    threads = []
    for n, name in enumerate("abc", 1):
        t = threading.Thread(target=caller, args=(name,))
        t.start()
        threads.append(t)
        _wait_until(lambda: lock.waiting() == n)
    lock.release()
    for t in threads:
        t.join(5)
    assert order == ["a", "b", "c"]


def test_an_uncontended_lock_is_taken_at_once_and_must_be_held_to_release():
    lock = LeastWorkFirstLock()
    lock.acquire(1)
    lock.release()
    lock.acquire(2)
    lock.release()
    assert lock.waiting() == 0
    with pytest.raises(RuntimeError, match="not held"):
        lock.release()
