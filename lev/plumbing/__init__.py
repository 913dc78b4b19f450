"""The process's plumbing, which every domain may import and which imports no domain (only `core` and `store`):
`deps` (what a request or a job runs with: settings, database, Redis, job queue, object store, embedder, outbound
client, transcriber), `ports` (the interfaces of those parts, which the adapters in `embedding`, `providers` and
`net` fill), `jobs`
(a job's fixed id, queueing it once, re-queueing it unless it is queued or running) and `offload` (the child
processes that parse, extract and chunk large inputs off the event loop)."""
