"""`make cluster`: Lev's scale-out topology on one machine (see docs/operations.md)."""
