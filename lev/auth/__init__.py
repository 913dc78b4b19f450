"""auth."""
