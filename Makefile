# Parallax — the two set-up commands are `make demo` and `make test` (see README.md).
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
# Django 6 needs Python >= 3.12: take the first one found (pyenv installs count).
PYTHON ?= $(shell for p in python3.13 python3.12 $$HOME/.pyenv/versions/3.13*/bin/python3 $$HOME/.pyenv/versions/3.12*/bin/python3 /root/.pyenv/versions/3.13*/bin/python3 /root/.pyenv/versions/3.12*/bin/python3 python3; do \
	if command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then command -v $$p; break; fi; done)
DEMO_DIR := var/demo
HOST ?= 127.0.0.1
PORT ?= 8000
export DEBUG ?= 1

.PHONY: help install install-dev demo demo-data run test test-postgres lint format migrations-check check-deploy bench clean

help:
	@echo "make demo   - venv, install, migrate (SQLite), demo users + data, serve on http://$(HOST):$(PORT)"
	@echo "make test   - the whole test suite (SQLite; services it can find are used, see docs/deploy.md)"
	@echo "make lint | migrations-check | check-deploy | bench | test-postgres"

# uv (from the package index, into the venv) installs the wheels in parallel; pip if uv cannot be had.
define pip_install
	if [ -x $(VENV)/bin/uv ]; then $(VENV)/bin/uv pip install --quiet --python $(PY) -r $(1); \
	else $(PY) -m pip install -q -r $(1); fi
endef

$(VENV)/.installed: requirements.txt
	@test -n "$(PYTHON)" || { echo "Python >= 3.12 is required (Django 6)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q uv || echo "uv not available: installing with pip"
	$(call pip_install,requirements.txt)
	@# a development checkout: manage.py runs here with DEBUG=1 unless SECRET_KEY is set (docs/deploy.md)
	mkdir -p var && touch var/development
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed requirements-dev.txt
	$(call pip_install,requirements-dev.txt)
	touch $@

install: $(VENV)/.installed

install-dev: $(VENV)/.installed-dev

demo: install demo-data run

demo-data: install
	$(PY) manage.py migrate --noinput
	$(PY) manage.py create_demo_users
	$(PY) manage.py generate_corpus --scale demo --seed 1 --cells --out $(DEMO_DIR)/corpus
	$(PY) manage.py import_trajectories $(DEMO_DIR)/corpus --quiet-ok
	$(PY) manage.py import_trajectories tests/fixtures/corpus tests/fixtures/real/claude-code-inline tests/fixtures/real/claude-code-workflow tests/fixtures/real/swe-agent tests/fixtures/real/openhands tests/fixtures/real/otel-genai tests/fixtures/real/gemini-cli --quiet-ok
	$(PY) manage.py load_codebook --preset mast
	$(PY) manage.py load_codebook  # loaded last: the newest frozen codebook is the one the demo study pins
	$(PY) manage.py create_study "Demo study" --annotators annotator1,annotator2,annotator3 --adjudicator senior --exists-ok
	$(PY) manage.py assign "Demo study"
	$(PY) manage.py simulate_codings "Demo study" --fraction 0.5 --seed 1
	@echo; echo "Demo users (password: parallax-demo): annotator1 annotator2 annotator3 senior admin"

# The web server and a real Celery worker on kombu's filesystem broker (no server needed), so that
# uploads import off the request with a live progress bar; the worker stops with the server.
run: install
	@echo "Parallax on http://$(HOST):$(PORT)/  (log in as admin / parallax-demo); worker log: var/celery-worker.log"
	@mkdir -p var
	export CELERY_BROKER_URL=filesystem://; \
	$(PY) -m celery -A config worker -B -s var/celerybeat-schedule --pool=solo --without-gossip --without-mingle --loglevel=INFO > var/celery-worker.log 2>&1 & \
	worker=$$!; trap 'kill $$worker 2>/dev/null' EXIT INT TERM; \
	DEBUG=0 PARALLAX_DEMO=1 $(PY) manage.py runserver $(HOST):$(PORT)

# One test process more than the machine has cores (a browser test spends part of its time waiting for the page),
# and idle processes take tests queued for the others (worksteal): on 2 cores 211 s instead of 285 s with -n auto.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))
PYTEST_RUN = $(PY) -m pytest -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS)
# More pytest options, e.g. PYTEST_ARGS='-m "not browser"' (CI's SQLite pass: the browser tests run on PostgreSQL).
PYTEST_ARGS ?=

test: install-dev
	$(PYTEST_RUN)

test-postgres: install-dev
	@test -n "$$DATABASE_URL" || { echo "set DATABASE_URL=postgres://..."; exit 1; }
	$(PYTEST_RUN)

lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: install-dev
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

migrations-check: install
	$(PY) manage.py makemigrations --check --dry-run

check-deploy: install
	DEBUG=0 SECRET_KEY=$$($(PY) -c 'import secrets; print(secrets.token_urlsafe(50))') ALLOWED_HOSTS=parallax.example.org \
		$(PY) manage.py check --deploy --fail-level WARNING

bench: install-dev
	$(PY) bench/agreement_bench.py
	$(PY) bench/page_bench.py
	$(PY) bench/study_bench.py
	$(PY) bench/load_bench.py
	$(PY) bench/coding_day.py
	$(PY) bench/import_bench.py
	$(PY) bench/bomb_bench.py

clean:
	rm -rf $(VENV) var db.sqlite3* staticfiles
