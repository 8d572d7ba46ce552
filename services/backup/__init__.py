"""Backup and restore of both stores (``graphmesh backup create|restore``).

- ``manifest``: the manifest, store summaries and the decisions made from
  them (consistency, emptiness, versions); pure.
- ``postgres``: pg_dump / pg_restore and the PostgreSQL summary.
- ``graph``: Neo4j export / import through the driver, the graph summary.
- ``run``: ``create_backup`` and ``restore_backup``.
"""
