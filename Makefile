# Two commands on a fresh Debian/Ubuntu machine: `make demo` and `make test`.
# Both install what they need: system packages (apt) when missing, and a
# virtual environment at .venv with the package installed in editable mode.

VENV    := .venv
PY      := $(VENV)/bin/python
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PACKAGES := python3-venv libvulkan1 mesa-vulkan-drivers vulkan-validationlayers glslc \
                spirv-tools vulkan-tools xvfb xauth libglfw3 gcc libc6-dev
export XDG_RUNTIME_DIR ?= /tmp/guestcompute-runtime
TORCH_CPU ?= torch==2.13.0+cpu

.PHONY: all deps venv native test test-gpu demo bench bake clean

all: test

deps:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages:$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	@mkdir -p $(XDG_RUNTIME_DIR) && chmod 700 $(XDG_RUNTIME_DIR)

$(VENV)/.installed: pyproject.toml
	$(MAKE) deps
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,demos,onnx]'
	# onnxruntime: the ONNX model tests compare against it on the CPU. Its
	# wheel is large (tens of MB), so it is installed here for the suite and
	# is not in the `test` extra; without it those comparisons skip.
	$(PY) -m pip install -q onnxruntime || echo "onnxruntime not installed: ONNX comparisons against it will skip"
	# slangc for the Slang kernel tests: slangtorch's wheel carries a
	# standalone one (its torch requirement is only for its own Python API,
	# hence --no-deps). Without it those tests skip, saying why.
	$(PY) -m pip install -q --no-deps slangtorch || echo "slangtorch not installed: Slang kernel tests will skip"
	# torch's CPU build (and onnxscript, its default ONNX exporter's), for the
	# tests that export torch modules to ONNX and load them. Only where the
	# package sources hold that build: the default torch wheel brings CUDA's
	# libraries (gigabytes). Without it those tests skip.
	$(PY) -m pip install -q "$(TORCH_CPU)" onnxscript || echo "$(TORCH_CPU) not installed: torch export tests will skip"
	touch $@

venv: deps $(VENV)/.installed native

# The C command interpreter that records batches of guest commands (a plain
# shared library next to its source, named after the source's hash; about
# 0.2 s with gcc).
native: deps $(VENV)/.installed
	$(PY) -m guestcompute build-native

# The suite twice: recording through the C command interpreter (required:
# a missing build fails the run), then through the Python walker.
test: venv
	GUESTCOMPUTE_NATIVE=require $(PY) -m pytest -q
	GUESTCOMPUTE_NATIVE=off $(PY) -m pytest -q

# The GPU lane: the whole suite on a machine with a GPU and its Vulkan driver,
# through both walkers, with that machine's own Python (it needs vulkan, numpy,
# pytest, pytest-xdist and hypothesis; nothing is installed). The Khronos
# validation layer must be on the loader's path: every message fails a test.
# `guestcompute doctor` first prints the device the suite will run on.
GPU_PY   ?= python3
GPU_JOBS ?= 14
test-gpu:
	@mkdir -p $(XDG_RUNTIME_DIR) && chmod 700 $(XDG_RUNTIME_DIR)
	$(GPU_PY) -m guestcompute doctor
	$(GPU_PY) -m guestcompute build-native
	GUESTCOMPUTE_NATIVE=require $(GPU_PY) -m pytest -q -n $(GPU_JOBS)
	GUESTCOMPUTE_NATIVE=off $(GPU_PY) -m pytest -q -n $(GPU_JOBS)

# The particle demo: a window when there is a display; otherwise offscreen under
# the validation layer, writing the last frame to out/particles.png.
demo: venv
	@if [ -n "$$DISPLAY$$WAYLAND_DISPLAY" ]; then \
	  $(PY) -m demos.particles; \
	else \
	  $(PY) -m demos.particles --headless --validation --frames 90 --screenshot out/particles.png; \
	fi

# Precompile every built-in kernel into guestcompute/kernels/baked (needs glslc);
# incremental: only new kernel sources compile, unused files are removed.
bake: venv
	$(PY) -m pip install -q -e '.[bake]'
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m guestcompute bake

# The benchmark suite: JSON, markdown and a PNG chart in bench-results/.
# BENCH_ARGS passes options, e.g. `make bench BENCH_ARGS="--quick --only record"`.
bench: venv
	$(PY) -m benchmarks.run $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
