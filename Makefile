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

test: setup
	@bash scripts/setup_browser.sh
	$(PY) -m pytest $(PYTEST_ARGS)

test-fast: setup
	$(PY) -m pytest -m "not engine" $(PYTEST_ARGS)

bench: setup
	$(PY) benchmarks/sandbox.py --quick

clean:
	rm -rf runs .pytest_cache
