"""A second own-documents set (issue 24): every law in force that the law
dev sets' scenario and consult questions cite, written as plain-text files,
with those questions and gold passages given as text
(tests/quality/law_files.py says how), so the generic path (no domain
pack) is measured on long Chinese documents and real lay questions, and
choices fitted on the documents dev set (three design documents) can be
checked on documents they were not fitted on.

    python bench/laws_as_files.py build                # -> bench/results/laws_as_files/
    graphmesh up --detach
    graphmesh ingest files bench/results/laws_as_files/files --collection lawfiles
    graphmesh eval --dataset bench/results/laws_as_files/queries-scenario.jsonl --collection lawfiles --answers
    graphmesh eval --dataset bench/results/laws_as_files/queries-consult.jsonl --collection lawfiles --answers
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import RESULTS  # noqa: E402

from tests.quality.law_files import cited_laws, law_files  # noqa: E402

OUT = RESULTS / "laws_as_files"


def build(out: Path) -> None:
    files, questions = law_files(cited_laws())
    (out / "files").mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (out / "files" / name).write_text(text, encoding="utf-8")
    for name, rows in questions.items():
        path = out / f"queries-{name}.jsonl"
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        print(f"{name}: {len(rows)} questions -> {path}")
    print(f"{len(files)} laws, {sum(len(t) for t in files.values()):,} characters -> {out / 'files'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["build"])
    parser.add_argument("--out", type=Path, default=OUT)
    build(parser.parse_args().out)


if __name__ == "__main__":
    main()
