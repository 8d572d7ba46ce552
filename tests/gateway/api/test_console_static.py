"""The web console's static files, read as text (the browser tests run
them): every interface text key exists in both languages, and every key the
page and the scripts name is defined."""
from __future__ import annotations

import pytest

import re

from services.gateway.api.console import CONSOLE

pytestmark = pytest.mark.unit


def _languages() -> dict[str, set[str]]:
    source = (CONSOLE / "i18n.js").read_text(encoding="utf-8")
    en, zh = source.split("\n  en: {", 1)[1].split("\n  zh: {", 1)
    zh = zh.split("\n};", 1)[0]
    key = re.compile(r'"([\w.]+)":\s*"')
    return {"en": set(key.findall(en)), "zh": set(key.findall(zh))}


def test_both_languages_have_the_same_keys():
    languages = _languages()
    assert len(languages["en"]) > 100
    assert languages["en"] - languages["zh"] == set()
    assert languages["zh"] - languages["en"] == set()


def test_every_key_the_page_and_scripts_use_is_defined():
    defined = _languages()["en"]
    html = (CONSOLE / "index.html").read_text(encoding="utf-8")
    used = set(re.findall(r'data-i18n(?:-placeholder|-label|-title)?="([\w.]+)"', html))
    for script in CONSOLE.glob("*.js"):
        used |= set(re.findall(r'\bt\("([\w.]+)"', script.read_text(encoding="utf-8")))
        for keys in re.findall(r'\[((?:\s*"[\w.]+",?)+)\s*\]\.map\(\(k\)', script.read_text(encoding="utf-8")):
            used |= set(re.findall(r'"([\w.]+)"', keys))  # table header key lists: [...].map((k) => t(k))
    assert {"ask.submit", "ent.breakdown", "st.p95", "att.evidence"} <= used
    assert used - defined == set()
