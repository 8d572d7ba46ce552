"""The answer generator's DeepSearch partial answer without an LLM: the
extractive quote of the iteration's evidence, never its label alone."""
from __future__ import annotations

import pytest

from services.gateway.answer.generator import Generator
from services.gateway.downstream.guard import Deadline
from tests.fakes import FakeLlm
from tests.gateway.test_orchestration import settings

pytestmark = [pytest.mark.unit, pytest.mark.asyncio(loop_scope="session")]


async def test_a_partial_answer_quotes_the_evidence_without_the_extractive_label():
    generator = Generator(settings(), FakeLlm())
    partial = await generator.partial_answer("增长率多少时停止？", "", ["增长率低于阈值时停止迭代。"], Deadline(5))
    assert partial == "增长率低于阈值时停止迭代。 [1]"


async def test_evidence_with_nothing_quotable_gives_an_empty_partial_answer_not_the_label():
    generator = Generator(settings(), FakeLlm())
    assert await generator.partial_answer("增长率多少时停止？", "", ["|---|---|"], Deadline(5)) == ""
    assert await generator.partial_answer("增长率多少时停止？", "", [], Deadline(5)) == ""
