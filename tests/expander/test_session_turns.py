"""LeastWorkFirstLock (services/expander/session_turns.py): the session goes
to the waiting call with the least work left, less the work served to other
calls since it began; ties to the earliest call."""
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


def _granted_order(lock: LeastWorkFirstLock, holder, waiters: list[tuple[str, object, float]]) -> list[str]:
    """With ``holder`` holding the lock, queues ``waiters`` (name, call,
    work left; one batch of 1 each) in that order, releases, and returns the
    names in the order they got the lock."""
    order: list[str] = []

    def waiter(name: str, call, left: float) -> None:
        lock.acquire(call, left, 1)
        order.append(name)
        lock.release()

    threads = []
    for n, (name, call, left) in enumerate(waiters, 1):
        t = threading.Thread(target=waiter, args=(name, call, left))
        t.start()
        threads.append(t)
        _wait_until(lambda: lock.waiting() == n)
    lock.release()
    for t in threads:
        t.join(5)
    return order


def test_the_call_with_the_least_work_left_goes_first():
    lock = LeastWorkFirstLock()
    holder = lock.call()
    big, small, middle = lock.call(), lock.call(), lock.call()
    lock.acquire(holder, 1, 1)
    assert _granted_order(lock, holder, [("big", big, 100), ("small", small, 5), ("middle", middle, 50)]) == [
        "small", "middle", "big"]


def test_equal_work_goes_to_the_earliest_call():
    lock = LeastWorkFirstLock()
    holder = lock.call()
    calls = [lock.call() for _ in range(3)]
    lock.acquire(holder, 1, 1)
    assert _granted_order(lock, holder, [(n, c, 7) for n, c in zip("cab", reversed(calls))]) == ["b", "a", "c"]


def test_a_long_call_goes_first_once_others_were_served_as_much_as_it_needs():
    lock = LeastWorkFirstLock()
    long_call = lock.call()
    for _ in range(3):  # while the long call runs, others get 3 x 40 = 120 units of work
        other = lock.call()
        lock.acquire(other, 40, 40)
        lock.release()
    holder, fresh_small = lock.call(), lock.call()
    lock.acquire(holder, 1, 1)
    # long: 150 left - 121 served to others = 29; fresh: 35 - 1 = 34. Without aging 35 < 150.
    assert _granted_order(lock, holder, [("fresh", fresh_small, 35), ("long", long_call, 150)]) == ["long", "fresh"]


def test_an_uncontended_lock_is_taken_at_once_and_must_be_held_to_release():
    lock = LeastWorkFirstLock()
    call = lock.call()
    lock.acquire(call, 2, 1)
    lock.release()
    lock.acquire(call, 1, 1)
    lock.release()
    assert lock.waiting() == 0 and call.own == 2
    with pytest.raises(RuntimeError, match="not held"):
        lock.release()
