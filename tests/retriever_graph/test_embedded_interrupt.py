"""An interrupted start of the embedded Neo4j leaves nothing running: the
launcher runs in a session of its own and no pid file names it yet, so a
Ctrl-C while `graphmesh up` waits for it must stop it."""
from __future__ import annotations

import subprocess
import sys

import pytest

from services.retriever_graph import embedded

pytestmark = pytest.mark.unit


def test_ctrl_c_while_waiting_for_bolt_stops_the_launcher(tmp_path, monkeypatch):
    started: list[subprocess.Popen] = []
    real_popen = subprocess.Popen

    def popen(*args, **kwargs):
        started.append(real_popen(*args, **kwargs))
        return started[-1]

    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt  # Ctrl-C while the wait loop reads the log

    # a launcher that never prints its ready line
    monkeypatch.setattr(embedded, "build_launcher", lambda root: [sys.executable, "-c", "import time; time.sleep(60)"])
    monkeypatch.setattr(embedded.subprocess, "Popen", popen)
    monkeypatch.setattr(embedded, "_tail", interrupted)
    with pytest.raises(KeyboardInterrupt):
        embedded.start_embedded_neo4j(tmp_path / "data", 7999, tmp_path / "neo4j.log")
    assert len(started) == 1
    assert started[0].wait(timeout=10) is not None  # stopped, not left running
