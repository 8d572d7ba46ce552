"""The format of a packed context, shared by its writer (the fuser) and its
readers (the gateway's answer path, ``graphmesh eval``): numbered blocks
"[n] label\\ntext", n from 1, label a candidate's title and the headings
below it."""
from __future__ import annotations

import re
from collections.abc import Callable

from services.common.text import same_title, title_words

#: A block's header line; ASCII digits only, so another script's digit in a
#: document's text ("[٢] ...") never reads as a number.
HEADER = re.compile(r"^\[([0-9]+)\] (.*)$")


def source_label(candidate) -> str:
    """A candidate's header label: its title and the headings below it
    (empty ones and a repeat of the title left out; a heading that words the
    title longer, "手册" and "手册（2025年版）", stands for it once, in the
    longer wording: ``text.same_title``). ``candidate``: anything with
    ``title`` and ``heading_path`` (a Candidate message, a fuser Item)."""
    title, headings = candidate.title, [h for h in candidate.heading_path if h]
    if headings and same_title(headings[0], title):  # only the first heading can be the title again
        title = max(title, headings[0], key=title_words)
        headings = headings[1:]
    return " ".join([title] + [h for h in headings if h != title])


def split_blocks(context: str, is_label: Callable[[int, str], bool] | None = None) -> list[tuple[str, list[str]]]:
    """(label, text lines) of each block of a packed ``context``, in number
    order; text before the first header is dropped. A line opens block n
    when it is "[n] label" with n the next number and, when ``is_label`` is
    given, ``is_label(n, label)`` holds, so that a line of a document's own
    text that looks like a header ("[2] Smith, 2020" in a reference list,
    "[1] 1 2 3" in R output) stays in its block. Lines are split at "\n"
    only (a form feed inside a text is not a line end)."""
    blocks: list[tuple[str, list[str]]] = []
    for line in context.split("\n"):
        match = HEADER.match(line.rstrip("\r"))
        number = len(blocks) + 1
        if match and int(match.group(1)) == number and (is_label is None or is_label(number, match.group(2))):
            blocks.append((match.group(2), []))
        elif blocks:
            blocks[-1][1].append(line)
    return blocks


def join_blocks(blocks: list[tuple[str, list[str]]]) -> str:
    """The context text of ``blocks`` (``split_blocks``' output)."""
    return "\n".join("\n".join([f"[{n}] {label}", *lines]) for n, (label, lines) in enumerate(blocks, start=1))
