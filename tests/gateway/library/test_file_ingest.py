"""One file into its document (services/gateway/library/file_ingest.py): what a file's own metadata may hold."""
from __future__ import annotations

import pytest

from graphmesh.gateway.v1 import gateway_pb2
from services.gateway.library.file_ingest import document_from_file
from services.ingest.chunking import ChunkingConfig
from services.ingest.document_ids import MAX_HEADING_CHARS
from services.ingest.files import FileParseError

pytestmark = pytest.mark.unit


def _file(metadata: dict[str, str]) -> gateway_pb2.IngestFile:
    return gateway_pb2.IngestFile(name="m.txt", content="年假为十五天。".encode(), metadata=metadata)


@pytest.mark.parametrize("key", ["bad key!", "", "部门 名称", "k" * 65])
def test_a_metadata_key_no_filter_could_name_fails_the_file_naming_it(key):
    # a trial's {"bad key!": "v"} was stored; `--filter 'bad key! = "v"'` then failed on the key
    with pytest.raises(FileParseError, match="is not a metadata key") as err:
        document_from_file(_file({key: "v"}), "default", ChunkingConfig())
    assert repr(key) in str(err.value)


def test_metadata_keys_a_filter_can_name_are_kept():
    doc = document_from_file(_file({"部门": "人事", "source.url-v2": "u", "year_2024": "1"}), "hr", ChunkingConfig())
    assert {k: doc.record.metadata[k] for k in ("部门", "source.url-v2", "year_2024")} == {"部门": "人事", "source.url-v2": "u",
                                                                                         "year_2024": "1"}


def test_a_title_longer_than_the_stores_index_is_cut_to_the_limit():
    """A file's title is what it says (here its first heading): one past MAX_HEADING_CHARS would be refused by
    Neo4j's index after PostgreSQL stored it, so it is cut, and the file is stored whole."""
    heading = "长" * (MAX_HEADING_CHARS + 500)
    doc = document_from_file(gateway_pb2.IngestFile(name="t.md", content=f"# {heading}\n\n正文一句。".encode()),
                             "default", ChunkingConfig())
    assert doc.record.title == "长" * MAX_HEADING_CHARS and doc.record.heading_path == [doc.record.title]
    assert "正文一句" in doc.text
