"""oauth."""
