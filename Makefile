# The two set-up commands in README: `make run` and `make test`. Both create .venv when needed.
VENV   ?= .venv
PYTHON ?= python3
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.easel-installed

.PHONY: run test lint check bench bundle screenshots translations install-desktop clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	# torch 2.13.0 first: the CPU wheel on this machine's disk (a looser request pulls a CUDA build).
	$(PY) -m pip install torch==2.13.0
	$(PY) -m pip install -e '.[test,dev]'
	# spandrel without its torchvision (see the `upscale` extra in pyproject.toml).
	$(PY) -m pip install --no-deps 'spandrel>=0.4,<0.5' 'einops>=0.8'
	touch $(STAMP)

run: $(STAMP)
	$(PY) -m app

# PostgreSQL tests use $EASEL_TEST_PG_URL, else a private server on 127.0.0.1 that
# scripts/pg_test_server.sh starts when PostgreSQL is installed (they skip without one).
# Two pytest processes, each test file whole in one (its module fixtures built once): one
# process kept 0.8 of a core busy, mostly waiting on the worker processes it starts;
# two ran the suite in 484 s instead of 916 s on a 2-core machine. TEST_PROCESSES=0: one.
# PYTHONDONTWRITEBYTECODE cleared: where the shell sets it (this machine does), each pytest
# process rewrote every test file's asserts and compiled app/ again (7 of the 22 s of CPU it
# took to collect), and each process the tests start (`python -m app` commands, spawned
# workers) compiled app/ again (0.1-0.2 s of CPU each). .pyc files go to git-ignored __pycache__/.
TEST_PROCESSES ?= 2
test: $(STAMP)
	PYTHONDONTWRITEBYTECODE= \
	EASEL_TEST_PG_URL="$${EASEL_TEST_PG_URL:-$$(scripts/pg_test_server.sh start)}" \
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -n $(TEST_PROCESSES) --dist loadfile

lint: $(STAMP)
	$(VENV)/bin/ruff check app tests benchmarks packaging
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

check: lint test

bench: $(STAMP)
	$(PY) benchmarks/transitions.py
	$(PY) benchmarks/claims.py
	$(PY) benchmarks/generation.py
	$(PY) benchmarks/model_quality.py
	xvfb-run -a $(PY) benchmarks/gui.py
	$(PY) benchmarks/chaos.py
	$(PY) benchmarks/integrity.py
	$(PY) benchmarks/security.py
	$(PY) -m benchmarks.history

# The window's Chinese: collect the strings of app/ui into the .ts (translations are kept),
# then compile the .qm the app loads. Both files are committed, so `make run` needs neither tool.
translations: $(STAMP)
	$(VENV)/bin/pyside6-lupdate -no-obsolete -locations none $$(find app/ui -name '*.py' | sort) \
		-ts resources/i18n/easel_zh_CN.ts
	$(VENV)/bin/pyside6-lrelease resources/i18n/easel_zh_CN.ts -qm resources/i18n/easel_zh_CN.qm

screenshots: $(STAMP)
	xvfb-run -a $(PY) packaging/screenshots.py --real

bundle: $(STAMP)
	$(PY) -m pip install 'pyinstaller>=6.10'
	$(VENV)/bin/pyinstaller --noconfirm --clean --distpath dist --workpath build packaging/easel.spec
	@du -sh dist/easel

install-desktop: $(STAMP)
	packaging/install_desktop.sh "$(abspath $(VENV))/bin/easel"

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
