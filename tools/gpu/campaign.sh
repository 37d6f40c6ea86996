#!/usr/bin/env bash
# tools/gpu/campaign.sh - GPU fuzzing campaigns through the kernel-under-test library, for ONE
# device call: builds mlasim and libmlasim_kut_gpu.so (build-cuda, tools/gpu/common.sh), or takes
# them from a carried folder (BIN=<folder> from tools/gpu/pack.sh: no build), then runs
# `mlasim fuzz --gpu sentinel|guard` at small sizes under a wall-clock budget each, and prints
# the summary lines (cases/s, findings, worker replacements, where the time goes).
#   SECONDS_SENTINEL (default 120), SECONDS_GUARD (default 60), JOBS (default 16),
#   HEAD_DIMS (default 576,512), KUT (default <bin>/libmlasim_kut_gpu.so),
#   EXTRA (more flags for both campaigns, e.g. "--reference cpu"),
#   TESTS=1: first the device input generator's tests (GpuInputs.*; builds mlasim_tests too
#     unless BIN holds one),
#   AB=1: each campaign once more with --host-inputs (q and the KV cache built on the host and
#     uploaded, as before the device generator): the baseline, same seed, same budget.
#   MPS=0: no MPS daemon (by default one is started for the campaigns when
#     nvidia-cuda-mps-control exists: tools/gpu/mps.sh; the workers are processes sharing one GPU).
# Logs and the campaign folders go to $OUT (camp-sentinel/, camp-guard/, *.log).
set -uo pipefail
source "$(dirname "$0")/common.sh"
if [ -n "${BIN:-}" ]; then
  D=$BIN
  export LD_LIBRARY_PATH=$PWD/$BIN/lib:${LD_LIBRARY_PATH:-}
else
  D=build-cuda/bin
  targets="mlasim mlasim_kut_gpu"
  [ "${TESTS:-0}" = 1 ] && targets="$targets mlasim_tests"
  build_cuda $targets || exit 1
fi
M=$D/mlasim
KUT=${KUT:-$D/libmlasim_kut_gpu.so}
JOBS=${JOBS:-16}
HEAD_DIMS=${HEAD_DIMS:-576,512}
if [ "${TESTS:-0}" = 1 ]; then
  timeout 120 "$D/mlasim_tests" --gtest_filter='GpuInputs.*:InputValues.*' > "$OUT/inputs-tests.log" 2>&1
  echo "== input generator tests: rc=$?"
  grep -E '^\[  (PASSED|FAILED) |FAILED  \]|OK \]' "$OUT/inputs-tests.log" | head -20
fi
campaign() {  # MODE SECONDS [TAG FLAGS...]
  local mode=$1 secs=$2 tag=${3:-} t0
  shift 3 2> /dev/null || shift $#
  t0=$(date +%s)
  $M fuzz --gpu "$mode" --kernel-under-test "$KUT" --cases 100000 --seconds "$secs" --seed 1 \
    --small --ignore-known --head-dims "$HEAD_DIMS" --jobs "$JOBS" ${EXTRA:-} "$@" \
    --out "$OUT/camp-$mode$tag" > "$OUT/camp-$mode$tag.log" 2>&1
  local rc=$?
  echo "== fuzz --gpu $mode $*: rc=$rc in $(( $(date +%s) - t0 )) s"
  grep -vE '^coverage' "$OUT/camp-$mode$tag.log" | tail -25
}
source "$(dirname "$0")/mps.sh"
mps_start
trap mps_stop EXIT
campaign sentinel "${SECONDS_SENTINEL:-120}"
campaign guard "${SECONDS_GUARD:-60}"
if [ "${AB:-0}" = 1 ]; then
  campaign sentinel "${SECONDS_SENTINEL:-120}" -host-inputs --host-inputs
  campaign guard "${SECONDS_GUARD:-60}" -host-inputs --host-inputs
fi
# every finding replays through the same kernel (its file records the command)
for f in "$OUT"/camp-*/*.json; do
  [ -e "$f" ] || continue
  case $f in */progress*.json | */summary*.json) continue ;; esac
  mode=$(basename "$(dirname "$f")"); mode=${mode#camp-}; mode=${mode%-host-inputs}
  $M replay --gpu "$mode" --kernel-under-test "$KUT" --head-dims "$HEAD_DIMS" "$f" \
    > "${f%.json}.replay.log" 2>&1
  rc=$?
  echo "replay $(basename "$f"): rc=$rc"
done
