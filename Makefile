# mlasim: every target drives CMake. Configure settings come from CMakePresets.json, so `make` and
# `cmake --preset <name>` build the same thing. Extra cache settings: make verify CMAKE_ARGS=-D...
.DEFAULT_GOAL := all
JOBS ?= 2
CMAKE_ARGS ?=
CTEST = ctest --output-on-failure --no-tests=error -j$(JOBS)

.PHONY: all deps configure verify demo bench asan cuda-build clean

# CPU build in build/ (GPU_BACKEND=NONE, AMD device-code check on); the CLI is build/bin/mlasim.
all: configure
	cmake --build build -j$(JOBS)

configure:
	cmake --preset default $(CMAKE_ARGS)

deps:
	bash scripts/install-deps.sh

# What CI runs: install packages, build everything (the AMD device check is part of the build), test.
verify: deps
	$(MAKE) --no-print-directory all
	$(CTEST) --test-dir build

# The main job on its built-in default case: the founding fault, before and after the fix.
demo: deps
	$(MAKE) --no-print-directory all
	bash scripts/demo.sh

bench: all
	./build/bin/mlasim_bench --benchmark_min_time=0.05

# Debug + clang++ AddressSanitizer/UndefinedBehaviorSanitizer in build-asan/.
asan:
	cmake --preset asan $(CMAKE_ARGS)
	cmake --build build-asan -j$(JOBS)
	$(CTEST) --test-dir build-asan

# NVIDIA backend in build-cuda/: proves it compiles and links, also on a machine without a GPU.
cuda-build:
	cmake --preset cuda $(CMAKE_ARGS)
	cmake --build build-cuda -j$(JOBS)

clean:
	rm -rf build build-asan build-cuda build-hip
