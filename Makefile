# The two commands a person needs: `make demo` (the tiny model live, then recorded real samples replayed and a
# leaderboard simulation: `solver demo`) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
RUN ?= runs/demo-$(shell date +%Y%m%d-%H%M%S)
PYTEST_ARGS ?=
# Two test workers (pytest-xdist) for the 2 cores: the tests of the shared engine, of the shared endpoint and of the
# Kaggle gateways each stay on one worker, every other module on one (tests/conftest.py, worker_group). WORKERS= runs
# the tests in one process, in the order they were collected.
WORKERS ?= -n 2 --dist loadgroup --no-loadscope-reorder

.PHONY: setup demo test test-fast bench clean

setup:
	@bash scripts/setup.sh

demo: setup
	$(PY) -m solver demo --out $(RUN)

# Everything: the real-engine tests (marker engine) and the slow ones (benchmarks in quick mode, notebooks, the
# headless browser, soak) included; CI runs exactly this (.ci/run). Each test's seconds, slowest first, are left in
# runs/test-durations.tsv (runs/test-fast-durations.tsv for the fast tier).
test: setup
	@bash scripts/setup_browser.sh
	$(PY) -m pytest $(WORKERS) --durations-file=runs/test-durations.tsv $(PYTEST_ARGS)

# The fast tier: no real engine, nothing slow, and vLLM hidden (tests/without_vllm), so it proves it needs none.
test-fast: setup
	PYTHONPATH=$(CURDIR)/tests/without_vllm$${PYTHONPATH:+:$$PYTHONPATH} $(PY) -m pytest $(WORKERS) \
		-m "not engine and not slow" --durations-file=runs/test-fast-durations.tsv $(PYTEST_ARGS)

bench: setup
	$(PY) benchmarks/sandbox.py --quick

clean:
	rm -rf runs .pytest_cache
