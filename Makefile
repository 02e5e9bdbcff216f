# group-qc: `make demo` runs the main job offline on CPU; `make test` runs the test suite.
# Both create/use .venv on first use (torch/torchvision come from this machine's local wheels).
VENV ?= .venv
PY := $(VENV)/bin/python
OPENSPEC_VERSION := 1.13.2
export OPENSPEC_TELEMETRY := 0
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: setup demo test test-fast lint specs clean

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,demo]'
	touch $@

setup: $(VENV)/.installed

demo: setup
	bash scripts/demo.sh

# Two workers on CI's 2 cores, a test file per worker (its module fixtures built once), the slowest files first
# (the `file_seconds` markers, sorted by tests/conftest.py; conftest also builds the shared start point once for both workers).
# One torch thread per process (the workers and every command they start): two workers then fill the 2 cores
# without four threads fighting over them. Measured on test_judge + test_evaluate + test_sft, two workers: 255 s with
# torch's default threads, 206 s with one.
TEST_WORKERS ?= 2
TEST_THREADS ?= 1
test: setup
	OMP_NUM_THREADS=$(TEST_THREADS) $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25

test-fast: setup
	OMP_NUM_THREADS=$(TEST_THREADS) $(PY) -m pytest -q -m "not slow" -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25

.ci/node/node_modules/.bin/openspec:
	npm install --silent --no-audit --no-fund --prefix .ci/node @fission-ai/openspec@$(OPENSPEC_VERSION)

# ruff as configured in pyproject.toml ([tool.ruff]: pycodestyle and pyflakes, 120 columns), the import contracts
# ([tool.importlinter]: the layers, and no torch/transformers/ms-swift/datasets in the pure core) and mypy ([tool.mypy]:
# the pure core, Stage-A, the ms-swift plugin, judging, evaluation, pages, the review app and the router)
lint: setup
	$(PY) -m ruff check .
	$(VENV)/bin/lint-imports
	$(PY) -m mypy

specs: .ci/node/node_modules/.bin/openspec
	.ci/node/node_modules/.bin/openspec validate --all --strict

clean:
	rm -rf demo_out .pytest_cache
