"""The citation grammar under the real local LLM (llama.cpp, Qwen2.5-Coder
0.5B Q4_K_M): what the model writes under it is sentences (and clauses ending
at "；") that each end with marks of the packed sources, and nothing else."""
from __future__ import annotations

import re

import pytest

import domains
from services.common.llm import LlmClient, LlmConfig
from services.gateway.answer.citation_grammar import citation_grammar
from services.gateway.answer.grounding import build_messages

pytestmark = [pytest.mark.asyncio(loop_scope="session"), pytest.mark.e2e]

CONTEXT = ("[1] 中华人民共和国专利法 第四十二条\n发明专利权的期限为二十年，实用新型专利权的期限为十年，自申请日起计算。\n"
           "[2] 中华人民共和国专利法 第四十四条\n没有按照规定缴纳年费的，专利权在期限届满前终止。\n"
           "[3] 中华人民共和国商标法 第三十九条\n注册商标的有效期为十年，自核准注册之日起计算。")
SENTENCE = re.compile(r"[^\[\]【】。！？!?；;\n]{2,}(?:\[(\d+)\])+[。！？.；]")


async def test_under_the_grammar_every_sentence_ends_with_a_mark_of_a_packed_source(local_llm):
    client = LlmClient(LlmConfig(base_url=local_llm, timeout=120.0))
    try:
        messages = build_messages("发明专利保护多少年？", CONTEXT, domains.answer_prompt(["law_zh"]))
        answer = await client.complete(messages, max_tokens=96, extra={"grammar": citation_grammar(3)})
    finally:
        await client.close()
    sentences = [m.group(0) for m in SENTENCE.finditer(answer)]
    assert sentences and "".join(sentences).replace(" ", "") == answer.replace(" ", ""), answer
    marks = {int(n) for n in re.findall(r"\[(\d+)\]", answer)}
    assert marks and marks <= {1, 2, 3}, answer
