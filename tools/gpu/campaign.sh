#!/usr/bin/env bash
# tools/gpu/campaign.sh - GPU fuzzing campaigns through the kernel-under-test library, for ONE
# device call: builds mlasim and libmlasim_kut_gpu.so (build-cuda, tools/gpu/common.sh), then
# runs `mlasim fuzz --gpu sentinel|guard` at small sizes under a wall-clock budget each, and
# prints the summary lines (cases/s, findings, worker replacements, where the time goes).
#   SECONDS_SENTINEL (default 120), SECONDS_GUARD (default 60), JOBS (default 8),
#   HEAD_DIMS (default 576,512), KUT (default build-cuda/bin/libmlasim_kut_gpu.so),
#   EXTRA (more flags for both campaigns, e.g. "--reference cpu").
# Logs and the campaign folders go to $OUT (camp-sentinel/, camp-guard/, *.log).
set -uo pipefail
source "$(dirname "$0")/common.sh"
build_cuda mlasim mlasim_kut_gpu || exit 1
M=build-cuda/bin/mlasim
KUT=${KUT:-build-cuda/bin/libmlasim_kut_gpu.so}
JOBS=${JOBS:-8}
HEAD_DIMS=${HEAD_DIMS:-576,512}
campaign() {  # MODE SECONDS
  local mode=$1 secs=$2 t0
  t0=$(date +%s)
  $M fuzz --gpu "$mode" --kernel-under-test "$KUT" --cases 100000 --seconds "$secs" --seed 1 \
    --small --ignore-known --head-dims "$HEAD_DIMS" --jobs "$JOBS" ${EXTRA:-} \
    --out "$OUT/camp-$mode" > "$OUT/camp-$mode.log" 2>&1
  local rc=$?
  echo "== fuzz --gpu $mode: rc=$rc in $(( $(date +%s) - t0 )) s"
  grep -vE '^coverage' "$OUT/camp-$mode.log" | tail -25
}
campaign sentinel "${SECONDS_SENTINEL:-120}"
campaign guard "${SECONDS_GUARD:-60}"
# every finding replays through the same kernel (its file records the command)
for f in "$OUT"/camp-*/*.json; do
  [ -e "$f" ] || continue
  case $f in */progress*.json | */summary*.json) continue ;; esac
  mode=$(basename "$(dirname "$f")"); mode=${mode#camp-}
  $M replay --gpu "$mode" --kernel-under-test "$KUT" --head-dims "$HEAD_DIMS" "$f" \
    > "${f%.json}.replay.log" 2>&1
  rc=$?
  echo "replay $(basename "$f"): rc=$rc"
done
