#!/usr/bin/env bash
# tools/gpu/profile.sh - Nsight Compute profile of one decode launch, for one device call.
# Builds build-cuda like run.sh, then for each tiling in TILINGS (DecodeOptions::tiling, default
# "0": the kernel the library picks) profiles the first timed launch of that kernel on the perf
# shape SHAPE (default dense-h16: B=128, 8k, 16 heads; any name of tests/gpu/gpu_perf_test.cpp,
# e.g. dense-fp8q-h16, dense-h128) and writes the details (speed of light, warp stalls, memory)
# to $OUT/ncu-tiling-N.txt, plus the SASS of the decode kernels (libmlasim_kut_gpu.so) to
# $OUT/decode.sass. Needs a Firecracker device (ncu counters).
set -uo pipefail
source "$(dirname "$0")/common.sh"
build_cuda mlasim_tests mlasim_kut_gpu || exit 1
cuobjdump -sass build-cuda/bin/libmlasim_kut_gpu.so > "$OUT/decode.sass" 2>&1
for t in ${TILINGS:-0}; do
  MLASIM_PERF_SHAPES=${SHAPE:-dense-h16} MLASIM_PERF_TILINGS=$t timeout 300 ncu --clock-control none \
    -k regex:mla_decode --launch-skip 1 --launch-count 1 --set full -o "$OUT/ncu-tiling-$t" -f \
    build-cuda/bin/mlasim_tests --gtest_filter='GpuPerf.DISABLED_DecodeBandwidth' \
    --gtest_also_run_disabled_tests > "$OUT/ncu-run-$t.log" 2>&1
  echo "ncu tiling $t rc=$?"; grep '\[perf\] decode' "$OUT/ncu-run-$t.log"
  ncu -i "$OUT/ncu-tiling-$t.ncu-rep" --print-details all > "$OUT/ncu-tiling-$t.txt" 2>&1
  ncu -i "$OUT/ncu-tiling-$t.ncu-rep" --page source --print-source sass --csv > "$OUT/ncu-src-$t.csv" 2>&1
  rm -f "$OUT/ncu-tiling-$t.ncu-rep"
done
