"""Imports of bookmark, Pocket, Raindrop and Lev export files and of ZIPs of folders: what a file reads into
(`importfile`), the readers (`bookmarks` for the CSV and HTML formats, `netscape` for a browser's bookmark HTML,
`levfile`; `archive` for a ZIP, whose files `files` keeps), and the durable import job (`service`)."""
