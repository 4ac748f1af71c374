# Every target creates or reuses .venv; it reinstalls only when a requirements file changes.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.requirements-installed
REQUIREMENTS := requirements.txt requirements-blender.txt

.PHONY: venv test demo build bench clean

venv: $(STAMP)

$(STAMP): $(REQUIREMENTS)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet $(addprefix -r ,$(REQUIREMENTS))
	touch $@

test: venv
	$(PY) -m pytest -q tests

demo: venv
	$(PY) -m solver demo

build: venv
	$(PY) tools/build_extension.py

bench: venv
	$(PY) -m bench

clean:
	rm -rf dist $(STAMP)
