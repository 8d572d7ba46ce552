"""The shared RetrieverService servicer (services.common.retriever): a
Retrieve hands the request's with_embeddings to the backend's
RetrievalQuery (issue 27), so a backend can skip reading stored vectors."""
import pytest

from graphmesh.retriever.v1 import retriever_pb2
from services.common.retriever import RetrievalQuery, RetrieverServicer

pytestmark = pytest.mark.unit


class RecordingBackend:
    """A RetrievalBackend that records each RetrievalQuery and finds nothing."""

    source_by_channel: dict = {}

    def __init__(self) -> None:
        self.queries: list[RetrievalQuery] = []

    async def retrieve(self, request: RetrievalQuery):
        self.queries.append(request)
        return [], []


def test_retrieval_query_asks_for_no_embeddings_by_default():
    assert RetrievalQuery(query="q", keywords=["q"], embedding=[], top_k=1).with_embeddings is False


@pytest.mark.parametrize("with_embeddings", [False, True])
async def test_retrieve_passes_with_embeddings_to_the_backend(with_embeddings):
    backend = RecordingBackend()
    servicer = RetrieverServicer(backend, None, 1000)  # Retrieve never touches the entity backend
    await servicer.Retrieve(retriever_pb2.RetrieveRequest(query="q", keywords=["q"], with_embeddings=with_embeddings), None)
    assert [q.with_embeddings for q in backend.queries] == [with_embeddings]


async def test_list_documents_with_chunks_passes_the_flag_and_bounds_the_page():
    from services.common.errors import InvalidArgument
    from services.common.retriever import MAX_CHUNKED_DOCUMENTS

    calls = []

    class Listing(RecordingBackend):
        async def list_documents(self, ids, collections, filters, page_size, after_id, with_chunks=False):
            calls.append((page_size, with_chunks))
            return []

    servicer = RetrieverServicer(Listing(), None, 1000)
    await servicer.ListDocuments(retriever_pb2.ListDocumentsRequest(ids=["a"], with_chunks=True), None)
    await servicer.ListDocuments(retriever_pb2.ListDocumentsRequest(page_size=500), None)
    assert calls == [(MAX_CHUNKED_DOCUMENTS, True), (500, False)]
    with pytest.raises(InvalidArgument) as err:
        await servicer.ListDocuments(retriever_pb2.ListDocumentsRequest(page_size=MAX_CHUNKED_DOCUMENTS + 1, with_chunks=True), None)
    assert err.value.field == "page_size"
