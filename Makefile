# minikafka: `make run` starts the broker on 127.0.0.1:9092 (data in ./data); `make test` runs the tests.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
JS_DIR := tests/e2e/js
JS_STAMP := $(JS_DIR)/node_modules/.installed

.PHONY: run test lint bench js venv clean unit e2e

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

$(JS_STAMP): $(JS_DIR)/package.json
	cd $(JS_DIR) && npm install --no-audit --no-fund --loglevel=error
	touch $(JS_STAMP)

js: $(JS_STAMP)

run: $(STAMP)
	$(BIN)/minikafka serve --host 127.0.0.1 --port 9092 --data-dir ./data

test: $(STAMP) $(JS_STAMP)
	$(BIN)/pytest -q -p no:cacheprovider

unit: $(STAMP)
	$(BIN)/pytest -q -p no:cacheprovider tests/unit

e2e: $(STAMP) $(JS_STAMP)
	$(BIN)/pytest -q -p no:cacheprovider tests/e2e

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports

bench: $(STAMP)
	$(BIN)/python bench/bench.py

clean:
	rm -rf $(VENV) $(JS_DIR)/node_modules data .pytest_cache .hypothesis
