"""Adapters for the third-party AI providers Lev calls over HTTP: `transcriber` (speech to text, OpenAI-compatible
`/audio/transcriptions`), `mailer` (plain-text mail through the operator's SMTP server)."""
