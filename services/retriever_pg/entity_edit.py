"""Editing the entity cards of ``entity_store``: export and deletion by name.

The cards hold no facts (those live in the graph retriever); the only
edges between cards are their ``parents`` lists, so deleting a card also
takes its name out of every other card's parents (and rewrites their card
text). Such a card's content hash is cleared: the next ingest of it writes
it again instead of taking it for unchanged. Pure asyncio (asyncpg).
"""
from __future__ import annotations

from services.common.records import Deletion, EntityExport, EntityRecord
from services.retriever_pg.entity_store import EntityCard, EntityCardStore

_FIELDS = "name, category, definition, aliases, parents"


def _record(row) -> EntityRecord:
    return EntityRecord(name=row["name"], category=row["category"], definition=row["definition"],
                        aliases=list(row["aliases"]), parents=list(row["parents"]))


async def export(cards: EntityCardStore, collection: str, names: list[str], page_size: int, after: str,
                 with_links: bool) -> EntityExport:
    """The named cards (or a page of cards after ``after``) by name and,
    with ``with_links``, the cards naming one of them as parent. Cards keep
    no attributes and no facts: those fields are empty."""
    async with cards._connect() as conn:
        if names:
            rows = await conn.fetch(f"SELECT {_FIELDS} FROM entity_cards WHERE collection = $1 AND name = ANY($2::text[]) "
                                    "ORDER BY name", collection, names)
        else:
            rows = await conn.fetch(f"SELECT {_FIELDS} FROM entity_cards WHERE collection = $1 AND name > $2 "
                                    "ORDER BY name LIMIT $3", collection, after, page_size)
        out = EntityExport(entities=[_record(r) for r in rows])
        if with_links and rows:
            children = await conn.fetch(f"SELECT {_FIELDS} FROM entity_cards WHERE collection = $1 AND parents && $2::text[] "
                                        "ORDER BY name", collection, [r["name"] for r in rows])
            out.children = [_record(r) for r in children]
    return out


async def delete(cards: EntityCardStore, collection: str, names: list[str]) -> tuple[Deletion, list[str]]:
    """Deletes the named cards (surfaces and grams cascade) and takes their
    names out of the other cards' parents, in one transaction.

    Returns:
        (counts: entities and surface vectors removed, names removed).
    """
    async with cards._connect() as conn:
        async with conn.transaction():
            vectors = await conn.fetchval(
                "SELECT count(*) FROM entity_surfaces WHERE collection = $1 AND entity_name = ANY($2::text[])", collection, names)
            removed = [r["name"] for r in await conn.fetch(
                "DELETE FROM entity_cards WHERE collection = $1 AND name = ANY($2::text[]) RETURNING name", collection, names)]
            if removed:
                gone = set(removed)
                for row in await conn.fetch(f"SELECT {_FIELDS} FROM entity_cards WHERE collection = $1 AND parents && $2::text[]",
                                            collection, removed):
                    parents = [p for p in row["parents"] if p not in gone]
                    text = EntityCard(name=row["name"], category=row["category"], definition=row["definition"],
                                      aliases=list(row["aliases"]), parents=parents).card_text()
                    await conn.execute("UPDATE entity_cards SET parents = $3, card = $4, content_hash = '' "
                                       "WHERE collection = $1 AND name = $2", collection, row["name"], parents, text)
    return Deletion(entities=len(removed), vectors=int(vectors) if removed else 0), sorted(removed)
