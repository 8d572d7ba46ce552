"""The embedded Neo4j of `graphmesh up` with its generated password: a
client without the password is refused, one with it is served, and a
restart with the same password (every `graphmesh up` after the first)
opens the same store."""
from __future__ import annotations

import pytest
from neo4j import GraphDatabase
from neo4j.exceptions import AuthError

from services.common.mesh_auth import new_mesh_token
from services.retriever_graph.embedded import start_embedded_neo4j, stop_process

pytestmark = pytest.mark.integration


def test_password_is_required_and_survives_a_restart(tmp_path):
    password = new_mesh_token()
    for attempt in range(2):
        proc, uri = start_embedded_neo4j(tmp_path / "data", 0, tmp_path / f"neo4j-{attempt}.log", password=password)
        try:
            with pytest.raises(AuthError):
                with GraphDatabase.driver(uri) as driver:
                    driver.verify_connectivity()
            with GraphDatabase.driver(uri, auth=("neo4j", password)) as driver:
                if attempt == 0:
                    driver.execute_query("CREATE (:Probe {n: 1})")
                assert driver.execute_query("MATCH (p:Probe) RETURN count(p) AS n").records[0]["n"] == 1
        finally:
            stop_process(proc.pid)
