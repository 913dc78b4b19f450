"""Imports of bookmark, Pocket, Raindrop and Lev export files: what a file reads into (`importfile`), the
readers (`bookmarks`, `levfile`), and the durable import job (`service`)."""
