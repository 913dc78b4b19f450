"""The process's plumbing, which every domain may import and which imports no domain: `deps` (what a request or a
job runs with: settings, database, Redis, job queue, object store, embedder, outbound client, transcriber) and `jobs`
(a job's fixed id, queueing it once, re-queueing it unless it is queued or running) and `offload` (the child
processes that parse, extract and chunk large inputs off the event loop)."""
