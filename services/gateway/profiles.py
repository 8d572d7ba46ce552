"""Retrieval profiles: what a search of one question type runs (channels,
fusion and its weights, top-k, MMR, HyDE), the defaults, and the profiles a
collection's domain pack adds from its recipe file."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

import domains
from services.common import names

# Measured with bench/fusion_sweep.py on the three law dev sets with e5onnx
# (docs/retrieval.md): weighted fusion with the dense channel at 1.0 and
# BM25 at 0.5 has the best mean MRR@10 (scenario 0.614, consult 0.151,
# facts 0.327 against 0.609 / 0.148 / 0.276 with BM25 at 1.0, the USE-era
# weights). Channels that did not help weigh 0. pg.boost (same-document
# neighbours) finds nothing on single-chunk law articles; for long documents
# it weighs as much as a heading match, so the chunks around two hits of one
# document rank just after the hits themselves.
# The weights of channels a domain pack feeds come from its recipe
# (domains/<pack>/recipes.json), with the figures that fitted them.
DEFAULT_WEIGHTS = {
    # pg.centred runs where the collections mix writing systems only, and there pg.vector weighs 0 (the fuser's
    # centred_weights): it takes pg.vector's place at the same weight.
    names.PG_KEYWORD: 0.5, names.PG_VECTOR: 1.0, names.PG_CENTRED: 1.0, names.PG_HYDE: 0.5, names.PG_FULLTEXT: 0.25, names.PG_TRIGRAM: 0.5,
    names.PG_BOOST: 0.25, names.GRAPH_HEADING: 0.25,
    # Not fused: its candidates are offered to the fuser's cross-script check (FuseRequest.translation) alone.
    # Fused by RRF at any weight from 0.25 up, it put the other language's chunks first for half the questions
    # answered in their own (bench/cross_lingual_probe.py, docs/benchmarks.md "Keywords across writing systems").
    names.PG_TRANSLATED: 0.0, names.GRAPH_FULLTEXT: 0.0, names.GRAPH_NEIGHBOUR: 0.0,
    names.GRAPH_TERM: 0.25, names.GRAPH_PPR: 0.25,
    # Only a pack with a query adapter sends it, at the weight of its recipe (law_zh: lay consultations).
    names.PG_ADAPTED: 0.0,
    **{channel: weight for pack in domains.PACKS.values() for channel, weight in pack.channel_weights.items()},
    names.RERANK: 1.0,
    # Chosen by 5-fold cross-validation over the pooled dev sets
    # (bench/sentence_maxsim_probe.py, docs/benchmarks.md "Sentence MaxSim").
    names.SENTENCE_MAXSIM: 2.0,
}
#: Channels a profile does not run unless a request switches them on
#: (docs/retrieval.md: each added no quality on the law dev sets; their
#: cost is shown there). graph.term since the re-judging of issue 23
#: (bench/rejudge_defaults.py, docs/benchmarks.md "Defaults re-judged"):
#: its pooled gain over the 560 law dev questions is MRR@10 +0.0016
#: [-0.0001, +0.0040] (p 0.12), R@10 +0.000 [-0.005, +0.005], an interval
#: not above zero.
DEFAULT_OFF = (names.GRAPH_HEADING, names.GRAPH_FULLTEXT, names.GRAPH_NEIGHBOUR, names.GRAPH_TERM,
               names.GRAPH_CITES, names.GRAPH_VERSION, names.GRAPH_PPR)


class RetrievalProfile(BaseModel):
    """How one kind of question is retrieved.

    Attributes:
        retrieve_top_k: candidates asked of each retriever channel (reference
            default 20 for vector chunks).
        fusion_method: "rrf" or "weighted" (default: weighted, measured best).
        channel_weights: weight per channel; channels not listed weigh 1.0.
            Default DEFAULT_WEIGHTS, so a profile that only changes another
            field keeps the measured fusion.
        mmr_lambda: MMR trade-off over the fused list; None = no MMR.
        hyde: whether to search with a HyDE passage (needs an LLM).
        expansions: whether keyword search also gets expansion terms from
            stored entity names, entity definitions and chunk headings
            (retriever_pg SuggestExpansions, MarxSphere L1/L2/L3), at most
            ``max_expansions`` terms. Off by default: see docs/retrieval.md.
        channels_off: channels (and stages, names.SWITCHABLE_STAGES) not run
            for this profile unless a request switches them on
            (SearchRequest.enabled_stages); default DEFAULT_OFF.
        related_seeds: fused first-stage hits that seed the second, related
            call (graph.cites, graph.version, graph.ppr); 0 = no second call.
            It runs only when one of those channels is on.
        maxsim_candidates: fused chunks scored by their best sentence
            (``sentence.maxsim``, services/gateway/search/sentence_maxsim.py)
            when that channel is on; 0 = none.
    """

    model_config = ConfigDict(extra="forbid")  # a misspelt key is an error, not ignored

    retrieve_top_k: int = 20
    fusion_method: Literal["rrf", "weighted"] = "weighted"
    channel_weights: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    mmr_lambda: float | None = None
    hyde: bool = False
    expansions: bool = False
    max_expansions: int = Field(15, ge=1, le=50)
    channels_off: list[str] = Field(default_factory=lambda: list(DEFAULT_OFF))
    related_seeds: int = Field(5, ge=0, le=50)
    maxsim_candidates: int = Field(20, ge=0, le=100)

    def switched_off(self, disabled: frozenset[str], enabled: frozenset[str] = frozenset()) -> frozenset[str]:
        """Stages and channels not to run: the profile's ``channels_off``
        less those the request switches on, plus those it switches off."""
        return frozenset((set(self.channels_off) - set(enabled)) | set(disabled))


def pack_profile(fields: dict) -> RetrievalProfile:
    """A profile from a domain pack's recipe entry: RetrievalProfile's
    fields, where ``channel_weights`` change the default weights and
    ``channels_off`` adds to the default off list."""
    fields = dict(fields)
    weights = {**DEFAULT_WEIGHTS, **fields.pop("channel_weights", {})}
    off = [*DEFAULT_OFF, *(c for c in fields.pop("channels_off", []) if c not in DEFAULT_OFF)]
    return RetrievalProfile(channel_weights=weights, channels_off=off, **fields)


def _default_profiles() -> dict[str, RetrievalProfile]:
    """The default profile and those of the domain packs' question types
    (each pack's recipes.json: e.g. law_zh's case facts, lay consultation
    and article lookup profiles, measured on the law dev sets,
    docs/retrieval.md "Per question type"). A pack's question types are
    detected only for collections of that pack, so the profiles cannot
    meet another pack's questions."""
    profiles = {"default": RetrievalProfile()}
    for pack in domains.PACKS.values():
        for question_type, fields in pack.profiles.items():
            profiles[question_type] = pack_profile(fields)
    return profiles
