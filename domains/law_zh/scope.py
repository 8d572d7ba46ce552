"""Questions outside what a law_zh corpus holds: the laws of another
country or of the EU, the own laws of Hong Kong, Macao and Taiwan, and the
common law or the GDPR. The corpus holds PRC laws, regulations and judicial
interpretations (the Basic Laws of Hong Kong and Macao among them), so a
question naming another jurisdiction's law, constitution, code, tax or
court is not answerable from it, however close its articles look
(日本刑法对盗窃罪怎么处罚？ retrieves the PRC Criminal Law's theft article).

The rule wants the jurisdiction right before the legal word (at most
MAX_GAP Chinese characters between, no punctuation; 司法 and 执法 are not
law names), so that "我在日本工作，回国后个人所得税怎么交" stays in scope, and a
question that names China itself (extradition from abroad, judicial
assistance) is in scope. A question naming no law is out of scope too when
its situation happens in another jurisdiction (在美国离婚) or its party
belongs to one (日本员工). Measured by bench/law_scope.py.
"""
from __future__ import annotations

import re

#: Jurisdictions whose law the corpus does not hold.
JURISDICTIONS = (
    "日本", "美国", "英国", "德国", "法国", "俄罗斯", "俄联邦", "韩国", "朝鲜", "印度", "欧盟", "加拿大", "澳大利亚", "新加坡",
    "意大利", "西班牙", "葡萄牙", "巴西", "越南", "泰国", "荷兰", "瑞士", "瑞典", "挪威", "丹麦", "芬兰", "以色列", "伊朗",
    "土耳其", "墨西哥", "南非", "埃及", "新西兰", "菲律宾", "马来西亚", "印尼", "印度尼西亚", "阿根廷", "乌克兰", "波兰",
    "比利时", "奥地利", "希腊", "爱尔兰", "沙特", "阿联酋", "巴基斯坦", "孟加拉", "缅甸", "柬埔寨", "老挝", "蒙古", "哈萨克斯坦",
    "联邦德国", "欧洲联盟",
)
#: Words that make the question one about that jurisdiction's law.
LEGAL_WORDS = ("宪法", "法典", "刑法", "民法", "法律", "条例", "税法", "税率", "所得税", "修正案", "最高法院", "法院", "总统",
               "国会", "议会", "判例", "劳动法", "公司法", "合同法", "移民法", "破产法", "最低工资", "法")
MAX_GAP = 8
_JURISDICTION = "|".join(sorted(JURISDICTIONS, key=len, reverse=True))
_PATTERN = re.compile(rf"({_JURISDICTION})的?[\u4e00-\u9fff]{{0,{MAX_GAP}}}?"
                      rf"(?<!司)(?<!执)({'|'.join(sorted(LEGAL_WORDS, key=len, reverse=True))})")


#: What puts a question's own situation in another jurisdiction when it names no law there: the
#: situation happens there ("在美国离婚", "在新加坡被狗咬了"), or its party belongs there ("日本员工加班费怎么算").
#: A fresh user's trial got PRC articles, with no caveat, for all three.
_SITUATED = re.compile(rf"在({_JURISDICTION})[\u4e00-\u9fff]{{0,4}}?"
                       r"(离婚|结婚|被|犯|判|罚|打官司|起诉|继承|买房|租房|开公司|注册公司|交税|纳税|上班|打工|辞职|解雇|开除)")
_PARTY = re.compile(rf"({_JURISDICTION})的?(员工|雇员|公司|企业|公民|法院|政府|警察)")
#: Or the question's dealing happens there, named before what is done: "德国网购退货可以退几天" (a trial's got the
#: PRC seven-day rule as if it applied in Germany).
_DEALING = re.compile(rf"({_JURISDICTION})(网购|购物|买房|租房|离婚|结婚|看病)")

#: Hong Kong, Macao and Taiwan: the corpus holds the PRC's laws for them (the Basic Laws, the garrison and
#: national security laws, the nationality law's interpretations, 台湾同胞投资保护法), not their own ordinances
#: and codes. A question naming a law of the region itself is out of scope (a trial's 台湾地区劳动基准法 and 香港的租务
#: 条例 got PRC articles as the answer) unless it names one of those PRC laws.
_REGIONS = ("台湾地区", "台湾", "香港", "澳门")
_REGION = re.compile(rf"({'|'.join(_REGIONS)})的?[\u4e00-\u9fff]{{0,{MAX_GAP}}}?"
                     rf"(?<!司)(?<!执)({'|'.join(sorted(LEGAL_WORDS, key=len, reverse=True))})")
_PRC_LAWS_FOR_REGIONS = ("基本法", "驻军法", "国家安全法", "国安法", "国籍法", "同胞投资", "光复", "特别行政区")
#: Legal systems, not jurisdictions, the corpus holds nothing of: 普通法 (common law), GDPR.
_SYSTEMS = re.compile(r"(普通法系?|英美法系?|大陆法系|GDPR|通用数据保护条例)", re.IGNORECASE)

#: A question that speaks of China itself asks about PRC law dealing with
#: abroad (extradition, judicial assistance), which the corpus holds; so does
#: one about coming back (回国后个人所得税怎么交).
_DOMESTIC = ("中国", "我国", "中华人民共和国", "国内", "内地", "回国", "归国")
#: Where the quoted clause of the question ends, and how long it may be at most.
_CLAUSE_END = re.compile(r"[，。？！；、,.?!;\s]")
QUOTED_MAX_CHARS = 24


def out_of_scope(query: str) -> str | None:
    """Why ``query`` cannot be answered from a PRC law corpus, in the words
    the answer gives ("知识库收录的是中华人民共和国的法律法规，不含日本的法律"),
    or None when it may be."""
    if any(word in query for word in _DOMESTIC):
        return None
    match = _PATTERN.search(query) or _SITUATED.search(query) or _PARTY.search(query) or _DEALING.search(query) \
        or _SYSTEMS.search(query)
    if match is None and not any(name in query for name in _PRC_LAWS_FOR_REGIONS):
        match = _REGION.search(query)
    if match is None:
        return None
    # the clause that names it, whole: the match alone ended mid-phrase (a trial's "在美国被")
    clause = _CLAUSE_END.split(query[match.start():], maxsplit=1)[0][:QUOTED_MAX_CHARS]
    held = match.group(1) if match.re is _SYSTEMS else f"{match.group(1)}的法律"
    return f"知识库收录的是中华人民共和国的法律法规，不含{held}（问题问的是“{clause}”）"
