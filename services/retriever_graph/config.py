"""retriever_graph settings (environment prefix GRAPHMESH_RETRIEVER_GRAPH_)."""
from __future__ import annotations

from pydantic_settings import SettingsConfigDict

from services.common.settings import DEFAULT_PORTS, ServiceSettings


class RetrieverGraphSettings(ServiceSettings):
    """Attributes:
    neo4j_uri: Bolt URI of Neo4j (the embedded one started by
        ``graphmesh up`` listens on bolt://127.0.0.1:7687).
    neo4j_user / neo4j_password: credentials; empty for no auth.
    neo4j_database: database name.
    """

    model_config = SettingsConfigDict(env_prefix="GRAPHMESH_RETRIEVER_GRAPH_", extra="ignore")

    port: int = DEFAULT_PORTS["retriever_graph"]
    neo4j_uri: str = "bolt://127.0.0.1:7687"
    neo4j_user: str = ""
    neo4j_password: str = ""
    neo4j_database: str = "neo4j"
