"""Lev as the OAuth 2.1 authorization server of its MCP resource: metadata, authorization requests, the consent
page's figures and codes (`server`); the token endpoint: code exchange, refresh rotation and revocation (`grants`);
client registration, client metadata documents and client authentication (`clients`); what the consent page says
about a client (`consent`)."""
