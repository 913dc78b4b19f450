"""Feeds: following RSS, Atom and JSON Feed sources whose new entries become items.

Rooms: `parse` (fetching through the guard with a conditional GET, telling a feed from anything else, a page's
`<link rel="alternate">`), `poll` (one check of a feed and the ingest of its pending entries: the `poll_feed` job),
`schedule` (the due feeds checked in batches, nothing new recorded by one statement per batch),
`service` (follow, list, update, unfollow, refresh, OPML in and out), `opml` (reading and writing OPML 2.0),
`xmlguard` (no entity declarations, anywhere, in any encoding), `authors` (feedparser's author pattern bounded).
"""
