"""Imports of bookmark, Pocket, Raindrop and Lev export files: what a file reads into (`importfile`), the
readers (`bookmarks` for the CSV and HTML formats, `netscape` for a browser's bookmark HTML, `levfile`), and the
durable import job (`service`)."""
