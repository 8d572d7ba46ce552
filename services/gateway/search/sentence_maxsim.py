"""Sentence MaxSim: a chunk scored by its best sentence's dense similarity
to the question, as one more weighted channel (``names.SENTENCE_MAXSIM``).

A chunk's own vector averages every topic it holds; a question is usually
answered by one sentence of it. So the first fusion's top
``RetrievalProfile.maxsim_candidates`` chunks are cut into sentences, each
sentence is embedded passage-side by the expander (its embedding cache holds
the sentences of every chunk ingested with ``IngestSettings.sentence_vectors``
on, so a question embeds none), and a chunk's score is the largest cosine between the
question's query-side vector and its sentences: the MaxSim of late
interaction (ColBERT, Khattab and Zaharia 2020), over sentences instead of
tokens, with the same bi-encoder. The fuser adds the scores as the channel
``sentence.maxsim`` (weighted fusion: min-max over the scored chunks, times
its weight). Measured in docs/benchmarks.md "Sentence MaxSim"
(bench/sentence_maxsim_probe.py).

Pure parts (``sentence_units``, ``maxsim_scores``) are tested directly; the
orchestration embeds the sentences ``IngestSettings.embed_batch`` at a
time (the top chunks of a document of short lines hold more than one Embed
call may carry), degrades to nothing (stage DEGRADED) when the fuser or the
expander fails, whatever the status code (the requests are the gateway's own,
never the caller's error), and is SKIPPED without a query embedding.
"""
from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence

import numpy as np

from graphmesh.common.v1 import types_pb2
from graphmesh.expander.v1 import expander_pb2
from graphmesh.fuser.v1 import fuser_pb2
from services.common import names
from services.common.script_centring import centred_cosines, spans_scripts
from services.common.text import split_sentences
from services.gateway.config import GatewaySettings, RetrievalProfile
from services.gateway.downstream.guard import Deadline, Trace, guarded
from services.gateway.downstream.interfaces import Expander, Fuser
from services.gateway.search.fuse_request import fuse_request
from services.gateway.search.sentence_vectors import SentenceVectorCache

#: Characters (stripped) a piece needs to count as a sentence; shorter ones
#: (a list number, a lone heading word) are skipped.
MIN_SENTENCE_CHARS = 4
#: Sentences embedded per chunk, in reading order: bounds the cost of one
#: very long chunk.
MAX_SENTENCES_PER_CHUNK = 32
#: Context budget of the candidate fusion: no context is packed from it.
_CANDIDATE_BUDGET_CHARS = 1


#: A heading that asks a question (an FAQ's "Q: Can I deploy on Friday?"): the chunk under it answers it.
_ASKING_HEADING = re.compile(r"[?？]\s*$")


def chunk_units(text: str, heading_path: Sequence[str] = (), limit: int = MAX_SENTENCES_PER_CHUNK) -> list[str]:
    """The units a chunk is scored by: its ``sentence_units``, after its last
    heading when that heading asks a question. An FAQ's answer seldom repeats
    the question it answers ("A: To staging, yes."), so without the heading
    the answer scored below another document's chunk that merely mentions
    the same words (a fresh user's trial: "Can I deploy on Friday?")."""
    units = sentence_units(text, limit)
    last = heading_path[-1].strip() if heading_path else ""
    return [last, *units] if last and _ASKING_HEADING.search(last) and last not in units else units


def sentence_units(text: str, limit: int = MAX_SENTENCES_PER_CHUNK) -> list[str]:
    """The sentences of one chunk that are scored: ``split_sentences``
    pieces of at least MIN_SENTENCE_CHARS characters, stripped, the first
    ``limit``; the whole text (stripped) when none qualifies; [] for blank
    text."""
    pieces = [s.strip() for s in split_sentences(text) if len(s.strip()) >= MIN_SENTENCE_CHARS][:limit]
    return pieces or ([text.strip()] if text.strip() else [])


def maxsim_scores(query_vector: Sequence[float], owners: Sequence[str],
                  sentence_vectors: Sequence[Sequence[float]], scripts: Sequence[str] = (),
                  centroids: Mapping[str, Sequence[float]] | None = None) -> dict[str, float]:
    """Per chunk id, the largest dot product between ``query_vector`` and
    the vectors of its sentences (cosine for unit vectors, in [-1, 1]);
    when the sentences' writing systems (``scripts``, one per sentence)
    span two with a centroid in ``centroids``, each sentence's cosine with
    its system's centroid removed instead (``script_centring``, as channel
    pg.centred scores the chunks: the same centroids, those of the
    collections' chunks).

    Args:
        query_vector: the question's query-side embedding, shape (d,).
        owners: the chunk id of each sentence, in the order of
            ``sentence_vectors``.
        sentence_vectors: one passage-side embedding per sentence, (n, d).
        scripts: the writing system of each sentence's chunk, or () when
            not known (no centring).
        centroids: {writing system: mean chunk embedding}, or None.

    Returns:
        {chunk id: MaxSim}; {} when there are no sentences.

    Raises:
        ValueError: ``owners`` and ``sentence_vectors`` differ in length, or
            a vector's dimension differs from the query's.
    """
    if len(owners) != len(sentence_vectors):
        raise ValueError(f"{len(owners)} owners for {len(sentence_vectors)} sentence vectors")
    if not owners:
        return {}
    q = np.asarray(query_vector, dtype=np.float32)
    matrix = np.asarray(sentence_vectors, dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[1] != q.shape[0]:
        raise ValueError(f"sentence vectors of shape {matrix.shape} for a query vector of dimension {q.shape[0]}")
    if centroids and len(scripts) == len(owners) and spans_scripts(scripts, centroids):
        sims = np.asarray(centred_cosines(q, matrix, scripts, centroids))
    else:
        sims = matrix @ q
    best: dict[str, float] = {}
    for owner, sim in zip(owners, sims.tolist()):
        if owner not in best or sim > best[owner]:
            best[owner] = sim
    return {owner: round(score, 6) for owner, score in best.items()}


async def maxsim_list(settings: GatewaySettings, fuser: Fuser, expander: Expander, query: str,
                      query_vector: Sequence[float], profile: RetrievalProfile,
                      lists: list[fuser_pb2.CandidateList], off: frozenset[str], deadline: Deadline,
                      trace: Trace, cache: SentenceVectorCache | None = None,
                      model: str = "", centroids: Mapping[str, Sequence[float]] | None = None,
                      ) -> list[fuser_pb2.CandidateList]:
    """The ``sentence.maxsim`` candidate list of ``lists``' best chunks:
    [one list whose candidates carry their MaxSim as the channel score], or
    [] when the channel is off (``off``, the profile's ``channels_off``
    applied), the profile scores no candidate, there is no query vector
    (expander down: stage SKIPPED) or no candidate, or the fuser or the
    expander fails (stage DEGRADED). Sentences whose vectors ``cache``
    holds for the query vector's ``model`` are not sent to the expander;
    those it sends back are kept there. ``centroids``: the writing systems'
    centroids of the collections searched (``maxsim_scores``)."""
    stage = names.SENTENCE_MAXSIM
    if stage in off or profile.maxsim_candidates <= 0:
        return []
    if not query_vector:
        trace.skip(stage, "no query embedding")
        return []
    if not any(lst.candidates for lst in lists):
        trace.skip(stage, "no candidates")
        return []
    started = time.perf_counter()
    request = fuse_request(query, lists, profile, profile.maxsim_candidates, _CANDIDATE_BUDGET_CHARS)
    # raise_codes=(): the stage's requests are the gateway's own, so no downstream code is the caller's error
    first = await guarded(trace, stage, "fuser", lambda t: fuser.fuse(request, t), None, deadline,
                          settings.deadlines.fuse, record_ok=False, raise_codes=())
    if first is None or not first.candidates:
        return []
    candidates = list(first.candidates[: profile.maxsim_candidates])
    owners: list[str] = []
    texts: list[str] = []
    for cand in candidates:
        for sentence in chunk_units(cand.text, cand.heading_path):
            owners.append(cand.id)
            texts.append(sentence)
    held = cache.get_many(texts, model) if cache is not None else {}
    missing = [i for i in range(len(texts)) if i not in held]
    vectors: list[Sequence[float] | None] = [held.get(i) for i in range(len(texts))]
    cache_hits = 0
    batch = settings.ingest.embed_batch  # 20 long chunks hold more sentences than one Embed call may carry
    for start in range(0, len(missing), batch):
        positions = missing[start:start + batch]
        embed = expander_pb2.EmbedRequest(texts=[texts[i] for i in positions], kind=expander_pb2.EMBED_KIND_PASSAGE)
        reply = await guarded(trace, stage, "expander", lambda t, embed=embed: expander.embed(embed, t), None, deadline,
                              settings.deadlines.expand, record_ok=False, raise_codes=())
        if reply is None or len(reply.vectors) != len(embed.texts):
            return []
        fresh = np.asarray([v.values for v in reply.vectors], dtype=np.float32)
        for i, vector in zip(positions, fresh):
            vectors[i] = vector
        if cache is not None:
            cache.put_many(list(embed.texts), fresh, reply.model)
        cache_hits += reply.cache_hits
    script_of = {cand.id: cand.script for lst in lists for cand in lst.candidates}
    scores = maxsim_scores(query_vector, owners, vectors, [script_of.get(o, "") for o in owners], centroids)
    scored = sorted(candidates, key=lambda c: -scores.get(c.id, -1.0))
    # Copies of the retrievers' own candidates: the fused ones lack the
    # collection and metadata (the fuser does not carry them), and the
    # fuser keeps the source of a chunk's best-ranked list.
    originals: dict[str, types_pb2.Candidate] = {}
    for lst in lists:
        for cand in lst.candidates:
            originals.setdefault(cand.id, cand)
    out = []
    for rank, cand in enumerate(scored, start=1):
        copy = types_pb2.Candidate()
        copy.CopyFrom(originals.get(cand.id, cand))
        copy.ClearField("channel_scores")
        copy.ClearField("embedding")
        copy.channel_scores.add(channel=stage, score=scores.get(cand.id, 0.0), rank=rank)
        out.append(copy)
    trace.record(stage, started, detail=f"{len(texts)} sentences of {len(candidates)} chunks, "
                 f"{len(held) + cache_hits} cached ({len(held)} in the gateway's memory)")
    return [fuser_pb2.CandidateList(producer="gateway", candidates=out)]
