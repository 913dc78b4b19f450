# Lev: `make run` and `make test` set up everything themselves on a fresh machine with Python 3.11+.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
PORT ?= 8080

.PHONY: screenshots conformance cluster test-cluster cluster-deps browser-deps node-deps run test lint typecheck fuzz contract bench bench-quality bench-latency bench-ingest bench-load bench-busy bench-hostile bench-cluster bench-automation bench-light bench-sharing bench-answers bench-highlights bench-unfair bench-filtered bench-deliveries bench-folders bench-documents bench-tagged bench-cost bench-restart wheel clean

# Packages are installed by uv (pinned; the one thing pip installs): a first `make run` on an empty package cache
# downloads and installs about 80 packages in parallel, several times faster than pip.
UV_VERSION := 0.13.8
UV := $(BIN)/uv
# Bytecode is compiled at install (and Lev's own before a run or a test): where PYTHONDONTWRITEBYTECODE is set, as on
# CI's machines, every process would otherwise compile every module it imports again (10 s of CPU for `lev`).
INSTALL := $(UV) pip install --compile-bytecode --python $(BIN)/python
COMPILE := $(BIN)/python -m compileall -q -j 0

$(BIN)/python:
	@echo "==> [1/3] creating $(VENV) (first run only)"
	$(PYTHON) -m venv $(VENV)

$(UV): | $(BIN)/python
	@echo "==> [2/3] installing uv $(UV_VERSION), the package installer"
	$(BIN)/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)

# The local embedding model runs on ONNX Runtime and ships inside the package (lev/embedding/model/): no torch.
$(STAMP): pyproject.toml | $(UV)
	@echo "==> [3/3] installing Lev and its dependencies (first run: about 450 MB of packages)"
	$(INSTALL) -e .
	touch $@

$(DEV_STAMP): $(STAMP) pyproject.toml
	@echo "==> installing the development tools (tests, linters)"
	$(INSTALL) -e '.[dev]'
	touch $@

# The cluster's separate servers: Debian's redis-server and haproxy (PostgreSQL + pgvector comes from the embedded
# package's binaries, moto's S3 server from the dev extras). Installed when missing.
# The browser tests drive Debian's chromium through Playwright (executable_path=/usr/bin/chromium).
browser-deps:
	@command -v chromium >/dev/null || { \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; }

# The tests' pinned Node tools (MCP Inspector, axe-core, the MCP Apps host: tests/npm_cache.py PINNED) in .cache/.
node-deps: $(DEV_STAMP)
	$(BIN)/python -m tests.npm_cache

cluster-deps:
	@command -v redis-server >/dev/null && command -v haproxy >/dev/null || { \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			redis-server haproxy; }

# 2 API processes behind haproxy, 2 workers, PostgreSQL over TCP, Redis, S3 (docs/operations.md); Ctrl-C stops it.
cluster: $(DEV_STAMP) cluster-deps
	$(BIN)/python -m cluster.run

# The cluster and fault tests alone (they are part of `make test` too).
test-cluster: $(DEV_STAMP) cluster-deps
	$(BIN)/pytest -q tests/cluster -p no:cacheprovider

# The wheel `pipx install` / `uv tool install` take (README, "Install without the repository"). Built from a clean
# build/ each time: setuptools never empties it, so a deleted file (a migration) would ship again.
wheel:
	rm -rf build dist
	$(PYTHON) -m pip wheel . --no-deps --disable-pip-version-check -w dist
	@ls dist/*.whl

run: export LEV_LOG_FORMAT ?= console
run: $(STAMP)
	@$(COMPILE) lev
	$(BIN)/lev serve --port $(PORT)

# Every page at 1280 and 390 px into docs/screenshots, from a fresh Lev of its own (tests/screenshots.py).
screenshots: $(DEV_STAMP) browser-deps
	$(BIN)/python -m tests.screenshots

lint: $(DEV_STAMP)
	$(BIN)/ruff check .

typecheck: $(DEV_STAMP)
	$(BIN)/mypy

test: $(DEV_STAMP) cluster-deps browser-deps node-deps
	@$(COMPILE) lev tests contract_tests bench cluster conftest.py
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/pytest -q -n 3 --dist loadfile --no-loadscope-reorder --durations=15 tests contract_tests -p no:cacheprovider

contract: $(DEV_STAMP)
	$(BIN)/pytest -q contract_tests -p no:cacheprovider

fuzz: $(DEV_STAMP)
	LEV_FUZZ_EXAMPLES=2000 $(BIN)/pytest -q contract_tests -p no:cacheprovider

# The MCP conformance suite's scenarios that apply to Lev, against a running Lev (`make run`): LEV_TOKEN=lev_... and
# LEV_URL (default http://127.0.0.1:8080). The suite and its Node 22 are pinned in tests/npm_cache.py.
conformance: $(DEV_STAMP)
	$(BIN)/python -m tests.mcp.conformance

bench: bench-quality bench-latency bench-ingest bench-load bench-busy bench-hostile bench-cluster bench-automation bench-light bench-sharing bench-answers bench-highlights bench-unfair bench-filtered bench-deliveries bench-folders bench-documents bench-tagged bench-cost

# bench-light: this commit against the commit before issue 33, each from a fresh clone with its own `make run`.
bench-quality bench-latency bench-ingest bench-load bench-busy bench-hostile bench-automation bench-light bench-sharing bench-answers bench-highlights bench-unfair bench-filtered bench-deliveries bench-folders bench-documents bench-tagged bench-cost: $(DEV_STAMP)
	$(BIN)/python -m bench.run $(subst bench-,,$@)

bench-cluster: $(DEV_STAMP) cluster-deps
	$(BIN)/python -m bench.run cluster

# A second `lev serve` on an existing data directory: ready and Ctrl-C seconds (RESTART_SOURCE: another checkout).
bench-restart: $(DEV_STAMP)
	@$(COMPILE) lev
	$(BIN)/python -m bench.restart --runs 3 $(if $(RESTART_SOURCE),--source $(RESTART_SOURCE))

clean:
	rm -rf $(VENV) .lev .tox .mypy_cache .ruff_cache
