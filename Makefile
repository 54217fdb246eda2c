# Every command of the project lives here; the README and CI call these targets.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.stamp
NPM_STAMP := node_modules/.stamp
DATA_DIR ?= .entryway

.PHONY: chromium setup run test lint typecheck format contracts lock bench-gas bench-bundler bench-validation-modes bench-bundler-versions bench-api bench-multiprocess bench-request-log bench-poll-cost bench-notary bench-sponsor bench-costs clean devnet

setup: $(STAMP) $(NPM_STAMP) chromium

# Debian's Chromium, for the dashboard's browser tests (Playwright drives it headless).
# Installed once with apt (as root, or through sudo); nothing is downloaded at test time.
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium; }

# Python: a virtualenv with the locked, hashed dependencies, then the project itself (editable).
$(STAMP): requirements/dev.txt pyproject.toml sdk/pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --require-hashes --no-deps -r requirements/dev.txt
	$(BIN)/pip install --quiet --no-deps --no-build-isolation -e .
	$(BIN)/pip install --quiet --no-deps --no-build-isolation -e sdk
	touch $@

# npm: anvil, solc and the EntryPoint v0.8 release, exactly as package-lock.json pins them.
$(NPM_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

run: setup
	$(BIN)/entryway up --data-dir $(DATA_DIR)

devnet: setup
	$(BIN)/entryway devnet --data-dir $(DATA_DIR)

test: setup
	$(BIN)/ruff check src sdk tests bench
	$(BIN)/ruff format --check src sdk tests bench
	$(BIN)/mypy
	$(BIN)/mypy --strict sdk/src
	$(BIN)/pytest

lint: setup
	$(BIN)/ruff check src sdk tests bench
	$(BIN)/ruff format --check src sdk tests bench

format: setup
	$(BIN)/ruff format src sdk tests bench
	$(BIN)/ruff check --fix src tests bench

typecheck: setup
	$(BIN)/mypy
	$(BIN)/mypy --strict sdk/src

# Compile contracts/ with the pinned solc and refresh the artifacts inside the package.
contracts: $(NPM_STAMP)
	node tools/compile.mjs src/entryway/contracts/artifacts

# Re-resolve the Python lock (versions and hashes only, no index URLs). uv is a maintainer's
# tool, installed here on demand rather than carried by every setup.
lock: setup
	$(BIN)/pip install --quiet uv
	$(BIN)/uv pip compile pyproject.toml --extra dev --generate-hashes --python-version 3.11 \
	  --no-header -o requirements/dev.txt -q

# The devnet's block gas limit for the capacity loads: `make bench-bundler BLOCK_GAS_LIMIT=60000000`.
BLOCK_GAS_LIMIT ?= 30000000
OPEN_LOOP_RATES ?= 25,50,75,100,125,150
# The closed loop once per validation mode, each pinned on anvil; native through a relay that
# plays geth's erc7562Tracer by a JavaScript tracer (its figures are the script's, not geth's).
VALIDATION_MODES ?= opcodes calls untraced native

bench-bundler: setup
	for mode in $(VALIDATION_MODES); do $(BIN)/python -m bench.bundler --validation-mode $$mode || exit 1; done
	$(BIN)/python -m bench.bundler --accounts 100 --ops 10 --validate 0 --block-gas-limit $(BLOCK_GAS_LIMIT)
	$(BIN)/python -m bench.bundler --accounts 200 --ops 5 --validate 0 --trust-factory --block-gas-limit $(BLOCK_GAS_LIMIT)
	$(BIN)/python -m bench.bundler --accounts 100 --validate 0 --open-loop $(OPEN_LOOP_RATES) --block-gas-limit $(BLOCK_GAS_LIMIT)
	$(BIN)/python -m bench.bundler --accounts 50 --ops 12 --executors 1 --faults --block-gas-limit $(BLOCK_GAS_LIMIT)

bench-validation-modes: setup
	$(BIN)/python -m bench.validation_modes --write-doc

bench-bundler-versions: setup
	$(BIN)/python -m bench.bundler_versions

bench-api: setup
	$(BIN)/python -m bench.api --write-doc

bench-multiprocess: setup
	$(BIN)/python -m bench.multiprocess --write-doc

# What recording a call in the request log costs a request (in process; figures written).
bench-request-log: setup
	$(BIN)/python -m bench.request_log_cost --in-process --write-doc

# CPU per receipt poll: `entryway api` against the standalone bundler (printed).
bench-poll-cost: setup
	$(BIN)/python -m bench.poll_cost

bench-notary: setup
	$(BIN)/python -m bench.notary --write-doc
	$(BIN)/python -m bench.notary_api --write-doc

bench-sponsor: setup
	$(BIN)/python -m bench.sponsor --write-doc

bench-gas: setup
	$(BIN)/python -m bench.gas

# What each operation costs on each devnet chain; refreshes the table in docs/pricing.md.
bench-costs: setup
	$(BIN)/python -m bench.chain_costs --write-doc

clean:
	rm -rf $(VENV) node_modules .pytest_cache .mypy_cache .ruff_cache
