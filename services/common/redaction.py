"""Secrets never reach a log: API keys (``gmk_<id>_<secret>``) and the
values of bearer / x-api-key headers and of the mesh token are masked in log records. Every
service's entry point installs ``KeyRedactingFilter`` on its log handlers."""
from __future__ import annotations

import logging
import re

_SECRETISH = re.compile(r"(gmk_[0-9a-f]{8}_)[A-Za-z0-9_-]+|((?:bearer|x-api-key|x-graphmesh-mesh-token|mesh_token)[\s:=\"']+)[^\s,'\"}]+",
                        re.I)


def redact(text: str) -> str:
    """``text`` with every key secret and bearer / x-api-key value masked."""
    return _SECRETISH.sub(lambda m: (m.group(1) or m.group(2)) + "***", text)


class KeyRedactingFilter(logging.Filter):
    """A logging filter (add to a handler) that redacts keys from records."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if (clean := redact(message)) != message:
            record.msg, record.args = clean, None
        return True
