# jsonrpc-mcp: the same commands locally and in CI.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test lint bench bench-compare serve conformance clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check jsonrpc_mcp tests bench conformance
	$(BIN)/ruff format --check jsonrpc_mcp tests conformance bench/run.py bench/inproc.py bench/inproc_http.py bench/sockload.py bench/servers
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/run.py

bench-compare: $(STAMP)
	$(BIN)/python bench/run.py --compare

serve: $(STAMP)
	$(BIN)/jsonrpc-mcp serve --http 127.0.0.1:8000

conformance: $(STAMP)
	$(BIN)/python conformance/run.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache conformance/.node
