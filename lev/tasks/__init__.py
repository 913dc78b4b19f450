"""Background jobs on arq: transforms, transcription, document extraction, drains and purges; `fairshare` keeps one
user's jobs to their share of the worker slots."""
