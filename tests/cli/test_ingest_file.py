"""``graphmesh ingest documents`` against the real gateway (fake downstream
services): two Ingest calls in flight so one batch is embedded while the
one before it is stored, except where a batch repeats an id of a batch
still in flight; counts and failures in input order either way."""
from __future__ import annotations

import asyncio
import json

import pytest

from services.cli.client import ingest_file
from tests.fakes import FakeRetriever, GatedExpander

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.contract]


def write(tmp_path, ids: list[str]):
    path = tmp_path / "docs.jsonl"
    path.write_text("\n".join(json.dumps({"id": i, "title": "测试法", "text": f"第{n}条 内容{n}。"}, ensure_ascii=False)
                              if i else "not json" for n, i in enumerate(ids)), "utf-8")
    return path


async def start(fake_gateway, monkeypatch):
    expander, pg = GatedExpander(), FakeRetriever("retriever_pg")
    gw = await fake_gateway(expander=expander, pg=pg, ingest={"sentence_vectors": False})  # one Embed call per batch
    monkeypatch.setenv("GRAPHMESH_GATEWAY_ADDR", gw.address)
    monkeypatch.delenv("GRAPHMESH_API_KEY", raising=False)
    return expander, pg


async def test_the_next_batch_is_sent_while_one_is_still_being_ingested(fake_gateway, monkeypatch, tmp_path):
    expander, pg = await start(fake_gateway, monkeypatch)
    upload = asyncio.create_task(asyncio.to_thread(ingest_file, write(tmp_path, ["a", "b", "", "d"]), "documents", 2,
                                                   progress=False))
    await expander.until_arrived(2)  # both batches arrived before either was let through
    expander.open(10)
    totals, failures = await upload
    assert (totals["received"], totals["stored"], totals["failed"]) == (4, 3, 1)
    assert [(line, reason.startswith("invalid JSON")) for line, _, reason in failures] == [(2, True)]
    assert sorted(pg.stored) == ["a", "b", "d"]


async def test_a_batch_repeating_an_id_in_flight_waits_so_the_later_record_wins(fake_gateway, monkeypatch, tmp_path):
    expander, pg = await start(fake_gateway, monkeypatch)
    upload = asyncio.create_task(asyncio.to_thread(ingest_file, write(tmp_path, ["a", "b", "a", "c"]), "documents", 2,
                                                   progress=False))
    await expander.until_arrived(1)
    await asyncio.sleep(0.3)
    assert expander.arrived == 1  # ["a", "c"] waits for ["a", "b"]
    expander.open(10)
    totals, _ = await upload
    assert totals["stored"] == 4 and pg.stored == ["a", "b", "a", "c"]
    last_a = [d for rpc, r in pg.calls if rpc == "ingest_documents" for d in r.documents if d.document.id == "a"][-1]
    assert "第2条" in last_a.chunks[0].text


async def test_a_batch_with_no_readable_record_is_reported_line_by_line_and_the_file_goes_on(fake_gateway, monkeypatch, tmp_path):
    """A trial's file lost its later good records: the gateway refuses a batch none of whose records it can
    read (INVALID_ARGUMENT), and the upload stopped there with one error."""
    expander, pg = await start(fake_gateway, monkeypatch)
    expander.open(10)
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join([json.dumps({"id": "a", "text": "第一条 内容。"}, ensure_ascii=False),
                               json.dumps({"id": "b", "title": "长" * 1001, "text": "第二条 内容。"}, ensure_ascii=False),
                               "not json",
                               json.dumps({"id": "d", "text": "第四条 内容。"}, ensure_ascii=False)]), "utf-8")
    totals, failures = await asyncio.to_thread(ingest_file, path, "documents", 1, progress=False)
    assert (totals["received"], totals["stored"], totals["failed"]) == (4, 2, 2)
    assert [(line, doc_id, reason.split(":")[0]) for line, doc_id, reason in failures] == [(1, "b", "title"), (2, "", "invalid JSON")]
    assert sorted(pg.stored) == ["a", "d"]
