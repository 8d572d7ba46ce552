"""``graphmesh ingest files`` against the real gateway (fake downstream
services): a JSONL file among the files counts its documents in the totals,
as a document file counts its own."""
from __future__ import annotations

import asyncio
import json
import os
import shlex

import pytest

from graphmesh.common.v1 import types_pb2
from graphmesh.gateway.v1 import gateway_pb2
from services.cli.documents import confirmed_collection_delete, prune_scopes
from services.cli.main import build_parser, main

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.contract]


async def test_a_jsonl_files_documents_count_in_the_totals(cli_gateway, capsys, tmp_path):
    await cli_gateway(ingest={"sentence_vectors": False})
    (tmp_path / "laws.jsonl").write_text("\n".join(json.dumps({"id": f"d{i}", "text": f"第{i}条 内容。"}, ensure_ascii=False)
                                                   for i in range(3)), "utf-8")
    (tmp_path / "手册.md").write_text("# 手册\n\n年假为十五天。\n", "utf-8")
    code = await asyncio.to_thread(main, ["ingest", "files", str(tmp_path / "laws.jsonl"), str(tmp_path / "手册.md"),
                                          "--collection", "hr"])
    out, err = capsys.readouterr()
    totals = json.loads(out.strip().splitlines()[-1])
    inner = json.loads(next(line for line in err.splitlines() if line.startswith("jsonl")).split(": ", 1)[1])
    assert code == 0 and inner["stored"] == 3
    assert (totals["files"], totals["records"], totals["stored"], totals["failed"]) == (2, 3, 4, 0)
    assert totals["chunks"] >= inner["chunks"] + 1


async def test_a_file_with_the_same_text_as_another_says_so(cli_gateway, capsys, tmp_path):
    await cli_gateway(ingest={"sentence_vectors": False})
    for name in ("报销.md", "报销-副本.md"):
        (tmp_path / name).write_text("# 报销\n\n差旅费须在出差结束后三十天内报销。\n", "utf-8")
    code = await asyncio.to_thread(main, ["ingest", "files", str(tmp_path / "报销.md"), str(tmp_path / "报销-副本.md"),
                                          "--collection", "hr"])
    err = capsys.readouterr().err
    copy = next(line for line in err.splitlines() if "报销-副本.md" in line)
    assert code == 0 and copy.startswith("stored") and "same text as" in copy and "报销.md'" in copy


async def test_a_file_with_the_same_title_and_other_text_names_the_other_and_how_to_delete_it(cli_gateway, capsys,
                                                                                               tmp_path):
    await cli_gateway(ingest={"sentence_vectors": False})
    (tmp_path / "报销2024.md").write_text("# 差旅报销办法\n\n住宿标准每晚400元。\n", "utf-8")
    (tmp_path / "报销2026.md").write_text("# 差旅报销办法\n\n住宿标准每晚500元。\n", "utf-8")
    code = await asyncio.to_thread(main, ["ingest", "files", str(tmp_path / "报销2024.md"), str(tmp_path / "报销2026.md"),
                                          "--collection", "hr"])
    err = capsys.readouterr().err
    revised = next(line for line in err.splitlines() if "报销2026.md" in line)
    stored_id = next(line for line in err.splitlines() if "报销2024.md" in line and "报销2026" not in line).split()[1]
    assert code == 0 and revised.startswith("stored") and "same title as" in revised
    assert revised.endswith(f"same title as {stored_id!r}, with other text: two versions? both answer, each with its own "
                            f"figures; delete the one no longer in force (graphmesh documents delete {shlex.quote(stored_id)} "
                            f"--collection hr, or this one)")
    assert "same title" not in next(line for line in err.splitlines() if "报销2024.md" in line and "报销2026" not in line)


async def test_collections_list_with_none_says_so_on_stderr(cli_gateway, capsys):
    """A trial's `collections list` on a new stack printed nothing at all."""
    await cli_gateway()
    assert await asyncio.to_thread(main, ["collections", "list"]) == 0
    out, err = capsys.readouterr()
    assert out == "" and "no collections: nothing was ingested yet" in err


async def test_a_file_name_that_is_not_utf8_fails_alone_and_the_others_are_stored(cli_gateway, capsys,
                                                                                   tmp_path):
    """A trial's folder with a file named in another encoding ended in a traceback, and nothing was stored."""
    await cli_gateway(ingest={"sentence_vectors": False})
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / os.fsdecode(b"\xff\xfe.txt")).write_text("乱码文件名。\n", "utf-8")
    (folder / "ok.txt").write_text("年假为十五天。\n", "utf-8")
    (folder / "more.jsonl").write_text(json.dumps({"id": "r1", "text": "病假需要医院证明。"}, ensure_ascii=False), "utf-8")
    code = await asyncio.to_thread(main, ["ingest", "files", str(folder), "--collection", "hr"])
    out, err = capsys.readouterr()
    totals = json.loads(out.strip().splitlines()[-1])
    assert code == 1 and "Traceback" not in err
    assert any(line.startswith("failed") and "\ufffd\ufffd.txt" in line and "not valid UTF-8" in line
               for line in err.splitlines())
    assert any(line.startswith("stored") and "ok.txt" in line for line in err.splitlines())
    # the JSONL file's record is counted apart, so the totals add up: 2 files that are not JSONL + 1 record
    assert (totals["files"], totals["records"], totals["stored"], totals["failed"]) == (3, 1, 2, 1)


def test_collections_list_with_a_name_is_a_usage_error(capsys):
    """`collections list hr` listed every collection, as if the name were a filter it applied."""
    assert main(["collections", "list", "hr"]) == 2
    assert "takes no name" in capsys.readouterr().err


async def test_eval_over_a_collection_no_store_holds_is_an_error_naming_it(cli_gateway, capsys, tmp_path):
    """A trial's eval with a mistyped --collection scored 0.0 on every metric and exited 0."""
    await cli_gateway()
    dataset = tmp_path / "q.jsonl"
    dataset.write_text(json.dumps({"id": "a", "query": "年假几天", "gold_text": "年假为十五天"}, ensure_ascii=False), "utf-8")
    code = await asyncio.to_thread(main, ["eval", "--dataset", str(dataset), "--collection", "yuntuu",
                                          "--out", str(tmp_path / "run.json")])
    err = capsys.readouterr().err
    assert code == 2 and "no store holds collection 'yuntuu'" in err
    assert not (tmp_path / "run.json").exists()


async def test_every_command_sends_the_api_key_when_auth_is_on(fake_gateway, monkeypatch, capsys, tmp_path):
    """A trial with auth on got UNAUTHENTICATED from `collections list`, `documents list` and `ingest files`
    with GRAPHMESH_API_KEY set, and `eval` scored 0 with every question an error."""
    from services.gateway.api.auth import new_key

    key, record = new_key("operator")
    gw = await fake_gateway(auth={"enabled": True, "api_keys": record.line()}, ingest={"sentence_vectors": False})
    capsys.readouterr()
    monkeypatch.setenv("GRAPHMESH_GATEWAY_ADDR", gw.address)
    monkeypatch.setenv("GRAPHMESH_API_KEY", key)
    (tmp_path / "手册.md").write_text("# 手册\n\n年假为十五天。\n", "utf-8")
    assert await asyncio.to_thread(main, ["ingest", "files", str(tmp_path / "手册.md"), "--collection", "hr"]) == 0
    assert await asyncio.to_thread(main, ["collections", "list"]) == 0
    assert await asyncio.to_thread(main, ["documents", "list", "--collection", "hr"]) == 0
    dataset = tmp_path / "q.jsonl"
    dataset.write_text(json.dumps({"id": "a", "query": "年假几天", "gold_text": "年假为十五天"}, ensure_ascii=False), "utf-8")
    code = await asyncio.to_thread(main, ["eval", "--dataset", str(dataset), "--collection", "hr", "--json",
                                          "--out", str(tmp_path / "run.json")])
    out, err = capsys.readouterr()
    assert "UNAUTHENTICATED" not in err
    assert code == 0 and json.loads(out.strip().splitlines()[-1])["errors"] == 0
    monkeypatch.delenv("GRAPHMESH_API_KEY")  # and without the key, the gateway refuses: the key is what let them in
    assert await asyncio.to_thread(main, ["collections", "list"]) == 2
    assert "UNAUTHENTICATED" in capsys.readouterr().err


async def test_collections_delete_asks_first_and_a_script_passes_yes(cli_gateway, capsys, tmp_path):
    """A trial noted that `collections delete` removes a whole collection without a word."""
    await cli_gateway(ingest={"sentence_vectors": False})
    (tmp_path / "手册.md").write_text("# 手册\n\n年假为十五天。\n", "utf-8")
    assert await asyncio.to_thread(main, ["ingest", "files", str(tmp_path / "手册.md"), "--collection", "hr"]) == 0
    capsys.readouterr()
    assert await asyncio.to_thread(main, ["collections", "delete", "hr"]) == 2  # no terminal under pytest
    assert "error: deleting collection 'hr': " in capsys.readouterr().err
    assert await asyncio.to_thread(main, ["collections", "list"]) == 0
    assert capsys.readouterr().out.startswith("hr")
    assert await asyncio.to_thread(main, ["collections", "delete", "hr", "--yes"]) == 0
    assert "byStore" in capsys.readouterr().out  # DeleteCollection's reply: what each store deleted


async def test_a_mistyped_collection_gets_the_stored_name_it_meant(cli_gateway, capsys, tmp_path):
    """A trial's `collections delete wuye-rst` got NOT_FOUND with no word of the collection wuye-rest."""
    await cli_gateway(ingest={"sentence_vectors": False})
    (tmp_path / "须知.txt").write_text("烫伤时立即用冷水冲洗降温15分钟以上。\n", "utf-8")
    assert await asyncio.to_thread(main, ["ingest", "files", str(tmp_path), "--collection", "wuye-rest"]) == 0
    capsys.readouterr()
    assert await asyncio.to_thread(main, ["collections", "delete", "wuye-rst", "--yes"]) != 0
    assert "did you mean the collection 'wuye-rest' (not 'wuye-rst')?" in capsys.readouterr().err


def test_a_bare_file_name_not_found_gets_the_stored_ids_it_meant(capsys):
    """A trial's `documents delete 事故应急处置步骤.txt` deleted nothing with no hint that the file was stored from its
    folder as 规章/事故应急处置步骤.txt."""
    from services.cli import documents

    class Stub:
        def ListDocuments(self, request, timeout):
            names = ["规章/事故应急处置步骤.txt", "规章/实验室安全管理规定.md"]
            return gateway_pb2.ListDocumentsResponse(documents=[
                types_pb2.StoredDocument(name=f"{request.parent}/documents/{n}") for n in names])

    args = build_parser().parse_args(["documents", "delete", "事故应急处置步骤.txt", "--collection", "ls2"])
    documents._suggest_ids(Stub(), args, ["事故应急处置步骤.txt", "没有这个.txt"])
    assert capsys.readouterr().err == "did you mean '规章/事故应急处置步骤.txt' (not '事故应急处置步骤.txt')?\n"


def test_collections_delete_goes_ahead_only_on_yes_at_a_terminal(monkeypatch, capsys):
    class Stub:
        def ListCollections(self, request, timeout):
            return gateway_pb2.ListCollectionsResponse(collections=[types_pb2.CollectionInfo(name="hr", documents=3)])

    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    asked = []
    assert confirmed_collection_delete(Stub(), "hr", lambda prompt: asked.append(prompt) or "y")
    assert "collection 'hr': 3 documents" in asked[0]
    assert not confirmed_collection_delete(Stub(), "hr", lambda prompt: "")
    assert "not deleted" in capsys.readouterr().err


async def test_eval_names_the_questions_whose_gold_text_is_in_no_passage(cli_gateway, capsys, tmp_path):
    """Two trials' gold lines that matched nothing stored (a typo; a PDF's ― for the source's —) scored as
    plain misses: eval now searches for the gold line itself and names the questions it still cannot find."""
    from tests.fakes import FakeRetriever, candidate

    pg = FakeRetriever("retriever_pg", [candidate("手册.md#1", "年假为十五天。办公时间8:30―17:00。", "pg.keyword", 2.0)])
    pg.collections = [types_pb2.CollectionInfo(name="hr", documents=1, domain_pack="generic")]
    await cli_gateway(pg=pg)
    dataset = tmp_path / "q.jsonl"
    rows = [{"id": "typo", "query": "年假几天", "gold_text": "年假共计二十天"},
            {"id": "dash", "query": "几点上班", "gold_text": "办公时间8:30—17:00"}]
    dataset.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), "utf-8")
    capsys.readouterr()
    code = await asyncio.to_thread(main, ["eval", "--dataset", str(dataset), "--collection", "hr", "--json",
                                          "--out", str(tmp_path / "run.json")])
    out, err = capsys.readouterr()
    assert code == 0 and "the gold_text of 1 questions (typo) is in no passage found" in err
    totals = json.loads(out.strip().splitlines()[-1])
    assert totals["recall@3"] == 0.5  # the dash line is found, the typo is not
    saved = json.loads((tmp_path / "run.json").read_text("utf-8"))
    assert [r["gold_text_unfound"] for r in saved["rows"]] == [True, False]


async def test_prune_removes_the_documents_of_files_no_longer_in_the_folder(cli_gateway, capsys, tmp_path):
    """A trial deleted a withdrawn policy's file and ingested the folder again: "unchanged", and the policy
    kept being answered. With --prune the collection mirrors the folder."""
    await cli_gateway(ingest={"sentence_vectors": False})
    folder = folder_of(tmp_path / "policies", {"居住证.md": "# 居住证\n\n受理后15个工作日内制证完成。\n",
                                               "占道经营.txt": "占道经营投诉由城管受理。\n"})
    assert await asyncio.to_thread(main, ["ingest", "files", str(folder), "--collection", "hotline"]) == 0
    (folder / "占道经营.txt").unlink()
    capsys.readouterr()
    assert await asyncio.to_thread(main, ["ingest", "files", str(folder), "--collection", "hotline"]) == 0
    assert "pruned" not in capsys.readouterr().err  # without --prune nothing is deleted
    err, listed = await prune_one(folder, "hotline", capsys)
    assert "pruned    policies/占道经营.txt: not among the files read" in err
    assert "居住证.md" in listed and "占道经营.txt" not in listed


def folder_of(folder, files: dict[str, str]):
    """``folder``, made, holding ``files`` (name -> UTF-8 text)."""
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text, "utf-8")
    return folder


async def prune_one(folder, collection: str, capsys) -> tuple[str, str]:
    """`ingest files FOLDER --prune` into ``collection``, which must prune one document: (its stderr, then the
    collection's document list)."""
    code = await asyncio.to_thread(main, ["ingest", "files", str(folder), "--collection", collection, "--prune"])
    out, err = capsys.readouterr()
    assert code == 0 and json.loads(out.strip().splitlines()[-1])["pruned"] == 1, err
    assert await asyncio.to_thread(main, ["documents", "list", "--collection", collection, "--all"]) == 0
    return err, capsys.readouterr().out


async def test_prune_keeps_other_folders_files_and_documents_not_from_files(cli_gateway, capsys, tmp_path):
    """A trial noted that --prune of one folder would delete what another folder's files and a JSONL import
    had stored in the same collection: a folder's prune reaches only the ids that folder gives."""
    await cli_gateway(ingest={"sentence_vectors": False})
    policies, notices = tmp_path / "policies", tmp_path / "notices"
    policies.mkdir()
    notices.mkdir()
    (policies / "居住证.md").write_text("# 居住证\n\n受理后15个工作日内制证完成。\n", "utf-8")
    (policies / "旧办法.txt").write_text("旧办法已废止。\n", "utf-8")
    (notices / "停水.txt").write_text("周三停水一天。\n", "utf-8")
    records = tmp_path / "faq.jsonl"
    records.write_text('{"id": "faq-1", "text": "热线电话是12345。"}\n', "utf-8")
    for argv in (["ingest", "files", str(policies), str(notices)], ["ingest", "documents", str(records)]):
        assert await asyncio.to_thread(main, [*argv, "--collection", "hotline"]) == 0
    (policies / "旧办法.txt").unlink()
    capsys.readouterr()
    err, listed = await prune_one(policies, "hotline", capsys)
    assert "pruned    policies/旧办法.txt" in err
    assert "notices/停水.txt" in listed and "faq-1" in listed and "旧办法" not in listed


async def test_a_folder_another_collection_holds_is_stored_under_its_name_and_pruned_there(cli_gateway, capsys,
                                                                                            tmp_path):
    """Three trials' second collection of one folder failed file by file (ids are unique across collections)."""
    await cli_gateway(ingest={"sentence_vectors": False})
    folder = folder_of(tmp_path / "docs", {"作息.txt": "早读7:20开始。\n", "请假.txt": "请假须提前一天。\n"})
    assert await asyncio.to_thread(main, ["ingest", "files", str(folder), "--collection", "grade10"]) == 0
    capsys.readouterr()
    assert await asyncio.to_thread(main, ["ingest", "files", str(folder), "--collection", "grade11"]) == 0
    err = capsys.readouterr().err
    assert "stored as 'grade11/docs/作息.txt': another collection holds 'docs/作息.txt'" in err
    (folder / "请假.txt").unlink()
    err, listed = await prune_one(folder, "grade11", capsys)
    assert "pruned    grade11/docs/请假.txt" in err and "grade11/docs/作息.txt" in listed  # still in the folder
    (folder / "作息.txt").write_text("早读7:00开始。\n", "utf-8")  # edited: its stored version is replaced, and it says so
    assert await asyncio.to_thread(main, ["ingest", "files", str(folder), "--collection", "grade11"]) == 0
    assert "docs/作息.txt (1 chunk); replaced the version stored under this id; stored as 'grade11/docs/作息.txt'" \
        in capsys.readouterr().err


def test_prune_scopes_are_the_folders_and_file_folders_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs" / "sub").mkdir(parents=True)
    (tmp_path / "docs" / "a.md").write_text("a", "utf-8")
    assert prune_scopes(["docs"]) == [("docs/", True)]
    assert prune_scopes(["docs/a.md"], "v2/") == [("v2/docs/", False)]
    assert prune_scopes(["docs/*.md", "docs/**/*.md", "*.txt"]) == [("docs/", False), ("docs/", True), ("", False)]


def test_prune_refuses_what_it_cannot_mirror(tmp_path, capsys):
    (tmp_path / "a.jsonl").write_text('{"id": "1", "text": "x"}\n', "utf-8")
    assert main(["ingest", "files", str(tmp_path / "a.jsonl"), "--prune"]) == 2
    assert "--prune needs every path found and no JSONL file" in capsys.readouterr().err
    assert main(["ingest", "documents", str(tmp_path / "a.jsonl"), "--prune"]) == 2
    assert "--prune apply to `ingest files` only" in capsys.readouterr().err


async def test_jsonl_failures_name_the_files_lines_and_a_repeated_id_is_reported(cli_gateway, capsys, tmp_path):
    """A trial's bulk import: after a blank line every failure named the line before its own; a repeated id
    silently dropped the earlier record (received 3, stored 2, failed 0); past 20 failures the rest went unsaid."""
    await cli_gateway(ingest={"sentence_vectors": False})
    data = tmp_path / "laws.jsonl"
    data.write_text('{"id": "d1", "text": "甲"}\n\n{"id": "d2", "text": ""}\n{"id": "d1", "text": "丙"}\n', "utf-8")
    capsys.readouterr()
    assert await asyncio.to_thread(main, ["ingest", "documents", str(data), "--collection", "laws"]) == 1
    out, err = capsys.readouterr()
    totals = json.loads(out.strip().splitlines()[-1])
    assert totals["received"] == 3 and totals["stored"] + totals["unchanged"] + totals["failed"] == 3
    assert "failed line 3 id=d2" in err  # the file's third line: the blank one counts
    assert "failed line 1 id=d1: id 'd1' is repeated by a later record, which is the one stored" in err
    many = tmp_path / "empty.jsonl"
    many.write_text("".join(f'{{"id": "e{i}", "text": ""}}\n' for i in range(25)), "utf-8")
    assert await asyncio.to_thread(main, ["ingest", "documents", str(many), "--collection", "laws"]) == 1
    assert "... and 5 more failed lines" in capsys.readouterr().err
