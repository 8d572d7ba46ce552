"""Fixed samples of the dev sets in ../shared/data and the sub-corpus and
sub-library they are searched in (the retrieval-quality gate, issue 18).

Everything here is a pure function of the frozen files and the seeds below:
the same checkout over the same data gives byte-identical samples, corpora
and libraries.

Law passage retrieval (law-zh):
    ``law_sample(name)`` draws ``LAW_SAMPLE[name]`` queries (seed ``SEED``)
    from queries-<name>-dev.jsonl, leaving out queries longer than the
    gateway's maximum query length (their count is returned).
    ``law_subcorpus(samples)`` holds every gold article of the sampled
    queries; from each law holding gold, a seeded sample of its other
    articles (``SAME_LAW_PER_GOLD`` per gold article, at least
    ``SAME_LAW_MIN``), so the hard within-law confusions stay; per query, the
    ``LEXICAL_NEIGHBOURS`` articles of the whole corpus that BM25 over the
    query's keywords ranks first (``keyword_neighbours``), the confusions
    across laws; and ``BACKGROUND_ARTICLES`` further articles, seeded.

Entity retrieval (medkg-zh):
    ``entity_sample(name)`` draws ``ENTITY_SAMPLE[name]`` queries.
    ``alias_library(sample)``: the gold entities plus, per query, the
    entities whose names and aliases share the most character bigrams with
    the query and with the gold name (what the name channels confuse).
    ``symptom_library(sample)``: the gold diseases, per query the entities
    linked to most of its symptoms (partial matches that compete with the
    gold), and every triple of all of them.

Run ``python -m tests.quality.samples --out DIR`` to write the samples as
JSONL for ``graphmesh eval --dataset`` (the full-corpus comparison in
docs/retrieval.md).
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import subprocess
from collections import Counter, defaultdict
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[2]
#: Overrides where ../shared is (a directory holding data/law-zh and data/medkg-zh).
ENV_SHARED = "GRAPHMESH_SHARED_DIR"

SEED = 18
#: Queries drawn per law dev set (after leaving out over-long ones).
LAW_SAMPLE = {"scenario": 60, "consult": 40, "facts": 40}
#: Other articles of a law holding gold: a seeded sample of this many per
#: gold article of the law, at least SAME_LAW_MIN (all of them when fewer).
SAME_LAW_PER_GOLD = 5
SAME_LAW_MIN = 10
#: Per query, the articles of the whole corpus that BM25 over its keywords
#: ranks first (keyword_neighbours): the confusions across laws.
LEXICAL_NEIGHBOURS = 10
#: Further articles of the rest of the corpus, seeded.
BACKGROUND_ARTICLES = 50
#: Queries drawn per medkg dev set.
ENTITY_SAMPLE = {"alias": 150, "symptom": 100}
#: Alias set: distractors per query, by shared character bigrams with the
#: query and with the gold name.
ALIAS_NEIGHBOURS_OF_QUERY = 30
ALIAS_NEIGHBOURS_OF_GOLD = 10
#: Symptom set: distractors per query, the entities linked to most of its symptoms.
SYMPTOM_DISTRACTORS = 10


class SharedDataMissing(RuntimeError):
    """../shared/data is not where the gate looks for it."""


def _main_checkout(root: Path) -> Path | None:
    """The main checkout of the git repository at ``root`` (itself, or the
    checkout a worktree was added from), None outside git."""
    try:
        common = subprocess.run(["git", "rev-parse", "--path-format=absolute", "--git-common-dir"], cwd=root,
                                capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return Path(common).parent if common else None


def shared_dir() -> Path:
    """The ../shared directory: env ``GRAPHMESH_SHARED_DIR`` when set, else
    the repo root's parent's ``shared``, else (in a git worktree) the main
    checkout's parent's ``shared``.

    Raises:
        SharedDataMissing: none of them holds data/law-zh and data/medkg-zh.
    """
    candidates = []
    if os.environ.get(ENV_SHARED):
        candidates.append(Path(os.environ[ENV_SHARED]))
    else:
        candidates.append(REPO_ROOT.parent / "shared")
        main = _main_checkout(REPO_ROOT)
        if main is not None:
            candidates.append(main.parent / "shared")
    for path in candidates:
        if (path / "data" / "law-zh").is_dir() and (path / "data" / "medkg-zh").is_dir():
            return path
    raise SharedDataMissing(f"no shared data (data/law-zh, data/medkg-zh) in {', '.join(map(str, candidates))}; "
                            f"set {ENV_SHARED} to the directory holding data/")


def _law_dir() -> Path:
    return shared_dir() / "data" / "law-zh"


def _medkg_dir() -> Path:
    return shared_dir() / "data" / "medkg-zh"


def _read_jsonl(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@dataclass(frozen=True)
class Sample:
    """Queries drawn from one dev set: ``rows`` ({"id", "query", "gold"}, gold
    as strings), ``left_out`` = queries over ``max_chars`` not drawn from."""

    name: str
    rows: list[dict]
    left_out: int
    max_chars: int


def _draw(name: str, rows: list[dict], n: int, max_chars: int) -> Sample:
    fitting = [i for i, r in enumerate(rows) if len(r["query"]) <= max_chars]
    # A seeded shuffle and its first n: a larger n keeps the smaller sample's queries.
    random.Random(f"{SEED}:{name}").shuffle(fitting)
    drawn = [rows[i] for i in sorted(fitting[:n])]
    clean = [{"id": str(r["id"]), "query": r["query"], "gold": [str(g) for g in r["gold"]]} for r in drawn]
    return Sample(name, clean, len(rows) - len(fitting), max_chars)


# ---- lexical neighbours ----------------------------------------------------
def _bigrams(text: str) -> set[str]:
    return {text[i:i + 2] for i in range(len(text) - 1)} or {text}


def keyword_neighbours(queries: list[str], texts: list[str], n: int) -> list[list[int]]:
    """Per query, the indexes of the ``n`` texts that Okapi BM25 over the
    query's keywords (``services.common.text.query_keywords``, as the
    keyword channel uses) ranks first: what the keyword channel would
    confuse with the gold. A term's frequency in a text is its number of
    occurrences in the normalised, lower-cased text (found through a
    character/bigram index, so the texts need no tokenising), and lengths
    are in characters; k1 1.2, b 0.75, idf ln(1 + (N - df + 0.5) / (df + 0.5)).
    Ties go to the lower index, so the result is deterministic."""
    from services.common.text import normalize, query_keywords

    docs = [normalize(t).lower() for t in texts]
    postings: dict[str, list[int]] = defaultdict(list)
    for i, doc in enumerate(docs):
        for key in set(doc) | _bigrams(doc):
            postings[key].append(i)
    lengths = np.array([len(d) for d in docs], dtype=float)
    k1, b = 1.2, 0.75
    norm = k1 * (1 - b + b * lengths / lengths.mean())
    out = []
    for query in queries:
        scores = np.zeros(len(docs))
        for term in query_keywords(query):
            keys = [term] if len(term) == 1 else sorted(_bigrams(term))
            lists = sorted((postings.get(k, []) for k in keys), key=len)
            candidates = set(lists[0]).intersection(*lists[1:]) if lists else set()
            found = [(i, docs[i].count(term)) for i in sorted(candidates)]
            found = [(i, tf) for i, tf in found if tf]
            if not found:
                continue
            idf = np.log(1 + (len(docs) - len(found) + 0.5) / (len(found) + 0.5))
            idx = np.array([i for i, _ in found])
            tf = np.array([c for _, c in found], dtype=float)
            scores[idx] += idf * tf * (k1 + 1) / (tf + norm[idx])
        out.append([int(i) for i in np.argsort(-scores, kind="stable")[:n]])
    return out


# ---- law-zh -----------------------------------------------------------------
@lru_cache(maxsize=1)
def law_corpus() -> tuple[dict, ...]:
    """Every article of corpus.jsonl.gz, in file order."""
    return tuple(_read_jsonl(_law_dir() / "corpus.jsonl.gz"))


def law_sample(name: str, max_chars: int) -> Sample:
    """``LAW_SAMPLE[name]`` queries of queries-<name>-dev.jsonl no longer than
    ``max_chars`` characters (the gateway's limit), seeded."""
    return _draw(name, _read_jsonl(_law_dir() / f"queries-{name}-dev.jsonl"), LAW_SAMPLE[name], max_chars)


def article_text(article: dict) -> str:
    """The article as the gateway files it: law, chapter, section, article
    number, then the text."""
    return " ".join(str(article.get(k) or "") for k in ("law", "chapter", "section", "article", "text")).strip()


def law_subcorpus(samples: list[Sample]) -> list[dict]:
    """The articles the ``samples`` are searched in (see the module
    docstring), in corpus order, as corpus records.

    Raises:
        KeyError: a gold id that is not in the corpus.
    """
    corpus = law_corpus()
    by_id = {str(a["id"]): a for a in corpus}
    rows = [r for s in samples for r in s.rows]
    gold = {g for r in rows for g in r["gold"]}
    by_law: dict[str, list[str]] = defaultdict(list)
    for a in corpus:
        by_law[a["law"]].append(str(a["id"]))
    keep = set(gold)
    gold_laws = sorted({by_id[g]["law"] for g in gold})
    for law in gold_laws:
        ids = by_law[law]
        golds = sum(1 for i in ids if i in gold)
        others = [i for i in ids if i not in gold]
        room = min(len(others), max(SAME_LAW_MIN, SAME_LAW_PER_GOLD * golds))
        keep.update(random.Random(f"{SEED}:{law}").sample(others, room))
    if LEXICAL_NEIGHBOURS:
        for found in keyword_neighbours([r["query"] for r in rows], [article_text(a) for a in corpus], LEXICAL_NEIGHBOURS):
            keep.update(str(corpus[i]["id"]) for i in found)
    rest = [str(a["id"]) for a in corpus if str(a["id"]) not in keep]
    keep.update(random.Random(f"{SEED}:background").sample(rest, min(BACKGROUND_ARTICLES, len(rest))))
    return [a for a in corpus if str(a["id"]) in keep]


# ---- medkg-zh ---------------------------------------------------------------
@lru_cache(maxsize=1)
def medkg_entities() -> tuple[dict, ...]:
    """Every entity of entities.jsonl.gz, in file order."""
    return tuple(_read_jsonl(_medkg_dir() / "entities.jsonl.gz"))


def entity_sample(name: str, max_chars: int) -> Sample:
    """``ENTITY_SAMPLE[name]`` queries of queries-<name>-dev.jsonl, seeded."""
    return _draw(name, _read_jsonl(_medkg_dir() / f"queries-{name}-dev.jsonl"), ENTITY_SAMPLE[name], max_chars)


def alias_library(sample: Sample) -> list[dict]:
    """Entity records for the alias queries: gold entities and their
    bigram neighbours (see the module docstring), in file order."""
    entities = medkg_entities()
    index: dict[str, set[int]] = defaultdict(set)
    for i, e in enumerate(entities):
        for surface in [e["name"], *e.get("aliases", [])]:
            for b in _bigrams(surface):
                index[b].add(i)
    by_name = {e["name"]: i for i, e in enumerate(entities)}

    def neighbours(text: str, n: int) -> list[int]:
        counts: Counter[int] = Counter()
        for b in _bigrams(text):
            counts.update(index.get(b, ()))
        return [i for i, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]

    keep: set[int] = set()
    for row in sample.rows:
        keep.update(by_name[g] for g in row["gold"])
        keep.update(neighbours(row["query"], ALIAS_NEIGHBOURS_OF_QUERY))
        for g in row["gold"]:
            keep.update(neighbours(g, ALIAS_NEIGHBOURS_OF_GOLD))
    return _with_parents([entities[i] for i in sorted(keep)])


def _with_parents(records: list[dict]) -> list[dict]:
    """``records`` with the parents they name that are in the library (so
    parent links resolve), in file order."""
    names = {r["name"] for r in records}
    wanted = {p for r in records for p in r.get("parents", [])} - names
    return [e for e in medkg_entities() if e["name"] in names or e["name"] in wanted]


def _query_symptoms(query: str) -> list[str]:
    """The symptoms a symptom query lists ("症状：A、B、C" -> [A, B, C])."""
    body = query.split("：", 1)[-1]
    return [s for s in dict.fromkeys(part.strip() for part in body.split("、")) if s]


def _triples():
    with gzip.open(_medkg_dir() / "triples.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)


def symptom_library(sample: Sample) -> tuple[list[dict], list[dict]]:
    """(entity records, triple records) for the symptom queries.

    Kept: the gold diseases and, per query, the ``SYMPTOM_DISTRACTORS``
    entities linked to most of its symptoms (first by links whose predicate
    names a symptom, 常见症状 / 相关症状 / ..., then by links of any predicate,
    then by name), with every triple of every kept entity (all predicates, so
    the graph's tie-break on the number of facts sees what the full library
    has). Both lists in file order.
    """
    wanted = {row["id"]: _query_symptoms(row["query"]) for row in sample.rows}
    values = {v for vs in wanted.values() for v in vs}
    links: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))  # value -> subject -> predicates
    for t in _triples():
        if t["object"] in values:
            links[t["object"]][t["subject"]].add(t["predicate"])
    keep: set[str] = set()
    for row in sample.rows:
        symptom_links: Counter[str] = Counter()
        any_links: Counter[str] = Counter()
        for v in wanted[row["id"]]:
            for subject, predicates in links[v].items():
                any_links[subject] += 1
                symptom_links[subject] += any("症状" in p for p in predicates)
        ranked = sorted((s for s in any_links if s not in row["gold"]), key=lambda s: (-symptom_links[s], -any_links[s], s))
        keep.update(row["gold"])
        keep.update(ranked[:SYMPTOM_DISTRACTORS])
    entities = _with_parents([e for e in medkg_entities() if e["name"] in keep])
    names = {e["name"] for e in entities}
    triples = [t for t in _triples() if t["subject"] in names]
    return entities, triples


def jsonl(records: list[dict]) -> bytes:
    """``records`` as JSONL bytes (UTF-8, one object a line)."""
    return "\n".join(json.dumps(r, ensure_ascii=False) for r in records).encode("utf-8")


def main() -> None:
    """Writes the samples (and, with --corpus, the law sub-corpus) as JSONL."""
    from services.gateway.config import GatewaySettings

    ap = argparse.ArgumentParser(description="Write the quality gate's fixed samples as JSONL.")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--corpus", action="store_true", help="also write law-subcorpus.jsonl")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    limit = GatewaySettings().max_query_chars
    laws = [law_sample(n, limit) for n in LAW_SAMPLE]
    for s in [*laws, *(entity_sample(n, limit) for n in ENTITY_SAMPLE)]:
        (args.out / f"{s.name}.jsonl").write_bytes(jsonl(s.rows) + b"\n")
        print(f"{s.name}: {len(s.rows)} queries ({s.left_out} over {s.max_chars} characters left out)")
    if args.corpus:
        (args.out / "law-subcorpus.jsonl").write_bytes(jsonl(law_subcorpus(laws)) + b"\n")


if __name__ == "__main__":
    main()
