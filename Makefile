# minikafka: `make run` starts the broker on 127.0.0.1:9092 (data in ./data); `make test` runs the tests.
# Everything but apt packages (kcat; see .ci/run) is set up on demand: .venv via pip, kafkajs via npm.
PYTHON ?= python3
NPM ?= npm
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
JS_DIR := tests/e2e/js
JS_STAMP := $(JS_DIR)/node_modules/.installed
HOST ?= 127.0.0.1
PORT ?= 9092
DATA_DIR ?= ./data
PYTEST_ARGS ?=
BENCH_ARGS ?=
# `make bench CURVES_ARGS=--quick` (fewer, smaller points) or `CURVES_ARGS="--curves partitions,txns"`.
CURVES_ARGS ?=
# `make pipeline PIPELINE_ARGS="--events 200000 --mode driver"`; --bootstrap H:P uses a running broker.
PIPELINE_ARGS ?=
MYPY_PACKAGES := protocol storage coordinator tools broker pipeline testing
# mypy resolves `minikafka.*` imports only under the installed names: the editable install maps them
# with an import hook mypy cannot follow, so lint checks a tree of symlinks named like the package.
MYPY_TREE := .mypy-src

.PHONY: venv run test unit e2e lint bench load js install-check soak fuzz fuzz-corpus clean pipeline test-spark

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[dev,spark]'
	touch $(STAMP)

venv: $(STAMP)

# package-lock.json is committed, so `npm ci` installs exactly kafkajs 2.2.4.
$(JS_STAMP): $(JS_DIR)/package.json $(JS_DIR)/package-lock.json
	cd $(JS_DIR) && $(NPM) ci --no-audit --no-fund --loglevel=error
	touch $(JS_STAMP)

js: $(JS_STAMP)

run: $(STAMP)
	$(BIN)/minikafka serve --host $(HOST) --port $(PORT) --data-dir $(DATA_DIR)

test: $(STAMP) $(JS_STAMP)
	$(BIN)/pytest -q -p no:cacheprovider $(PYTEST_ARGS)

unit: $(STAMP)
	$(BIN)/pytest -q -p no:cacheprovider tests/unit $(PYTEST_ARGS)

e2e: $(STAMP) $(JS_STAMP)
	$(BIN)/pytest -q -p no:cacheprovider tests/e2e $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	rm -rf $(MYPY_TREE) && mkdir -p $(MYPY_TREE)/minikafka
	for package in $(MYPY_PACKAGES); do ln -s ../../$$package $(MYPY_TREE)/minikafka/$$package; done
	cd $(MYPY_TREE) && MYPYPATH=. ../$(BIN)/mypy --config-file ../pyproject.toml --cache-dir ../.mypy_cache \
		$(foreach package,$(MYPY_PACKAGES),-p minikafka.$(package))

bench: $(STAMP)
	$(BIN)/python bench/bench.py $(BENCH_ARGS)
	$(BIN)/python bench/curves.py $(CURVES_ARGS)
	$(BIN)/python bench/startup.py
	$(BIN)/python bench/trace_cost.py
	$(BIN)/python bench/metrics_cost.py
	$(BIN)/python bench/observe_cost.py
	$(BIN)/python bench/pcap_cost.py
	$(BIN)/python bench/cleaner.py
	$(BIN)/python bench/shutdown.py --testing
	$(BIN)/python bench/sendfile_threshold.py

# Hostile load (figures printed, never asserted): many connections, a client that never reads,
# connections dropped mid-request.
LOAD_ARGS ?=
load: $(STAMP)
	$(BIN)/python bench/load.py $(LOAD_ARGS)

# Crash soak (not in CI; about 8 s a cycle): real clients write, the broker is killed with -9 and
# restarted each cycle, every acknowledged record and transaction is checked. `make test` runs 2 cycles.
CYCLES ?= 200
SEED ?= 1
SOAK_ARGS ?=
soak: $(STAMP)
	$(BIN)/python -m tests.soak.harness --cycles $(CYCLES) --seed $(SEED) $(SOAK_ARGS)

# Fuzz a broker subprocess with mutated client frames (not in CI; `make test` runs 4,000 frames); prints
# frames/s, crashes, unanswered health checks, max RSS and whether acked data survived. Replay files of
# the last frames before a crash land in fuzz-replays/. `make fuzz-corpus` re-records the corpus.
FRAMES ?= 1000000
FUZZ_ARGS ?=
fuzz: $(STAMP)
	$(BIN)/python -m tests.fuzz.harness run --frames $(FRAMES) --seed $(SEED) $(FUZZ_ARGS)

fuzz-corpus: $(STAMP) $(JS_STAMP)
	$(BIN)/python -m tests.fuzz.recorder

# Builds the wheel and the sdist, installs each into a fresh venv outside the checkout and runs a
# confluent-kafka round trip against its `minikafka serve`. Needs no .venv: `build` comes from .venv when
# it has it, otherwise from PyPI into a throwaway venv.
install-check:
	PYTHON=$(PYTHON) BUILD_PYTHON=$(abspath $(BIN))/python bash tests/install/check_install.sh

# Spark (needs Java 17): the example pipeline starts its own broker on a free port with a temp data dir.
pipeline: $(STAMP)
	SPARK_LOCAL_IP=127.0.0.1 $(BIN)/python -m minikafka.pipeline.example $(PIPELINE_ARGS)

test-spark: $(STAMP)
	SPARK_LOCAL_IP=127.0.0.1 $(BIN)/pytest -q -p no:cacheprovider -m spark tests/spark $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) $(JS_DIR)/node_modules data .pytest_cache .hypothesis .mypy_cache .mypy-src .ruff_cache \
		.import_linter_cache bench/results fuzz-replays
	rm -rf *.egg-info
	find . -path ./.git -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

# librdkafka's own integration suite (not in `make test`: it needs minutes): builds its tests/test-runner
# in LIBRDKAFKA_SRC, runs every broker entry against a fresh broker in both consumer group protocols and
# writes docs/compatibility/librdkafka.md (+ .json). `COMPAT_ARGS="--tests 0001,0103 --timeout 120"`.
COMPAT_ARGS ?=
.PHONY: compat-librdkafka
compat-librdkafka: $(STAMP)
	@test -n "$(LIBRDKAFKA_SRC)" || { echo "compat-librdkafka: set LIBRDKAFKA_SRC=/path/to/librdkafka (a source tree)" >&2; exit 2; }
	$(BIN)/python -m tests.compat.librdkafka.run --librdkafka-src "$(LIBRDKAFKA_SRC)" $(COMPAT_ARGS)
