"""Learning to rank over one query's fused candidate list (issue 23).

Two parts, both without gRPC:

- ``features``: the feature matrix of a candidate list (pure Python): each
  channel's raw score, its score relative to the channel's best in this
  list, and its rank (sentinels when the channel did not find the
  candidate); how many channels found it; document-level aggregates (how
  many candidates share its title, i.e. its law, and their best fused score
  and rank); coverage of the query's keywords in its text and headings; its
  length; its status (in force or not) when the metadata has one; and the
  fused score and rank of today's pipeline (the fuser's order).
- ``LtrRanker``: a LightGBM LambdaMART model (objective=lambdarank) loaded
  from its text file, scoring one list (``score``) or re-ordering it
  (``rerank``). The model file's feature names say which channels it was
  trained with; ``FeatureSpec.from_names`` rebuilds the layout from them, so
  a model keeps working when the channel registry grows.

The training side (cross-validation, the model card) is
services/cli/ltr_training.py; the study is bench/ltr_study.py.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from services.common import names

#: Score feature of a channel that did not find the candidate. Every channel
#: score in this pipeline is >= 0 (cosine of e5 vectors, BM25, hit counts,
#: graph weights), so -1 sorts below all of them for the trees.
MISSING_SCORE = -1.0
#: Rank feature of a channel that did not find the candidate (ranks are 1-based
#: and channels return at most a few hundred).
MISSING_RANK = 1000.0
#: Status feature when the metadata carries no "status".
MISSING_STATUS = -1.0
#: The metadata value of an article in force (law_zh corpus).
IN_FORCE = "现行有效"

#: Channels a default FeatureSpec covers: the document channels the shipped
#: model (models/ltr/law_zh.txt) was trained with and the cross-encoder's
#: "rerank". pg.translated and pg.centred, added later, are left out (neither
#: runs in a law collection: one writing system), and so is pg.adapted (added
#: after the model was trained): a new feature column would not match the model file.
DEFAULT_CHANNELS: tuple[str, ...] = (*(c for c in names.DOCUMENT_CHANNELS
                                       if c not in (names.PG_TRANSLATED, names.PG_CENTRED, names.PG_ADAPTED)),
                                     names.RERANK)

#: Features that do not depend on a channel, in matrix order.
BASE_FEATURES: tuple[str, ...] = (
    "fused_score", "fused_rel", "fused_rank",
    "n_channels",
    "doc_count", "doc_share", "doc_best_fused_rel", "doc_best_rank", "doc_position",
    "kw_cover", "kw_cover_chars", "kw_heading_cover", "kw_hits",
    "text_chars", "log_text_chars",
    "status_in_force",
    "list_size", "query_keywords",
)
_PREFIXES = ("score.", "rel.", "rank.")


@dataclass(frozen=True, slots=True)
class LtrCandidate:
    """One candidate of a query's list, as the features see it.

    Attributes:
        id: candidate (chunk) id.
        document_id: its document; aggregated ranks count distinct documents.
        title: document title (the law's name for law articles); candidates
            with the same title form one document group.
        text: chunk text (characters).
        heading_path: headings above the chunk, outermost first.
        channels: channel name -> (raw score, 1-based rank in that channel).
        fused_score: the fuser's score (0 when not fused).
        fused_rank: 1-based position in the fused order (0 = unknown: the
            list position is used).
        status: the document's "status" metadata, "" when none.
    """

    id: str
    document_id: str = ""
    title: str = ""
    text: str = ""
    heading_path: tuple[str, ...] = ()
    channels: Mapping[str, tuple[float, int]] = field(default_factory=dict)
    fused_score: float = 0.0
    fused_rank: int = 0
    status: str = ""

    @classmethod
    def from_proto(cls, candidate) -> "LtrCandidate":
        """From a graphmesh.common.v1.Candidate (or anything with its fields:
        id, document_id, title, heading_path, text, channel_scores, fused_score,
        metadata); the fused rank is left to the list position."""
        channels: dict[str, tuple[float, int]] = {}
        for s in candidate.channel_scores:
            channels.setdefault(s.channel, (float(s.score), int(s.rank)))
        return cls(id=candidate.id, document_id=candidate.document_id, title=candidate.title, text=candidate.text,
                   heading_path=tuple(candidate.heading_path), channels=channels,
                   fused_score=float(candidate.fused_score), status=candidate.metadata.get("status", ""))

    @classmethod
    def from_record(cls, record: Mapping) -> "LtrCandidate":
        """From a dump record of bench/ltr_study.py: {"id", "document_id",
        "title", "heading_path", "text", "metadata", "fused_score",
        "fused_rank", "channels": [[name, score, rank], ...]}."""
        channels: dict[str, tuple[float, int]] = {}
        for name, score, rank in record.get("channels", ()):
            channels.setdefault(name, (float(score), int(rank)))
        return cls(id=str(record["id"]), document_id=str(record.get("document_id", "")), title=record.get("title", ""),
                   text=record.get("text", ""), heading_path=tuple(record.get("heading_path", ())), channels=channels,
                   fused_score=float(record.get("fused_score", 0.0)), fused_rank=int(record.get("fused_rank", 0)),
                   status=(record.get("metadata") or {}).get("status", ""))


@dataclass(frozen=True, slots=True)
class FeatureSpec:
    """The feature layout: BASE_FEATURES, then score./rel./rank. of each
    channel in ``channels``.

    Attributes:
        channels: channels with their own features, in matrix order.
    """

    channels: tuple[str, ...] = DEFAULT_CHANNELS

    @property
    def names(self) -> list[str]:
        """Feature names in column order (len = 18 + 3 x channels)."""
        return [*BASE_FEATURES, *(f"{p}{c}" for c in self.channels for p in _PREFIXES)]

    @classmethod
    def from_names(cls, feature_names: Sequence[str]) -> "FeatureSpec":
        """The spec whose ``names`` are ``feature_names`` (a model file's).

        Raises:
            ValueError: the names are not a layout this module writes (a
                model trained by another feature version).
        """
        n = len(BASE_FEATURES)
        if list(feature_names[:n]) != list(BASE_FEATURES) or (len(feature_names) - n) % 3:
            raise ValueError("feature names do not start with this module's BASE_FEATURES")
        channels = tuple(name.removeprefix("score.") for name in feature_names[n::3])
        spec = cls(channels)
        if spec.names != list(feature_names):
            raise ValueError("feature names are not score./rel./rank. triples per channel")
        return spec


def keyword_terms(keywords: Sequence[str]) -> list[str]:
    """The distinct non-empty keywords, longest first, with those contained
    in a longer kept one dropped (合作 inside 合作社), so that coverage does
    not count one phrase twice."""
    kept: list[str] = []
    for word in sorted({k.strip() for k in keywords if k and k.strip()}, key=lambda w: (-len(w), w)):
        if not any(word in longer for longer in kept):
            kept.append(word)
    return kept


def features(candidates: Sequence[LtrCandidate], keywords: Sequence[str] = (),
             spec: FeatureSpec = FeatureSpec()) -> list[list[float]]:
    """The feature matrix of one query's candidate list.

    Args:
        candidates: the list in today's fused order (best first); one query.
        keywords: the query's keywords (the expander's, QueryInfo.keywords);
            coverage features are 0 without them.
        spec: the layout (default: every document channel and "rerank").

    Returns:
        len(candidates) rows of len(spec.names) floats, rows in input order.
        Missing channel: score/rel MISSING_SCORE, rank MISSING_RANK. Text
        lengths in characters. An empty list gives [].
    """
    if not candidates:
        return []
    n = len(candidates)
    best: dict[str, float] = {}
    for cand in candidates:
        for channel, (score, _) in cand.channels.items():
            best[channel] = max(best.get(channel, 0.0), score)
    fused_max = max((c.fused_score for c in candidates), default=0.0)
    fused_rank = [c.fused_rank or i for i, c in enumerate(candidates, start=1)]

    groups: dict[str, list[int]] = {}
    for i, cand in enumerate(candidates):
        groups.setdefault(cand.title or cand.document_id or cand.id, []).append(i)
    group_of: list[list[int]] = [[] for _ in range(n)]
    for members in groups.values():
        for i in members:
            group_of[i] = members

    terms = keyword_terms(keywords)
    term_chars = sum(len(t) for t in terms)
    rows: list[list[float]] = []
    for i, cand in enumerate(candidates):
        members = group_of[i]
        best_member_fused = max(candidates[j].fused_score for j in members)
        # How many of the same document's candidates rank above this one (0 = its best).
        position = sum(1 for j in members if fused_rank[j] < fused_rank[i])
        body = cand.text
        heading = " ".join(cand.heading_path) or cand.title
        hits = [t for t in terms if t in body]
        heading_hits = sum(1 for t in terms if t in heading)
        status = MISSING_STATUS if not cand.status else float(cand.status == IN_FORCE)
        row = [
            cand.fused_score, _rel(cand.fused_score, fused_max), float(fused_rank[i]),
            float(sum(1 for c in cand.channels if c in spec.channels)),
            float(len(members)), len(members) / n, _rel(best_member_fused, fused_max),
            float(min(fused_rank[j] for j in members)), float(position),
            len(hits) / len(terms) if terms else 0.0,
            sum(len(t) for t in hits) / term_chars if term_chars else 0.0,
            heading_hits / len(terms) if terms else 0.0,
            float(len(hits)),
            float(len(body)), math.log1p(len(body)),
            status,
            float(n), float(len(terms)),
        ]
        for channel in spec.channels:
            found = cand.channels.get(channel)
            if found is None:
                row += (MISSING_SCORE, MISSING_SCORE, MISSING_RANK)
            else:
                score, rank = found
                row += (score, _rel(score, best.get(channel, 0.0)), float(rank))
        rows.append(row)
    return rows


def _rel(value: float, top: float) -> float:
    """``value`` over the list's best (1.0 for the best; 0 when the best is 0)."""
    return value / top if top > 0 else 0.0


class LtrRanker:
    """A LambdaMART model over ``features``, loaded once from a LightGBM text
    model file (``lightgbm.Booster.save_model``).

    Args:
        model_file: path of the model (e.g. models/ltr/law_zh.txt).
        num_threads: LightGBM prediction threads (1: one list of ~100 rows
            is too small to split; threads would only add overhead).

    Raises:
        FileNotFoundError: ``model_file`` does not exist.
        ValueError: the model's feature names are not a FeatureSpec layout.
        ModuleNotFoundError: lightgbm is not installed.
    """

    def __init__(self, model_file: str | Path, num_threads: int = 1) -> None:
        import lightgbm

        path = Path(model_file)
        if not path.is_file():
            raise FileNotFoundError(f"LTR model file not found: {path}")
        self.model_file = path
        self._booster = lightgbm.Booster(model_file=str(path))
        self.spec = FeatureSpec.from_names(self._booster.feature_name())
        self._threads = num_threads

    @property
    def name(self) -> str:
        """The model file's stem (e.g. "law_zh")."""
        return self.model_file.stem

    def score(self, candidates: Sequence[LtrCandidate], keywords: Sequence[str] = ()) -> list[float]:
        """One LambdaMART score per candidate, in input order (unbounded
        reals: only their order means anything); [] for an empty list."""
        if not candidates:
            return []
        import numpy as np

        matrix = np.asarray(features(candidates, keywords, self.spec), dtype=np.float64)
        return [float(s) for s in self._booster.predict(matrix, num_threads=self._threads)]

    def rerank(self, candidates: Sequence[LtrCandidate], keywords: Sequence[str] = ()) -> list[tuple[LtrCandidate, float]]:
        """The candidates best first by model score, with their scores; ties
        keep today's fused order (a stable sort)."""
        scores = self.score(candidates, keywords)
        order = sorted(range(len(candidates)), key=lambda i: -scores[i])
        return [(candidates[i], scores[i]) for i in order]


def to_unit(scores: Sequence[float]) -> list[float]:
    """Scores mapped into [0, 1] by a logistic (order kept), for callers that
    need RerankResponse's [0, 1] range."""
    return [1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, s)))) for s in scores]


#: The model shipped for law_zh collections (models/ltr/README.md).
DEFAULT_MODEL_FILE = Path(__file__).resolve().parents[2] / "models" / "ltr" / "law_zh.txt"


class LtrScorer:
    """The reranker service's "ltr" scorer: list-wise, so the servicer calls
    ``score_list`` with the request's candidates instead of batching pairs
    (one list of 100 candidates costs about 1-2 ms of one core; see
    bench/ltr_latency.py). The model loads lazily, once.

    Args:
        model_file: LightGBM text model (default: models/ltr/law_zh.txt).
    """

    name = "ltr"
    padded = False
    listwise = True

    def __init__(self, model_file: str | Path = DEFAULT_MODEL_FILE) -> None:
        self.model_file = Path(model_file)
        self._ranker: LtrRanker | None = None

    @property
    def model(self) -> str:
        return str(self.model_file)

    @property
    def device(self) -> str:
        return "cpu"

    def load(self) -> LtrRanker:
        """Loads the model (once) and returns it.

        Raises:
            ScorerUnavailable: ("no_model") the file is missing or is not a
                model of this feature layout, or lightgbm is not installed.
        """
        if self._ranker is None:
            from services.reranker.scorer import ScorerUnavailable

            try:
                self._ranker = LtrRanker(self.model_file)
            except (OSError, ValueError, ModuleNotFoundError) as err:
                raise ScorerUnavailable("no_model", f"ltr model {self.model_file} cannot be loaded: {err}") from err
        return self._ranker

    def score_list(self, candidates: Sequence, keywords: Sequence[str] = ()) -> list[float]:
        """Scores in [0, 1] (``to_unit`` of the model's), one per candidate
        in input order; ``candidates`` are graphmesh.common.v1.Candidate
        messages in today's fused order (list position = fused rank).

        Raises:
            ScorerUnavailable: the model cannot be loaded.
        """
        ranker = self.load()
        return to_unit(ranker.score([LtrCandidate.from_proto(c) for c in candidates], keywords))

    async def prepare(self, query: str, passages: list[str]):
        """Not a pair scorer: always raises ScorerUnavailable."""
        from services.reranker.scorer import ScorerUnavailable

        raise ScorerUnavailable("no_model", "the ltr scorer ranks candidate lists; send RerankRequest.candidates")

    async def score(self, pairs: list[tuple[str, str]]) -> list[float]:
        """Not a pair scorer: always raises ScorerUnavailable."""
        return await self.prepare("", [])

    async def close(self) -> None:
        """Nothing to release."""
