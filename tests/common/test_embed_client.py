"""EmbedClient's edges that need no expander: no texts, no address yet,
nothing listening."""
from __future__ import annotations

import pytest

from services.common.embed_client import EmbedClient, EmbedUnavailable

pytestmark = pytest.mark.unit


async def test_no_texts_make_no_call():
    client = EmbedClient(lambda: (_ for _ in ()).throw(AssertionError("no address needed")))
    assert (await client.embed([], query=True)).shape == (0, 0)


@pytest.mark.parametrize("address", [lambda: {}["expander"], lambda: (_ for _ in ()).throw(RuntimeError("boom")),
                                     lambda: None, lambda: ""])
async def test_an_address_function_without_an_address_is_unavailable(address):
    with pytest.raises(EmbedUnavailable, match="not known yet"):
        await EmbedClient(address).embed(["盗窃罪"], query=True)


async def test_nothing_listening_is_unavailable_and_the_client_can_be_reused():
    client = EmbedClient("127.0.0.1:9", timeout=2.0)
    for _ in range(2):
        with pytest.raises(EmbedUnavailable, match="UNAVAILABLE|DEADLINE"):
            await client.embed(["盗窃罪"], query=True)
        await client.close()
