"""The MCP surface's protocol rules beside the one dispatch in handlers/mcp.py: which protocol revision a
request speaks and what revision 2026-07-28 requires (`revision`); what an answer weighs on the wire and answers
cut to fit (`budget`); the MCP App view, its resource and the extension's negotiation (`app`); items as resources
(`resources`); the Server Card and the MCP Registry's entry (`card`)."""
