# Every target bootstraps its own virtualenv with uv (installing uv first if it is missing).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
UV := $(shell command -v uv 2>/dev/null)
ifeq ($(UV),)
UV := $(PYTHON) -m uv
endif
STACK ?= aws-dev
export PYTHONPATH := $(CURDIR)

.PHONY: venv plan plan-all test bench clean

$(VENV)/.installed: requirements.txt
	$(UV) --version >/dev/null 2>&1 || $(PYTHON) -m pip install --quiet uv
	$(UV) venv --quiet --allow-existing --python $(PYTHON) $(VENV)
	VIRTUAL_ENV=$(VENV) $(UV) pip install --quiet -r requirements.txt
	touch $@

venv: $(VENV)/.installed

## plan: render the offline plan of one example stack (STACK=aws-dev by default)
plan: venv
	$(PY) -m multinode plan $(STACK)

## plan-all: render every stack in stacks/
plan-all: venv
	$(PY) -m multinode plan --all

## test: the whole test suite
test: venv
	$(PY) -m pytest -q -p no:cacheprovider tests

## bench: time `plan` per example stack against the import floor
bench: venv
	$(PY) bench/plan_bench.py

clean:
	rm -rf build .pytest_cache
