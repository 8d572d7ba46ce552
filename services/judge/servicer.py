"""JudgeService: rule metrics now; LLM-judged ones are reported as not
computed (never as 0 or 1) until an LLM judge is configured."""
from __future__ import annotations

import grpc

from graphmesh.judge.v1 import judge_pb2, judge_pb2_grpc
from services.common.errors import validate_query, validate_range
from services.judge import core
from services.judge.config import JudgeSettings

RETRIEVAL = judge_pb2.METRIC_GROUP_RETRIEVAL
ANSWER = judge_pb2.METRIC_GROUP_ANSWER
REASONING = judge_pb2.METRIC_GROUP_REASONING
RULE = judge_pb2.SCORE_METHOD_RULE
NOT_COMPUTED = judge_pb2.SCORE_METHOD_NOT_COMPUTED

# Metrics of the reference (000 section 6) that need an LLM judge.
LLM_ONLY = [
    ("context_relevancy", RETRIEVAL), ("correctness", ANSWER), ("completeness", ANSWER), ("relevancy", ANSWER),
    ("faithfulness", ANSWER), ("hallucination", ANSWER), ("factual_consistency", ANSWER),
    ("cot_quality", REASONING), ("reasoning_depth", REASONING), ("multi_hop_accuracy", REASONING),
]


def _metric(name: str, group: int, value: float | None, detail: str = "") -> judge_pb2.Metric:
    if value is None:
        return judge_pb2.Metric(name=name, group=group, method=NOT_COMPUTED, detail=detail)
    return judge_pb2.Metric(name=name, group=group, value=value, method=RULE, detail=detail)


class JudgeServicer(judge_pb2_grpc.JudgeServiceServicer):
    def __init__(self, settings: JudgeSettings) -> None:
        self._settings = settings

    async def Judge(self, request: judge_pb2.JudgeRequest, context: grpc.aio.ServicerContext) -> judge_pb2.JudgeResponse:
        validate_query(request.question, self._settings.max_query_chars, "question")
        k = validate_range(request.k or 10, 1, self._settings.max_k, "k")
        ranked = core.dedupe(request.ranked_ids)
        gold = set(request.gold_ids)
        no_gold = "no gold ids given"
        metrics = [
            _metric(f"hit@{k}", RETRIEVAL, core.hit_at(ranked, gold, k) if gold else None, no_gold if not gold else ""),
            _metric(f"recall@{k}", RETRIEVAL, core.recall_at(ranked, gold, k) if gold else None, no_gold if not gold else ""),
            _metric("mrr", RETRIEVAL, core.mrr_at(ranked, gold, k) if gold else None, no_gold if not gold else ""),
            _metric(f"ndcg@{k}", RETRIEVAL, core.ndcg_at(ranked, gold, k) if gold else None, no_gold if not gold else ""),
            _metric("context_precision", RETRIEVAL, core.precision_at(ranked, gold, k) if gold else None, no_gold if not gold else ""),
        ]
        if request.answer:
            validity = core.citation_validity(request.answer, len(request.contexts))
            metrics.append(_metric("citation_validity", ANSWER, validity, "no citations" if validity is None else ""))
            metrics.append(_metric("json_contamination", RETRIEVAL, 1.0 - core.json_contamination(request.answer)))
        metrics.extend(_metric(name, group, None, "needs an LLM judge; none configured") for name, group in LLM_ONLY)
        return judge_pb2.JudgeResponse(metrics=metrics)
