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

# What CI runs: install packages, build everything (the AMD device check is part of the build), test.
verify: deps
	$(MAKE) --no-print-directory all
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
