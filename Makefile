# ragtui — `make help` lists the targets.
PYTHON ?= python3
.DEFAULT_GOAL := help

.PHONY: help install test e2e-llm bench figures quality lint format typecheck ci clean

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

install: ## install ragtui and its test dependencies into the current Python
	$(PYTHON) -m pip install -e '.[test]'

test: ## run the test suite (the README's test command)
	$(PYTHON) -m pytest

e2e-llm: ## only the end-to-end test of `ragtui ask` against llama.cpp's server (needs '.[llama]'; see .ci/run)
	$(PYTHON) -m pytest tests/cli/test_ask_llama_e2e.py

bench: ## run the benchmarks against their named peers (needs: pip install -e '.[bench]')
	$(PYTHON) bench/bench_bm25.py
	$(PYTHON) bench/bench_vectors.py
	$(PYTHON) bench/bench_ingest.py
	$(PYTHON) bench/reliability.py
	$(PYTHON) bench/bench_tui.py

figures: ## run the retrieval-quality evaluations and draw assets/eval-*.png (needs ../shared/data and '.[eval]')
	$(PYTHON) bench/plots.py --run

quality: ## every table and figure of docs/quality.md, both shipped embedders (needs ../shared/data and '.[eval,onnx]')
	nice $(PYTHON) bench/plots.py --run --write docs/quality.md

lint: ## static checks: ruff, the import contracts (pyproject.toml), then the type check
	$(PYTHON) -m ruff check ragtui tests bench
	$(PYTHON) -c 'import sys; from importlinter.cli import lint_imports_command as lint_imports; sys.exit(lint_imports())' --no-cache  # lint-imports
	$(PYTHON) -m mypy

format: ## ruff format, for the files you name: make format FILES='ragtui/x.py' (default: ragtui tests bench)
	$(PYTHON) -m ruff format $(or $(FILES),ragtui tests bench)

typecheck: ## mypy over the whole package as pyproject.toml configures it (core, request and editor strict)
	$(PYTHON) -m mypy

ci: ## run CI as CI does, in this checkout
	bash .ci/run

clean: ## remove build and test leftovers
	rm -rf build dist *.egg-info .pytest_cache .hypothesis .mypy_cache
