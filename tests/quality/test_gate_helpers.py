"""The quality gate's own helpers (tests/quality): where the shared data is
looked for, what happens without it, the keyword neighbours and the scores,
on small hand-checked inputs."""
from __future__ import annotations

import pytest

from services.cli.evaluate import QueryRow
from tests.quality import gate, samples

pytestmark = pytest.mark.unit


def _row(ranked: list[str], gold: list[str], error: str = "") -> QueryRow:
    return QueryRow("q", "query", gold, ranked, None, 0.0, [], error=error)


def test_missing_shared_data_skips_locally(monkeypatch, tmp_path):
    monkeypatch.setenv(samples.ENV_SHARED, str(tmp_path))
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="GRAPHMESH_SHARED_DIR"):
        gate.require_shared_data()


def test_missing_shared_data_fails_in_ci_with_the_reason(monkeypatch, tmp_path):
    monkeypatch.setenv(samples.ENV_SHARED, str(tmp_path))
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=str(tmp_path)):
        gate.require_shared_data()


def test_shared_dir_is_taken_from_the_environment_when_it_holds_the_data(monkeypatch, tmp_path):
    (tmp_path / "data" / "law-zh").mkdir(parents=True)
    (tmp_path / "data" / "medkg-zh").mkdir(parents=True)
    monkeypatch.setenv(samples.ENV_SHARED, str(tmp_path))
    assert samples.shared_dir() == tmp_path


def test_keyword_neighbours_rank_by_shared_keywords():
    texts = ["专利 申请 审查", "劳动合同 解除 经济补偿", "劳动 报酬 工资", "劳动合同 订立"]
    [ranked] = samples.keyword_neighbours(["劳动合同解除要给经济补偿吗"], texts, 2)
    # text 1 holds 劳动合同 (and its parts 劳动, 合同), 解除 and 经济补偿; text 3
    # 劳动合同 and its parts; text 2 only 劳动; text 0 nothing.
    assert ranked == [1, 3]


def test_keyword_neighbours_break_ties_by_index():
    assert samples.keyword_neighbours(["专利"], ["专利法", "专利法"], 2) == [[0, 1]]


def test_score_means_hits_and_reciprocal_ranks():
    rows = [_row(["a", "b"], ["a"]), _row(["x", "y", "b"], ["b"]), _row(["x"], ["z"]), _row([], ["a"], error="UNAVAILABLE")]
    f = gate.score("scenario", rows)
    assert (f.n, f.errors) == (4, 1)
    assert f.top1 == 0.25            # only the first row has its gold first
    assert f.recall10 == 0.5         # rows 1 and 2
    assert f.mrr10 == round((1 + 1 / 3) / 4, 4)


def test_check_floors_names_the_figure_below_its_floor(monkeypatch):
    monkeypatch.setitem(gate.FLOORS, "scenario", {"recall@10": 0.6, "mrr@10": 0.5})
    figures = gate.Figures("scenario", 10, top1=0.4, recall10=0.7, mrr10=0.45, errors=0, degraded=0, degraded_services={})
    with pytest.raises(AssertionError, match=r"mrr@10 0.4500 < 0.5"):
        gate.check_floors(figures)
    gate.REPORT.clear()


def test_check_floors_refuses_degraded_figures_naming_the_service(monkeypatch):
    monkeypatch.setitem(gate.FLOORS, "alias", {"top1": 0.1})
    figures = gate.Figures("alias", 10, top1=0.5, recall10=0.7, mrr10=0.6, errors=0, degraded=3,
                           degraded_services={"fuser": 3})
    with pytest.raises(AssertionError, match="3 of 10 queries answered without some service {'fuser': 3}"):
        gate.check_floors(figures)
    gate.REPORT.clear()
