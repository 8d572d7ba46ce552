"""Library use cases: ingest of documents, files, entities and triples into
the stores (reading and chunking are services.ingest), and the document
lifecycle (get, list, delete, collections) with its resource names."""
