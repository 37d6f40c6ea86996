#!/usr/bin/env bash
# tools/gpu/flashmla_corpus.sh - the FlashMLA scheduler golden corpus (docs/planners.md).
#
#   tools/gpu/flashmla_corpus.sh build   # dev machine (nvcc 13, no GPU needed): compiles the harness
#                                        # against both FlashMLA checkouts into build-flashmla/
#   tools/gpu/flashmla_corpus.sh run     # on the H200: runs it on tests/data/flashmla-sched-inputs
#                                        # and writes $OUT/flashmla-sched.jsonl.gz (default ./gpu-out)
#
# Checkouts: FLASHMLA_DIR (9241ae3, with csrc/cutlass) and FLASHMLA_414A2F3_DIR (Feb 2025, no
# CUTLASS: it compiles against FLASHMLA_DIR's CUTLASS; only its scheduler is instantiated).
# Defaults: .third_party/flashmla and .third_party/flashmla-414a2f3, extracted from
# ../shared/third_party/*.tar.xz when missing. Flags: FlashMLA's setup.py nvcc flags, sm_90a.
# The binary links cudart, libstdc++ and libgcc statically, so it runs on a bare device machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
FLASHMLA_DIR=${FLASHMLA_DIR:-.third_party/flashmla}
FLASHMLA_414A2F3_DIR=${FLASHMLA_414A2F3_DIR:-.third_party/flashmla-414a2f3}
B=build-flashmla
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}

extract() {  # DIR ARCHIVE: from ../shared/third_party/, or from .third_party/ (a device call
  # carries the archive there: carry [".third_party/archives"])
  [ -d "$1" ] && return 0
  local a
  for a in "../shared/third_party/$2" ".third_party/archives/$2"; do
    [ -f "$a" ] && { mkdir -p .third_party && tar -xJf "$a" -C .third_party/; return 0; }
  done
  echo "flashmla_corpus: $1 missing and no ../shared/third_party/$2 or .third_party/archives/$2" >&2
  exit 2
}

build() {
  extract "$FLASHMLA_DIR" flashmla.tar.xz
  extract "$FLASHMLA_414A2F3_DIR" flashmla-414a2f3.tar.xz
  mkdir -p $B
  local common=(-O3 -DNDEBUG -D_USE_MATH_DEFINES -Wno-deprecated-declarations
    -U__CUDA_NO_HALF_OPERATORS__ -U__CUDA_NO_HALF_CONVERSIONS__ -U__CUDA_NO_HALF2_OPERATORS__
    -U__CUDA_NO_BFLOAT16_CONVERSIONS__ --expt-relaxed-constexpr --expt-extended-lambda
    --use_fast_math -gencode arch=compute_90a,code=sm_90a -Itools/gpu)
  local cutlass=(-I"$FLASHMLA_DIR/csrc/cutlass/include" -I"$FLASHMLA_DIR/csrc/cutlass/tools/util/include")
  local new=(-std=c++20 -I"$FLASHMLA_DIR/csrc" -I"$FLASHMLA_DIR/csrc/kerutils/include"
    -I"$FLASHMLA_DIR/csrc/sm90" "${cutlass[@]}")
  local t0=$(date +%s)
  "$NVCC" "${common[@]}" "${new[@]}" -c \
    "$FLASHMLA_DIR/csrc/smxx/decode/get_decoding_sched_meta/get_decoding_sched_meta.cu" -o $B/sched_9241ae3_kernel.o &
  "$NVCC" "${common[@]}" "${new[@]}" -c tools/gpu/flashmla_sched_9241ae3.cu -o $B/sched_9241ae3.o &
  wait
  "$NVCC" "${common[@]}" -std=c++17 -I"$FLASHMLA_414A2F3_DIR/csrc" "${cutlass[@]}" -c \
    tools/gpu/flashmla_sched_414a2f3.cu -o $B/sched_414a2f3.o &
  "$NVCC" -O2 -std=c++17 -Itools/gpu -c tools/gpu/flashmla_sched_corpus.cpp -o $B/main.o &
  wait
  "$NVCC" -gencode arch=compute_90a,code=sm_90a -cudart static \
    -Xcompiler=-static-libstdc++,-static-libgcc $B/main.o $B/sched_9241ae3.o \
    $B/sched_9241ae3_kernel.o $B/sched_414a2f3.o -o $B/flashmla_sched_corpus
  echo "flashmla_corpus: built $B/flashmla_sched_corpus in $(( $(date +%s) - t0 )) s"
}

run() {
  local out=${OUT:-$PWD/gpu-out}
  mkdir -p "$out"
  [ -x $B/flashmla_sched_corpus ] || { echo "flashmla_corpus: build first (carry $B/)" >&2; exit 2; }
  gzip -dc tests/data/flashmla-sched-inputs.jsonl.gz > $B/inputs.jsonl
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/flashmla-env.log" 2>&1 || true
  $B/flashmla_sched_corpus $B/inputs.jsonl $B/outputs.jsonl 2> "$out/flashmla-sched.log"
  gzip -9n -c $B/outputs.jsonl > "$out/flashmla-sched.jsonl.gz"
  cat "$out/flashmla-sched.log"
  ls -l "$out/flashmla-sched.jsonl.gz"
}

case "${1:-}" in
  build) build ;;
  run) run ;;
  *) echo "usage: $0 build|run" >&2; exit 2 ;;
esac
