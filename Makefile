# tpucost: `make demo` runs the notebooks, `make test` runs every test (and checks in Chromium a book
# rendered from the notebooks its wheel test executed), `make check` the quick ones,
# `make docs` renders the book from make demo's executed notebooks, `make docs-check` checks it in Chromium.
# Both create .venv (from python3) and install the exact tested versions
# from constraints.txt when needed. `make test` also creates .venv-colab: Colab's
# versions (constraints-colab.txt, the lower bounds of pyproject.toml) on Python 3.13
# where the machine has it (pyenv), else on python3.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.tpucost-installed
# Colab's Python where this machine has it (pyenv's 3.13, or python3.13 on PATH), else $(PYTHON).
COLAB_PYTHON ?= $(or $(shell for p in $(HOME)/.pyenv/versions/3.13*/bin/python3.13 python3.13; do \
                  $$p -c 'import sys' 2>/dev/null && { echo $$p; break; }; done),$(PYTHON))
COLAB_VENV  := .venv-colab
COLAB_PY    := $(COLAB_VENV)/bin/python
COLAB_STAMP := $(COLAB_VENV)/.tpucost-installed

# Python caches compiled modules (and pytest its rewritten tests) in __pycache__/, even where the
# environment sets PYTHONDONTWRITEBYTECODE: without the cache every test process compiles the package
# and the tests again (about 4 s each).
unexport PYTHONDONTWRITEBYTECODE

# Test processes run side by side (pytest-xdist); the tests marked `quiet` then run alone.
JOBS ?= 2
# How xdist hands them out: worksteal gives each process one contiguous half of the collected
# tests, and an idle process takes half of what the other has left; xdist's default, load, hands
# out consecutive chunks that shrink as the run goes, so more files are split between the two
# processes, and both then build such a file's module fixtures and compile the programs it shares.
DIST ?= worksteal
# The files that hold tests marked `quiet` (collecting only these saves ~10 s per timing phase;
# tests/conftest.py refuses a quiet test this would miss).
QUIET_FILES := $(shell grep -l 'mark\.quiet' tests/test_*.py)

.PHONY: demo docs docs-check browser test test-newest test-colab check lab install lock bench clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[notebooks,dev,corpus,docs,tpu]'
	touch $(STAMP)

$(COLAB_STAMP): pyproject.toml constraints-colab.txt
	test -x $(COLAB_PY) || $(COLAB_PYTHON) -m venv $(COLAB_VENV)
	$(COLAB_PY) -m pip install -q -c constraints-colab.txt -e '.[dev,tpu]' keras  # the corpus extra's Keras: its diffrax needs a newer jax than Colab's
	touch $(COLAB_STAMP)

install: $(STAMP)

## demo: execute notebooks/0*.ipynb in order; executed copies and HTML go to build/
demo: $(STAMP)
	$(PY) tools/run_notebooks.py --out build

## docs: the book: docs/ and make demo's executed notebooks (build/0*.ipynb) rendered by Sphinx
## into build/site/ (nothing is executed again; run make demo first)
docs: $(STAMP)
	$(PY) tools/build_docs.py --executed build --out build/site

## docs-check: every page of build/site/ in headless Chromium: console, images, links, search, badges
## (a missing browser or book fails)
docs-check: $(STAMP) browser
	TPUCOST_REQUIRE_BROWSER=1 $(PY) -m pytest -p no:cacheprovider -m browser tests/test_site.py

## browser: Debian's chromium and chromium-driver for the browser check, when missing (apt-get;
## as root, else through sudo), unless TPUCOST_CHROMEDRIVER names another driver (TPUCOST_CHROMIUM its
## browser). Where they cannot be installed it fails, and so does make test.
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
browser:
	@test -n "$$TPUCOST_CHROMEDRIVER" || { command -v chromium && command -v chromedriver; } >/dev/null || \
	  { $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium chromium-driver; } || \
	  { echo "error: could not install Debian's chromium and chromium-driver, which the browser tests need" >&2; exit 1; }

## test: what CI runs: every test on the newest pins, then the core tests and the notebooks on Colab's versions
test: test-newest test-colab

## test-newest: every test but the browser's, $(JOBS) at a time, then the timing tests (marked quiet)
## alone; the notebooks run from the wheel in a fresh environment of each runtime (newest, and Colab's
## on its Python), and the newest runtime's executed copies (build/tested-notebooks) are rendered into
## build/tested-site, which the browser tests then check (a missing browser or book fails)
test-newest: $(STAMP) browser
	TPUCOST_COLAB_PYTHON=$(COLAB_PYTHON) $(PY) -m pytest -n $(JOBS) --dist $(DIST) -m "not quiet and not browser"
	$(PY) -m pytest -m "quiet and not browser" $(QUIET_FILES)
	$(PY) tools/build_docs.py --executed build/tested-notebooks --out build/tested-site
	TPUCOST_REQUIRE_BROWSER=1 TPUCOST_SITE=build/tested-site $(PY) -m pytest -p no:cacheprovider -m browser tests/test_site.py

## test-colab: the unit tests marked `core` in .venv-colab (Colab's versions: flax, the profiler,
## compile options, Pallas), and every test marked `tpu` (compiling for a TPU v5e with Colab's jax and
## its libtpu: every corpus family, the examples, the notebooks' TPU programs, Mosaic), then its timing tests alone
test-colab: $(COLAB_STAMP)
	TPUCOST_PINS=constraints-colab.txt $(COLAB_PY) -m pytest -n $(JOBS) --dist $(DIST) -m "((core and not slow) or tpu) and not notebooks and not quiet and not newest_only"
	TPUCOST_PINS=constraints-colab.txt $(COLAB_PY) -m pytest -m "core and quiet and not newest_only" $(QUIET_FILES)

## check: the edit loop: unit tests only (nothing timed on the device, no training runs, no notebooks,
## no compiling for a TPU)
check: $(STAMP)
	$(PY) -m pytest -n $(JOBS) --dist $(DIST) -m "not measures and not slow and not notebooks and not tpu"

## lab: open JupyterLab on notebooks/
lab: $(STAMP)
	$(VENV)/bin/jupyter lab notebooks/

## bench: every speed measurement of benchmarks/ (each prints ratios to a reference run alongside)
bench: $(STAMP)
	for script in benchmarks/*.py; do echo "== $$script"; PYTHONPATH=. $(PY) $$script || exit 1; done

## lock: re-pin constraints.txt from the current .venv (after changing dependencies)
lock: $(STAMP)
	( echo '# Exact versions tested by `make test` and CI (pip install -c constraints.txt).'; \
	  echo '# Regenerate with `make lock` after changing dependencies.'; \
	  $(PY) -m pip freeze --exclude-editable | grep -v '^tpucost' ) > constraints.txt

clean:
	rm -rf build .pytest_cache
