"""The judge's metric set, without gRPC: rule scores, three-round LLM
median, rule/LLM merge, group scores and the overall score.

Source: MarxSphere eval-32-metrics V41 (the MarxSphere design (docs/references.md), section 6): 31 scored
items in four groups plus overall = 0.40 A + 0.35 B + 0.25 C + 0.00 D; the
LLM judge runs ``_llmJudgeOnce`` three times and takes the median
(``runThreeRoundMedian``), and ``mergeScore(rule, llm)`` merges both tracks by
max. Weights, rounds and the merge policy are configurable here.

A metric whose rule part cannot be computed and whose LLM part is not
available is NOT_COMPUTED, never 0 or 1.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from domains.pack import CitationRules
from services.common.text import citation_numbers
from services.judge import core
from services.judge import text_rules as tr


class Group(str, Enum):
    """Metric groups of the reference."""

    RETRIEVAL = "A"
    ANSWER = "B"
    REASONING = "C"
    COST = "D"


class Method(str, Enum):
    """How a score was obtained."""

    RULE = "rule"
    LLM = "llm"
    MERGED = "merged"
    NOT_COMPUTED = "not_computed"


#: Group weights of the reference (000 section 6): overall = 0.40A + 0.35B + 0.25C + 0.00D.
DEFAULT_WEIGHTS: dict[Group, float] = {Group.RETRIEVAL: 0.40, Group.ANSWER: 0.35, Group.REASONING: 0.25, Group.COST: 0.0}
#: LLM rounds per judgement (reference: runThreeRoundMedian).
DEFAULT_ROUNDS = 3
#: Latency budgets (milliseconds) at which a stage's normalised latency score
#: is 1; slower stages score budget/duration (GraphMesh constants, from the
#: per-stage timeouts' order of magnitude on a 2-core machine).
DEFAULT_LATENCY_BUDGETS_MS: dict[str, float] = {
    "expand": 300.0, "retrieve": 1000.0, "fuse": 300.0, "total": 3000.0, "pg": 800.0, "graph": 800.0,
}
#: Token budget per answered question at which token efficiency is 1.
DEFAULT_TOKEN_BUDGET = 4000
#: Characters per token when the caller gives no token count (Chinese text;
#: an estimate, said in the metric's detail).
CHARS_PER_TOKEN = 1.5


@dataclass(slots=True)
class JudgeInputs:
    """One judged question.

    Attributes:
        question: the question.
        answer: the answer with [n] marks ("" for retrieval only).
        ranked_ids: retrieved ids, best first (deduplicated here).
        contexts: context texts in citation order.
        context_ids: id of each context (empty, or one per context).
        gold_ids: relevant ids (empty when unlabelled).
        reference_answer: labelled answer ("" when none).
        k: cut-off for the ranked metrics.
        timings_ms: stage name -> duration in milliseconds (gateway names:
            expand, retrieve.pg, retrieve.graph, rerank, fuse, generate, total).
        total_tokens: prompt + completion tokens; 0 = unknown.
        context_labels: label of each context (law and article), empty or
            one per context; the articles cited through [n] are read here.
        citation_rules: how answers name sources under the collections'
            domain pack (domains.citation_rules); None = the general rules,
            where reference agreement ("articles") is not computed.
    """

    question: str
    answer: str = ""
    ranked_ids: Sequence[str] = ()
    contexts: Sequence[str] = ()
    context_ids: Sequence[str] = ()
    gold_ids: Sequence[str] = ()
    reference_answer: str = ""
    k: int = 10
    timings_ms: Mapping[str, float] = field(default_factory=dict)
    total_tokens: int = 0
    context_labels: Sequence[str] = ()
    citation_rules: CitationRules | None = None


@dataclass(slots=True)
class Score:
    """One metric's outcome. ``value`` is None exactly when NOT_COMPUTED;
    ``group`` is None only for overall."""

    name: str
    group: Group | None
    method: Method
    value: float | None
    detail: str = ""
    rule_value: float | None = None
    llm_value: float | None = None
    llm_rounds: list[float] = field(default_factory=list)


@dataclass(slots=True)
class GroupResult:
    """Mean of a group's computed metrics (None when none was computed)."""

    group: Group
    value: float | None
    weight: float
    computed: int
    total: int


@dataclass(slots=True)
class Judgement:
    """Every metric, the group scores and overall."""

    scores: list[Score]
    groups: list[GroupResult]
    overall: Score

    def by_name(self) -> dict[str, Score]:
        """Scores keyed by metric name."""
        return {s.name: s for s in self.scores}


# The outcome of one LLM round: {metric name: score in [0, 1]} (metrics it
# could not score omitted), or the exception the round failed with.
LlmRoundResult = "Mapping[str, float] | BaseException"
RuleFn = Callable[[JudgeInputs], "float | None"]


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """A metric: its group, rule (None = LLM only), whether an LLM judges
    it, what its rule needs (said when it cannot be computed), and what the
    LLM judge is asked: ``llm_definition`` in the one-JSON-object mode,
    ``llm_question`` (a yes-or-no question; P(yes) is the score) in the
    yes-no mode (services.judge.llm)."""

    name: str
    group: Group
    rule: RuleFn | None
    llm: bool
    needs: str
    llm_definition: str = ""
    llm_question: str = ""


def _gold(x: JudgeInputs) -> set[str]:
    return {g for g in x.gold_ids if g}


def _ranked(x: JudgeInputs) -> list[str]:
    return core.dedupe(list(x.ranked_ids))


def _context_ranked(x: JudgeInputs) -> list[str]:
    """Context ids when given, else the top k of the ranking."""
    return core.dedupe(list(x.context_ids)) if x.context_ids else _ranked(x)[: x.k]


def _context_recall(x: JudgeInputs) -> float | None:
    gold = _gold(x)
    if gold:
        ids = _context_ranked(x)
        return len(gold.intersection(ids)) / len(gold) if ids else 0.0
    return tr.context_recall_text(x.reference_answer, x.contexts)


def _context_precision(x: JudgeInputs) -> float | None:
    gold = _gold(x)
    if not gold:
        return None
    ids = _context_ranked(x)
    return core.precision_at(ids, gold, len(ids)) if ids else 0.0


def _with_gold(fn: Callable[[list[str], set[str], int], float]) -> RuleFn:
    def rule(x: JudgeInputs) -> float | None:
        gold = _gold(x)
        return fn(_ranked(x), gold, x.k) if gold else None

    return rule


def cited_labels(x: JudgeInputs) -> list[str]:
    """Labels of the contexts the answer cites with [n]."""
    numbers = set(citation_numbers(x.answer))
    return [label for n, label in enumerate(x.context_labels, start=1) if n in numbers]


def _cross_doc(x: JudgeInputs) -> float | None:
    ids = [i for i in x.context_ids if i]
    return len(set(ids)) / len(ids) if ids else None


def _json_clean(x: JudgeInputs) -> float | None:
    return 1.0 - core.json_contamination(x.answer) if x.answer.strip() else None


def _citation_f1(x: JudgeInputs) -> float | None:
    if not x.answer.strip() or not x.context_ids:
        return None
    return core.citation_f1(x.answer, list(x.context_ids), _gold(x))


def _multi_hop(x: JudgeInputs) -> float | None:
    gold = _gold(x)
    if len(gold) < 2:
        return None
    ids = _context_ranked(x)
    return len(gold.intersection(ids)) / len(gold)


def _latency(*stages: str, budget_key: str) -> Callable[[JudgeInputs, Mapping[str, float]], float | None]:
    def rule(x: JudgeInputs, budgets: Mapping[str, float]) -> float | None:
        found = [x.timings_ms[s] for s in stages if s in x.timings_ms]
        if not found:
            return None
        duration = max(found) if budget_key == "retrieve" else sum(found)
        return 1.0 if duration <= 0 else min(1.0, budgets[budget_key] / duration)

    return rule


_A, _B, _C = Group.RETRIEVAL, Group.ANSWER, Group.REASONING
_NEEDS_GOLD = "needs gold ids"
_NEEDS_ANSWER = "needs an answer"

#: The 24 metrics of groups A-C (group D is built from settings in ``judge``).
METRICS: list[MetricSpec] = [
    MetricSpec("context_recall", _A, _context_recall, False, "needs gold ids, or a reference answer and contexts"),
    MetricSpec("context_precision", _A, _context_precision, False, _NEEDS_GOLD),
    MetricSpec("context_relevancy", _A, lambda x: tr.context_relevancy(x.question, x.contexts), True, "needs contexts",
               "资料与问题的相关程度（1=每段资料都与问题直接相关）",
               "上面的资料与问题直接相关吗？"),
    MetricSpec("entity_utilisation", _A, lambda x: tr.entity_utilisation(x.question, x.answer, x.contexts), False,
               "needs an answer and question keywords found in the contexts"),
    MetricSpec("mrr@k", _A, _with_gold(core.mrr_at), False, _NEEDS_GOLD),
    MetricSpec("ndcg@k", _A, _with_gold(core.ndcg_at), False, _NEEDS_GOLD),
    MetricSpec("diversity", _A, lambda x: tr.diversity(x.contexts), False, "needs two or more contexts"),
    MetricSpec("cross_doc_coverage", _A, _cross_doc, False, "needs context_ids"),
    MetricSpec("json_contamination", _A, _json_clean, False, _NEEDS_ANSWER),
    MetricSpec("hit@k", _A, _with_gold(core.hit_at), False, _NEEDS_GOLD),
    MetricSpec("recall@k", _A, _with_gold(core.recall_at), False, _NEEDS_GOLD),
    MetricSpec("source_grounded", _A, lambda x: tr.source_grounded(x.answer, len(x.contexts)), False, _NEEDS_ANSWER),
    MetricSpec("correctness", _B, lambda x: tr.correctness(x.answer, x.reference_answer, cited_labels(x), x.citation_rules), True,
               "needs an answer and a reference answer", "回答是否正确（有参考答案时与之对照）",
               "对照参考答案（没有参考答案时对照资料），回答的结论正确吗？"),
    MetricSpec("completeness", _B, lambda x: tr.completeness(x.answer, x.reference_answer, cited_labels(x), x.citation_rules), True,
               "needs an answer and a reference answer", "回答是否完整覆盖问题的各个要点",
               "回答覆盖了问题问到的所有要点吗？"),
    MetricSpec("relevancy", _B, lambda x: tr.answer_relevancy(x.question, x.answer), True, _NEEDS_ANSWER,
               "回答是否切题", "回答直接回答了问题本身吗（而不是讲了相关但不同的事）？"),
    MetricSpec("faithfulness", _B, lambda x: tr.faithfulness(x.answer, x.contexts), True, "needs an answer and contexts",
               "回答中的陈述是否都能在资料中找到依据", "回答里的每个陈述都能在上面的资料中找到依据吗？"),
    MetricSpec("hallucination", _B, lambda x: tr.hallucination(x.answer, x.contexts, x.question), True,
               "needs an answer and contexts", "编造程度（0=没有任何资料之外的编造内容，1=全是编造；本项越低越好）",
               "回答完全没有资料之外编造的内容（名称、编号、数字、条件）吗？"),
    MetricSpec("factual_consistency", _B, lambda x: tr.factual_consistency(x.answer, x.reference_answer, x.contexts), True,
               "needs an answer stating numbers, and a reference answer or contexts", "回答中的事实（数字、条件、主体）与资料或参考答案一致",
               "回答中的数字、条件和主体都与资料或参考答案一致吗？"),
    MetricSpec("citation_f1", _B, _citation_f1, False, "needs an answer citing [n], context_ids and gold ids"),
    MetricSpec("conciseness", _B, lambda x: tr.conciseness(x.answer, x.reference_answer), False, _NEEDS_ANSWER),
    MetricSpec("readability", _B, lambda x: tr.readability(x.answer), True, _NEEDS_ANSWER, "行文是否清晰易读",
               "回答行文清晰易读吗？"),
    MetricSpec("cot_quality", _C, None, True, "LLM only", "推理链条是否清楚、每一步是否有依据",
               "回答的推理链条清楚、每一步都有依据吗？"),
    MetricSpec("reasoning_depth", _C, None, True, "LLM only", "推理深度（是否把条件、例外与结论联系起来）",
               "回答把条件、例外与结论联系起来了吗？"),
    MetricSpec("multi_hop_accuracy", _C, _multi_hop, True, "needs two or more gold ids",
               "需要多步（多条资料）推理时，是否把各步都答对", "问题需要多条资料时，回答把每一步都答对了吗？"),
]

#: Group D: (name, stages, budget key). Stage 2/3/4 of the reference are
#: expansion, retrieval and fusion (with rerank) here.
COST_METRICS = [
    ("latency_norm.expand", ("expand",), "expand"),
    ("latency_norm.retrieve", ("retrieve.pg", "retrieve.graph"), "retrieve"),
    ("latency_norm.fuse", ("rerank", "fuse"), "fuse"),
    ("end_to_end_norm", ("total", "generate"), "total"),
    ("pg_query_norm", ("retrieve.pg",), "pg"),
    ("neo4j_query_norm", ("retrieve.graph",), "graph"),
]

#: Metrics an LLM judges only when there is an answer to judge.
_ANSWER_FREE_LLM = {"context_relevancy"}


def collect_rounds(results: Sequence[Mapping[str, float] | BaseException], names: Sequence[str]) -> tuple[dict[str, list[float]], list[str]]:
    """Scores of ``names`` from the results of the LLM rounds.

    Returns:
        ({metric: [score per successful round, clipped to [0, 1]]},
         [error text of each failed round]). Non-finite and non-numeric
        scores are dropped.
    """
    per_metric: dict[str, list[float]] = {n: [] for n in names}
    errors: list[str] = []
    for result in results:
        if isinstance(result, BaseException):  # one failed round leaves the others
            errors.append(f"{type(result).__name__}: {result}")
            continue
        for name in names:
            value = result.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                per_metric[name].append(min(1.0, max(0.0, float(value))))
    return per_metric, errors


def llm_metric_names(inputs: JudgeInputs) -> list[str]:
    """Metrics an LLM round should score for ``inputs`` (answer metrics only
    when there is an answer)."""
    return [m.name for m in METRICS if m.llm and (inputs.answer.strip() or m.name in _ANSWER_FREE_LLM)]


def merge(rule: float | None, llm: float | None, policy: str = "max") -> tuple[float | None, Method]:
    """Merges the rule and LLM scores: ``max`` (the reference's mergeScore)
    or ``mean``. Returns (value, method); (None, NOT_COMPUTED) when neither.

    Raises:
        ValueError: for an unknown policy.
    """
    if policy not in ("max", "mean"):
        raise ValueError(f"unknown merge policy {policy!r}; expected 'max' or 'mean'")
    if rule is None and llm is None:
        return None, Method.NOT_COMPUTED
    if llm is None:
        return rule, Method.RULE
    if rule is None:
        return llm, Method.LLM
    return (max(rule, llm) if policy == "max" else (rule + llm) / 2), Method.MERGED


def _cost_scores(x: JudgeInputs, budgets: Mapping[str, float], token_budget: int) -> list[Score]:
    out = []
    for name, stages, key in COST_METRICS:
        value = _latency(*stages, budget_key=key)(x, budgets)
        if value is None:
            out.append(Score(name, Group.COST, Method.NOT_COMPUTED, None, f"needs timings of {'/'.join(stages)}"))
        else:
            out.append(Score(name, Group.COST, Method.RULE, value, f"min(1, {budgets[key]:.0f} ms / duration)", rule_value=value))
    if x.total_tokens > 0:
        tokens, how = float(x.total_tokens), "given"
    elif x.answer.strip() or x.contexts:
        tokens = (sum(len(c) for c in x.contexts) + len(x.question) + len(x.answer)) / CHARS_PER_TOKEN
        how = f"estimated at {CHARS_PER_TOKEN} characters per token"
    else:
        tokens, how = 0.0, ""
    if tokens:
        value = min(1.0, token_budget / tokens)
        out.append(Score("token_efficiency", Group.COST, Method.RULE, value,
                         f"min(1, {token_budget} / {tokens:.0f} tokens, {how})", rule_value=value))
    else:
        out.append(Score("token_efficiency", Group.COST, Method.NOT_COMPUTED, None, "needs an answer, contexts or total_tokens"))
    return out


def judge(
    inputs: JudgeInputs,
    llm_results: Sequence[Mapping[str, float] | BaseException] | None = None,
    *,
    policy: str = "max",
    weights: Mapping[Group, float] | None = None,
    latency_budgets_ms: Mapping[str, float] | None = None,
    token_budget: int = DEFAULT_TOKEN_BUDGET,
    llm_kind: str = "rounds",
) -> Judgement:
    """Scores ``inputs`` with every metric of the reference set.

    Args:
        llm_results: the result of each LLM judgement round run over
            ``llm_metric_names(inputs)`` (a score mapping, or the exception
            the round failed with); None when no LLM is configured
            (LLM-only metrics are then NOT_COMPUTED). The median of the
            successful rounds is used.
        policy: "max" or "mean" merge of the rule and LLM parts.
        weights: group weights for overall (default DEFAULT_WEIGHTS).
        llm_kind: how the LLM scores were made, for the details: "rounds"
            (sampled rounds, their median) or "yes_probability" (one
            P(yes) per metric, services.judge.llm.judge_yes_no).
    Returns:
        A Judgement: 24 metrics of A-C plus 7 of D, group scores, overall.
    Raises:
        ValueError: unknown policy.
    """
    merge(None, None, policy)  # validates the policy up front
    weights = dict(DEFAULT_WEIGHTS if weights is None else weights)
    budgets = {**DEFAULT_LATENCY_BUDGETS_MS, **(latency_budgets_ms or {})}

    llm_names = llm_metric_names(inputs)
    llm_scores: dict[str, list[float]] = {}
    llm_note = "needs an LLM judge; none configured"
    if llm_results is not None and llm_names:
        llm_scores, errors = collect_rounds(llm_results, llm_names)
        if errors:
            llm_note = f"LLM judge failed in {len(errors)} of {len(llm_results)} rounds: {errors[0]}"
        else:
            llm_note = "the LLM judge gave no score for it"

    scores: list[Score] = []
    for spec in METRICS:
        rule_value = spec.rule(inputs) if spec.rule is not None else None
        rounds_done = llm_scores.get(spec.name, [])
        llm_value = statistics.median(rounds_done) if rounds_done else None
        value, method = merge(rule_value, llm_value, policy)
        if method is Method.NOT_COMPUTED:
            reasons = [] if spec.rule is None else [f"rule {spec.needs}"]
            if spec.llm:
                reasons.append(llm_note if (inputs.answer.strip() or spec.name in _ANSWER_FREE_LLM) else "LLM judging needs an answer")
            detail = "; ".join(reasons)
        elif method is Method.MERGED:
            detail = f"rule={rule_value:.4f} llm={llm_value:.4f} ({_llm_how(len(rounds_done), llm_kind)}) merged by {policy}"
        elif method is Method.LLM:
            detail = _llm_how(len(rounds_done), llm_kind) + (f"; rule {spec.needs}" if spec.rule else "")
        else:
            detail = "rule" + (f"; LLM part: {llm_note}" if spec.llm else "")
        name = spec.name.replace("@k", f"@{inputs.k}")
        scores.append(Score(name, spec.group, method, value, detail, rule_value, llm_value, list(rounds_done)))
    scores.extend(_cost_scores(inputs, budgets, token_budget))
    groups = group_scores(scores, weights)
    return Judgement(scores, groups, overall(groups))


def _llm_how(rounds: int, kind: str) -> str:
    return "the LLM judge's yes-probability" if kind == "yes_probability" else f"median of {rounds} LLM rounds"


def group_scores(scores: Sequence[Score], weights: Mapping[Group, float]) -> list[GroupResult]:
    """Mean of each group's computed metrics, with the group's weight."""
    out = []
    for group in Group:
        members = [s for s in scores if s.group is group]
        values = [s.value for s in members if s.value is not None]
        out.append(GroupResult(group, statistics.fmean(values) if values else None, float(weights.get(group, 0.0)), len(values), len(members)))
    return out


def overall(groups: Sequence[GroupResult]) -> Score:
    """Weighted sum of group scores. Groups with weight > 0 but nothing
    computed are left out and the remaining weights renormalised (the detail
    says which); NOT_COMPUTED when no weighted group has a value."""
    used = [g for g in groups if g.weight > 0 and g.value is not None]
    missing = [g.group.value for g in groups if g.weight > 0 and g.value is None]
    if not used:
        return Score("overall", None, Method.NOT_COMPUTED, None, "no weighted group has a computed metric")
    total = sum(g.weight for g in used)
    value = sum(g.weight * g.value for g in used) / total
    terms = " + ".join(f"{g.weight:.2f}x{g.group.value}" for g in used)
    detail = f"({terms}) / {total:.2f}"
    if missing:
        detail += f"; groups without a computed metric left out: {', '.join(missing)}"
    return Score("overall", None, Method.RULE, value, detail, rule_value=value)
