import pytest
from services.gateway.search import deep_rules as deep

pytestmark = pytest.mark.unit


def test_growth_rate_is_new_over_known():
    assert deep.growth_rate(3, 0) == 1.0
    assert deep.growth_rate(0, 0) == 0.0
    assert deep.growth_rate(1, 10) == 0.1
    assert deep.growth_rate(0, 7) == 0.0


def test_stop_on_growth_below_threshold_only_from_the_second_iteration():
    assert not deep.should_stop(1, 0.0, 3, 0.1).stop
    stop = deep.should_stop(2, 0.09, 3, 0.1)
    assert stop.stop and stop.reason == "growth rate 0.090 < 0.1"
    assert not deep.should_stop(2, 0.1, 3, 0.1).stop  # equal is not below


def test_stop_after_max_iterations_or_without_sub_queries():
    assert deep.should_stop(3, 0.5, 3, 0.1).reason == "max iterations 3"
    assert deep.should_stop(1, 1.0, 3, 0.1, has_sub_queries=False).reason == "no sub-queries"


def test_next_queries_takes_the_best_scored_unasked():
    proposed = [("a", 0.2), ("b", 0.9), ("c", 0.5), ("b", 0.9), ("d", 0.7)]
    assert deep.next_queries(proposed, asked={"d"}, k=2) == ["b", "c"]


def test_new_ids_keeps_order_and_drops_known_and_repeats():
    assert deep.new_ids(["x", "a", "y", "x", "b"], known=["a", "b"]) == ["x", "y"]
