# Two entry points: `make demo` and `make test`. Both build .venv from scratch when needed.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
SHARED ?= ../shared

.PHONY: install install-test demo test lint typecheck unit bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install -q -e .

install-test: $(BIN)/python
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[dev,realserver]"

demo: install
	@echo "== servedoctor diagnose examples/ (the GLM-5 story's two failures and real public logs)"
	-$(BIN)/servedoctor diagnose examples/*.log
	@echo "== servedoctor rules"
	$(BIN)/servedoctor rules

lint: install-test
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: install-test
	$(BIN)/mypy

unit: install-test
	$(BIN)/pytest -q

test: lint typecheck unit

bench: install-test
	$(BIN)/python bench/log_throughput.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
