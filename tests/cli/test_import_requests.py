"""The requests ``graphmesh ingest files PATH... --async`` sends (services/cli/operations_cmd.py):
a JSONL file among the files is its own operation, its lines documents, as without --async."""
from __future__ import annotations

import argparse
import json

import pytest

from graphmesh.gateway.v1 import gateway_pb2
from services.cli.operations_cmd import import_requests

pytestmark = pytest.mark.unit


def _args(*paths: str) -> argparse.Namespace:
    return argparse.Namespace(kind="files", paths=list(paths), collection="hotel", pack="", id_prefix="", meta=[])


def test_a_jsonl_file_among_the_files_is_sent_as_jsonl_documents_in_an_operation_of_its_own(tmp_path):
    (tmp_path / "rules.md").write_text("# 入住须知\n退房时间为中午12:00。\n", "utf-8")
    record = {"id": "m1", "title": "会员等级", "text": "累计入住10晚升级为金卡。"}
    (tmp_path / "members.jsonl").write_text(json.dumps(record, ensure_ascii=False) + "\n", "utf-8")
    files, jsonl = import_requests(_args(str(tmp_path)))
    assert [f.name.rsplit("/", 1)[-1] for f in files.files] == ["rules.md"] and not files.jsonl
    assert not jsonl.files and json.loads(jsonl.jsonl)["id"] == "m1"
    assert jsonl.kind == gateway_pb2.INGEST_KIND_DOCUMENTS and jsonl.collection == files.collection == "hotel"


def test_a_folder_of_jsonl_files_only_sends_no_empty_files_request(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"id": "a", "text": "第一条 内容。"}\n', "utf-8")
    [only] = import_requests(_args(str(tmp_path)))
    assert only.jsonl and not only.files
