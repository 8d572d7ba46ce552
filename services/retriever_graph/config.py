"""retriever_graph settings (environment prefix GRAPHMESH_RETRIEVER_GRAPH_)."""
from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import SettingsConfigDict

from services.common.settings import DEFAULT_PORTS, ServiceSettings


class Neo4jSettings(BaseModel):
    """Group ``neo4j`` (GRAPHMESH_RETRIEVER_GRAPH_NEO4J__*).

    Attributes:
        uri: Bolt URI (the embedded Neo4j started by ``graphmesh up``
            listens on bolt://127.0.0.1:7687).
        user / password: credentials; empty for no auth (password: a secret).
        database: database name.
        transaction_timeout_max: ceiling of each read transaction's timeout,
            seconds; the caller's remaining deadline applies when smaller,
            and this bound alone when the caller set none. Writes (ingest,
            deletes) get the caller's deadline only.
        deadline_margin: seconds kept back from the caller's remaining
            deadline (at most a tenth of it), so a transaction terminated
            at its timeout is still answered DEADLINE_EXCEEDED before the
            caller gives up.
        connection_timeout: seconds to open one connection.
        connection_acquisition_timeout: seconds to get a pooled connection,
            opening one included.
        liveness_check_timeout: a pooled connection idle longer than this
            many seconds is checked (one round trip) before use, so one
            that died with a restarted Neo4j is replaced, not failed on.
        max_connection_lifetime: seconds a connection is used at most.
        max_retry_seconds: how long the driver retries a transaction that
            failed on a lost connection (first retry after 0.1 s).
    """

    model_config = ConfigDict(extra="forbid")

    uri: str = "bolt://127.0.0.1:7687"
    user: str = ""
    password: str = ""
    database: str = "neo4j"
    transaction_timeout_max: float = Field(30.0, gt=0.0)
    deadline_margin: float = Field(0.05, ge=0.0)
    connection_timeout: float = Field(2.0, gt=0.0)
    connection_acquisition_timeout: float = Field(5.0, gt=0.0)
    liveness_check_timeout: float = Field(2.0, ge=0.0)
    max_connection_lifetime: float = Field(600.0, gt=0.0)
    max_retry_seconds: float = Field(1.0, ge=0.0)


class RetrieverGraphSettings(ServiceSettings):
    """Attributes:
    neo4j: Neo4jSettings (group, GRAPHMESH_RETRIEVER_GRAPH_NEO4J__<FIELD>).
    expansion_weights: entity expansion weight per relation ("parent",
        "same_object", "same_property", "same_category"); defaults 0.85 /
        0.55 / 0.45 / 0.35 from the Guizhou indicator GraphRAG design (docs/references.md) (JSON in the environment).
    attribute_other_weight: weight of a link whose predicate does not match
        the attribute label the query names (e.g. an adverse reaction when
        the query lists symptoms), in [0, 1].
    docgraph_refresh_seconds: how often the document graph's lookup tables
        (articles, terms, offences) check the stored graph version and are
        rebuilt when it changed.
    dense_lookups: whether lookup tables that can match by meaning (law_zh's
        offence names) get vectors from the expander (GRAPHMESH_EXPANDER_ADDR);
        off: they match by characters only.
    expander_timeout: seconds per Embed call of the dense lookups (the
        first embeds every penal article: a few seconds on 2 cores, cold).
    """

    model_config = SettingsConfigDict(env_prefix="GRAPHMESH_RETRIEVER_GRAPH_")

    port: int = DEFAULT_PORTS["retriever_graph"]
    neo4j: Neo4jSettings = Field(default_factory=Neo4jSettings)
    expansion_weights: dict[str, float] = Field(
        default_factory=lambda: {"parent": 0.85, "same_object": 0.55, "same_property": 0.45, "same_category": 0.35}
    )
    attribute_other_weight: float = Field(0.3, ge=0.0, le=1.0)
    docgraph_refresh_seconds: float = Field(10.0, gt=0.0)
    dense_lookups: bool = True
    expander_timeout: float = Field(30.0, gt=0.0)

    #: The flat names of the previous release (fields added since have none).
    deprecated_fields: ClassVar[dict[str, str]] = {f"neo4j_{name}": f"neo4j.{name}" for name in ("uri", "user", "password", "database")}
