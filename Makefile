# `make demo` and `make test` bootstrap .venv themselves (a no-op when nothing changed).
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
# bytecode caches make every later import fast; the machine sets PYTHONDONTWRITEBYTECODE=1
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup local-llm demo test lint bench clean

setup:
	@./scripts/bootstrap.sh

demo: setup
	$(VENV)/bin/accelopt demo

# a real small model on loopback for the tests of the LLM path (built once per machine, ~5 min)
local-llm: setup
	$(VENV)/bin/accelopt local-llm prepare

test: setup local-llm
	$(PY) -m pytest -q

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

bench: setup
	$(PY) benchmarks/events_bench.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
