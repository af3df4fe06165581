# gpushift developer entry points. `make demo` and `make test` work on a fresh machine:
# they install uv if it is missing, then create .venv from the lock file. Bytecode is compiled
# at setup: with PYTHONDONTWRITEBYTECODE set, every process would otherwise compile each module
# it imports again (a second or more for every CLI run a test makes).
UV := python3 -m uv
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup demo test lint typecheck unit bench

setup:
	@$(UV) --version >/dev/null 2>&1 || python3 -m pip install --quiet uv
	$(UV) sync --locked --quiet --compile-bytecode
	$(BIN)/python -m compileall -q src

# Exit code 1 means "findings" (here: Pending pods under memory sharing), which is the point of
# the demo, so only 2 (bad input) or worse fails the target.
demo: setup
	$(BIN)/gpushift simulate --example homelab --compare || [ $$? -eq 1 ]

lint: setup
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	PYTHONPATH=src:. $(BIN)/lint-imports --no-cache

typecheck: setup
	$(BIN)/mypy

# A worker per core (pytest-xdist); --dist loadscope keeps each module on one worker, so a
# module's shared twin is started once.
unit: setup
	$(BIN)/pytest -q -p no:cacheprovider -n auto --dist loadscope

test: lint typecheck unit

bench: setup
	$(BIN)/python -m bench
