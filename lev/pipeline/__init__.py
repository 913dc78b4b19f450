"""The ingest pipeline: from a URL, a text or an uploaded file to stored, chunked, embedded content.

`ingest` and `uploads` are the entry points of the request path; `indexing` stores what they produce (and what
the jobs in `tasks/` finish); the other modules each do one step: `fetch` and `pages` (SSRF-guarded HTTP, web
pages), `youtube`, `documents`, `media`, `transcriber`, `transform`, `embedder`, `chunking`, `retry`.
"""
