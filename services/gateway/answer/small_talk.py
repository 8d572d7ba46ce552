"""Greetings, thanks and acknowledgements sent as a question ("hi", "你好", "谢谢医生", "好的"): nothing is asked, so nothing is
answered, whatever the search finds. Three trials' chat pages answered "hi" and "谢谢医生" with quotes
from their documents (answerability 0.99). Pure; GraphMesh's rule, not a reference design's."""
from __future__ import annotations

import re

from services.common.text import latin_script, simplified

#: Greetings and thanks, in Chinese (simplified, Cantonese) and English.
#: And acknowledgements (好的, 收到, ok): a trial's "好的谢谢" and "收到" after an answer were answered as the
#: earlier question again, and "ok" was refused over the chat's own "(Earlier: …)" wrapper.
_GREETING = re.compile(r"你好|您好|哈喽|哈啰|嗨|早上好|上午好|下午好|晚上好|早安|晚安|在吗|在不在|谢谢|多谢|感谢|辛苦了|拜拜|"
                       r"再见|唔该|好的|好滴|好嘞|收到|知道了|明白了?|了解了?|懂了|嗯嗯?|"
                       r"\b(?:hi|hello|hey|hiya|good (?:morning|afternoon|evening)|thank you|thanks|thx|cheers|"
                       r"bye|goodbye|ok|okay|got it|noted)\b", re.IGNORECASE)
#: Words that address someone or soften a greeting, left over once it is taken away ("谢谢医生", "thanks a lot").
_ADDRESS = re.compile(r"医生|大夫|老师|客服|亲|你们|您|大家|[晒啦呀啊哦哈喔嘛]|\b(?:there|doctor|team|everyone|all|guys|so much|very much|"
                      r"a lot)\b", re.IGNORECASE)
_NOT_A_WORD = re.compile(r"[\W_]+", re.UNICODE)
#: Thanks and acknowledgements among the small talk: answered "you're welcome", not "hello".
_THANKS = re.compile(r"谢谢|多谢|感谢|辛苦了|唔该|好的|好滴|好嘞|收到|知道了|明白|了解|懂了|嗯|拜拜|再见|"
                     r"\b(?:thank you|thanks|thx|cheers|ok|okay|got it|noted|bye|goodbye)\b", re.IGNORECASE)


def reason(question: str) -> str | None:
    """Why the answer abstains when ``question`` holds a greeting or thanks (``_GREETING``) and nothing else but
    words of address (``_ADDRESS``), punctuation and emoji, or only emoji and punctuation, in the question's
    language; None when it asks something. Emoji or punctuation alone ("👍", "？？？") are said to hold no words,
    not to be a greeting (a trial's resident typing "？？？" was told it was one)."""
    text = simplified(question)
    if not _NOT_A_WORD.sub("", text):  # "👍", "🐶？", "？？？": a chat's reaction, no question
        return "No question was asked: the message has no words" if latin_script(question) \
            else "没有读到问题：消息里没有文字，请输入要问的内容"
    if not _GREETING.search(text) or _NOT_A_WORD.sub("", _ADDRESS.sub(" ", _GREETING.sub(" ", text))):
        return None
    return "No question was asked, only a greeting or thanks" if latin_script(question) else "没有读到问题，只有问候或致谢"


def reply(question: str) -> str | None:
    """What the answer says to small talk (``reason`` is not None), in the question's language: a greeting is
    greeted back and asked for the question, thanks and acknowledgements get "you're welcome", a message of
    no words is told so; None when ``question`` asks something. A trial's parents' "你好" and "谢谢" got
    "没有读到问题，只有问候或致谢，无法回答这个问题" above a list of unrelated sources."""
    why = reason(question)
    if why is None:
        return None
    english = latin_script(question)
    if not _NOT_A_WORD.sub("", simplified(question)):
        return why
    if _THANKS.search(simplified(question)):
        return "You're welcome. Ask another question any time." if english else "不客气，还有问题可以继续问。"
    return "Hello! Type your question and I will look for the answer in the documents." if english \
        else "您好！请直接输入想问的问题，我会从资料里找答案。"
