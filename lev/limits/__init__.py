"""What a user or token may spend: the one tier rule (`tiers`: tokens held at once, transcription minutes),
per-token rate limits and the monthly write cap (`ratelimit`), the monthly transcription quota (`quota`), sign-in and
sign-up budgets reserved before the work they guard (`attempts`)."""
