"""Lines of code in a quoted text (a runbook's comments and commands): which lines are code, how lines
joined into one quote keep a command on its own line, and the block of commands a comment labels. Pure; used
by ``services.gateway.answer.quotable``."""
from __future__ import annotations

import re

#: A comment line of code or configuration.
COMMENT = re.compile(r"^(?:#|//)\s*\S")
#: A letter of any script (a line of only numbers is a code listing's line number).
LETTER = re.compile(r"[^\W\d_]")
#: A fence line of a Markdown code block.
FENCE_LINE = re.compile(r"^(```|~~~)")


#: A line of code or a command: a comment or a prompt, or a line without CJK holding an option, a path or an
#: operator ("kubectl -n ingress exec deploy/x -- nginx -s reload").
_CODE_LINE = re.compile(r"^\s*(?:#|\$\s|//)|^[^\u2e80-\u9fff\uff00-\uffef]*(?:\s--?[A-Za-z]|[=/|{};$])"
                        r"[^\u2e80-\u9fff\uff00-\uffef]*$")


def lines_joined(lines: list[str]) -> str:
    """Consecutive lines as one piece: joined by a space, as a sentence wrapped across lines reads, but by a line
    break after a comment or between two lines of code (``_CODE_LINE``): a trial's "# 语法没问题再 reload" and
    the kubectl command under it were quoted as one line, which a shell reads as a comment. (A comment's block
    of commands, ``commented_block``, keeps every line break.)"""
    out = lines[0] if lines else ""
    for prev, line in zip(lines, lines[1:]):
        code = _CODE_LINE.search(prev) and (COMMENT.match(prev) or _CODE_LINE.search(line))
        out += ("\n" if code else " ") + line
    return out


def commented_block(lines: list[str], comment: int, first: int, max_chars: int) -> int | None:
    """The index of the last line of the code that the comment at ``comment`` labels, from its
    first line ``first`` up to the next comment, fence or line without a letter, within
    ``max_chars`` characters with the comment; None unless that is two lines or more."""
    if first >= len(lines) or not LETTER.search(lines[first]) or COMMENT.match(lines[first]):
        return None
    last, size = first, len(lines[comment]) + 1 + len(lines[first])
    while last + 1 < len(lines) and LETTER.search(lines[last + 1]) and not COMMENT.match(lines[last + 1]) \
            and not FENCE_LINE.match(lines[last + 1]) and size + 1 + len(lines[last + 1]) <= max_chars:
        last += 1
        size += 1 + len(lines[last])
    return last if last > first else None
