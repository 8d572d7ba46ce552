"""The domain-pack interface: what general retrieval code asks of a domain.

General code (chunking, retrieval channels, fusion, the document graph's
storage and walks) knows no domain. What is true only of one kind of corpus
is a pack: data and small pure functions, registered under a name, in the
way bm25s takes its stopwords and splitter as data. A collection names its
pack when it is created; documents of that collection are read by the
pack's fact extractor, and questions asked of it are classified by the
pack's classifier and answered with the pack's retrieval recipes. Packs
import no service.

A pack provides (every part optional; ``domains.generic`` provides none of
the domain parts):

- ``classify(query)``: (question type, confidence) for the forms of
  question this domain has, tried before the general cue rules; None when
  the query has none of them.
- ``question_types``: the question-type names ``classify`` may return.
- ``document_facts(document)``: what the document graph learns of one
  stored document (for law_zh: its article key, cross-references,
  amendments, defined terms, offences, status); None = nothing.
- ``channels``: the graph lookup channels the pack's facts feed
  (services.common.names), run only for collections of this pack.
- ``profiles``: retrieval profiles per question type (the fields of
  services.gateway.config.RetrievalProfile), read from the pack's recipe
  file, with ``recipe_source`` naming the command and figures that fitted
  them.
- ``channel_weights``: fusion weights of the pack's own channels.
- ``citations``: how answers over the pack's corpora name their sources
  (``CitationRules``), read by the citation verifier and the judge.
- ``lookup_index(articles, terms, offences, word_tokens, version)``: the
  in-memory lookup tables the pack's channels read, built from what the
  graph retriever stored (``domains.facts`` entries); the index answers
  ``hits(channel, query, keywords, limit) -> [IndexHit]`` and has ``terms``
  (for PageRank seeds), ``size`` and ``version``. An index that can match
  by meaning also has ``dense_documents`` (ids whose first chunk it wants
  embedded passage-side), ``attach_vectors(matrix)``, ``vectors_attached``
  and ``probes(channel, query) -> [text]`` (texts to embed query-side), and
  takes their vectors as ``hits(..., probe_vectors=)``; the graph retriever
  gets both from the expander (law_zh: offence names against penal
  articles).
- ``answer_prompt``: the grounded answer's system message and instruction
  (``AnswerPrompt``; law_zh asks for the law and article of each claim).
- ``title_aliases(title)``: other names a document title is asked by
  (law_zh: a law without its 中华人民共和国 prefix), for heading lookups
  and the user dictionary.
- ``query_adapter``: a learned map of one embedding model's query vectors
  for some question types (``QueryAdapter``; law_zh: lay consultations, whose
  words no statute uses), searched as channel pg.adapted beside the
  question's own vector.
- ``rewrite_query(query)``: the query in its corpus's own notation, before
  its keywords are cut and it is embedded (law_zh: 第26条 -> 第二十六条, as
  statutes number their articles).
- ``source_caveat(metadata)``: what a reader must know of a cited source
  before relying on it, as a short word from its own metadata (law_zh: the
  status of a repealed or historical version, "已废止"); "" for none. Answers
  carry it on the citation and in a note after the answer.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def _nothing(query: str) -> None:
    """The default of a pack part it does not provide."""
    return None


def _no_aliases(title: str) -> tuple[str, ...]:
    """The default of ``title_aliases``: a title has no other name."""
    return ()


def _as_asked(query: str) -> str:
    """The default of ``rewrite_query``: the query as asked."""
    return query


def _no_caveat(metadata: Mapping[str, str]) -> str:
    """The default of ``source_caveat``: a source needs no caveat."""
    return ""


@dataclass(frozen=True)
class CitationRules:
    """How answers over a pack's corpora name their sources.

    Attributes:
        source_names: spans that name a source ("《刑法》", "第二百六十六条"):
            taken out of an answer sentence before its claim words are
            checked, since naming a source is checked through its citation
            and numbers, not counted as content.
        source_name_word: a whole keyword that is a source's name ("刑法"),
            likewise not a claim word.
        cited_units: text -> {(document group, unit number)} it names
            ("《中华人民共和国刑法》第二百六十六条" -> {("刑法", 266)}), for the
            judge's reference agreement and the verifier; the group is ""
            when unnamed.
        named_groups: text -> the document groups it names by title
            ("依照《日本刑法》" -> {"日本刑法"}); the verifier removes a
            sentence naming a group or unit that no source holds.
    """

    source_names: re.Pattern
    source_name_word: re.Pattern
    cited_units: Callable[[str], set[tuple[str, int]]]
    named_groups: Callable[[str], set[str]] = lambda text: set()


@dataclass(frozen=True)
class AnswerExample:
    """One worked example shown to the LLM before the real question (a
    few-shot turn): packed sources in the gateway's "[n] label\ntext"
    form, a question and the answer wanted, each sentence ending with the
    mark of the source that states it. Taken from the pack's own corpus,
    never from an evaluation question.
    """

    context: str
    question: str
    answer: str


@dataclass(frozen=True)
class AnswerPrompt:
    """The grounded answer's prompt for a pack's corpora, in Chinese and in
    English (the question's language picks one).

    Attributes:
        system_zh / system_en: the system message.
        instruction_zh / instruction_en: the line after the question (small
            local models otherwise answer with a bare "[1]").
        example_zh / example_en: a worked example sent as an earlier
            user/assistant turn (None: no example).
    """

    system_zh: str
    instruction_zh: str
    system_en: str
    instruction_en: str
    example_zh: AnswerExample | None = None
    example_en: AnswerExample | None = None


@dataclass(frozen=True)
class RewritePrompts:
    """The expander's LLM rewrite instructions for a pack's corpora; each
    user template holds ``{query}``.

    Attributes:
        system: the system message.
        expanded_query: asks for one fuller search query.
        hyde: asks for a short passage written as the corpus would answer.
    """

    system: str
    expanded_query: str
    hyde: str


def embedding_family(model: str) -> str:
    """``model`` without a query-window suffix ("e5onnx-t256" -> "e5onnx"): the same weights, the same vectors, so
    a pack's abstention fits and query adapter, which are keyed by embedding model, hold for both."""
    return re.sub(r"-t\d+$", "", model or "")


@dataclass(frozen=True, eq=False)
class QueryAdapter:
    """A low-rank residual map of query vectors, fitted on a pack's questions
    so that a question lands nearer the stored passages that answer it:

        q' = (q + (q · down) · upᵀ) / ‖q + (q · down) · upᵀ‖

    Passages and the corpus are untouched (nothing is re-embedded); the
    gateway searches q' as one more dense channel (pg.adapted).

    Attributes:
        embedding_model: the embedder whose vectors it was fitted on
            ("e5onnx"); another model's vectors are never mapped.
        question_types: the question types it applies to.
        down / up: float32 arrays (dimension, rank).
        source: the command and figures that fitted it.
    """

    embedding_model: str
    question_types: tuple[str, ...]
    down: Any
    up: Any
    source: str = ""

    def applies(self, question_type: str, model: str) -> bool:
        """Whether a question of ``question_type`` embedded by ``model`` (a "-tN" window suffix ignored) is mapped."""
        return question_type in self.question_types and embedding_family(model) == self.embedding_model

    def adapt(self, vector) -> list[float]:
        """``vector`` (dimension floats) mapped and unit-normalised; [] for a vector of another dimension."""
        import numpy as np

        q = np.asarray(vector, dtype=np.float32)
        if q.shape != (self.down.shape[0],):
            return []
        out = q + (q @ self.down) @ self.up.T
        norm = float(np.linalg.norm(out))
        return (out / norm).tolist() if norm > 0 else []


def load_query_adapter(path: Path, source: str = "") -> QueryAdapter:
    """The adapter saved at ``path`` (numpy .npz: arrays "down" and "up" of one
    shape (dimension, rank), and "meta", a JSON object with "embedding_model"
    and "question_types").

    Raises:
        ValueError: the file lacks one of them, or the shapes differ.
    """
    import numpy as np

    with np.load(path) as saved:
        missing = {"down", "up", "meta"} - set(saved.files)
        if missing:
            raise ValueError(f"{path}: a query adapter needs arrays {sorted(missing)}")
        down, up, meta = saved["down"].astype(np.float32), saved["up"].astype(np.float32), json.loads(str(saved["meta"]))
    if down.ndim != 2 or down.shape != up.shape:
        raise ValueError(f"{path}: down {down.shape} and up {up.shape} must be one (dimension, rank) shape")
    return QueryAdapter(str(meta["embedding_model"]), tuple(meta["question_types"]), down, up, source or meta.get("command", ""))


@dataclass(frozen=True)
class DomainPack:
    """One domain pack (module doc).

    Attributes:
        name: registry name, e.g. "law_zh" (lower case, [a-z0-9_]).
        description: one line for people and the API.
        classify: query -> (question type, confidence in [0, 1]) or None.
        question_types: names ``classify`` may return.
        document_facts: DocumentRecord -> facts for the document graph, or
            None when the pack extracts none.
        channels: lookup channels the pack's facts feed.
        profiles: question type -> RetrievalProfile fields (a dict).
        channel_weights: fusion weight of each of the pack's channels.
        chunk_tokens / chunk_overlap: chunk size and overlap (tokens) of the
            pack's documents; None = the gateway's setting.
        out_of_scope: query -> why the pack's corpora cannot answer it (a
            reason string), or None; a "no" makes Answer abstain.
        abstention_fits: the answerability rule fitted on the pack's
            corpora, per embedding model: {model: {"weights": [5 floats in
            services.gateway.answer.abstention.SIGNALS order], "bias": float,
            "note": str}}, from the recipe's "abstention"; empty = Answer
            does not abstain on that rule's say for the pack's collections.
        recipe_source: the command and figures that fitted the recipes.
        citations: how answers name the pack's sources, or None.
        lookup_index: builds the lookup tables of the pack's channels, or
            None when it has none (module doc).
        answer_prompt: the grounded answer's prompt, or None for the
            gateway's general one.
        rewrite_prompts: the expander's rewrite and HyDE instructions, or
            None for its general ones.
        title_aliases: title -> other names it is asked by.
        query_adapter: the learned map of query vectors searched as
            pg.adapted (``QueryAdapter``), or None.
        source_caveat: document metadata -> a short caveat word ("" none).
        rewrite_query: query -> the query in the corpus's own notation.
    """

    name: str
    description: str
    classify: Callable[[str], tuple[str, float] | None] = _nothing
    question_types: tuple[str, ...] = ()
    document_facts: Callable[[Any], Any] | None = None
    channels: tuple[str, ...] = ()
    profiles: Mapping[str, dict] = field(default_factory=dict)
    channel_weights: Mapping[str, float] = field(default_factory=dict)
    chunk_tokens: int | None = None
    chunk_overlap: int | None = None
    abstention_fits: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    out_of_scope: Callable[[str], str | None] = _nothing
    recipe_source: str = ""
    citations: CitationRules | None = None
    lookup_index: Callable[..., Any] | None = None
    answer_prompt: AnswerPrompt | None = None
    rewrite_prompts: RewritePrompts | None = None
    title_aliases: Callable[[str], tuple[str, ...]] = _no_aliases
    query_adapter: QueryAdapter | None = None
    source_caveat: Callable[[Mapping[str, str]], str] = _no_caveat
    rewrite_query: Callable[[str], str] = _as_asked

    @property
    def abstention_fitted(self) -> bool:
        """Whether the pack carries a fitted answerability rule."""
        return bool(self.abstention_fits)


def load_recipe(path: Path) -> dict:
    """A pack's recipe file: {"source": str, "profiles": {type: {...}},
    "channel_weights": {channel: weight}, optionally "chunk_tokens",
    "chunk_overlap" and "abstention": {"source": str, "fits": {model: fit}}}.

    Raises:
        ValueError: the file is not such an object.
    """
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("profiles", {}), dict):
        raise ValueError(f"{path}: a recipe is an object with \"profiles\"")
    return data
