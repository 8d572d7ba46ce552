"""Citation verification replayed on saved LLM answers (benchmark, not a
test): the model's own text of each row of an answer-quality run
(``bench/answer_quality.py --stream``) cleaned and verified again, over the
same packed sources, by the verifier of this checkout, as the gateway's
generator does (services/gateway/answer/generator.py). Shows what a change
of the verifier does to the final answers without running the LLM again.

    python bench/citation_replay.py bench/results/answer_quality-<label>-<time>.json [...]

Per set, over the rows the LLM answered (a raw answer saved): sentences of
the final answers, the share with a mark, the same for sentences stating a
rule (naming a law or article), sentences removed, answers left with no
supported sentence (the gateway then answers extractively), and final
answers naming a law or article no source holds.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "gen" / "python"), str(REPO / "bench")]

import domains  # noqa: E402
from answer_quality import _rule_sentence  # noqa: E402
from services.common import citation_check  # noqa: E402
from services.common.text import citation_numbers  # noqa: E402
from services.gateway.answer import grounding  # noqa: E402


def replay(rows: list[dict]) -> dict:
    """Figures of ``rows``' raw answers verified again (see the module docstring)."""
    rules = domains.citation_rules(["law_zh"])
    sentences = marked = stating = stating_marked = removed = fallbacks = unheld = answers = 0
    for row in rows:
        raw = row.get("raw_answer")
        if row.get("error") or not raw or not row.get("contexts"):
            continue
        sources = [f"{label}\n{text}" for label, text in zip(row["context_labels"], row["contexts"])]
        text = grounding.clean_answer(raw, len(sources)).text
        if not text:
            continue
        answers += 1
        verified = citation_check.verify(text, sources, row["query"], rules=rules)
        removed += len(verified.removed)
        if verified.removed and not citation_numbers(verified.text):
            fallbacks += 1  # the gateway quotes the sources instead
            continue
        unheld += bool(citation_check.unheld_references(verified.text, sources, rules))
        for sentence, marks in citation_check.marked_sentences(verified.text):
            sentences += 1
            marked += bool(marks)
            if _rule_sentence(sentence, rules):
                stating += 1
                stating_marked += bool(marks)
    return {"llm_answers": answers, "fallback_to_extractive": fallbacks, "sentences_removed": removed,
            "final_sentences": sentences, "marked": round(marked / sentences, 4) if sentences else None,
            "rule_sentences": stating, "rule_marked": round(stating_marked / stating, 4) if stating else None,
            "final_answers_naming_unheld": unheld}


def main() -> None:
    for path in sys.argv[1:]:
        run = json.loads(Path(path).read_text())
        for name, rows in run["rows"].items():
            print(path, name, json.dumps(replay(rows), ensure_ascii=False))


if __name__ == "__main__":
    main()
