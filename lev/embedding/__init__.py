"""Text to vectors: the `Embedder` interface and its adapters (`embedder`), the bundled all-MiniLM-L6-v2 on ONNX
Runtime (`minilm`, its files in `model/`), where embeddings run in an API process (`pool`: the query batcher, the
niced ingest threads), and the maintainer's script that wrote the bundled model from the original weights
(`export`, never imported by Lev)."""
