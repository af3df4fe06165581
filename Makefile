# gpushift developer entry points. `make demo` and `make test` work on a fresh machine:
# they install uv if it is missing, then create .venv from the lock file. Bytecode is compiled
# at setup: with PYTHONDONTWRITEBYTECODE set, every process would otherwise compile each module
# it imports again (a second or more for every CLI run a test makes).
UV := python3 -m uv
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup demo test lint typecheck unit bench upstream test-upstream

setup:
	@$(UV) --version >/dev/null 2>&1 || python3 -m pip install --quiet uv
	$(UV) sync --locked --all-extras --quiet --compile-bytecode
	$(BIN)/python -m compileall -q src twin/src

# The main job: the move to DRA and back on the homelab twin, with its timeline, the
# invariant monitor's result and an HTML report. Every non-zero exit is a real failure here
# (1: a violation or a move that did not finish; 2: bad input; 3: the twin did not start).
demo: setup
	$(BIN)/gpushift rehearse --example homelab --time-scale 100 --report rehearsal.html

lint: setup
	$(BIN)/ruff check src twin tests bench upstream
	$(BIN)/ruff format --check src twin tests bench upstream
	PYTHONPATH=src:twin/src:. $(BIN)/lint-imports --no-cache

typecheck: setup
	$(BIN)/mypy

# pytest-xdist workers; --dist loadscope keeps each module on one worker, so a
# module's shared twin is started once. --no-loadscope-reorder keeps the order tests/conftest.py
# gives (longest modules first) instead of xdist's most-tests-first, which left the few-test
# cluster rehearsals, minutes each, to the end. PYTHONDONTWRITEBYTECODE is cleared for pytest
# alone so its rewritten test modules are cached: each worker otherwise rewrites all of them,
# about ten seconds of CPU per worker per run.
# Two workers more than the cores: the scenario tests spend part of their time waiting on the
# twin's virtual clock or a server's Retry-After, and the extra workers fill those waits
# (bench/README.md, the test suite).
WORKERS ?= $(shell python3 -c "import os; print(len(os.sched_getaffinity(0)) + 2)")

# On a checkout whose test modules have never been rewritten, one collection rewrites them
# first: the workers would otherwise each rewrite all of them at once (about 3 s of CPU each).
# Its output is dropped; the run after it collects again and reports any error.
unit: setup
	@ls tests/__pycache__/*-pytest-*.pyc >/dev/null 2>&1 || \
		PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -q -p no:cacheprovider --collect-only >/dev/null 2>&1 || true
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -q -p no:cacheprovider -n $(WORKERS) --dist loadscope --no-loadscope-reorder -m "not upstream"

# The checks run beside the tests rather than before them: mypy is single-threaded and the
# tests leave a core idle while their workers start and while the last modules finish.
# Output is synchronised by line, so the three never interleave within a line.
test: setup
	$(MAKE) --no-print-directory -j 3 --output-sync=line lint typecheck unit

bench: setup
	$(BIN)/python -m bench

# The upstream control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kubectl) built from the Go module proxy into ${GPUSHIFT_UPSTREAM:-~/.cache/gpushift/upstream}/
# <version>/bin; a no-op when it is there. Needs Go 1.26+. The last line is the bin directory.
upstream:
	python3 upstream/build.py

# The upstream tier: the tests marked `upstream` (simulate against kube-scheduler, the twin's API
# tests against kube-apiserver, the differential property test), on the binaries of
# `make upstream`. Each module starts its own control plane, so two workers share the cores.
test-upstream: setup upstream
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -q -p no:cacheprovider -n 2 --dist loadscope -m upstream
