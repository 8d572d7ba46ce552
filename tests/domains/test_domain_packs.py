"""Domain packs: the registry, classification by the packs searched, the
recipes the gateway's profiles come from, and the gateway's per-collection
pack resolution (over fake retrievers)."""
from __future__ import annotations

import pytest

import domains
from graphmesh.common.v1 import types_pb2
from services.common.errors import InvalidArgument
from services.expander.core import detect_question_type
from services.gateway.search.collection_packs import CollectionPacks
from services.gateway.config import DEFAULT_OFF, DEFAULT_WEIGHTS, GatewaySettings
from services.gateway.downstream.guard import Deadline
from tests.fakes import FakeRetriever

pytestmark = pytest.mark.unit

CASE = "公诉机关指控，被告人王某于2020年盗窃财物，经审理查明属实，罪名：盗窃罪。"


def test_registry_and_default_pack():
    assert domains.get_pack("") is domains.GENERIC and domains.get_pack("law_zh") is domains.LAW_ZH
    with pytest.raises(domains.UnknownPack, match="known: generic, law_zh"):
        domains.get_pack("law_fr")
    assert domains.GENERIC.document_facts is None and not domains.GENERIC.channels


def test_law_question_types_only_for_law_collections():
    assert detect_question_type(CASE, ["law_zh"])[0] == "QUESTION_TYPE_CASE_FACTS"
    kind, _ = detect_question_type(CASE, ["generic"])
    assert kind not in domains.LAW_ZH.question_types
    assert detect_question_type("刑法第二百三十四条", [])[0] not in domains.LAW_ZH.question_types
    assert detect_question_type("刑法第二百三十四条", ["generic", "law_zh"])[0] == "QUESTION_TYPE_ARTICLE_LOOKUP"


def test_profiles_come_from_the_pack_recipe():
    settings = GatewaySettings()
    profiles = settings.profiles
    for question_type in domains.LAW_ZH.profiles:
        assert question_type in profiles
    assert profiles["QUESTION_TYPE_ARTICLE_LOOKUP"].related_seeds == 0
    assert profiles["QUESTION_TYPE_ARTICLE_LOOKUP"].channels_off == list(DEFAULT_OFF)
    # A question type without a profile in the recipe (re-judged, issue 23) is searched with the default one.
    assert settings.profile_for("QUESTION_TYPE_CASE_FACTS", 1.0)[0] == "default"
    assert "graph.term" in DEFAULT_OFF
    assert DEFAULT_WEIGHTS["graph.offence"] == domains.LAW_ZH.channel_weights["graph.offence"]


@pytest.mark.asyncio
async def test_collection_packs_resolve_validate_and_remember():
    pg = FakeRetriever("retriever_pg")
    pg.collections = [types_pb2.CollectionInfo(name="laws", documents=3, domain_pack="law_zh"),
                      types_pb2.CollectionInfo(name="old", documents=1)]
    packs = CollectionPacks([pg, FakeRetriever("retriever_graph", fail="hang")])
    deadline = Deadline(5)
    assert await packs.for_ingest("laws", "", deadline) == "law_zh"
    assert await packs.for_ingest("laws", "law_zh", deadline) == "law_zh"
    with pytest.raises(InvalidArgument) as err:
        await packs.for_ingest("laws", "generic", deadline)
    assert err.value.field == "domain_pack"
    with pytest.raises(InvalidArgument):
        await packs.for_ingest("new", "no_such_pack", deadline)
    assert await packs.for_ingest("new", "", deadline) == "generic"
    assert await packs.for_search(["laws", "new", "unknown"], deadline) == ["law_zh", "generic"]
    assert pg.listings == 1  # one read, then the cache
    packs.forget("laws")
    assert await packs.for_search(["laws"], deadline) == ["law_zh"]


@pytest.mark.asyncio
async def test_collections_no_store_holds_are_named_and_nothing_is_said_without_a_store():
    pg = FakeRetriever("retriever_pg")
    pg.collections = [types_pb2.CollectionInfo(name="laws", documents=3, domain_pack="law_zh"),
                      types_pb2.CollectionInfo(name="old", documents=1)]  # stored before packs: known all the same
    packs = CollectionPacks([pg], ttl=0.0)
    deadline = Deadline(5)
    assert await packs.not_stored(["laws", "old", "lwas", "lwas"], deadline) == ["lwas"]
    await packs.for_ingest("lwas", "", deadline)  # an ingest that stores nothing creates nothing
    assert await packs.not_stored(["lwas"], deadline) == ["lwas"]
    packs.stored("lwas")  # one that stores a document does, before the stores are read again
    assert await packs.not_stored(["lwas"], deadline) == []
    down = CollectionPacks([FakeRetriever("retriever_pg", fail="hang")])
    assert await down.not_stored(["anything"], Deadline(3)) == []


@pytest.mark.parametrize("query", ["日本刑法对盗窃罪怎么处罚？", "美国的个人所得税最高税率是多少？", "俄罗斯联邦宪法规定总统任期几年？",
                                   "欧盟数据保护条例对罚款有什么规定？",
                                   # a trial's: no law named, the situation abroad or its party foreign
                                   "在美国离婚的话夫妻财产怎么分？", "在新加坡被狗咬了谁来赔偿？", "日本员工加班费怎么算？",
                                   "美国加州的最低工资是多少？",
                                   # a lay trial's dealing abroad, named before what is done
                                   "德国网购退货可以退几天？", "日本买房要交什么税？",
                                   # a paralegal trial's: a region's own law, a legal system, the GDPR
                                   "台湾地区劳动基准法规定的加班费怎么算？", "香港的租务条例对押金有什么规定？",
                                   "GDPR对个人数据跨境传输有什么要求？", "普通法下合同的对价是什么？"])
def test_another_countrys_law_is_out_of_the_law_packs_scope(query):
    reason = domains.LAW_ZH.out_of_scope(query)
    assert reason and "中华人民共和国" in reason


def test_the_refusal_quotes_the_clause_that_names_the_jurisdiction_whole():
    # a trial's refusal quoted “在美国被”, the match cut mid-phrase
    assert domains.LAW_ZH.out_of_scope("我在美国被公司解雇了，能要求赔偿吗？").endswith("（问题问的是“在美国被公司解雇了”）")
    assert domains.LAW_ZH.out_of_scope("日本刑法对盗窃罪怎么处罚？").endswith("（问题问的是“日本刑法对盗窃罪怎么处罚”）")


@pytest.mark.parametrize("query", ["我在日本工作，回国后个人所得税怎么交？", "美国司法部门请求中国协助冻结财产，依据什么法律？",
                                   "盗窃罪怎么处罚？", "香港特别行政区基本法规定了什么？",
                                   "在中国的日本员工加班费怎么算？", "我在美国出差时公司扣了我的工资怎么办？",
                                   "公司派我去德国工作，社保怎么交？", "美国留学回来落户有什么政策？",
                                   # the PRC laws for the regions, which the corpus holds
                                   "香港特别行政区维护国家安全法第二十九条规定了什么？", "台湾同胞投资保护法规定了什么？",
                                   "澳门特别行政区基本法规定居民有哪些权利？", "香港法院的判决在内地怎么执行？"])
def test_prc_questions_that_name_abroad_stay_in_scope(query):
    assert domains.LAW_ZH.out_of_scope(query) is None
    assert domains.GENERIC.out_of_scope(query) is None


def test_chunk_sizes_come_from_the_pack_unless_the_operator_sets_them():
    """generic's recipe cuts 384-token chunks; an operator's
    GRAPHMESH_GATEWAY_INGEST__CHUNK_TOKENS wins over every recipe."""
    from services.gateway.config import GatewaySettings
    from services.gateway.library.document_ingest import DocumentIngest

    def chunking(settings, pack):
        return DocumentIngest(settings, None, [], None).chunking_for(pack)

    default = GatewaySettings(port=0)
    assert (chunking(default, "generic").target_tokens, chunking(default, "generic").overlap_tokens) == (384, 48)
    assert chunking(default, "law_zh").target_tokens == 512  # no recipe size: the gateway's
    operator = GatewaySettings(port=0, ingest={"chunk_tokens": 128, "chunk_overlap": 16})
    assert (chunking(operator, "generic").target_tokens, chunking(operator, "generic").overlap_tokens) == (128, 16)
