"""Fixtures of the CLI tests: a real gateway over fake downstream services, the CLI pointed at it."""
from __future__ import annotations

import pytest_asyncio


@pytest_asyncio.fixture(loop_scope="session")
async def cli_gateway(fake_gateway, monkeypatch, capsys):
    """Starts a gateway (``fake_gateway``'s options) and points the CLI at it (GRAPHMESH_GATEWAY_ADDR, no API
    key), its READY line read away so that a test's captured output is the CLI's own; returns the gateway."""
    async def start(**options):
        gw = await fake_gateway(**options)
        capsys.readouterr()  # the gateway's READY line
        monkeypatch.setenv("GRAPHMESH_GATEWAY_ADDR", gw.address)
        monkeypatch.delenv("GRAPHMESH_API_KEY", raising=False)
        return gw
    return start
