"""The LLM prompts over statutes: the grounded answer names the law and
article of each claim and cites its source; rewrites add legal terms and
HyDE passages are written in the wording of a statute."""
from __future__ import annotations

from domains.pack import AnswerExample, AnswerPrompt, RewritePrompts

#: The worked example: two articles of the Labour Law from the corpus (ids
#: 5743 and 5741, gold of no dev question), the answering one second so the
#: model learns to pick its number rather than always write [1].
_EXAMPLE_ZH = AnswerExample(
    context=("[1] 中华人民共和国劳动法 第四章 工作时间和休息休假 第三十八条\n用人单位应当保证劳动者每周至少休息一日。\n"
             "[2] 中华人民共和国劳动法 第四章 工作时间和休息休假 第三十六条\n"
             "国家实行劳动者每日工作时间不超过八小时、平均每周工作时间不超过四十四小时的工时制度。"),
    question="公司让员工每天上班十个小时，合法吗？",
    answer="不合法，依照《中华人民共和国劳动法》第三十六条，劳动者每日工作时间不超过八小时、平均每周工作时间不超过四十四小时[2]。",
)
_EXAMPLE_EN = AnswerExample(
    context=_EXAMPLE_ZH.context,
    question="Can a company make staff work ten hours a day?",
    answer="No: under Article 36 of the Labour Law, working time may not exceed eight hours a day and 44 hours a week on average [2].",
)

# The instruction sits after the question: small local models (Qwen2.5 0.5B)
# otherwise answer with a bare "[1]". The example is neutral on purpose.
ANSWER_PROMPT = AnswerPrompt(
    system_zh=("你是严谨的法律问答助手。只依据给出的编号资料回答，不要使用资料以外的知识；资料没有写到的内容不要回答，"
               "资料不足时直说。回答中写明所依据的法律名称和条号（如《专利法》第四十二条），每句话后用[n]标注它依据的资料编号，"
               "只标注确实写有该内容的资料。不要输出 JSON 或代码块。"),
    instruction_zh=("请用一两句完整的中文句子回答，写明法律名称和条号，并在句末用方括号标注所依据资料的编号，"
                    "例如：依照《某某法》第十条，某某行为应当承担相应责任[2]。"),
    system_en=("You are a careful legal assistant. Answer only from the numbered sources given, in English; do not use "
               "other knowledge, and say so when the sources are not enough. Name the law and article you rely on, and "
               "end each sentence with [n], the number of the source that states it. No JSON, no code blocks."),
    instruction_en=("Answer in one or two complete English sentences, naming the law and article, each ending "
                    "with its source number, e.g.: Under Article 10 of the X Law, the party is liable [2]."),
    example_zh=_EXAMPLE_ZH,
    example_en=_EXAMPLE_EN,
)

REWRITE_PROMPTS = RewritePrompts(
    system="你是中文法律检索助手。只输出要求的内容，不要解释，不要使用 JSON 或代码块。",
    expanded_query="把下面的问题改写成一个更完整的检索查询，补充同义词和相关法律术语，只输出一行查询。\n问题：{query}",
    hyde="请用法律条文的口吻写一段不超过120字的文字，直接回答下面的问题。只输出这段文字。\n问题：{query}",
)
