"""Lev as the OAuth 2.1 authorization server of its MCP resource: metadata, authorization requests, codes,
token exchange, refresh and revocation (`server`); client registration, client metadata documents and client
authentication (`clients`); what the consent page says about a client (`consent`)."""
