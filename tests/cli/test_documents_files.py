"""`graphmesh ingest files` argument expansion: folders (recursive), globs,
single files, each once, with their document ids."""
from __future__ import annotations

import pytest

import os
from pathlib import Path

from services.cli import documents
from services.cli.documents import expand_paths, links_outside, missing_message, skipped_files, unsupported_files
from services.cli.main import build_parser

pytestmark = pytest.mark.unit


def _touch(root: Path, *relative: str) -> None:
    for rel in relative:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")


def test_folders_globs_and_files_become_ids(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _touch(tmp_path, "手册/a.pdf", "手册/子目录/b.docx", "手册/忽略.xlsx", "其他/c.md", "其他/d.txt", "laws.jsonl")
    found, missing = expand_paths(["手册", "其他/*.md", "其他/d.txt", "手册/a.pdf", "laws.jsonl", "nowhere/*.pdf"])
    assert [(str(p.relative_to(tmp_path)) if p.is_absolute() else str(p), i) for p, i in found] == [
        (os.path.join("手册", "a.pdf"), "手册/a.pdf"),
        (os.path.join("手册", "子目录", "b.docx"), "手册/子目录/b.docx"),
        (os.path.join("其他", "c.md"), "其他/c.md"),
        (os.path.join("其他", "d.txt"), "其他/d.txt"),
        ("laws.jsonl", "laws.jsonl"),
    ]
    assert missing == ["nowhere/*.pdf"]
    prefixed, _ = expand_paths(["其他/c.md"], id_prefix="v2/")
    assert prefixed[0][1] == "v2/其他/c.md"


def test_a_folders_files_of_unread_types_are_named_and_hidden_ones_passed_over(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _touch(tmp_path, "手册/a.pdf", "手册/旧版.doc", "手册/子目录/表.xlsx", "手册/.DS_Store", "手册/.git/config", "单独.doc")
    assert [p.as_posix() for p in unsupported_files(["手册", "单独.doc", "nowhere"])] == ["手册/子目录/表.xlsx", "手册/旧版.doc"]


def test_a_folders_hidden_files_and_folders_are_not_ingested_but_one_named_on_its_own_is(tmp_path: Path, monkeypatch):
    """A .env.md or a .secret.txt dropped into a shared folder is not indexed with it."""
    monkeypatch.chdir(tmp_path)
    _touch(tmp_path, "手册/a.md", "手册/.env.md", "手册/.git/notes.txt", "手册/子目录/.secret.txt", "手册/子目录/b.txt")
    found, _ = expand_paths(["手册"])
    assert sorted(i for _, i in found) == ["手册/a.md", "手册/子目录/b.txt"]
    named, _ = expand_paths(["手册/.env.md"])
    assert [i for _, i in named] == ["手册/.env.md"]


def test_a_folders_links_to_files_outside_it_are_left_out_and_named(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _touch(tmp_path, "手册/a.md", "secret/passwd", "secret/keys.txt")
    (tmp_path / "手册" / "link.txt").symlink_to(tmp_path / "secret" / "passwd")
    (tmp_path / "手册" / "linked").symlink_to(tmp_path / "secret", target_is_directory=True)
    (tmp_path / "手册" / "same.md").symlink_to(tmp_path / "手册" / "a.md")  # inside the folder: read
    found, _ = expand_paths(["手册"])
    assert sorted(i for _, i in found) == ["手册/a.md", "手册/same.md"]  # a linked folder is not walked either
    assert [p.as_posix() for p in links_outside(["手册"])] == ["手册/link.txt"]
    assert unsupported_files(["手册"]) == []  # named once, as a link, not again as a file type
    _touch(tmp_path, "手册/表.xlsx")
    skipped = [(p.as_posix(), why.split(",")[0].split(";")[0]) for p, why in skipped_files(["手册"])]
    # every file left out counts in the ingest's "skipped" total, the link as well as the unread type
    assert skipped == [("手册/link.txt", f"a link to {tmp_path / 'secret' / 'passwd'}"),
                       ("手册/表.xlsx", "unsupported file type '.xlsx'")]


def test_a_globs_links_to_files_outside_its_folder_are_left_out_and_named(tmp_path: Path, monkeypatch):
    """A glob reads what a folder argument reads: a link out of the folder it searches is skipped, and a
    linked folder is not walked ("docs/**/*.txt" with docs/host.txt -> /etc/hostname)."""
    monkeypatch.chdir(tmp_path)
    _touch(tmp_path, "docs/a.txt", "docs/sub/b.txt", "secret/passwd.txt", "secret/keys.txt")
    (tmp_path / "docs" / "host.txt").symlink_to(tmp_path / "secret" / "passwd.txt")
    (tmp_path / "docs" / "sub" / "linked").symlink_to(tmp_path / "secret", target_is_directory=True)
    (tmp_path / "docs" / "same.txt").symlink_to(tmp_path / "docs" / "a.txt")  # inside the folder: read
    found, missing = expand_paths(["docs/**/*.txt"])
    assert sorted(i for _, i in found) == ["docs/a.txt", "docs/same.txt", "docs/sub/b.txt"]
    assert missing == []
    assert sorted(p.as_posix() for p in links_outside(["docs/**/*.txt"])) == [
        "docs/host.txt", "docs/sub/linked/keys.txt", "docs/sub/linked/passwd.txt"]
    assert [p.as_posix() for p, _ in skipped_files(["docs/**/*.txt"])][:1] == ["docs/host.txt"]
    named, _ = expand_paths(["docs/host.txt"])  # a link named on its own is read, as a hidden file is
    assert [i for _, i in named] == ["docs/host.txt"]
    monkeypatch.chdir(tmp_path / "docs")  # a glob without a folder searches the current one
    assert sorted(i for _, i in expand_paths(["*.txt"])[0]) == ["a.txt", "same.txt"]
    assert [p.as_posix() for p in links_outside(["*.txt"])] == ["host.txt"]


def test_an_argument_naming_nothing_says_why(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _touch(tmp_path, "表.xlsx")
    (tmp_path / "dangling.txt").symlink_to(tmp_path / "gone.txt")
    assert missing_message("nosuch.txt") == "no such file or folder: nosuch.txt"
    assert missing_message("*.pdf") == "no supported file matches *.pdf"
    assert missing_message("dangling.txt") == "dangling.txt is a broken link"
    assert missing_message("表.xlsx").startswith("no supported file at 表.xlsx: supported types are")
    assert expand_paths(["nosuch.txt", "dangling.txt"])[1] == ["nosuch.txt", "dangling.txt"]


def test_parser_takes_files_collection_and_filters():
    args = build_parser().parse_args(["ingest", "files", "a", "b", "--collection", "hr", "--meta", "dept=人事"])
    assert (args.kind, args.paths, args.collection, args.meta) == ("files", ["a", "b"], "hr", ["dept=人事"])
    args = build_parser().parse_args(["search", "q", "--collection", "a", "--collection", "b", "--filter", 'status = "x"'])
    assert (args.collection, args.filter) == (["a", "b"], 'status = "x"')
    args = build_parser().parse_args(["documents", "list", "--collection", "hr", "--page-token", "eyJh"])
    assert args.page_token == "eyJh"  # the token a listing prints for its next page
    args = build_parser().parse_args(["documents", "delete", "x", "y", "--collection", "hr"])
    assert (args.action, args.ids, args.collection) == ("delete", ["x", "y"], "hr")
    args = build_parser().parse_args(["eval", "--dataset", "d.jsonl", "--collection", "laws"])
    assert args.collection == ["laws"]


def test_collection_names_are_padded_by_terminal_columns_so_wide_names_line_up():
    from services.cli.documents import pad
    assert pad("hr", 10) == "hr" + " " * 8 and pad("公司文档", 10) == "公司文档" + " " * 2
    assert pad("一二三四五六", 10) == "一二三四五六"  # wider than the column: left as it is


def test_a_meta_key_a_filter_could_not_name_is_refused_before_anything_is_sent(tmp_path: Path, monkeypatch, capsys):
    from services.cli.main import main as cli
    (tmp_path / "a.txt").write_text("内容。", encoding="utf-8")
    monkeypatch.setenv("GRAPHMESH_GATEWAY_ADDR", "127.0.0.1:9")  # nothing listens: the refusal comes first
    assert cli(["ingest", "files", str(tmp_path / "a.txt"), "--meta", "bad key=1"]) == 2
    assert "--meta key 'bad key'" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["0", "-1", "inf", "nan", "soon"])
def test_a_timeout_must_be_a_finite_number_of_seconds_above_zero(value, capsys):
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["search", "年假", "--timeout", value])
    assert exit_info.value.code == 2 and "--timeout" in capsys.readouterr().err
    assert build_parser().parse_args(["search", "年假", "--timeout", "2.5"]).timeout == 2.5


def test_a_folder_with_no_file_that_is_read_is_a_usage_error_not_an_empty_success(tmp_path, monkeypatch, capsys):
    """A trial's `ingest files emptydir` exited 0 with all zeros and no word, where a glob matching nothing exits 2."""
    from services.cli.main import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GRAPHMESH_GATEWAY_ADDR", "127.0.0.1:9")  # never called
    (tmp_path / "empty").mkdir()
    _touch(tmp_path, "only_xlsx/表.xlsx")
    for folder in ("empty", "only_xlsx"):
        assert main(["ingest", "files", folder]) == 2
        assert f"error: no supported file in {folder}: supported types are" in capsys.readouterr().err


def test_a_missing_documents_look_alikes_are_the_stored_ids_that_end_with_its_name():
    """A trial's `documents delete 事故应急处置步骤.txt` deleted nothing with no hint: the file was stored from its
    folder as 规章/事故应急处置步骤.txt."""
    stored = ["规章/事故应急处置步骤.txt", "规章/实验室安全管理规定.md", "旧版/事故应急处置步骤.txt", "安全培训.md"]
    assert documents.id_look_alikes("事故应急处置步骤.txt", stored) == ["规章/事故应急处置步骤.txt", "旧版/事故应急处置步骤.txt"]
    assert documents.id_look_alikes("规章/实验室安全管理规定.md", ["ls2/规章/实验室安全管理规定.md"]) == \
        ["ls2/规章/实验室安全管理规定.md"]
    assert documents.id_look_alikes("应急处置步骤.txt", stored) == []  # a part of a name is not a look-alike
