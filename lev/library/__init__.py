"""Reading the library: search, an item (in pages), its stored file, recent and similar items and the folder writes
the surfaces share (`reads`); an item's own fields changed, its reading state among them (`changes`); a search's
filters as the surfaces send them (`filters`); the whole library as JSON
Lines (`export`). An item's states live in store/lifecycle.py."""
