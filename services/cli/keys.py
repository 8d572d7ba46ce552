"""``graphmesh keys create NAME [--file FILE]``: a new gateway API key.

The key is printed once (standard output) and only its salted scrypt hash is
kept: appended to FILE (the gateway's GRAPHMESH_GATEWAY_AUTH__API_KEYS_FILE, or the
Kubernetes Secret graphmesh-api-keys) or printed for you to store.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from services.gateway.api.auth import new_key


def create_key(name: str) -> tuple[str, str]:
    """A fresh key for ``name``.

    Returns:
        (key, stored_line): the key to hand to the client (shown once) and
        the line to store, ``name:id:scrypt:n:r:p:salt:hash``.
    Raises:
        ValueError: the name is not 1-64 of [A-Za-z0-9_.-].
    """
    key, record = new_key(name)
    return key, record.line()


def append_line(path: Path, line: str) -> None:
    """Appends ``line`` to the key file, creating it readable by its owner only."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as f:
        f.write(line + "\n")


def cmd_keys(args: argparse.Namespace) -> int:
    """Runs ``keys create``; returns the exit code (2 on a bad name)."""
    try:
        key, line = create_key(args.name)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.file:
        append_line(Path(args.file), line)
        print(f"stored the hash of key {args.name!r} in {args.file}", file=sys.stderr)
    else:
        print(f"stored line (put it in GRAPHMESH_GATEWAY_AUTH__API_KEYS_FILE):\n{line}", file=sys.stderr)
    print("the key (shown once; send it as 'authorization: Bearer KEY' or 'x-api-key: KEY'):", file=sys.stderr)
    print(key)
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Adds ``keys create NAME [--file FILE]`` to the graphmesh command."""
    keys = sub.add_parser("keys", help="create gateway API keys (stored as salted hashes)")
    keys.add_argument("action", choices=["create"])
    keys.add_argument("name", help="who the key is for: 1-64 of letters, digits, _ . -")
    keys.add_argument("--file", help="append the stored line to this file (mode 600) instead of printing it")
