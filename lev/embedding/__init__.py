"""Text to vectors: the `Embedder` interface and its adapters (`embedder`), the bundled MiniLM (`minilm`)
and its ONNX query graph (`query_graph`); where embeddings run in an API process (`pool`) and the low-priority
ingest process (`child`)."""
