"""Search use cases: query understanding, the fan-out to every retriever,
the fuse request, DeepSearch's iterative retrieval, entity search, and which
domain pack each searched collection has."""
