# The two commands a person needs: `make demo` (the tiny model live, then recorded real samples replayed and a
# leaderboard simulation: `solver demo`) and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
RUN ?= runs/demo-$(shell date +%Y%m%d-%H%M%S)
PYTEST_ARGS ?=

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
	$(PY) -m pytest --durations-file=runs/test-durations.tsv $(PYTEST_ARGS)

# The fast tier: no real engine, nothing slow, and vLLM hidden (tests/without_vllm), so it proves it needs none.
test-fast: setup
	PYTHONPATH=$(CURDIR)/tests/without_vllm$${PYTHONPATH:+:$$PYTHONPATH} $(PY) -m pytest -m "not engine and not slow" \
		--durations-file=runs/test-fast-durations.tsv $(PYTEST_ARGS)

bench: setup
	$(PY) benchmarks/sandbox.py --quick

clean:
	rm -rf runs .pytest_cache
