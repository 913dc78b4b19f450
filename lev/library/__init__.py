"""Reading the library: search, an item, its stored file, recent and similar items and the folder writes the
surfaces share (`reads`); the whole library as JSON Lines (`export`). An item's states live in store/lifecycle.py."""
