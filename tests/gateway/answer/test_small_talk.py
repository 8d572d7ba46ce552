"""What counts as nothing asked (services/gateway/answer/small_talk.py), and how the refusal says why."""
from __future__ import annotations

import pytest

from services.gateway.answer import small_talk

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("message", ["？？？", "👍", "🐶？", "..."])
def test_punctuation_or_emoji_alone_is_said_to_hold_no_words_not_to_be_a_greeting(message):
    """A trial's resident typing "？？？" into the chat was told it was a greeting or thanks."""
    assert small_talk.reason(message) == "没有读到问题：消息里没有文字，请输入要问的内容"


def test_a_greeting_is_still_called_one():
    assert small_talk.reason("你好") == "没有读到问题，只有问候或致谢"
    assert small_talk.reason("thanks 👍") == "No question was asked, only a greeting or thanks"


def test_a_question_is_not_small_talk():
    assert small_talk.reason("狗链子要多长？") is None


def test_small_talk_is_answered_in_kind():
    """A trial's parents' "你好" and "谢谢" got "无法回答这个问题" above a list of unrelated sources."""
    assert small_talk.reply("你好") == "您好！请直接输入想问的问题，我会从资料里找答案。"
    assert small_talk.reply("谢谢老师") == "不客气，还有问题可以继续问。"
    assert small_talk.reply("Hello") == "Hello! Type your question and I will look for the answer in the documents."
    assert small_talk.reply("thanks!") == "You're welcome. Ask another question any time."
    assert small_talk.reply("？？？") == "没有读到问题：消息里没有文字，请输入要问的内容"
    assert small_talk.reply("孩子发烧了还能去吗") is None
