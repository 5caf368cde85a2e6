# hacn-book task runner. The two commands of the README:
#   make book   build the Jupyter Book into _build/html (renders stored results)
#   make test   unit tests + every notebook under nbval (smoke profile), and beside them a book build
#               (a book build ends with tools/check_pages.py and tools/check_layout.py: a page a reader
#               should not see, or a table or figure wider than its column at 1400 px, fails it)
# Both set up the project-local virtual environment (.venv) first; that step is
# skipped when the pinned requirements have not changed.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
VENV := .venv
PY := $(VENV)/bin/python
# The read-only offline data mirror shipped beside the repository, if any.
MIRROR := $(abspath ../shared/data)
ifeq ($(origin HACN_DATA), undefined)
ifneq ($(wildcard $(MIRROR)),)
export HACN_DATA := $(CURDIR)/.data
endif
endif

.PHONY: book test env data unit notebooks book-build clean

env:
	@bash tools/setup_env.sh

# A writable data root of per-file symlinks into the mirror (loaders add processed/ there).
data: env
	@if [ -d "$(MIRROR)" ] && [ "$${HACN_DATA:-}" = "$(CURDIR)/.data" ]; then \
	  $(PY) -c "from hacn_core.engine.data import link_mirror; link_mirror('$(MIRROR)', '$(CURDIR)/.data')"; fi

book: env data book-build

# The book renders stored results only: no training, an empty data root and no downloads,
# so a fresh clone without the data mirror and without a network builds it.
# The notebooks are executed first, one per core, into a fresh Jupyter cache (tools/execute_notebooks.py);
# the build then renders them from it. `jupyter-book build .` alone executes them itself, one at a time.
BOOK_ENV = HACN_PROFILE=book HACN_ALLOW_TRAIN=0 HACN_QUIET=1 HACN_DATA=$(CURDIR)/_build/empty-data HACN_DOWNLOAD=0
book-build:
	@rm -rf _build/.doctrees _build/html _build/empty-data _build/.jupyter_cache && mkdir -p _build/empty-data
	$(BOOK_ENV) $(PY) tools/execute_notebooks.py --cache _build/.jupyter_cache --config _build/book-config.yml
	$(BOOK_ENV) $(VENV)/bin/jupyter-book build . -W --keep-going --config _build/book-config.yml
	@# the equations must render offline: MathJax from _static/, no CDN
	@test -f _build/html/_static/mathjax/tex-chtml.js || { echo "book: MathJax missing from _build/html/_static/mathjax"; exit 1; }
	@! grep -l "cdn.jsdelivr.net/npm/mathjax" -r _build/html --include=*.html || { echo "book: a page loads MathJax from a CDN"; exit 1; }
	@# read every page as a reader would: no NaN, Unnamed or index column, cut-off cell, raw TeX
	@# outside math, image without alt text (tools/check_pages.py lists page, rule and snippet)
	@$(PY) tools/check_pages.py _build/html || { echo "book: built, but pages above fail the reader's checks (open $(CURDIR)/_build/html/index.html)"; exit 1; }
	@# open every page in headless Chromium at 1400 px: no table or figure wider than its column, no clipped
	@# cell (tools/check_layout.py lists page, element and widths; without Debian's chromium it says so and passes)
	@$(PY) tools/check_layout.py --if-browser _build/html || { echo "book: built, but tables or figures above do not fit their column (open $(CURDIR)/_build/html/index.html)"; exit 1; }
	@echo "book: $(CURDIR)/_build/html/index.html"

# The tests read five datasets (about 115 MB; the README's Data section). Before anything is collected,
# conftest.py checks the data root for them: missing ones are downloaded once, or, with HACN_DOWNLOAD=0,
# the run stops at once with one message listing them and the commands that fetch them.
# HACN_TEST_DATA=skip (make test HACN_TEST_DATA=skip) skips every test that needs a missing dataset instead.
# Tests run in parallel, one worker per core and one torch thread per worker (TEST_WORKERS=1 for
# one process); --dist loadfile keeps a file, and so a notebook's cells, on one worker in order.
TEST_WORKERS ?= auto
PYTEST := OMP_NUM_THREADS=1 $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile -p no:cacheprovider

# The book build runs beside the tests, not after them: its rendering and page checks are mostly one process
# (a core idles), and the tests' last files keep one worker busy while the other has nothing left; run side by
# side, each fills the other's idle core. Its log is printed after the tests (and kept in _build/book-build.log);
# Ctrl-C or a signal to make stops both.
test: env data
	@mkdir -p _build
	@set -m; \
	$(MAKE) --no-print-directory book-build > _build/book-build.log 2>&1 & book=$$!; set +m; \
	trap 'kill -TERM -- -$$book 2>/dev/null; exit 130' INT TERM HUP; \
	echo "book build started beside the tests (log: _build/book-build.log)"; \
	tests=0; $(PYTEST) --durations=15 tests notebooks --nbval-lax || tests=$$?; \
	built=0; wait $$book || built=$$?; \
	echo "---- book build (beside the tests) ----"; cat _build/book-build.log; \
	if [ $$tests -ne 0 ]; then echo "make test: the tests failed (exit $$tests)"; fi; \
	if [ $$built -ne 0 ]; then echo "make test: the book build failed (exit $$built; log above)"; fi; \
	exit $$(( tests != 0 ? tests : built ))

unit: env data
	$(PYTEST) tests

notebooks: env data
	$(PYTEST) notebooks --nbval-lax

clean:
	rm -rf _build .data .pytest_cache
