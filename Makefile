# make demo: set up, build, and train the demo model on the tpu device.
# make test: set up, build, and run the whole test suite (C++ and Python; it includes
#   tests/opinfo/test_opinfo_subset.py, a CI-sized slice of the OpInfo sweep).
# make opinfo: PyTorch's op_db on the tpu device against the CPU, every variant and dtype,
#   Strict mode, then float32 in Fused mode; writes tests/opinfo/report.md and report.json.
#   OPINFO_OPS=add,sum (op_db entries) runs a subset; OPINFO_MODE (strict, debug or fused),
#   OPINFO_DTYPES, OPINFO_FUSED_DTYPES (empty: no Fused pass), OPINFO_JOBS and OPINFO_ARGS
#   (more sweep.py options, e.g. --max-samples 64) narrow or widen it.
# make modules: PyTorch's module suite (module_db) on the tpu device against the CPU, as its
#   test_cpu_gpu_parity runs it for CUDA, in float32 and float64 (tests/modules/parity.py;
#   tests/modules/test_module_subset.py is the CI-sized slice in make test).
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
JOBS ?= $(shell nproc)
# pytest workers for make test: each test file runs whole on one worker.
TEST_WORKERS ?= 2

.PHONY: all system-deps setup build test demo bench opinfo modules special-grid clean

all: build

$(STAMP): requirements.txt
	@echo "torchtpu: creating $(VENV) with the pinned packages (first run only)"
	@$(PYTHON) -m venv $(VENV)
	@$(VPY) -m pip install -q --upgrade pip
	@$(VPY) -m pip install -q -r requirements.txt
	@touch $@

# GoogleTest, OpenSSL's headers (libcrypto: the shared cache tier's signatures)
# and ccache (to speed rebuilds) come from Debian when missing.
system-deps:
	@if [ ! -f /usr/include/gtest/gtest.h ] || [ ! -f /usr/include/openssl/evp.h ] || ! command -v ccache >/dev/null; then \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq libgtest-dev libssl-dev ccache >/dev/null; \
	fi

setup: $(STAMP) system-deps

# JAX (optional, for torchtpu.pallas): the test suite installs it.
JAX_STAMP := $(VENV)/.jax-installed
$(JAX_STAMP): requirements-jax.txt $(STAMP)
	$(VPY) -m pip install -q -r requirements-jax.txt
	touch $@

# TorchTitan and what its llama3 runs import (tests/test_titan.py): pinned and
# installed without dependencies beside the venv's packages, so pip never
# touches torch.
TITAN_SITE := $(VENV)/titan-site
TITAN_STAMP := $(VENV)/.titan-installed
$(TITAN_STAMP): tests/titan/requirements-titan.txt $(STAMP)
	$(VPY) -m pip install -q --no-deps --target $(TITAN_SITE) -r tests/titan/requirements-titan.txt
	touch $@

# The trainer's packages (torchtpu.train: Hydra, datasets, TensorBoard, matplotlib,
# W&B, jsonschema for the manifests' tests): pinned, installed without
# dependencies into the venv, so pip never touches torch.
TRAIN_STAMP := $(VENV)/.train-installed
$(TRAIN_STAMP): requirements-train.txt $(STAMP)
	$(VPY) -m pip install -q --no-deps -r requirements-train.txt
	touch $@

# The package installs into the venv in editable mode through pyproject.toml
# (pip and scikit-build-core, CMake in ./build, the C++ tests too): the
# checkout runs in place, and its metadata gives torch the entry points (the
# Dynamo backend "tpu", device autoload). Older hand-made registrations go first.
build: setup
	@echo "torchtpu: building the C++ extension (several minutes the first time, seconds after)"
	@$(VPY) -c "import glob, os, shutil, site; sp = site.getsitepackages()[0]; \
	  [os.remove(p) for p in glob.glob(os.path.join(sp, 'torchtpu-dev.pth'))]; \
	  [shutil.rmtree(d) for d in glob.glob(os.path.join(sp, 'torchtpu-*.dist-info')) if not os.path.exists(os.path.join(d, 'RECORD'))]"
	@CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) $(VPY) -m pip install -q --no-build-isolation --no-deps -e . \
	  -Cbuild-dir=build -Ccmake.define.TORCHTPU_CPP_TESTS=ON

test: build $(JAX_STAMP) $(TITAN_STAMP) $(TRAIN_STAMP)
	build/torchtpu_cpp_tests
	$(VPY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile tests

OPINFO_MODE ?= strict
OPINFO_DTYPES ?= float32,bfloat16,float16,int64,int32,bool
OPINFO_FUSED_DTYPES ?= float32
OPINFO_OPS ?=
OPINFO_JOBS ?= $(JOBS)
OPINFO_CACHE ?= /tmp/torchtpu-opinfo-cache
OPINFO_ARGS ?=
OPINFO_RUN = TORCHTPU_CACHE_DIR=$(OPINFO_CACHE) $(VPY) tests/opinfo/sweep.py -j $(OPINFO_JOBS) \
  $(if $(OPINFO_OPS),--ops $(OPINFO_OPS)) $(OPINFO_ARGS)

opinfo: build
	rm -f tests/opinfo/report.json
	$(OPINFO_RUN) --mode $(OPINFO_MODE) --dtypes $(OPINFO_DTYPES)
	$(if $(OPINFO_FUSED_DTYPES),$(OPINFO_RUN) --mode fused --dtypes $(OPINFO_FUSED_DTYPES))

modules: build
	TORCHTPU_CACHE_DIR=$(OPINFO_CACHE) $(VPY) tests/modules/parity.py --dtypes float32,float64 \
	  --json tests/modules/report.json

# Special functions on dense grids (512 points per binade) against the CPU.
special-grid: build
	TORCHTPU_CACHE_DIR=$(OPINFO_CACHE) $(VPY) tests/opinfo/special_grid.py --per-octave 512

demo: build
	@$(VPY) examples/train_gpt.py

bench: build
	$(VPY) benchmarks/dispatch.py
	$(VPY) benchmarks/train_step.py

clean:
	rm -rf build torchtpu/_C*.so
