"""JudgeService: validates the request, runs ``scoring.judge`` (rule scores,
and the LLM judge's scores when one is configured: yes-probabilities, or
the median of JSON rounds; services.judge.llm) in a worker thread, and
converts the result to protobuf."""
from __future__ import annotations

import asyncio

import grpc

import domains

from graphmesh.judge.v1 import judge_pb2, judge_pb2_grpc
from services.common.errors import InvalidArgument, validate_query, validate_range
from services.common.llm import LlmClient
from services.judge import scoring
from services.judge.llm import judge_round, judge_yes_no
from services.judge.config import JudgeSettings

GROUP_PB = {
    scoring.Group.RETRIEVAL: judge_pb2.METRIC_GROUP_RETRIEVAL,
    scoring.Group.ANSWER: judge_pb2.METRIC_GROUP_ANSWER,
    scoring.Group.REASONING: judge_pb2.METRIC_GROUP_REASONING,
    scoring.Group.COST: judge_pb2.METRIC_GROUP_COST,
    None: judge_pb2.METRIC_GROUP_UNSPECIFIED,
}
METHOD_PB = {
    scoring.Method.RULE: judge_pb2.SCORE_METHOD_RULE,
    scoring.Method.LLM: judge_pb2.SCORE_METHOD_LLM,
    scoring.Method.MERGED: judge_pb2.SCORE_METHOD_MERGED,
    scoring.Method.NOT_COMPUTED: judge_pb2.SCORE_METHOD_NOT_COMPUTED,
}


def metric_to_pb(score: scoring.Score) -> judge_pb2.Metric:
    """protobuf Metric of a scoring.Score (value 0 and NOT_COMPUTED when absent)."""
    metric = judge_pb2.Metric(
        name=score.name, group=GROUP_PB[score.group], method=METHOD_PB[score.method],
        value=score.value if score.value is not None else 0.0, detail=score.detail, llm_rounds=score.llm_rounds,
    )
    if score.rule_value is not None:
        metric.rule_value = score.rule_value
    if score.llm_value is not None:
        metric.llm_value = score.llm_value
    return metric


def inputs_from_request(request: judge_pb2.JudgeRequest, settings: JudgeSettings) -> scoring.JudgeInputs:
    """Validated JudgeInputs of ``request``.

    Raises:
        InvalidArgument: "question" empty/too long, "k" out of range,
            "context_ids" or "context_labels" not one per context,
            "reference_answer" too long, "domain_packs" names an unknown pack.
    """
    question = validate_query(request.question, settings.max_query_chars, "question")
    k = validate_range(request.k or 10, 1, settings.max_k, "k")
    if request.context_ids and len(request.context_ids) != len(request.contexts):
        raise InvalidArgument("context_ids", f"has {len(request.context_ids)} ids for {len(request.contexts)} contexts; give one per context or none")
    if len(request.reference_answer) > settings.max_reference_chars:
        raise InvalidArgument("reference_answer", f"is {len(request.reference_answer)} characters; the maximum is {settings.max_reference_chars}")
    if request.context_labels and len(request.context_labels) != len(request.contexts):
        raise InvalidArgument("context_labels", f"has {len(request.context_labels)} labels for {len(request.contexts)} contexts; give one per context or none")
    if request.total_tokens < 0:
        raise InvalidArgument("total_tokens", "must not be negative")
    unknown = [name for name in request.domain_packs if name and name not in domains.PACKS]
    if unknown:
        raise InvalidArgument("domain_packs", f"unknown domain pack {unknown[0]!r}; known: {', '.join(sorted(domains.PACKS))}")
    timings: dict[str, float] = {}
    for t in request.timings:
        timings[t.stage] = timings.get(t.stage, 0.0) + max(0.0, t.duration_ms)
    return scoring.JudgeInputs(
        question=question, answer=request.answer, ranked_ids=list(request.ranked_ids), contexts=list(request.contexts),
        context_ids=list(request.context_ids), gold_ids=list(request.gold_ids), reference_answer=request.reference_answer,
        k=k, timings_ms=timings, total_tokens=request.total_tokens, context_labels=list(request.context_labels),
        citation_rules=domains.citation_rules(list(request.domain_packs)),
    )


class JudgeServicer(judge_pb2_grpc.JudgeServiceServicer):
    """Judge RPC. The LLM judge (an OpenAI-compatible endpoint) is built once
    when ``llm_base_url`` is set; without it LLM-only metrics are NOT_COMPUTED."""

    def __init__(self, settings: JudgeSettings) -> None:
        self._settings = settings
        self._weights = {g: settings.weights.get(g.value, 0.0) for g in scoring.Group}
        self._llm = LlmClient(settings.llm.config())

    async def close(self) -> None:
        """Releases the LLM client's connections."""
        await self._llm.close()

    async def Judge(self, request: judge_pb2.JudgeRequest, context: grpc.aio.ServicerContext) -> judge_pb2.JudgeResponse:
        """Scores one question; see the proto for fields and errors."""
        inputs = inputs_from_request(request, self._settings)
        s = self._settings
        llm_results = None
        names = scoring.llm_metric_names(inputs)
        yes_no = s.llm.mode == "yes_no"
        if self._llm.enabled and names:
            if yes_no:
                llm_results = [await _failure_as_data(judge_yes_no(self._llm, inputs, names))]
            else:  # seeds 1..rounds: independent samples, the same ones for the same inputs
                llm_results = [await _failure_as_data(judge_round(self._llm, inputs, names, seed=n))
                               for n in range(1, s.llm.rounds + 1)]
        result = await asyncio.to_thread(
            scoring.judge, inputs, llm_results, policy=s.merge_policy, weights=self._weights,
            latency_budgets_ms=s.latency_budgets_ms, token_budget=s.token_budget,
            llm_kind="yes_probability" if yes_no else "rounds",
        )
        return judge_pb2.JudgeResponse(
            metrics=[metric_to_pb(m) for m in result.scores],
            groups=[
                judge_pb2.GroupScore(group=GROUP_PB[g.group], value=g.value or 0.0, weight=g.weight, computed=g.computed, total=g.total)
                for g in result.groups
            ],
            overall=metric_to_pb(result.overall),
            llm_configured=self._llm.enabled,
        )


async def _failure_as_data(call):
    """The scores ``call`` returns, or the exception it failed with (LLM
    calls run one after another: a local llama.cpp serves one request at a
    time)."""
    try:
        return await call
    except Exception as err:  # noqa: BLE001 - a failed round is data for scoring
        return err
