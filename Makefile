# Every target creates or reuses .venv; it reinstalls only when a requirements file changes.
# `make test` also creates or reuses .venv-blender-4.2 (Blender 4.2 LTS, the oldest line we support).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.requirements-installed
REQUIREMENTS := requirements.txt requirements-blender.txt
# Installed without their declared dependencies (see each file): opensim asks for numpy>=2.1, bpy for <2.
NO_DEPS_REQUIREMENTS := requirements-opensim.txt

.PHONY: venv venv-blender-4.2 test test-numpy-lines test-blender-4.2 demo build bench clean

venv: $(STAMP)

$(STAMP): $(REQUIREMENTS) $(NO_DEPS_REQUIREMENTS)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet $(addprefix -r ,$(REQUIREMENTS))
	$(PY) -m pip install --quiet --no-deps $(addprefix -r ,$(NO_DEPS_REQUIREMENTS))
	touch $@

test: venv test-numpy-lines test-blender-4.2
	$(PY) -m pytest -q tests

# The add-on tests again with Blender 4.2 LTS as the Blender side of every session (pytest itself
# runs in .venv; tools/blender_session.py starts Blender with $$ITASC_TEST_PYTHON), and the zip
# checked by 4.2's extension validator too.
VENV_42 := .venv-blender-4.2
STAMP_42 := $(VENV_42)/.requirements-installed

venv-blender-4.2: $(STAMP_42)

$(STAMP_42): requirements-blender-4.2.txt
	test -x $(VENV_42)/bin/python || $(PYTHON) -m venv $(VENV_42)
	$(VENV_42)/bin/python -m pip install --quiet -r requirements-blender-4.2.txt
	touch $@

test-blender-4.2: venv $(STAMP_42)
	$(VENV_42)/bin/python -c "import bpy; print('add-on tests on Blender', bpy.app.version_string)"
	ITASC_TEST_PYTHON=$(VENV_42)/bin/python $(PY) -m pytest -q tests/addon

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

# The main job in headless Blender: the rig Rigify generates, all limbs in IK with poles, controls
# animated, ours vs Blender's Standard IK; writes out/demo.blend and out/demo_error.png.
# The engine alone: python -m solver demo.
# RIG=basic_quadruped (cat, wolf, horse, bird, basic_human, metarig): the same on another rig.
RIG ?= generated
demo: build
	$(PY) tools/demo_rigify.py --zip $(ZIP) --rig $(RIG)

# Retargeting demo: the CMU walk (../shared/data/bvh) onto the generated Rigify rig, ours beside the
# copy-rotation retarget; prints per-span foot slide and times, writes out/retarget.blend and
# out/retarget_feet.png.
.PHONY: demo-retarget
demo-retarget: build
	$(PY) tools/demo_retarget.py --zip $(ZIP)

# Markerless demo: Pose2Sim's balancing trial (../shared/data/markerless_pose2sim, calibrated on its
# static trial) onto the generated Rigify rig and onto the metarig, ours beside the rotation-copy
# baseline; prints keypoint error, jitter and foot drift, writes out/markerless.blend and
# out/markerless.png.
.PHONY: demo-markerless
demo-markerless: build
	$(PY) tools/demo_markerless.py --zip $(ZIP)

ZIP = dist/$(shell sed -n 's/^id *= *"\(.*\)"/\1/p' blender_manifest.toml)-$(shell sed -n 's/^version *= *"\(.*\)"/\1/p' blender_manifest.toml).zip

build: venv
	$(PY) tools/build_extension.py

bench: venv
	$(PY) -m bench

clean:
	rm -rf dist $(STAMP) $(STAMP_42)
