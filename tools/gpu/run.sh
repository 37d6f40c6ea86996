#!/usr/bin/env bash
# tools/gpu/run.sh - everything for ONE device call on the H200: configure + build the CUDA
# backend, run the GPU tests, `mlasim replay --gpu` (sentinel and guard-page modes) on the founding
# case under atom-2026-08 and atom-2026-11, compute-sanitizer memcheck on a small case, and the
# performance runs (skipped with PERF=0).
# Logs go to $OUT (default ./gpu-out). Missing Debian packages travel in .gpu-carry/prefix
# (copied from `dpkg -L librapidcheck-dev libxtensor-dev ...` on the dev machine).
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
PREFIX=$PWD/.gpu-carry/prefix/usr
export LD_LIBRARY_PATH=$PREFIX/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
{
  nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv
  nvcc --version | tail -2; cmake --version | head -1
} > "$OUT/env.log" 2>&1
t0=$(date +%s)
cmake -S . -B build-cuda -G Ninja -DGPU_BACKEND=CUDA -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PREFIX" > "$OUT/build.log" 2>&1 &&
  cmake --build build-cuda -j"$(nproc)" --target mlasim_tests mlasim >> "$OUT/build.log" 2>&1
rc=$?
echo "build rc=$rc in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/build.log"
[ $rc -eq 0 ] || { tail -40 "$OUT/build.log"; exit $rc; }
T=build-cuda/bin/mlasim_tests
$T --gtest_filter='Gpu*' 2>&1 | tee "$OUT/gpu-tests.log"
# performance right after the tests, so a call that runs out of time still has its numbers
if [ "${PERF:-1}" != 0 ]; then
  $T --gtest_filter='GpuPerf.*' --gtest_also_run_disabled_tests 2>&1 | tee "$OUT/perf.log"
fi
M=build-cuda/bin/mlasim
for mode in sentinel guard; do
  for prof in atom-2026-08 atom-2026-11; do
    t1=$(date +%s%N)
    $M replay --builtin seed --profile $prof --gpu $mode > "$OUT/replay-$mode-$prof.log" 2>&1
    rc=$?
    echo "== replay --gpu $mode --profile $prof: rc=$rc, $(( ($(date +%s%N) - t1) / 1000000 )) ms"
    sed -n '/^gpu (/,$p' "$OUT/replay-$mode-$prof.log"
  done
done 2>&1 | tee "$OUT/replay-gpu.log"
if command -v compute-sanitizer > /dev/null; then
  timeout 150 compute-sanitizer --tool memcheck --print-limit 20 $T \
    --gtest_filter="GpuPlanner.Serial*:GpuDecode.*:GpuGuard.*" > "$OUT/memcheck.log" 2>&1
  echo "memcheck rc=$?" >> "$OUT/memcheck.log"; tail -5 "$OUT/memcheck.log"
fi
