#!/usr/bin/env bash
# tools/gpu/run.sh - everything for ONE device call on the H200: configure + build the CUDA
# backend, run the GPU tests, the performance runs (skipped with PERF=0), `mlasim replay --gpu` on
# every built-in and tests/cases scenario (sentinel mode) and on the founding case in guard-page
# mode, and compute-sanitizer memcheck on a small case. With FLASHMLA=1 it then runs
# tools/gpu/third_party_kut.sh: FlashMLA's dense decode as the kernel under test (build with
# -DMLASIM_FLASHMLA_DIR, `fuzz --gpu sentinel` 120 s, `--gpu guard` 60 s, every finding replayed;
# carry .third_party/archives/flashmla.tar.xz); FLASHINFER=1 adds FlashInfer's fa3 kernel (carry
# flashinfer.tar.xz). FLASHMLA=only runs that step alone (no other build or test).
# Logs go to $OUT (default ./gpu-out); setup and build in tools/gpu/common.sh.
set -uo pipefail
source "$(dirname "$0")/common.sh"
{
  nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv
  nvcc --version | tail -2; cmake --version | head -1
} > "$OUT/env.log" 2>&1
THIRD_PARTY="flashmla$([ "${FLASHINFER:-0}" = 1 ] && echo ' flashinfer')"
if [ "${FLASHMLA:-0}" = only ]; then
  KERNELS=$THIRD_PARTY bash "$(dirname "$0")/third_party_kut.sh"
  exit $?
fi
build_cuda mlasim_tests mlasim || exit 1
T=build-cuda/bin/mlasim_tests
$T --gtest_filter='Gpu*' 2>&1 | tee "$OUT/gpu-tests.log"
# performance right after the tests, so a call that runs out of time still has its numbers
if [ "${PERF:-1}" != 0 ]; then
  $T --gtest_filter='GpuPerf.*' --gtest_also_run_disabled_tests 2>&1 | tee "$OUT/perf.log"
fi
M=build-cuda/bin/mlasim
# After the timed runs everything else runs side by side (the GPU is idle most of the time; the
# CPU numerics are the long part): guard mode, the --json run and memcheck in the background,
# the sentinel sweep in the foreground.
guard_runs() {  # guard mode: each call in a child with q, then o, ending at an unmapped page
  for prof in atom-2026-08 atom-2026-11; do
    local t1=$(date +%s%N)
    $M replay --builtin seed --profile $prof --gpu guard > "$OUT/replay-guard-$prof.log" 2>&1
    echo "== replay --gpu guard --profile $prof: rc=$?, $(( ($(date +%s%N) - t1) / 1000000 )) ms"
    sed -n '/^gpu (/,$p' "$OUT/replay-guard-$prof.log"
  done > "$OUT/replay-guard.log" 2>&1
}
guard_runs &
{ $M replay --builtin seed --profile atom-2026-08 --gpu --json > "$OUT/replay-seed-gpu.json" 2>&1
  echo "replay --gpu --json rc=$? ($(wc -c < "$OUT/replay-seed-gpu.json") bytes)" > "$OUT/replay-json.log"; } &
if command -v compute-sanitizer > /dev/null; then
  { timeout 200 compute-sanitizer --tool memcheck --print-limit 20 $T \
      --gtest_filter="GpuPlanner.Serial*:GpuDecode.*:GpuGuard.*" > "$OUT/memcheck.log" 2>&1
    echo "memcheck rc=$?" >> "$OUT/memcheck.log"; } &
fi
# `replay --gpu` (sentinel mode) on every built-in case under two profiles and on every case file,
# 6 at a time; one line per run in replay-gpu.log, the full report in replay-<name>.log.
replay_one() {  # NAME ARGS...
  local name=$1; shift
  local t1=$(date +%s%N)
  $M replay "$@" --gpu > "$OUT/replay-$name.log" 2>&1
  local rc=$?
  printf '%-44s rc=%d %6d ms  %s\n' "$name" $rc $(( ($(date +%s%N) - t1) / 1000000 )) \
    "$(grep -E '^gpu verdict|device error' "$OUT/replay-$name.log" | tr '\n' ' ')"
}
export -f replay_one; export M OUT
{
  for b in seed seed-b35 dense-mtp; do
    for prof in atom-2026-08 atom-2026-11; do echo "$b-$prof --builtin $b --profile $prof"; done
  done
  for f in tests/cases/*.json; do
    case $f in *.expect.json) continue ;; esac
    echo "$(basename "$f" .json) $f"
  done
} | xargs -P 6 -L 1 bash -c 'replay_one "$@"' _ | sort > "$OUT/replay-gpu.log"
wait
cat "$OUT/replay-gpu.log" "$OUT/replay-guard.log" "$OUT/replay-json.log"
tail -4 "$OUT/memcheck.log" 2>/dev/null
if [ "${FLASHMLA:-0}" = 1 ]; then
  KERNELS=$THIRD_PARTY bash "$(dirname "$0")/third_party_kut.sh"
fi
