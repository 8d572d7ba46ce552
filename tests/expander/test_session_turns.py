"""EarliestDeadlineTurns (services/expander/session_turns.py): at each
hand-over a turn on the session goes to the waiting call due first; calls
without a deadline go last, and ties go to the earliest call; with several
slots, that many turns run at once."""
from __future__ import annotations

import threading
import time

import pytest

from services.expander.session_turns import EarliestDeadlineTurns

pytestmark = pytest.mark.unit


def _wait_until(condition, within_s: float = 5.0) -> None:
    deadline = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def _granted_order(lock: EarliestDeadlineTurns, waiters: list[tuple[str, object]]) -> list[str]:
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
    lock = EarliestDeadlineTurns()
    ingest, question, worker = lock.call(600), lock.call(10), lock.call(120)
    assert _granted_order(lock, [("ingest", ingest), ("question", question), ("worker", worker)]) == [
        "question", "worker", "ingest"]


def test_equal_deadlines_and_no_deadline_go_in_call_order_after_the_others():
    lock = EarliestDeadlineTurns()
    first, second, none_first, none_second = lock.call(5), lock.call(5), lock.call(), lock.call(None)
    assert _granted_order(lock, [("none_second", none_second), ("second", second), ("none_first", none_first),
                                 ("first", first)]) == ["first", "second", "none_first", "none_second"]


def test_a_question_waits_for_one_text_of_an_ingest_not_all_of_it():
    lock = EarliestDeadlineTurns()
    ingest, question = lock.call(600), lock.call(10)
    events: list[str] = []
    lock.acquire(ingest)  # the ingest's first text runs
    asked = threading.Thread(target=lambda: (lock.acquire(question), events.append("question"), lock.release()))
    asked.start()
    _wait_until(lambda: lock.waiting() == 1)
    events.append("ingest text 1")
    lock.release()
    lock.acquire(ingest)  # at once: the waiting question is due first and goes before it
    events.append("ingest text 2")
    lock.release()
    asked.join(5)
    assert events == ["ingest text 1", "question", "ingest text 2"]


def test_an_uncontended_lock_is_taken_at_once_and_must_be_held_to_release():
    lock = EarliestDeadlineTurns()
    call = lock.call(1.0)
    lock.acquire(call)
    lock.release()
    assert lock.waiting() == 0
    with pytest.raises(RuntimeError, match="not held"):
        lock.release()


def test_two_slots_run_two_turns_at_once_and_the_third_waits_for_one():
    turns = EarliestDeadlineTurns(slots=2)
    ingest, question = turns.call(600), turns.call(10)
    turns.acquire(ingest)
    turns.acquire(ingest)  # the second slot: taken at once by the same call
    got: list[str] = []
    asked = threading.Thread(target=lambda: (turns.acquire(question), got.append("question")))
    asked.start()
    _wait_until(lambda: turns.waiting() == 1)
    assert got == []  # both slots are held
    turns.release()
    asked.join(5)
    assert got == ["question"]
    turns.release()
    turns.release()
    with pytest.raises(RuntimeError, match="not held"):
        turns.release()


def test_a_freed_slot_goes_to_the_call_due_first_while_another_slot_is_busy():
    turns = EarliestDeadlineTurns(slots=2)
    turns.acquire(turns.call())
    assert _granted_order(turns, [("ingest", turns.call(600)), ("question", turns.call(10))]) == ["question", "ingest"]
    turns.release()


def test_slots_below_one_are_refused():
    with pytest.raises(ValueError, match="slots"):
        EarliestDeadlineTurns(slots=0)
