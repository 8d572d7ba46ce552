"""Scope of the law_zh pack (not a test): how often its out-of-scope rule
(domains/law_zh/scope.py) fires on questions about other countries' laws
(bench/data/foreign_law_zh.jsonl: it should, every time) and on the law dev
sets and the short law questions (it should not). Pure: no stack needed.

    python bench/law_scope.py
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import SHARED_DATA, save  # noqa: E402

from domains.law_zh.scope import out_of_scope  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def main() -> None:
    sets = {"foreign_law (should fire)": DATA / "foreign_law_zh.jsonl", "short_law": DATA / "short_law_zh.jsonl",
            **{f"{n} dev": SHARED_DATA / "law-zh" / f"queries-{n}-dev.jsonl" for n in ("scenario", "consult", "facts")}}
    figures = {}
    for name, path in sets.items():
        found = [(r["query"], out_of_scope(r["query"])) for r in rows(path)]
        fired = [q for q, why in found if why]
        figures[name] = {"n": len(found), "fired": len(fired), "examples": [q[:60] for q in fired[:5]]}
        print(f"{name:26s} fired {len(fired):3d} of {len(found)}")
    save("law_scope", figures)


if __name__ == "__main__":
    main()
