"""Getting things into the library, one way for every kind (`service`):
resolve the request (`request`) → link to an existing content (`save`) → acquire it (`acquire`: text, a page
through `webpage`, a page the user's browser rendered (kind page), a download through `download`, `youtube`, a file
read by `documents` or measured by `media`) →
chunk and plan (`plan`, cutting with `chunking`) → embed → save in one transaction (`save`) → queue what follows
(`followups`). Uploads wrap the same steps (`uploads`); jobs finish what was queued (`finish`, with the transcriber
of `lev.providers` and `progress`). URL rules in `urls`. Documents people keep are read by `formats` (the seam),
writing their text with `layout` after `containers` checked them: `words`, `slides`, `sheets`, `markup`, `ebook`,
`mail`."""
