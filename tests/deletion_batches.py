"""For the stores' deletion tests: deletes in batches of two, each store
call's document ids recorded (services.common.retriever.StoreLifecycle)."""
from __future__ import annotations


def record_batches_of_two(monkeypatch, store) -> list[list[str]]:
    """Sets DELETE_BATCH to 2 and wraps ``store.delete_documents``; returns
    the list each call's ids are appended to."""
    from services.common import retriever

    monkeypatch.setattr(retriever, "DELETE_BATCH", 2)
    calls: list[list[str]] = []
    original = store.delete_documents

    async def recorded(ids, collections, conditions):
        calls.append(list(ids))
        return await original(ids, collections, conditions)

    monkeypatch.setattr(store, "delete_documents", recorded)
    return calls
