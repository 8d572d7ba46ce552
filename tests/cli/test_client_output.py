"""What `graphmesh search` / `answer` print (services/cli/client.py)."""
from __future__ import annotations

import pytest

from graphmesh.common.v1 import types_pb2
from graphmesh.gateway.v1 import gateway_pb2
from services.cli.client import _print_answer_notes, _print_search
from services.common import names

pytestmark = pytest.mark.unit


def test_a_collection_no_store_holds_is_said_in_words_not_only_as_a_skipped_stage(capsys):
    reason = "no store holds collection 'default': nothing was ingested into it"
    reply = gateway_pb2.SearchResponse(timings=[
        types_pb2.StageTiming(stage=names.STAGE_COLLECTIONS, status=types_pb2.STAGE_STATUS_SKIPPED, detail=reason),
        types_pb2.StageTiming(stage=names.STAGE_TOTAL, duration_ms=12, status=types_pb2.STAGE_STATUS_OK)])
    _print_search(reply)
    out = capsys.readouterr().out
    assert "collections=0ms(skipped)" in out and f"note: {reason}" in out
    _print_search(gateway_pb2.SearchResponse(timings=[types_pb2.StageTiming(stage=names.STAGE_TOTAL, duration_ms=3)]))
    assert "note:" not in capsys.readouterr().out


def test_an_empty_filtered_search_prints_what_filters_test(capsys):
    reason = "no document of the searched collections matches the filters on 'dept': ..."
    _print_search(gateway_pb2.SearchResponse(timings=[
        types_pb2.StageTiming(stage=names.STAGE_FILTERS, status=types_pb2.STAGE_STATUS_SKIPPED, detail=reason)]))
    out = capsys.readouterr().out
    assert f"note: {reason}" in out and "no results" not in out
    _print_search(gateway_pb2.SearchResponse(timings=[types_pb2.StageTiming(stage=names.STAGE_TOTAL, duration_ms=3)]))
    assert "no results" in capsys.readouterr().out  # an empty list is said in words


def test_an_answer_with_nothing_found_prints_why_and_no_empty_list_of_sources(capsys):
    reason = "no store holds collection 'nope': nothing was ingested into it"
    _print_answer_notes(gateway_pb2.AnswerResponse(mode=gateway_pb2.ANSWER_MODE_ABSTAINED, search=gateway_pb2.SearchResponse(
        timings=[types_pb2.StageTiming(stage=names.STAGE_COLLECTIONS, status=types_pb2.STAGE_STATUS_SKIPPED, detail=reason)])))
    out = capsys.readouterr().out
    assert f"note: {reason}" in out and "nearest sources" not in out


def test_an_answer_refused_by_a_rule_says_the_rule_not_a_score_over_its_threshold(capsys):
    """A trial's refusal by the dictionary rule printed "answerability 0.997 < 0.500"."""
    rule = "evidence does not answer the question: none of its words is in the dictionary or in the top results"
    _print_answer_notes(gateway_pb2.AnswerResponse(
        mode=gateway_pb2.ANSWER_MODE_ABSTAINED, answerability=0.997, answerability_threshold=0.5,
        attempts=[gateway_pb2.StrategyAttempt(reason=rule)],
        insufficient_sources=[gateway_pb2.Citation(number=1, label="告警手册", document_id="alerts.md")]))
    out = capsys.readouterr().out
    assert f"nearest sources (not sufficient to answer; {rule}):" in out and "0.997 <" not in out
