"""Sharing: folders shared with people as editors or viewers, and a folder's public page with its feed.

Rooms: `service` (invitations, members and roles, leaving, publishing: the owner's operations and the members'),
`public` (what a published folder shows the public: its entries, excerpts only, and its Atom feed).
"""
