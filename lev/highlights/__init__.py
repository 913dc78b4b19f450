"""Highlights: passages of an item's text a user marked, with notes (issue 42).

Rooms: `service` (the operations every surface shares: list, create with the passage found in the item's text,
change the note, delete, the user's recent highlights; their webhook events), `locate` (where the words are in
the text), `reader` (the item page's reader view: the text in parts, the highlights marked), `markdown` (an item
with its highlights as Markdown), `found` (highlights among search results: scored on the mode's scale, merged).
"""
