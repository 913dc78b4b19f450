"""Running Lev: structured logs (`logs`), liveness and readiness (`health`), Prometheus metrics (`metrics`),
backup and restore (`backup`), `lev db upgrade` (`pgupgrade`), the activity-log writer (`activity`)."""
