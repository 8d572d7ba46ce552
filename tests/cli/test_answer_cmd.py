"""``graphmesh answer`` against the real gateway (fake downstream services): what it prints, in what order."""
from __future__ import annotations

import asyncio

import pytest

from services.cli.main import main

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.contract]


async def test_graphmesh_answer_prints_the_answer_before_its_evidence(cli_gateway, capsys):
    """A trial's team leaders scrolled past ten full search results to find the answer."""
    await cli_gateway()
    assert await asyncio.to_thread(main, ["answer", "什么是实用新型？"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("answer (") and out.index("strategy:") < out.index("\nevidence:\n") < out.index("stages:")
