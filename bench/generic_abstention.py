"""Abstention on collections without a domain pack (not a test): does an
Answer over a user's own documents say "not in the documents" for a
question they do not answer, and still answer those they do?

Two steps. ``dump`` is a pytest module run (the quality gate's in-process
mesh). It ingests three own-document corpora as files into collections
without a pack: the three design documents (tests/quality/data/docs), the
60 laws the law dev questions cite (tests/quality/law_files.py) and a small
company's documents (tests/quality/data/company_docs). It then searches, in each
collection, that corpus's answerable questions (79 / 224 scenario + 142
consult / 37) and every out-of-scope question (bench/data/out_of_domain_zh.jsonl,
209, and tests/quality/data/company_docs/out_of_scope.jsonl, 14), and writes the
results in bench/abstention_fit.py's evidence form, with the collection, to
bench/results/generic_abstention_evidence.jsonl:

    STUDY=dump PYTHONPATH=.:gen/python python -m pytest bench/generic_abstention.py -q -s \\
        -p tests.fixtures.pg -p tests.fixtures.neo4j -p tests.fixtures.mesh

``report`` then prints, per collection, the answer rate of each answerable
set and the abstention rate of the out-of-scope questions under a pack's
fit (services/gateway/answer/abstention.py, default law_zh's) for the
evidence's embedding model:

    PYTHONPATH=.:gen/python python bench/generic_abstention.py report [--pack law_zh|generic]

A rule for the generic pack is fitted with bench/abstention_fit.py on the
same evidence (``fit --evidence bench/results/generic_abstention_evidence.jsonl``),
where every out-of-scope question, whatever its collection, is the set "ood".
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "gen" / "python")]

EVIDENCE = REPO / "bench" / "results" / "generic_abstention_evidence.jsonl"
#: English evidence (``STUDY=dump-english``): the fitting corpus and the held-out trial documents, apart.
ENGLISH_FIT = REPO / "bench" / "data" / "english_fit"
ENGLISH_TRIAL = REPO / "tests" / "quality" / "data" / "english_docs"
ENGLISH_EVIDENCE = REPO / "bench" / "results" / "generic_abstention_english.jsonl"
ENGLISH_HELD_OUT = REPO / "bench" / "results" / "generic_abstention_english_held_out.jsonl"
#: The same English fitting corpus asked in Chinese (queries_zh.jsonl, out_of_scope_zh.jsonl): a cross-lingual rule's evidence.
CROSS_EVIDENCE = REPO / "bench" / "results" / "generic_abstention_cross.jsonl"
CROSS_HELD_OUT = REPO / "bench" / "results" / "generic_abstention_cross_held_out.jsonl"
#: English questions over Chinese documents (``STUDY=dump-cross-en``): the fitting corpus written for it
#: (bench/data/cross_fit: 60 questions, 80 out of scope), and held out, the handbook set's English questions
#: and the English out-of-scope questions of bench/data/english_fit asked of the handbook's documents.
CROSS_EN_FIT = REPO / "bench" / "data" / "cross_fit"
HANDBOOK = REPO / "tests" / "quality" / "data" / "handbook_docs"
CROSS_EN_EVIDENCE = REPO / "bench" / "results" / "generic_abstention_cross_en.jsonl"
CROSS_EN_HELD_OUT = REPO / "bench" / "results" / "generic_abstention_cross_en_held_out.jsonl"
#: Near-domain evidence (``STUDY=dump-near``): documents written for fitting whose out-of-scope questions ask about
#: the same topics (bench/data/near_fit), and held out, the handbook and office sets' Chinese questions over Chinese
#: documents with their own out-of-scope questions (bench/abstention_coverage_study.py reads both).
NEAR_FIT = REPO / "bench" / "data" / "near_fit"
NEAR_EVIDENCE = REPO / "bench" / "results" / "generic_abstention_near.jsonl"
NEAR_HELD_OUT = REPO / "bench" / "results" / "generic_abstention_near_held_out.jsonl"
#: The same for English (``STUDY=dump-near-en``): bench/data/near_fit_en, four English documents written for fitting,
#: 60 questions and 60 out-of-scope questions on their topics (held out: STUDY=dump-trials).
NEAR_EN_FIT = REPO / "bench" / "data" / "near_fit_en"
NEAR_EN_EVIDENCE = REPO / "bench" / "results" / "generic_abstention_near_en.jsonl"
OFFICE = REPO / "tests" / "quality" / "data" / "office_docs"
#: Mixed collections built from the fitting corpora only (``STUDY=dump-mixed``): english_fit with cross_fit, and
#: near_fit with near_fit_en, each pair one collection holding English and Chinese documents, asked every question
#: and out-of-scope question written for either half, to MIXED_EVIDENCE. A rule for collections of two writing
#: systems is fitted on it; the trial sets with documents of both scripts (STUDY=dump-trials) are held out.
MIXED_EVIDENCE = Path(os.environ.get("OUT", REPO / "bench" / "results" / "generic_abstention_mixed.jsonl"))
#: Every own-document set written in a fresh user's trial (``STUDY=dump-trials``), none fitted on: each set's
#: questions and out-of-scope questions over its own documents, whatever their script, so that a study of any
#: fit (bench/abstention_coverage_study.py --fit) can keep the records that fit judges.
TRIAL_SETS = ("company_docs", "english_docs", "orbit_docs", "handbook_docs", "office_docs", "kestrel_docs",
              "starbridge_docs", "helan_docs", "lanfeng_docs", "qinghe_docs")
#: Where STUDY=dump-trials writes (OUT overrides it); TRIALS (comma-separated names of TRIAL_SETS) and
#: EXTRA (folders laid out like them, outside the repository: questions kept back) choose the sets.
TRIALS_EVIDENCE = Path(os.environ.get("OUT", REPO / "bench" / "results" / "generic_abstention_trials.jsonl"))
TRIAL = REPO / "tests" / "quality" / "data" / "company_docs"
OUT_OF_SCOPE = (REPO / "bench" / "data" / "out_of_domain_zh.jsonl", TRIAL / "out_of_scope.jsonl")


if os.environ.get("STUDY") in ("dump", "dump-english", "dump-cross-en", "dump-near", "dump-near-en", "dump-trials",
                                  "dump-mixed"):
    import grpc
    import pytest
    from google.protobuf import json_format

    from graphmesh.gateway.v1 import gateway_pb2, gateway_pb2_grpc
    from services.cli.evaluate import load_dataset
    from services.gateway.config import GatewaySettings
    from tests.quality.gate import CHANNEL_OPTIONS, PATIENT_SECONDS, patient_gateway
    from tests.quality.law_files import cited_laws, law_files

    pytestmark = [pytest.mark.asyncio(loop_scope="session")]
    DOCS = REPO / "tests" / "quality" / "data"

    async def _ingest(stub, collection: str, files: dict[str, bytes]) -> None:
        upload = [gateway_pb2.IngestFile(name=f"{collection}/{name}", content=data) for name, data in files.items()]
        reply = await stub.Ingest(gateway_pb2.IngestRequest(files=upload, collection=collection), timeout=1800)
        assert all(f.status == gateway_pb2.FILE_STATUS_STORED for f in reply.files), reply.files

    async def _search(stub, out, collection: str, name: str, rows: list[dict]) -> None:
        limit = GatewaySettings().max_query_chars
        for row in rows:
            if len(row["query"]) > limit:
                continue
            reply = await stub.Search(gateway_pb2.SearchRequest(query=row["query"], top_k=10, collections=[collection]),
                                      timeout=PATIENT_SECONDS)
            out.write(json.dumps({"set": name, "collection": collection, "id": f"{collection}:{row['id']}",
                                  "query": row["query"], "keywords": list(reply.query_info.keywords),
                                  "embedding_model": reply.query_info.embedding_model,
                                  "translation": json_format.MessageToDict(reply.query_info.translation),
                                  "results": [json_format.MessageToDict(c) for c in reply.results]},
                                 ensure_ascii=False) + "\n")
        print(f"{collection} {name}: {len(rows)} searched", flush=True)

    @pytest.mark.skipif(os.environ.get("STUDY") != "dump-english", reason="STUDY=dump-english")
    async def test_dump_english(mesh):
        """English own documents: the fitting corpus (three of the project's English documents, frozen in
        bench/data/english_fit, 60 questions, 80 out-of-scope ones) to ENGLISH_EVIDENCE, the same questions
        asked in Chinese to CROSS_EVIDENCE, and the trial's documents (tests/quality/data/english_docs, never
        fitted on) to ENGLISH_HELD_OUT."""
        def files(folder: Path) -> dict[str, bytes]:
            return {p.name: p.read_bytes() for p in sorted(folder.iterdir())
                    if p.suffix in (".txt", ".md", ".pdf", ".docx") and p.stem != "README"}
        runs = [(ENGLISH_EVIDENCE, "absen", ENGLISH_FIT, "en"), (ENGLISH_HELD_OUT, "absentrial", ENGLISH_TRIAL, "entrial")]
        async with patient_gateway(mesh, ingest={"embed_batch": 32}) as address:
            async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as ch:
                stub = gateway_pb2_grpc.GatewayServiceStub(ch)
                for path, collection, folder, name in runs:
                    await _ingest(stub, collection, files(folder))
                    with path.open("w", encoding="utf-8") as out:
                        await _search(stub, out, collection, name, load_dataset(folder / "queries.jsonl"))
                        await _search(stub, out, collection, "ood", load_dataset(folder / "out_of_scope.jsonl"))
                with CROSS_EVIDENCE.open("w", encoding="utf-8") as out:
                    await _search(stub, out, "absen", "enzh", load_dataset(ENGLISH_FIT / "queries_zh.jsonl"))
                    await _search(stub, out, "absen", "ood", load_dataset(ENGLISH_FIT / "out_of_scope_zh.jsonl"))
                with CROSS_HELD_OUT.open("w", encoding="utf-8") as out:  # Chinese questions no English rule saw
                    for collection in ("absen", "absentrial"):
                        await _search(stub, out, collection, "ood", load_dataset(OUT_OF_SCOPE[0]))

    @pytest.mark.skipif(os.environ.get("STUDY") != "dump-cross-en", reason="STUDY=dump-cross-en")
    async def test_dump_cross_english(mesh):
        """English questions over Chinese documents: the fitting corpus (bench/data/cross_fit) to
        CROSS_EN_EVIDENCE; the handbook set (tests/quality/data/handbook_docs, never fitted on) with its
        English questions, and the English out-of-scope questions of bench/data/english_fit, to CROSS_EN_HELD_OUT."""
        def files(folder: Path) -> dict[str, bytes]:
            return {p.name: p.read_bytes() for p in sorted(folder.iterdir())
                    if p.suffix in (".txt", ".md", ".pdf", ".docx") and p.stem != "README"}
        handbook_en = [r for r in load_dataset(HANDBOOK / "queries.jsonl") if r.get("language") == "en"]
        async with patient_gateway(mesh, ingest={"embed_batch": 32}) as address:
            async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as ch:
                stub = gateway_pb2_grpc.GatewayServiceStub(ch)
                await _ingest(stub, "abscrossen", files(CROSS_EN_FIT))
                await _ingest(stub, "abshandbook", files(HANDBOOK))
                with CROSS_EN_EVIDENCE.open("w", encoding="utf-8") as out:
                    await _search(stub, out, "abscrossen", "xen", load_dataset(CROSS_EN_FIT / "queries_en.jsonl"))
                    await _search(stub, out, "abscrossen", "ood", load_dataset(CROSS_EN_FIT / "out_of_scope_en.jsonl"))
                with CROSS_EN_HELD_OUT.open("w", encoding="utf-8") as out:
                    await _search(stub, out, "abshandbook", "handbook-en", handbook_en)
                    await _search(stub, out, "abshandbook", "ood", load_dataset(ENGLISH_FIT / "out_of_scope.jsonl"))
                    await _search(stub, out, "abscrossen", "ood", load_dataset(ENGLISH_FIT / "out_of_scope.jsonl"))

    @pytest.mark.skipif(os.environ.get("STUDY") != "dump-near", reason="STUDY=dump-near")
    async def test_dump_near(mesh):
        """Near-domain out-of-scope questions: bench/data/near_fit (written for fitting) to NEAR_EVIDENCE; the
        handbook and office sets (never fitted on), their Chinese questions over their documents and their
        out-of-scope questions, to NEAR_HELD_OUT."""
        def files(folder: Path) -> dict[str, bytes]:
            return {p.name: p.read_bytes() for p in sorted(folder.iterdir())
                    if p.suffix in (".txt", ".md", ".pdf", ".docx") and p.stem != "README"}

        def chinese(rows: list[dict]) -> list[dict]:
            from services.common.text import latin_script

            return [r for r in rows if not latin_script(r["query"])]

        async with patient_gateway(mesh, ingest={"embed_batch": 32}) as address:
            async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as ch:
                stub = gateway_pb2_grpc.GatewayServiceStub(ch)
                await _ingest(stub, "absnear", files(NEAR_FIT))
                with NEAR_EVIDENCE.open("w", encoding="utf-8") as out:
                    await _search(stub, out, "absnear", "near", load_dataset(NEAR_FIT / "queries.jsonl"))
                    await _search(stub, out, "absnear", "ood", load_dataset(NEAR_FIT / "out_of_scope.jsonl"))
                with NEAR_HELD_OUT.open("w", encoding="utf-8") as out:
                    for collection, folder in (("abshandbook", HANDBOOK), ("absoffice", OFFICE)):
                        await _ingest(stub, collection, files(folder))
                        await _search(stub, out, collection, collection[3:], chinese(load_dataset(folder / "queries.jsonl")))
                        await _search(stub, out, collection, "ood", chinese(load_dataset(folder / "out_of_scope.jsonl")))

    @pytest.mark.skipif(os.environ.get("STUDY") != "dump-near-en", reason="STUDY=dump-near-en")
    async def test_dump_near_english(mesh):
        """English near-domain out-of-scope questions: bench/data/near_fit_en (written for fitting) to NEAR_EN_EVIDENCE."""
        async with patient_gateway(mesh, ingest={"embed_batch": 32}) as address:
            async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as ch:
                stub = gateway_pb2_grpc.GatewayServiceStub(ch)
                await _ingest(stub, "absnearen", {p.name: p.read_bytes() for p in sorted(NEAR_EN_FIT.iterdir())
                                                  if p.suffix in (".txt", ".md") and p.stem != "README"})
                with NEAR_EN_EVIDENCE.open("w", encoding="utf-8") as out:
                    await _search(stub, out, "absnearen", "nearen", load_dataset(NEAR_EN_FIT / "queries.jsonl"))
                    await _search(stub, out, "absnearen", "ood", load_dataset(NEAR_EN_FIT / "out_of_scope.jsonl"))

    @pytest.mark.skipif(os.environ.get("STUDY") != "dump-mixed", reason="STUDY=dump-mixed")
    async def test_dump_mixed(mesh):
        """Two mixed collections made of fitting corpora (MIXED_EVIDENCE); sets are named by the question's
        language and the answering document's ("en-en", "zh-en", "en-zh", "zh-zh"), out of scope "ood"."""
        def files(*folders: Path) -> dict[str, bytes]:
            return {p.name: p.read_bytes() for folder in folders for p in sorted(folder.iterdir())
                    if p.suffix in (".txt", ".md", ".pdf", ".docx") and p.stem != "README"}
        collections = {
            "absmixed1": ((ENGLISH_FIT, CROSS_EN_FIT),
                          [("en-en", ENGLISH_FIT / "queries.jsonl"), ("zh-en", ENGLISH_FIT / "queries_zh.jsonl"),
                           ("en-zh", CROSS_EN_FIT / "queries_en.jsonl"), ("ood", ENGLISH_FIT / "out_of_scope.jsonl"),
                           ("ood", ENGLISH_FIT / "out_of_scope_zh.jsonl"), ("ood", CROSS_EN_FIT / "out_of_scope_en.jsonl")]),
            "absmixed2": ((NEAR_FIT, NEAR_EN_FIT),
                          [("zh-zh", NEAR_FIT / "queries.jsonl"), ("en-en", NEAR_EN_FIT / "queries.jsonl"),
                           ("ood", NEAR_FIT / "out_of_scope.jsonl"), ("ood", NEAR_EN_FIT / "out_of_scope.jsonl")]),
        }
        async with patient_gateway(mesh, ingest={"embed_batch": 32}) as address:
            async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as ch:
                stub = gateway_pb2_grpc.GatewayServiceStub(ch)
                with MIXED_EVIDENCE.open("w", encoding="utf-8") as out:
                    for collection, (folders, asked) in collections.items():
                        await _ingest(stub, collection, files(*folders))
                        for name, path in asked:
                            await _search(stub, out, collection, name, load_dataset(path))

    @pytest.mark.skipif(os.environ.get("STUDY") != "dump-trials", reason="STUDY=dump-trials")
    async def test_dump_trials(mesh):
        """Every trial's documents (TRIAL_SETS, never fitted on), each in its own collection "trial_<set>", searched
        with its questions (set: its name) and its out-of-scope questions (set "ood"), to TRIALS_EVIDENCE."""
        async with patient_gateway(mesh, ingest={"embed_batch": 32}) as address:
            async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as ch:
                stub = gateway_pb2_grpc.GatewayServiceStub(ch)
                wanted = [(name, DOCS / name) for name in os.environ.get("TRIALS", ",".join(TRIAL_SETS)).split(",") if name]
                wanted += [(Path(f).name, Path(f)) for f in os.environ.get("EXTRA", "").split(",") if f]
                with TRIALS_EVIDENCE.open("w", encoding="utf-8") as out:
                    for name, folder in wanted:
                        collection = f"trial_{name.removesuffix('_docs')}"
                        await _ingest(stub, collection, {p.name: p.read_bytes() for p in sorted(folder.iterdir())
                                                         if p.suffix in (".txt", ".md", ".pdf", ".docx", ".html", ".csv", ".tsv") and p.stem != "README"})
                        await _search(stub, out, collection, name, load_dataset(folder / "queries.jsonl"))
                        await _search(stub, out, collection, "ood", load_dataset(folder / "out_of_scope.jsonl"))

    @pytest.mark.skipif(os.environ.get("STUDY") != "dump", reason="STUDY=dump")
    async def test_dump(mesh):
        laws, law_questions = law_files(cited_laws())
        corpora = {
            "absdocs": ({p.name: p.read_bytes() for p in sorted((DOCS / "docs").glob("*.txt"))},
                        {"docs": load_dataset(DOCS / "queries-docs-dev.jsonl")}),
            "abslaws": ({n: t.encode() for n, t in laws.items()},
                        {"lf-scenario": law_questions["scenario"], "lf-consult": law_questions["consult"]}),
            "abstrial": ({p.name: p.read_bytes() for p in sorted(TRIAL.iterdir()) if p.suffix in (".txt", ".md", ".pdf", ".docx") and p.name != "README.md"},
                         {"trial": load_dataset(TRIAL / "queries.jsonl")}),
        }
        out_of_scope = [row for path in OUT_OF_SCOPE for row in load_dataset(path)]
        EVIDENCE.parent.mkdir(parents=True, exist_ok=True)
        async with patient_gateway(mesh, ingest={"embed_batch": 32}) as address:
            async with grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS) as ch:
                stub = gateway_pb2_grpc.GatewayServiceStub(ch)
                with EVIDENCE.open("w", encoding="utf-8") as out:
                    for collection, (files, answerable) in corpora.items():
                        await _ingest(stub, collection, files)
                        for name, rows in answerable.items():
                            await _search(stub, out, collection, name, rows)
                        await _search(stub, out, collection, "ood", out_of_scope)


def report(pack_name: str, constants: str = "", evidence: Path = EVIDENCE) -> None:
    """Per collection: each answerable set's answer rate and the
    out-of-scope abstention rate (the general questions and the own-document
    ones apart) under ``pack_name``'s fit, or under ``constants``
    ("w1,w2,w3,w4,w5;bias", bench/abstention_fit.py's folded constants)."""
    import numpy as np

    import domains
    from graphmesh.common.v1 import types_pb2
    from google.protobuf import json_format
    from services.gateway.answer import abstention

    fits = abstention.pack_fits([domains.PACKS[pack_name]]) if not constants else {}
    if constants:
        weights, bias = constants.split(";")
        given = abstention.Fit(tuple(float(w) for w in weights.split(",")), float(bias), "")
    rates: dict[tuple[str, str], list[bool]] = defaultdict(list)
    model = ""
    for line in evidence.open(encoding="utf-8"):
        record = json.loads(line)
        model = record["embedding_model"] or abstention.DEFAULT_MODEL
        results = [json_format.ParseDict(c, types_pb2.Candidate()) for c in record["results"]]
        fit = given if constants else abstention.fit_for(model, fits, record["query"], abstention.evidence_text(results),
                                                                   abstention.first_text(results))
        sig = abstention.signals(record["keywords"], results)
        name = record["set"] + ("/own" if "trial-ood" in record["id"] else "") + \
            ("/latin" if abstention.latin_script(record["query"]) else
             "/cross" if abstention.without_cjk(" ".join(abstention.evidence_text(results))) else "")
        rates[record["collection"], name].append(abstention.answerability(sig, fit.weights, fit.bias) >= abstention.THRESHOLD)
    print(f"{constants or pack_name + chr(39) + 's fit'} for {model}: answer rate of answerable sets, "
          "abstention rate of out-of-scope questions")
    for (collection, name), answered in sorted(rates.items()):
        share = float(np.mean(answered))
        kind, value = ("abstained", 1 - share) if name.startswith("ood") else ("answered", share)
        print(f"  {collection:9s} {name:12s} n={len(answered):3d} {kind} {value:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["report"])
    parser.add_argument("--pack", default="law_zh")
    parser.add_argument("--constants", default="", help='"w1,w2,w3,w4,w5;bias" instead of a pack\'s fit')
    parser.add_argument("--evidence", type=Path, default=EVIDENCE, help="an evidence file of ``dump`` or ``dump-english``")
    args = parser.parse_args()
    report(args.pack, args.constants, args.evidence)


if __name__ == "__main__":
    main()
