# jsonrpc-mcp: the same commands locally and in CI.
PY ?= python3
# `make test PY=3.13` (or PY=/path/to/python3.13): that interpreter (found by .ci/pythons), in a virtual
# environment of its own (.venv-3.13), so versions never share one. Without PY: python3 and .venv.
ifneq ($(filter 3.%,$(PY)),)
FOUND_PY := $(shell .ci/pythons $(PY) 2>/dev/null)
ifeq ($(FOUND_PY),)
$(error CPython $(PY) is not on this machine: neither python$(PY) on PATH nor a pyenv version)
endif
override PY := $(FOUND_PY)
endif
ifneq ($(filter command line environment override,$(origin PY)),)
VENV ?= .venv-$(shell $(PY) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo missing)
endif
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SERVE_STAMP := $(VENV)/.installed-http
DOCS_STAMP := $(VENV)/.installed-docs
HOST ?= 127.0.0.1
PORT ?= 8000
SITE ?= site

.PHONY: install test test-once test-all test-min release lint fuzz soak bench bench-compare bench-scale serve conformance conformance-scaled docs docs-serve clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP) $(SERVE_STAMP) $(DOCS_STAMP)

# What serving needs and no more: the package and its http extra (the dev extra is a superset).
$(SERVE_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q -e '.[http]'
	touch $(SERVE_STAMP)

# What building the documentation site needs and no more: the package and its docs extra (in the dev extra too).
$(DOCS_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q -e '.[docs]'
	touch $(DOCS_STAMP)

install: $(STAMP)

# The suite is spread over the machine's cores by pytest-xdist (TEST_JOBS=auto: one process per core; TEST_JOBS=0
# runs it in this process, as plain pytest does). The `once` leg stays in one process: its faults and workers time
# leases and restarts against each other.
TEST_JOBS ?= auto

# .ci/system-packages: what the tests start that PyPI does not ship (a Redis server), installed when missing.
test: $(STAMP)
	.ci/system-packages
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_JOBS) -m 'not once' $(PYTEST_ARGS)

# The tests marked `once`: real peers, Node, an OpenID provider, a browser, Redis faults, several workers, the site's
# build. They do not depend on the interpreter's version, so .ci/run runs them once, in a leg of their own.
test-once: $(STAMP)
	.ci/system-packages
	$(BIN)/python -m pytest -q -p no:cacheprovider -m once $(PYTEST_ARGS)

# The suite on every supported CPython this machine has (3.11 to 3.14), each in its own .venv-X.Y.
test-all:
	.ci/test-pythons

# The suite against the lowest versions pyproject.toml admits for anyio, msgspec and every feature extra
# (.ci/lowest.py names them), in .venv-min; the official SDK (an interop peer whose own floors are above ours) is
# left out and its interop tests skip. .ci/run runs it on every CI run.
MIN_VENV := .venv-min
test-min:
	.ci/system-packages
	test -x $(MIN_VENV)/bin/python || $(PY) -m venv $(MIN_VENV)
	$(MIN_VENV)/bin/python -m pip install -q --upgrade pip
	$(MIN_VENV)/bin/python .ci/lowest.py constraints > $(MIN_VENV)/constraints.txt
	$(MIN_VENV)/bin/python .ci/lowest.py test-deps > $(MIN_VENV)/test-requirements.txt
	$(MIN_VENV)/bin/python -m pip install -q -c $(MIN_VENV)/constraints.txt -e ".[$$($(MIN_VENV)/bin/python .ci/lowest.py extras)]" \
		-r $(MIN_VENV)/test-requirements.txt
	$(MIN_VENV)/bin/python .ci/lowest.py check
	$(MIN_VENV)/bin/python -m pytest -q -p no:cacheprovider -n $(TEST_JOBS) -m 'not once' $(PYTEST_ARGS)

# Build, check and smoke-test the sdist and wheel with every extra, and write the release notes (.ci/release).
release: $(STAMP)
	VENV_PY=$(BIN)/python .ci/release

lint: $(STAMP)
	$(BIN)/ruff check jsonrpc_mcp tests bench conformance .ci docs/_hooks.py
	$(BIN)/ruff format --check jsonrpc_mcp tests conformance .ci docs/_hooks.py bench/run.py bench/scale.py bench/inproc.py bench/inproc_http.py bench/sockload.py bench/servers
	$(BIN)/mypy

# A million seeded frames, malformed and odd, through a real server over stdio (90%) and HTTP (10%); figures in
# docs/robustness.md. (make test runs a bounded version: tests/test_fuzz.py.)
fuzz: $(STAMP)
	$(BIN)/python tests/fuzzing.py --frames 1000000

# The fault suite's seeded run for 10 minutes (two workers, a real Redis paused, restarted empty, kill -9); not CI.
soak: $(STAMP)
	.ci/system-packages
	$(BIN)/python bench/soak.py $(SOAK_ARGS)

bench: $(STAMP)
	$(BIN)/python bench/run.py

bench-compare: $(STAMP)
	$(BIN)/python bench/run.py --compare

# Several workers: calls/s and p99 with 1, 2 and 4 workers, with and without a shared Redis, both eras; 10,000
# concurrent sessions over 2 workers sharing Redis (docs/performance.md, "Several workers"). Starts its own
# redis-server (.ci/system-packages installs it).
bench-scale: $(STAMP)
	.ci/system-packages
	$(BIN)/python bench/scale.py

serve: $(SERVE_STAMP)
	$(BIN)/jsonrpc-mcp serve --http $(HOST):$(PORT)

# The documentation site, from docs/ (mkdocs.yml), into site/ (SITE=...); --strict: a broken link or reference
# fails. Installs only what the build needs (the docs extra).
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir $(SITE)

docs-serve: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

conformance: $(STAMP)
	$(BIN)/python conformance/run.py

# The server leg again, against a deployment of two workers sharing a Redis behind a proxy that sends every
# request to the next one (conformance/scaled_server.py).
conformance-scaled: $(STAMP)
	.ci/system-packages
	$(BIN)/python conformance/run.py --leg server --server-fixture conformance/scaled_server.py

clean:
	rm -rf .venv .venv-3.* .venv-min .pytest_cache .mypy_cache .ruff_cache conformance/.node site
