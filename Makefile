# Every target bootstraps .venv on its own when it is missing.
PY := .venv/bin/python
VENV_STAMP := .venv/.croupier-installed
DEMO_MINUTES ?= 4

.PHONY: setup tools test test-dispatch test-fast test-long lint format demo bench clean

setup: $(VENV_STAMP)

$(VENV_STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install -q --upgrade pip
	# The CPU build of torch first: a bare `torch` requirement would pull a multi-GB CUDA build.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]'
	touch $(VENV_STAMP)

# Tools the tests need, installed when missing (the tests install them the same way through
# apt-get when run without this): promtool, from Debian's prometheus package; Node and npm,
# from Debian's nodejs and npm, then the TypeScript client check's npm packages, pinned by
# tests/typescript/package-lock.json (tests/test_typescript_client.py runs the same `npm ci`).
tools:
	command -v promtool >/dev/null || apt-get install -y prometheus \
		|| (apt-get update && apt-get install -y prometheus)
	command -v npm >/dev/null || apt-get install -y nodejs npm \
		|| (apt-get update && apt-get install -y nodejs npm)
	cd tests/typescript && npm ci --no-audit --no-fund

# Modules run on parallel workers (one worker per core, up to 4), each module whole on one
# worker (its Ray session and servers are module-scoped): the suite waits on processes
# starting and trainers updating about as much as it computes: on 2 cores, two workers ran it
# in 415 s where one worker took 1,009 s (that serial run still held the two fault runs now
# in `make test-long`, ~240 s of it). The workers take modules slowest first
# (tests/conftest.py); `--no-loadscope-reorder` keeps that order: pytest-xdist's default
# hands out the modules with the most tests first, which left the slow few-test trainer
# modules for the end, one worker running them while the other idled. The instruction-set
# reruns (`make test-dispatch`) are tests of the suite (tests/test_dispatch_caps.py), run by
# the workers beside the rest: one after another behind it they added ~60 s of 13 min 48 s.
# The whole suite, on a 2-core box shared with other work (2026-12-07): 861 s of CPU with the
# reruns in it, where the suite before took 877 s and the reruns another ~24 s a cap. On the
# quiet box the same day: `make test` 7 min 32 s (pytest 446 s, 998 passed), where a fresh
# clone's took 13 min 48 s before (pytest 12:47 and the reruns after it); `.venv` from
# nothing adds ~1 min here. A fresh clone later the same day, `time make test`: 8 min 13 s
# (pytest 438 s, 1,009 passed). Tools the tests need (promtool, Node, Chromium) install in the
# background from the start when missing, and their modules run last (tests/conftest.py).
test: setup
	$(PY) -m ruff check src tests examples experiments
	$(PY) -m pytest -q -n auto --maxprocesses 4 --dist loadfile --no-loadscope-reorder

# The tests whose floats depend on which matmul kernels torch picks (served against learned
# logits, batches against rows alone), again under each instruction-set cap: what another
# CPU's dispatch would compute, so a claim that holds only on this machine's kernels fails
# here (~20 s a setting; `make test` runs them too).
test-dispatch: setup
	$(PY) -m pytest -q -p no:cacheprovider -n 3 tests/test_dispatch_caps.py

# The unit tier (tests/conftest.py: no Ray, no subprocess, guarded): under a minute.
test-fast: setup
	$(PY) -m pytest -q -m unit

# Minutes-long learning checks through the external path (tests marked `long`).
test-long: setup
	CROUPIER_LONG_TESTS=1 $(PY) -m pytest -q -s -m long

lint: setup
	$(PY) -m ruff check src tests examples experiments
	$(PY) -m ruff format --check src tests examples experiments

format: setup
	$(PY) -m ruff format src tests examples experiments
	$(PY) -m ruff check --fix src tests examples experiments

demo: setup
	$(PY) -m croupier.demo --minutes $(DEMO_MINUTES)

bench: setup
	command -v wrk >/dev/null || (apt-get install -y wrk || echo "install wrk for bench serve")
	$(PY) -m croupier bench serve --games 100,1000 --seconds 8 --rounds 3
	$(PY) -m croupier bench train --minutes 3
	$(PY) -m croupier bench lag --minutes 1.5
	$(PY) -m croupier bench soak --games 1000 --minutes 10

clean:
	rm -rf .venv runs .pytest_cache tests/typescript/node_modules tests/typescript/generated
