"""Store hits to gRPC candidates (services.common.convert): grouping by
chunk, per-channel ranks, and embeddings only when asked."""
import pytest

from services.common.convert import hits_to_candidates
from services.common.records import Hit

pytestmark = pytest.mark.unit


def hit(chunk: str, channel: str, score: float, embedding=()) -> Hit:
    return Hit(chunk_id=chunk, document_id=chunk.split("#")[0], title="t", heading_path=["t"], text="x",
               ordinal=0, channel=channel, score=score, evidence="", embedding=list(embedding))


def test_candidates_group_hits_and_carry_embeddings_only_when_asked():
    hits = [hit("a#0", "pg.vector", 0.9, [0.1, 0.2]), hit("b#0", "pg.vector", 0.8, [0.3, 0.4]),
            hit("a#0", "pg.keyword", 5.0)]
    plain = hits_to_candidates(hits, {"pg.vector": 1, "pg.keyword": 1}, with_embeddings=False)
    assert [c.id for c in plain] == ["a#0", "b#0"]
    assert [(s.channel, s.rank) for s in plain[0].channel_scores] == [("pg.vector", 1), ("pg.keyword", 1)]
    assert all(not c.embedding for c in plain)
    full = hits_to_candidates(hits, {"pg.vector": 1, "pg.keyword": 1})
    assert list(full[0].embedding) == pytest.approx([0.1, 0.2]) and list(full[1].embedding) == pytest.approx([0.3, 0.4])


def test_candidates_carry_their_document_s_writing_system_through_the_fuser():
    from services.fuser.convert import candidate_to_item, item_to_candidate

    english = hit("rules#0", "pg.vector", 0.8)
    english.script = "latin"
    [candidate] = hits_to_candidates([english], {"pg.vector": 1})
    assert candidate.script == "latin"
    assert item_to_candidate(candidate_to_item(candidate)).script == "latin"
