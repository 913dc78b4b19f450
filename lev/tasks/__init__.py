"""Background jobs on arq: transforms, transcription, document extraction, drains and purges."""
