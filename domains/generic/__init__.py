"""generic: the default pack, for any corpus. It adds no question types, no
document facts and no lookup channels of its own: documents get the general
path (chunks under their headings, dense and keyword channels, the heading
structure of the document graph) and questions the general cue rules
(MarxSphere's four types). Its recipe (``recipes.json``) sets smaller
chunks than the gateway's default and the answerability rule fitted on
own-document corpora (services/gateway/answer/abstention.py), each with the
figures that chose it."""
from __future__ import annotations

from pathlib import Path

from domains.pack import DomainPack, load_recipe

NAME = "generic"
_RECIPE = load_recipe(Path(__file__).resolve().parent / "recipes.json")
PACK = DomainPack(name=NAME, description="any corpus: structure from headings, dense and keyword retrieval",
                  chunk_tokens=_RECIPE.get("chunk_tokens"), chunk_overlap=_RECIPE.get("chunk_overlap"),
                  recipe_source=_RECIPE.get("source", ""), abstention_fits=_RECIPE["abstention"]["fits"])
