"""Lev: a self-hostable knowledge base service for AI agents."""

__version__ = "0.1.0"
