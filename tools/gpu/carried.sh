#!/usr/bin/env bash
# tools/gpu/carried.sh - one device call that runs binaries built on the developer machine (the
# device has nvcc but none of the Debian packages the tests link): copy build-cuda/bin/mlasim_tests,
# mlasim and mlasim_flashmla_bench (linked with -static-libstdc++ -static-libgcc) and the shared
# libraries `ldd` lists as not on a bare CUDA image into a folder of the checkout that git ignores
# (tools/gpu/pack.sh does it), name that folder in the call's carry, and run
#   bash tools/gpu/carried.sh <folder>
# It runs, in this order, each with a time limit, logging to $OUT: the GPU tests, the performance
# runs, the FlashMLA side-by-side bench, Nsight Compute on one launch of the decode kernel
# NCU_TILING (default 0: the one the library picks) on the perf shape NCU_SHAPE (default
# dense-h16), compute-sanitizer memcheck on the decode tests, and `mlasim replay --gpu` in
# sentinel and guard mode (REPLAY_MODES) on the founding case. STEPS (default all) picks some:
# tests,perf,bench,ncu,memcheck,replay.
set -uo pipefail
B=${1:?usage: carried.sh <folder with the carried binaries>}
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$B/lib:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
STEPS=",${STEPS:-tests,perf,bench,ncu,memcheck,replay},"
T=$B/mlasim_tests
step() { [[ $STEPS == *",$1,"* ]]; }
stamp() { echo "== $1 ($(date +%T))"; }
{
  nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm,clocks.mem,driver_version \
    --format=csv
  ldd "$T" | grep -i "not found" || echo "ldd: all libraries found"
} > "$OUT/env.log" 2>&1
cat "$OUT/env.log"
if step tests; then
  stamp tests
  timeout 120 "$T" --gtest_filter='Gpu*' > "$OUT/gpu-tests.log" 2>&1
  echo "gpu tests rc=$?"
  grep -E '^\[  (PASSED|FAILED) |^\[  FAILED|OK \]|FAILED  \]' "$OUT/gpu-tests.log" | head -30
  grep -E 'ws|warp-spec' "$OUT/gpu-tests.log" | sort | uniq -c | sort -rn | head -3
fi
if step perf; then
  stamp perf
  timeout 150 "$T" --gtest_filter='GpuPerf.*' --gtest_also_run_disabled_tests \
    > "$OUT/perf.log" 2>&1
  echo "perf rc=$?"
  grep '\[perf\]' "$OUT/perf.log"
fi
if step bench && [ -x "$B/mlasim_flashmla_bench" ]; then
  stamp bench
  timeout 100 "$B/mlasim_flashmla_bench" > "$OUT/bench.log" 2>&1
  echo "bench rc=$?"
  cat "$OUT/bench.log"
fi
if step ncu && command -v ncu > /dev/null; then
  stamp ncu
  MLASIM_PERF_SHAPES=${NCU_SHAPE:-dense-h16} MLASIM_PERF_TILINGS=${NCU_TILING:-0} timeout 80 ncu \
    --clock-control none -k regex:mla_decode --launch-skip 1 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section SchedulerStats \
    --section WarpStateStats --section Occupancy --section LaunchStats --section SourceCounters \
    -o "$OUT/ncu-decode" -f "$T" --gtest_filter='GpuPerf.DISABLED_DecodeBandwidth' \
    --gtest_also_run_disabled_tests > "$OUT/ncu-run.log" 2>&1
  echo "ncu rc=$?"
  ncu -i "$OUT/ncu-decode.ncu-rep" --print-details all > "$OUT/ncu-decode.txt" 2>&1
  rm -f "$OUT/ncu-decode.ncu-rep"
  grep -E 'Duration|Memory Throughput|DRAM Throughput|Compute \(SM\)|Issue Slots Busy|No Eligible|Registers Per|Achieved Occupancy|Warp Cycles Per Issued' \
    "$OUT/ncu-decode.txt" | head -20
fi
if step memcheck && command -v compute-sanitizer > /dev/null; then
  stamp memcheck
  timeout 80 compute-sanitizer --tool memcheck --print-limit 20 "$T" \
    --gtest_filter='GpuDecode.MatchesCpu*:GpuDecode.ZeroKv*' > "$OUT/memcheck.log" 2>&1
  echo "memcheck rc=$?"
  tail -3 "$OUT/memcheck.log"
fi
if step replay; then
  stamp replay
  for mode in ${REPLAY_MODES:-sentinel guard}; do
    timeout 70 "$B/mlasim" replay --builtin seed --profile atom-2026-08 --gpu $mode \
      > "$OUT/replay-$mode.log" 2>&1
    echo "replay --gpu $mode rc=$? (1 = the CPU report's violations)"
    grep -E '^gpu verdict|FAULT|device error' "$OUT/replay-$mode.log"
  done
fi
stamp done
