"""generic: the default pack, for any corpus. It adds no question types, no
document facts and no lookup channels of its own: documents get the general
path (chunks under their headings, dense and keyword channels, the heading
structure of the document graph) and questions the general cue rules
(MarxSphere's four types)."""
from __future__ import annotations

from domains.pack import DomainPack

NAME = "generic"
PACK = DomainPack(name=NAME, description="any corpus: structure from headings, dense and keyword retrieval")
