# minikafka: `make run` starts the broker on 127.0.0.1:9092 (data in ./data); `make test` runs the tests.
# Everything but apt packages (kcat; see .ci/run) is set up on demand: .venv via pip, kafkajs via npm.
# `make run` installs only what serving needs (`pip install -e .`). test, unit, e2e, lint, bench, load,
# soak, fuzz, fuzz-corpus and test-spark add the dev extra; test (it collects tests/spark too), lint (mypy
# reads pipeline/'s pyspark types), test-spark and pipeline add the spark extra; install-check needs no
# .venv. A stamp per extra set in .venv records what is installed: a target whose set is covered installs
# nothing, and one that needs more has pip add only the missing dependencies.
PYTHON ?= python3
NPM ?= npm
VENV ?= .venv
BIN := $(VENV)/bin
PIP_INSTALL := $(BIN)/python -m pip install -q --disable-pip-version-check
# pip itself is upgraded once, when the venv is made.
MAKE_VENV := test -x $(BIN)/python || { $(PYTHON) -m venv $(VENV) && $(PIP_INSTALL) --upgrade pip; }
RUN_STAMP := $(VENV)/.installed-run
DEV_STAMP := $(VENV)/.installed-dev
SPARK_STAMP := $(VENV)/.installed-spark
# Both extras. Venvs made before the split have only this stamp, which meant the same.
ALL_STAMP := $(VENV)/.installed
JS_DIR := tests/e2e/js
JS_STAMP := $(JS_DIR)/node_modules/.installed
HOST ?= 127.0.0.1
PORT ?= 9092
DATA_DIR ?= ./data
PYTEST_ARGS ?=
BENCH_ARGS ?=
# `make bench CURVES_ARGS=--quick` (fewer, smaller points) or `CURVES_ARGS="--curves partitions,txns"`.
CURVES_ARGS ?=
# `make bench SUITE_ARGS="--setups fresh:inprocess,fresh:forked,shared-reset:inprocess,tansu"`: the suite's
# setups (fresh:MODE and shared-reset:MODE take any Broker mode), `--tests N`.
SUITE_ARGS ?=
# `make pipeline PIPELINE_ARGS="--events 200000 --mode driver"`; --bootstrap H:P uses a running broker.
PIPELINE_ARGS ?=
MYPY_PACKAGES := protocol storage coordinator tools broker pipeline testing
# mypy resolves `minikafka.*` imports only under the installed names: the editable install maps them
# with an import hook mypy cannot follow, so lint checks a tree of symlinks named like the package.
MYPY_TREE := .mypy-src

.PHONY: venv run test unit e2e lint bench load js install-check soak fuzz fuzz-corpus clean pipeline test-spark

# Each installing stamp also touches the stamps of the smaller sets it covers.
$(RUN_STAMP): pyproject.toml
	$(MAKE_VENV)
	$(PIP_INSTALL) -e .
	touch $@

$(DEV_STAMP): pyproject.toml
	$(MAKE_VENV)
	$(PIP_INSTALL) -e '.[dev]'
	touch $(RUN_STAMP) $@

$(SPARK_STAMP): pyproject.toml
	$(MAKE_VENV)
	$(PIP_INSTALL) -e '.[spark]'
	touch $(RUN_STAMP) $@

$(ALL_STAMP): pyproject.toml
	$(MAKE_VENV)
	$(PIP_INSTALL) -e '.[dev,spark]'
	touch $(RUN_STAMP) $(DEV_STAMP) $(SPARK_STAMP) $@

venv: $(ALL_STAMP)

# package-lock.json is committed, so `npm ci` installs exactly kafkajs 2.2.4.
$(JS_STAMP): $(JS_DIR)/package.json $(JS_DIR)/package-lock.json
	cd $(JS_DIR) && $(NPM) ci --no-audit --no-fund --loglevel=error
	touch $(JS_STAMP)

js: $(JS_STAMP)

run: $(RUN_STAMP)
	$(BIN)/minikafka serve --host $(HOST) --port $(PORT) --data-dir $(DATA_DIR)

# The suite starts hundreds of interpreters (spawned brokers, fork servers, command-line tools); where the
# shell sets PYTHONDONTWRITEBYTECODE (some CI images do) each would compile minikafka's modules again,
# about 0.3 s of CPU apiece. compileall writes the bytecode once and skips it when it is current.
BYTECODE = $(BIN)/python -m compileall -q -j 0 broker protocol storage coordinator tools testing pipeline

test: $(ALL_STAMP) $(JS_STAMP)
	$(BYTECODE)
	$(BIN)/pytest -q -p no:cacheprovider $(PYTEST_ARGS)

unit: $(DEV_STAMP)
	$(BYTECODE)
	$(BIN)/pytest -q -p no:cacheprovider tests/unit $(PYTEST_ARGS)

e2e: $(DEV_STAMP) $(JS_STAMP)
	$(BYTECODE)
	$(BIN)/pytest -q -p no:cacheprovider tests/e2e $(PYTEST_ARGS)

lint: $(ALL_STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	rm -rf $(MYPY_TREE) && mkdir -p $(MYPY_TREE)/minikafka
	for package in $(MYPY_PACKAGES); do ln -s ../../$$package $(MYPY_TREE)/minikafka/$$package; done
	cd $(MYPY_TREE) && MYPYPATH=. ../$(BIN)/mypy --config-file ../pyproject.toml --cache-dir ../.mypy_cache \
		$(foreach package,$(MYPY_PACKAGES),-p minikafka.$(package))

bench: $(DEV_STAMP)
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
	$(BIN)/python bench/reset_cost.py
	$(BIN)/python bench/suite.py $(SUITE_ARGS)

# Hostile load (figures printed, never asserted): many connections, a client that never reads,
# connections dropped mid-request.
LOAD_ARGS ?=
load: $(DEV_STAMP)
	$(BIN)/python bench/load.py $(LOAD_ARGS)

# Crash soak (not in CI; about 8 s a cycle): real clients write, the broker is killed with -9 and
# restarted each cycle, every acknowledged record and transaction is checked. `make test` runs 2 cycles.
CYCLES ?= 200
SEED ?= 1
SOAK_ARGS ?=
soak: $(DEV_STAMP)
	$(BIN)/python -m tests.soak.harness --cycles $(CYCLES) --seed $(SEED) $(SOAK_ARGS)

# Fuzz a broker subprocess with mutated client frames (not in CI; `make test` runs 4,000 frames); prints
# frames/s, crashes, unanswered health checks, max RSS and whether acked data survived. Replay files of
# the last frames before a crash land in fuzz-replays/. `make fuzz-corpus` re-records the corpus.
FRAMES ?= 1000000
FUZZ_ARGS ?=
fuzz: $(DEV_STAMP)
	$(BIN)/python -m tests.fuzz.harness run --frames $(FRAMES) --seed $(SEED) $(FUZZ_ARGS)

fuzz-corpus: $(DEV_STAMP) $(JS_STAMP)
	$(BIN)/python -m tests.fuzz.recorder

# Builds the wheel and the sdist, installs each into a fresh venv outside the checkout and runs a
# confluent-kafka round trip against its `minikafka serve`. Needs no .venv: `build` comes from .venv when
# it has it, otherwise from PyPI into a throwaway venv.
install-check:
	PYTHON=$(PYTHON) BUILD_PYTHON=$(abspath $(BIN))/python bash tests/install/check_install.sh

# Spark (needs Java 17): the example pipeline starts its own broker on a free port with a temp data dir.
pipeline: $(SPARK_STAMP)
	SPARK_LOCAL_IP=127.0.0.1 $(BIN)/python -m minikafka.pipeline.example $(PIPELINE_ARGS)

test-spark: $(ALL_STAMP)
	SPARK_LOCAL_IP=127.0.0.1 $(BIN)/pytest -q -p no:cacheprovider -m spark tests/spark $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) $(JS_DIR)/node_modules data .pytest_cache .hypothesis .mypy_cache .mypy-src .ruff_cache \
		.import_linter_cache bench/results fuzz-replays
	rm -rf *.egg-info
	find . -path ./.git -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

# The documentation site (mkdocs.yml, docs/): `make docs` builds it into site/ and fails on any warning (a
# broken link or anchor, a page left out of the nav); its reference tables are generated from the code by
# docs/hooks/generated.py. `make docs-serve` serves it on 127.0.0.1 and rebuilds it on every change.
DOCS_STAMP := $(VENV)/.docs-installed
DOCS_PORT ?= 8000
.PHONY: docs docs-serve

$(DOCS_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[docs]'
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

docs-serve: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:$(DOCS_PORT)

# librdkafka's own integration suite (not in `make test`: it needs minutes): builds its tests/test-runner
# in LIBRDKAFKA_SRC, runs every broker entry against a fresh broker in both consumer group protocols and
# writes docs/compatibility/librdkafka.md (+ .json). `COMPAT_ARGS="--tests 0001,0103 --timeout 120"`.
COMPAT_ARGS ?=
.PHONY: compat-librdkafka
compat-librdkafka: $(DEV_STAMP)
	@test -n "$(LIBRDKAFKA_SRC)" || { echo "compat-librdkafka: set LIBRDKAFKA_SRC=/path/to/librdkafka (a source tree)" >&2; exit 2; }
	$(BIN)/python -m tests.compat.librdkafka.run --librdkafka-src "$(LIBRDKAFKA_SRC)" $(COMPAT_ARGS)
