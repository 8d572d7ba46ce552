"""EarliestDeadlineLock (services/expander/session_turns.py): at each
hand-over the session goes to the waiting call due first; calls without a
deadline go last, and ties go to the earliest call."""
from __future__ import annotations

import threading
import time

import pytest

from services.expander.session_turns import EarliestDeadlineLock

pytestmark = pytest.mark.unit


def _wait_until(condition, within_s: float = 5.0) -> None:
    deadline = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def _granted_order(lock: EarliestDeadlineLock, waiters: list[tuple[str, object]]) -> list[str]:
    """With the lock held, queues ``waiters`` (name, call) in that order,
    releases, and returns the names in the order they got the session."""
    order: list[str] = []
    lock.acquire(lock.call())

    def waiter(name: str, call) -> None:
        lock.acquire(call)
        order.append(name)
        lock.release()

    threads = []
    for n, (name, call) in enumerate(waiters, 1):
        t = threading.Thread(target=waiter, args=(name, call))
        t.start()
        threads.append(t)
        _wait_until(lambda: lock.waiting() == n)
    lock.release()
    for t in threads:
        t.join(5)
    return order


def test_the_call_due_first_goes_first():
    lock = EarliestDeadlineLock()
    ingest, question, worker = lock.call(600), lock.call(10), lock.call(120)
    assert _granted_order(lock, [("ingest", ingest), ("question", question), ("worker", worker)]) == [
        "question", "worker", "ingest"]


def test_equal_deadlines_and_no_deadline_go_in_call_order_after_the_others():
    lock = EarliestDeadlineLock()
    first, second, none_first, none_second = lock.call(5), lock.call(5), lock.call(), lock.call(None)
    assert _granted_order(lock, [("none_second", none_second), ("second", second), ("none_first", none_first),
                                 ("first", first)]) == ["first", "second", "none_first", "none_second"]


def test_a_question_waits_for_one_batch_of_an_ingest_not_all_of_it():
    lock = EarliestDeadlineLock()
    ingest, question = lock.call(600), lock.call(10)
    events: list[str] = []
    lock.acquire(ingest)  # the ingest's first batch runs
    asked = threading.Thread(target=lambda: (lock.acquire(question), events.append("question"), lock.release()))
    asked.start()
    _wait_until(lambda: lock.waiting() == 1)
    events.append("ingest batch 1")
    lock.release()
    lock.acquire(ingest)  # at once: the waiting question is due first and goes before it
    events.append("ingest batch 2")
    lock.release()
    asked.join(5)
    assert events == ["ingest batch 1", "question", "ingest batch 2"]


def test_an_uncontended_lock_is_taken_at_once_and_must_be_held_to_release():
    lock = EarliestDeadlineLock()
    call = lock.call(1.0)
    lock.acquire(call)
    lock.release()
    assert lock.waiting() == 0
    with pytest.raises(RuntimeError, match="not held"):
        lock.release()
