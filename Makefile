# Every target creates or reuses .venv; it reinstalls only when a requirements file changes.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.requirements-installed
REQUIREMENTS := requirements.txt requirements-blender.txt
# Installed without their declared dependencies (see each file): opensim asks for numpy>=2.1, bpy for <2.
NO_DEPS_REQUIREMENTS := requirements-opensim.txt

.PHONY: venv test test-numpy-lines demo build bench clean

venv: $(STAMP)

$(STAMP): $(REQUIREMENTS) $(NO_DEPS_REQUIREMENTS)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet $(addprefix -r ,$(REQUIREMENTS))
	$(PY) -m pip install --quiet --no-deps $(addprefix -r ,$(NO_DEPS_REQUIREMENTS))
	touch $@

test: venv test-numpy-lines
	$(PY) -m pytest -q tests

# The engine supports numpy 1.24 through 2.x: its tests also run on both ends, without Blender.
NUMPY_LINES := 1.24.4 2.4.6
ENGINE_TEST_PACKAGES := pytest==9.2.0 hypothesis==6.170.15

test-numpy-lines:
	set -e; for v in $(NUMPY_LINES); do \
	  env=.venv-numpy-$$v; \
	  test -x $$env/bin/python || $(PYTHON) -m venv $$env; \
	  $$env/bin/python -c "import numpy, pytest" 2>/dev/null && \
	    $$env/bin/python -c "import numpy, sys; sys.exit(numpy.__version__ != '$$v')" || \
	    $$env/bin/python -m pip install --quiet numpy==$$v $(ENGINE_TEST_PACKAGES); \
	  echo "engine tests on numpy $$v"; \
	  $$env/bin/python -m pytest -q -p no:cacheprovider tests --ignore=tests/addon -m "not blender"; \
	done

demo: venv
	$(PY) -m solver demo

build: venv
	$(PY) tools/build_extension.py

bench: venv
	$(PY) -m bench

clean:
	rm -rf dist $(STAMP)
