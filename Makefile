# mlasim: every target drives CMake. Configure settings come from CMakePresets.json, so `make` and
# `cmake --preset <name>` build the same thing. Extra cache settings: make verify CMAKE_ARGS=-D...
SHELL := /bin/bash
.DEFAULT_GOAL := all
JOBS ?= 2
CMAKE_ARGS ?=
CTEST = ctest --output-on-failure --no-tests=error -j$(JOBS)

.PHONY: all deps configure verify demo bench asan tsan sanitizers cuda-build fuzz-smoke fuzz-long \
        fuzz-fold gpu-carry clean

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

# aiter's MLA sources for the aiter kernel-under-test adapter's AMD compile check and signature
# test, and the planner-vs-aiter benchmark (docs/kut-aiter.md): `verify` extracts the pinned
# archive into the build area and passes -DMLASIM_AITER_DIR when it is there, and warns loudly
# when it is not.
AITER_TARBALL ?= ../shared/third_party/aiter-mla.tar.xz
AITER_SRC := build/third_party/aiter
AITER_ARG = -DMLASIM_AITER_DIR=$(if $(wildcard $(AITER_SRC)/csrc/include/mla_reduce.h),$(CURDIR)/$(AITER_SRC))

.PHONY: aiter-src
aiter-src:
	@if [ -f $(AITER_TARBALL) ] && [ ! -f $(AITER_SRC)/csrc/include/mla_reduce.h ]; then \
	  mkdir -p $(dir $(AITER_SRC)) && tar -xJf $(AITER_TARBALL) -C $(dir $(AITER_SRC)); fi
	@if [ ! -f $(AITER_SRC)/csrc/include/mla_reduce.h ]; then \
	  echo "##########################################################################################"; \
	  echo "# WARNING: $(AITER_TARBALL) is missing:"; \
	  echo "# the aiter adapter (kernels/kut/aiter_kut.cpp) is NOT compile-checked for AMD, its"; \
	  echo "# signature and mapping tests do NOT run, and the planner-vs-aiter benchmark is NOT built."; \
	  echo "##########################################################################################"; fi

# ctest TESTDIR JUNIT: the suite of one build, JUnit XML written even when a test fails.
define run_ctest
	@rc=0; $(CTEST) --test-dir $(1) --output-junit $(CURDIR)/$(2) || rc=$$?; \
	  echo "ctest: JUnit XML in $(2)"; exit $$rc
endef

# What CI runs: install packages, build everything (the AMD device check is part of the build), test
# (JUnit XML: build/junit.xml), then the fuzz smoke run.
verify: deps flashinfer-src aiter-src
	$(MAKE) --no-print-directory all CMAKE_ARGS="$(CMAKE_ARGS) $(FLASHINFER_ARG) $(AITER_ARG)"
	$(call run_ctest,build,build/junit.xml)
	$(MAKE) --no-print-directory fuzz-smoke

# The main job on its built-in default case: the founding fault, before and after the fix.
demo: deps
	$(MAKE) --no-print-directory all
	bash scripts/demo.sh

bench: all
	./build/bin/mlasim_bench --benchmark_min_time=0.05

# clang++ AddressSanitizer + UndefinedBehaviorSanitizer in build-asan/ (-O1, every report fatal),
# every test; JUnit XML in build-asan/junit.xml.
asan:
	cmake --preset asan $(CMAKE_ARGS) > /dev/null
	cmake --build build-asan -j$(JOBS) --target mlasim_tests mlasim
	$(call run_ctest,build-asan,build-asan/junit.xml)

# clang++ ThreadSanitizer in build-tsan/: every test, then a short fuzz campaign on 4 threads
# (campaigns, replay and the planners run threads). JUnit XML in build-tsan/junit.xml.
TSAN_CASES ?= 2000
tsan:
	cmake --preset tsan $(CMAKE_ARGS) > /dev/null
	cmake --build build-tsan -j$(JOBS) --target mlasim_tests mlasim
	$(call run_ctest,build-tsan,build-tsan/junit.xml)
	rm -rf build-tsan/campaign
	./build-tsan/bin/mlasim fuzz --jobs 4 --seed 19 --cases $(TSAN_CASES) --seconds 300 \
	  --profile atom-2026-08 --out build-tsan/campaign > build-tsan/campaign.log 2>&1; \
	  rc=$$?; tail -3 build-tsan/campaign.log; \
	  if [ $$rc -gt 1 ]; then echo "tsan: campaign exited $$rc (log: build-tsan/campaign.log)"; exit 1; fi; \
	  echo "tsan: campaign at --jobs 4: no race reported (exit $$rc: 1 = findings, expected)"

sanitizers: asan tsan

# NVIDIA backend in build-cuda/: proves it compiles and links, also on a machine without a GPU.
cuda-build:
	cmake --preset cuda $(CMAKE_ARGS)
	cmake --build build-cuda -j$(JOBS)

# libFuzzer harnesses for every parser (clang-14, ASan + UBSan, UB fatal), scripts/fuzz.sh:
# fuzz-smoke (CI): each harness seeded, at most FUZZ_RUNS inputs / FUZZ_SECONDS s, a fresh working
#   corpus beside the repository's seeds (tests/fuzz/corpus/), -rss_limit_mb; build-fuzz/smoke/.
# fuzz-long FUZZ_SECONDS=N: crashes as named artifacts and a minimised corpus in fuzz-out/;
# fuzz-fold: merge that corpus into tests/fuzz/corpus/ (-merge=1, only inputs adding coverage).
FUZZ_ENV = JOBS=$(JOBS) CMAKE_ARGS="$(CMAKE_ARGS)" $(if $(FUZZ_SECONDS),FUZZ_SECONDS=$(FUZZ_SECONDS)) \
  $(if $(FUZZ_RUNS),FUZZ_RUNS=$(FUZZ_RUNS)) $(if $(FUZZ_SEED),FUZZ_SEED=$(FUZZ_SEED)) \
  $(if $(FUZZ_RSS_MB),FUZZ_RSS_MB=$(FUZZ_RSS_MB)) $(if $(FUZZ_JOBS),FUZZ_JOBS=$(FUZZ_JOBS))
fuzz-smoke:
	@$(FUZZ_ENV) bash scripts/fuzz.sh build
	@$(FUZZ_ENV) bash scripts/fuzz.sh smoke

fuzz-long:
	@$(FUZZ_ENV) bash scripts/fuzz.sh build
	@$(FUZZ_ENV) bash scripts/fuzz.sh long

fuzz-fold:
	@$(FUZZ_ENV) bash scripts/fuzz.sh fold

# .gpu-carry/prefix: the Debian packages a GPU machine without a package registry lacks
# (scripts/gpu-carry.sh, docs/kernels.md "A first device run").
gpu-carry:
	bash scripts/gpu-carry.sh

clean:
	rm -rf build build-asan build-tsan build-cuda build-hip build-fuzz build-fuzz.log
