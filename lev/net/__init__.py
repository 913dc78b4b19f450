"""Outbound HTTP: the SSRF guard and the guarded client every outbound request goes through (`guard`), and each
user's fair share of the fetches (`share`)."""
