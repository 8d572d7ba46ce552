"""Resource names and page tokens of the document lifecycle RPCs (AIP-122,
AIP-131/132/135, AIP-158).

- collection: ``collections/{collection}``; ``collections/-`` stands for
  every collection where a parent may (AIP-159).
- document: ``collections/{collection}/documents/{id}``; the id is the rest
  of the name and may itself contain "/" (a file's relative path).
- entity: ``collections/{collection}/entities/{entity}``; the entity id is
  its canonical name, the rest of the resource name.
- page token: URL-safe base64 of {"after": last id, "q": fingerprint of the
  parent and filter}; a token used with another parent or filter is refused.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import json

from services.common.errors import InvalidArgument
from services.common.filters import validate_collection

WILDCARD = "-"
_COLLECTIONS = "collections/"
_DOCUMENTS = "/documents/"
_ENTITIES = "/entities/"


def _collection_segment(name: str, field: str, form: str) -> str:
    """What follows "collections/" in ``name``, which must be one segment;
    else InvalidArgument saying the ``form`` expected."""
    if not name.startswith(_COLLECTIONS) or "/" in name[len(_COLLECTIONS):]:
        raise InvalidArgument(field, f"must be {form}, got {name!r}")
    return name[len(_COLLECTIONS):]


def parse_parent(parent: str, field: str = "parent") -> list[str] | None:
    """The collections a parent names: [name], or None for "collections/-".

    Raises:
        InvalidArgument: not "collections/{collection}".
    """
    name = _collection_segment(parent, field, "collections/{collection} or collections/-")
    if name == WILDCARD:
        return None
    if not name:
        raise InvalidArgument(field, "names no collection")
    return [validate_collection(name, field)]


def parse_collection_name(name: str, field: str = "name") -> str:
    """The collection of "collections/{collection}" (no wildcard).

    Raises:
        InvalidArgument: not a collection name.
    """
    if _collection_segment(name, field, "collections/{collection}") == WILDCARD:
        raise InvalidArgument(field, "must name one collection, not collections/-")
    return parse_parent(name, field)[0]


def parse_document_name(name: str, field: str = "name") -> tuple[str | None, str]:
    """(collection or None for "-", document id) of a document name.

    Raises:
        InvalidArgument: not "collections/{collection}/documents/{id}".
    """
    if not name.startswith(_COLLECTIONS) or _DOCUMENTS not in name:
        raise InvalidArgument(field, f"must be collections/{{collection}}/documents/{{id}}, got {name!r}")
    collection, doc_id = name[len(_COLLECTIONS):].split(_DOCUMENTS, 1)
    if not doc_id or "\x00" in doc_id:
        raise InvalidArgument(field, "names no document id")
    if collection == WILDCARD:
        return None, doc_id
    if not collection:
        raise InvalidArgument(field, "names no collection (use - for any)")
    return validate_collection(collection, field), doc_id


def parse_entity_name(name: str, field: str = "name") -> tuple[str, str]:
    """(collection, entity name) of an entity resource name.

    Raises:
        InvalidArgument: not "collections/{collection}/entities/{entity}"
            (no wildcard collection).
    """
    if not name.startswith(_COLLECTIONS) or _ENTITIES not in name:
        raise InvalidArgument(field, f"must be collections/{{collection}}/entities/{{entity}}, got {name!r}")
    collection, entity = name[len(_COLLECTIONS):].split(_ENTITIES, 1)
    if not entity.strip() or "\x00" in entity:
        raise InvalidArgument(field, "names no entity")
    if not collection or collection == WILDCARD:
        raise InvalidArgument(field, "must name one collection")
    return validate_collection(collection, field), entity.strip()


def entity_name(collection: str, entity: str) -> str:
    """The resource name of a library entity."""
    return f"{_COLLECTIONS}{collection}{_ENTITIES}{entity}"


def document_name(collection: str, doc_id: str) -> str:
    """The resource name of a stored document."""
    return f"{_COLLECTIONS}{collection}{_DOCUMENTS}{doc_id}"


def _fingerprint(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:16]


def encode_page_token(after_id: str, *context: str) -> str:
    """The token of the page after ``after_id`` under ``context`` (parent, filter)."""
    raw = json.dumps({"after": after_id, "q": _fingerprint(*context)}, ensure_ascii=False).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii")


def decode_page_token(token: str, *context: str, field: str = "page_token") -> str:
    """The id a page token continues after ("" for no token).

    Raises:
        InvalidArgument: not a token of ours, or made for another parent or filter.
    """
    if not token:
        return ""
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode("ascii")))
        after, fingerprint = data["after"], data["q"]
    except (binascii.Error, ValueError, KeyError, TypeError, UnicodeError):
        raise InvalidArgument(field, "is not a page token of this API") from None
    if fingerprint != _fingerprint(*context) or not isinstance(after, str):
        raise InvalidArgument(field, "was made for another parent or filter")
    return after
