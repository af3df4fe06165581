# gpushift developer entry points. `make demo` and `make test` work on a fresh machine:
# they install uv if it is missing, then create .venv from the lock file.
UV := python3 -m uv
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup demo test lint typecheck unit bench

setup:
	@$(UV) --version >/dev/null 2>&1 || python3 -m pip install --quiet uv
	$(UV) sync --locked --quiet

# The main job: the move to DRA and back on the homelab twin, with its timeline, the
# invariant monitor's result and an HTML report. Every non-zero exit is a real failure here
# (1: a violation or a move that did not finish; 3: the twin did not start; 4: no cutover).
demo: setup
	$(BIN)/gpushift rehearse --example homelab --time-scale 100 --report rehearsal.html

lint: setup
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	PYTHONPATH=src:. $(BIN)/lint-imports --no-cache

typecheck: setup
	$(BIN)/mypy

unit: setup
	$(BIN)/pytest -q -p no:cacheprovider

test: lint typecheck unit

bench: setup
	$(BIN)/python -m bench
