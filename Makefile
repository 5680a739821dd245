# The two commands: `make run` and `make test`. Everything else is a step they need.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
CHROMIUM := /usr/bin/chromium

.PHONY: run test lint bench-page bench-first-cycle install install-dev chromium

run: install
	mkdir -p data
	$(PY) -m app.main

test: install-dev chromium
	$(PY) -m ruff check .
	$(PY) -m pytest -q

lint: install-dev
	$(PY) -m ruff check .

bench-page: install-dev chromium
	$(PY) benchmarks/page_latency.py

bench-first-cycle: install-dev chromium
	$(PY) benchmarks/first_cycle.py

$(PY):
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# Stamps re-run the install only when pyproject.toml changes.
$(VENV)/.installed: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[dev]'
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

chromium:
	@test -x $(CHROMIUM) || { \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium; }
