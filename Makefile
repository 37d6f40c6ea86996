# mlasim: every target drives CMake. Configure settings come from CMakePresets.json, so `make` and
# `cmake --preset <name>` build the same thing. Extra cache settings: make verify CMAKE_ARGS=-D...
SHELL := /bin/bash
.DEFAULT_GOAL := all
JOBS ?= 2
CMAKE_ARGS ?=
CTEST = ctest --output-on-failure --no-tests=error -j$(JOBS)

.PHONY: all deps configure verify demo bench asan cuda-build fuzz-smoke clean

# CPU build in build/ (GPU_BACKEND=NONE, AMD device-code check on); the CLI is build/bin/mlasim.
all: configure
	cmake --build build -j$(JOBS)

configure:
	cmake --preset default $(CMAKE_ARGS)

deps:
	bash scripts/install-deps.sh

# FlashInfer's own MLAPlan, compiled through tests/third_party/flashinfer_shim.cpp for the live
# reference-vs-FlashInfer test: `verify` extracts the pinned archive's include/ into the build area
# and passes -DMLASIM_FLASHINFER_DIR when the archive and the CUDA headers are there, and warns
# loudly when they are not (docs/planners.md).
FLASHINFER_TARBALL ?= ../shared/third_party/flashinfer.tar.xz
FLASHINFER_SRC := build/third_party/flashinfer
CUDA_RUNTIME_HEADER ?= /usr/local/cuda/include/cuda_runtime_api.h
FLASHINFER_ARG = -DMLASIM_FLASHINFER_DIR=$(if $(and $(wildcard $(FLASHINFER_SRC)/include/flashinfer/attention/scheduler.cuh),$(wildcard $(CUDA_RUNTIME_HEADER))),$(CURDIR)/$(FLASHINFER_SRC))

.PHONY: flashinfer-src
flashinfer-src:
	@if [ -f $(FLASHINFER_TARBALL) ] && [ ! -f $(FLASHINFER_SRC)/include/flashinfer/attention/scheduler.cuh ]; then \
	  mkdir -p $(dir $(FLASHINFER_SRC)) && tar -xJf $(FLASHINFER_TARBALL) -C $(dir $(FLASHINFER_SRC)) flashinfer/include; fi
	@if [ ! -f $(FLASHINFER_SRC)/include/flashinfer/attention/scheduler.cuh ] || [ ! -f $(CUDA_RUNTIME_HEADER) ]; then \
	  echo "##########################################################################################"; \
	  echo "# WARNING: $(FLASHINFER_TARBALL) or $(CUDA_RUNTIME_HEADER) is missing:"; \
	  echo "# FlashInfer's MLAPlan is NOT compiled and the live FlashInfer-vs-reference test does NOT run."; \
	  echo "# (The committed FlashInfer corpus is still checked.)"; \
	  echo "##########################################################################################"; fi

# What CI runs: install packages, build everything (the AMD device check is part of the build), test.
verify: deps flashinfer-src
	$(MAKE) --no-print-directory all CMAKE_ARGS="$(CMAKE_ARGS) $(FLASHINFER_ARG)"
	$(CTEST) --test-dir build
	$(MAKE) --no-print-directory fuzz-smoke

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

# libFuzzer harnesses for every parser (clang-14, address + undefined sanitizers), a short run of
# each on its seed corpus in tests/fuzz/corpus/. Crashes found become new corpus files.
FUZZ_SECONDS ?= 10
fuzz-smoke:
	CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DMLASIM_LIBFUZZER=ON -DGPU_BACKEND=NONE $(CMAKE_ARGS) > build-fuzz.log
	cmake --build build-fuzz -j$(JOBS) --target fuzz_harnesses >> build-fuzz.log
	@for h in scenario_json fault_log layout plan_request case_dir; do \
	  mkdir -p build-fuzz/corpus/$$h; \
	  echo "fuzz-smoke: $${h}_fuzz for $(FUZZ_SECONDS) s"; \
	  ./build-fuzz/bin/$${h}_fuzz -max_total_time=$(FUZZ_SECONDS) -max_len=8192 -print_final_stats=1 \
	    build-fuzz/corpus/$$h tests/fuzz/corpus/$$h 2>&1 | grep -E "stat::number_of_executed_units|ERROR|SUMMARY" ; \
	  test $${PIPESTATUS[0]} -eq 0 || exit 1; \
	done

clean:
	rm -rf build build-asan build-cuda build-hip build-fuzz build-fuzz.log
