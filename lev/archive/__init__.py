"""Archived copies: one self-contained HTML snapshot of every web page Lev fetches and every page captured in a
browser, kept in the object store and served harmlessly. `snapshot` cleans a page and inlines its images and style
sheets (`css` makes sheets self-contained) through the outbound guard within the caps; `service` makes an item's
copy (the worker's job) and reads it back for a caller that can see the item."""
