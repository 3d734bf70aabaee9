# The two commands of the README: `make demo` and `make test`. Everything else is plumbing.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps configure build test test-asan test-asan-full test-tsan compat demo bench fuzz clean format docs \
	gpu-bundle gpu-bundle-check gpu-validate-cpu

all: build

deps:
	@scripts/install-deps

$(BUILD_DIR)/build.ninja:
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

configure: deps $(BUILD_DIR)/build.ninja

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 600
	JOBS=$(JOBS) tests/python/run.sh $(BUILD_DIR)
	$(MAKE) test-asan
	$(MAKE) test-tsan

# The readers', CLI and MPI tests (labels io, data, config, cli, mpi) under AddressSanitizer +
# UBSan (Open MPI's own leaks suppressed: tests/support/lsan.supp), in
# build-asan (CMakePresets.json; its two longest tests run a sample there, whole in the Release
# pass). Measured on a clean clone, 2 cores: 8 min to build, 7 min 15 s to run before the
# sampling (of a 29 min `make test`); on 2026-12-03 (3510633, a slower hour of the Xeon VM) 19 min
# to build (build-asan/.ninja_log; tools/serve_http.cpp, compiled for both sparsenet_cli and
# serve_http_test, 128 s each) and 7 min 42 s to run, of a 44 min `make test` (Release build 9
# min, its tests 2 min 46 s).
test-asan: deps
	cmake --preset asan
	cmake --build --preset asan -j $(JOBS)
	ctest --preset asan -j $(JOBS)

# Every CPU test (all labels but cuda) under AddressSanitizer + UBSan, in build-asan. Not part of
# `make test` (which runs the readers', CLI and MPI labels above): about 8 minutes to run on 2 cores
# once built (the install test is left out: an ASan-built package cannot link an uninstrumented
# consumer).
test-asan-full: deps
	cmake --preset asan
	cmake --build --preset asan-full -j $(JOBS)
	ctest --preset asan-full -j $(JOBS)

# The Recommender's concurrency test, serve's grouping gate (GroupingGate.*) and its HTTP front end
# (HttpServer.*) under
# ThreadSanitizer, in build-tsan (CMakePresets.json "tsan": the library and those tests).
# About 2 minutes from scratch on 2 cores.
test-tsan: deps
	cmake --preset tsan
	cmake --build --preset tsan -j $(JOBS)
	ctest --preset tsan -j $(JOBS)

# The oldest supported compilers (README, "Building by hand"): the library, the CLI and the tests
# labelled config and library built and run with GCC 11 (-march=native) in build-gcc11 and with
# Clang 14 (portable, no -march=native) in build-clang14 (CMakePresets.json). Needs g++-11 and
# clang-14 (scripts/install-deps). Not part of `make test`; .ci/run runs it.
compat: deps
	cmake --preset gcc11
	cmake --build --preset gcc11 -j $(JOBS)
	ctest --preset gcc11 -j $(JOBS)
	cmake --preset clang14
	cmake --build --preset clang14 -j $(JOBS)
	ctest --preset clang14 -j $(JOBS)

# The libFuzzer targets (tests/fuzz) in build-fuzz with clang, FUZZ_SECONDS per target (default
# 60), one at a time (docs/reliability.md). Not part of `make test`.
FUZZ_SECONDS ?= 60
fuzz:
	JOBS=$(JOBS) scripts/fuzz.sh $(FUZZ_SECONDS) $(CURDIR)/build-fuzz

# The GPU kit (docs/gpu.md): build-gpu/sparsenet-gpu.tar.zst, a Release CUDA build with every
# library a GPU machine lacks, for `scripts/gpu-validate` there. About 15 minutes from scratch on
# 2 cores. gpu-bundle-check runs the bundle's CPU part (scripts/gpu-validate --allow-no-gpu) in a
# bare Debian root (debootstrap, cached in build-gpu/rootfs), which proves that it needs nothing
# from this machine's -dev packages. Neither is part of `make test`.
gpu-bundle: deps
	JOBS=$(JOBS) scripts/gpu-bundle

gpu-bundle-check: gpu-bundle
	scripts/gpu-bundle-check

# The bundle's CPU part here, on this machine (no root folder), results in build-gpu/validate-cpu.
gpu-validate-cpu: gpu-bundle
	scripts/gpu-validate --allow-no-gpu --out build-gpu/validate-cpu build-gpu/sparsenet-gpu.tar.zst

# The API reference (include/sparsenet) in build-docs/html; needs doxygen.
docs:
	doxygen docs/Doxyfile

demo: build
	scripts/demo.sh $(BUILD_DIR)/sparsenet

# CPU benchmarks beside the peers (docs/benchmarks.md): training throughput on dsstne-bench and
# mult-dae vs PyTorch (pip into benchmarks/.venv), a batch-size sweep, conversion and loading,
# then the PNG plots (docs/img). Not part of `make test`.
bench: build
	benchmarks/setup-venv.sh
	benchmarks/bench.py --build $(BUILD_DIR) --python benchmarks/.venv/bin/python
	benchmarks/bench.py --build $(BUILD_DIR) --python benchmarks/.venv/bin/python --workload mult-dae
	benchmarks/bench.py --build $(BUILD_DIR) --python benchmarks/.venv/bin/python --users 2048 \
	  --repeats 2 --batch 64,128,256,512,1024 --tag batch-sweep
	PATH="$(CURDIR)/benchmarks/.venv/bin:$$PATH" benchmarks/data/convert_bench.sh $(BUILD_DIR)
	benchmarks/.venv/bin/python benchmarks/plot.py

format:
	clang-format -i $$(git ls-files '*.h' '*.cpp' '*.cu' '*.cuh')

clean:
	rm -rf $(BUILD_DIR) build-asan build-tsan build-gcc11 build-clang14 build-fuzz build-docs build-gpu
