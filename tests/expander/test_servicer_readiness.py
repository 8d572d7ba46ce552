"""The expander loads its embedding model before it reports SERVING
(Service.on_start, which serve() runs before health is set), so a restarted
expander is not sent traffic it cannot answer within a deadline. Regression
of the fault matrix (issue 16): loaded after SERVING, a restarted expander
timed out the gateway's calls for about 12 s."""
from __future__ import annotations

import numpy as np
import pytest

from services.common.settings import MeshAddresses
from services.expander import servicer as expander_servicer
from services.expander.config import ExpanderSettings
from services.expander.server import build

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.unit]


class CountingEmbedder:
    name = "counting"
    dimension = 2

    def embed(self, texts, *, query, deadline=None):
        return np.ones((len(texts), 2))


async def test_embedding_model_is_loaded_before_serving(monkeypatch):
    loads = []
    monkeypatch.setattr(expander_servicer, "build_embedder", lambda *a, **k: loads.append(a) or CountingEmbedder())
    service, _ = await build(ExpanderSettings(port=0, embedding={"cache": ""}, library={"addr": "none"}), MeshAddresses())
    assert not loads and not service.extra_tasks  # nothing loads at build or after serving
    await service.on_start()
    assert len(loads) == 1
    await service.on_stop()
