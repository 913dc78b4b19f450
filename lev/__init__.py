"""Lev: a self-hostable knowledge base service for AI agents.

The composition root (the only modules that import handlers/ and tasks/ or read the settings): `app` (the
Connexion app, auth hooks, error mapping), `middleware` (the outermost layer of every request), `serve` (the server
and the standalone worker), `cli` (the `lev` command), `runtime` (the process's shared resources, and the `Deps` it
hands to operations and jobs), `embedded` (the embedded PostgreSQL and Redis) and `supervisor` (which restarts
them when they die).

Domains, one package each: `core`, `auth`, `limits`, `oauth`, `mcp`, `library`, `ingest`, `net`, `embedding`,
`imports`, `transforms`, `ops`. docs/architecture.md draws the house.
"""

from lev.core.packagedata import VERSION as __version__  # noqa: F401  (what `import lev` answers)
