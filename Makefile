# tpucost: `make demo` runs the notebooks, `make test` runs every test.
# Both create .venv (from python3) and install the exact tested versions
# from constraints.txt when needed.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.tpucost-installed

.PHONY: demo test lab install lock bench clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[notebooks,dev]'
	touch $(STAMP)

install: $(STAMP)

## demo: execute notebooks/0*.ipynb in order; executed copies and HTML go to build/
demo: $(STAMP)
	$(PY) tools/run_notebooks.py --out build

## test: unit tests, parser cross-checks, fuzzing and notebook execution (TPUCOST_SMOKE=1)
test: $(STAMP)
	$(PY) -m pytest -q

## lab: open JupyterLab on notebooks/
lab: $(STAMP)
	$(VENV)/bin/jupyter lab notebooks/

## bench: the speed measurements of benchmarks/ (each prints ratios to a reference run alongside)
bench: $(STAMP)
	$(PY) benchmarks/parse_speed.py
	$(PY) benchmarks/collect_speed.py
	$(PY) benchmarks/inference_speed.py

## lock: re-pin constraints.txt from the current .venv (after changing dependencies)
lock: $(STAMP)
	( echo '# Exact versions tested by `make test` and CI (pip install -c constraints.txt).'; \
	  echo '# Regenerate with `make lock` after changing dependencies.'; \
	  $(PY) -m pip freeze --exclude-editable | grep -v '^tpucost' ) > constraints.txt

clean:
	rm -rf build .pytest_cache
