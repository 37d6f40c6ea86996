#!/usr/bin/env bash
# tools/gpu/third_party_kut.sh - the real third-party MLA kernels as kernels under test on the H200
# (docs/kernel-under-test.md "FlashMLA adapter", "FlashInfer adapter"), in one device call, every
# log under $OUT (default ./gpu-out). KERNELS (default "flashmla") lists the adapters to run:
#   flashmla         FlashMLA's dense bf16 decode + combine (kernels/kut/flashmla_kut.cu)
#   flashmla_sparse  FlashMLA's sparse fp8 V3.2 decode + combine (kernels/kut/flashmla_sparse_kut.cu)
#   flashinfer       FlashInfer's fa3 MLA decode (kernels/kut/flashinfer_kut.cu)
# For each: unless LIB_<NAME> (and MLASIM) name carried binaries, it extracts the checkout into
# .third_party/ (from ../shared/third_party/NAME.tar.xz or the carried
# .third_party/archives/NAME.tar.xz), configures build-cuda with -DMLASIM_FLASHMLA_DIR /
# -DMLASIM_FLASHINFER_DIR and builds mlasim and the adapter (NAME-build.log; FlashMLA's dense
# decode alone is ~2 min of nvcc); replays one known case through the adapter (dense kernels:
# tests/kut/cases/flashmla-dense-page64.json, whose draft step 0 is ATOM's known overflow,
# docs/findings.md #2, which the contract predicts; flashmla_sparse:
# tests/kut/cases/flashmla-sparse-v32.json; their calls run, are not UNSUPPORTED, the numerics
# compare); runs `mlasim fuzz --gpu
# sentinel` for SENTINEL_SECONDS (120) and `--gpu guard` for GUARD_SECONDS (60), head dims
# 576,512, --jobs JOBS (8), seed SEED (1), known families ignored, FUZZ_FLAGS (more flags for both
# campaigns, e.g. "--shrink-steps 4" to bound the shrink a found case gets), findings in
# $OUT/NAME-fuzz-MODE/; and replays every finding through the adapter in its mode. Prints the
# summary lines. Called by tools/gpu/run.sh with FLASHMLA=1 (and FLASHINFER=1), or alone:
#   KERNELS="flashmla flashinfer" bash tools/gpu/third_party_kut.sh      # builds on the device
#   MLASIM=D/mlasim LIB_FLASHMLA=D/libmlasim_kut_flashmla.so bash tools/gpu/third_party_kut.sh
# One kernel (build + 3 min of campaigns + replays) fits a 10-minute device call; run two
# kernels in two calls (build-cuda is kept between calls).
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/gpu/common.sh
KERNELS=${KERNELS:-flashmla}
SENTINEL_SECONDS=${SENTINEL_SECONDS:-120}
GUARD_SECONDS=${GUARD_SECONDS:-60}
JOBS=${JOBS:-8}
SEED=${SEED:-1}
stamp() { echo "== $1 ($(date +%T))"; }

checkout() {  # NAME: the extracted checkout's folder, extracting it when missing
  local dir=$PWD/.third_party/$1 a
  if [ ! -d "$dir/include" ] && [ ! -d "$dir/csrc" ]; then
    for a in ../shared/third_party/$1.tar.xz .third_party/archives/$1.tar.xz; do
      [ -f "$a" ] && { mkdir -p .third_party && tar -xJf "$a" -C .third_party/; break; }
    done
  fi
  [ -d "$dir/include" ] || [ -d "$dir/csrc" ] || return 1
  echo "$dir"
}

build() {  # NAME: configure build-cuda with the checkout and build mlasim + the adapter
  local name=$1 option dir t0 rc
  case $name in
    flashmla|flashmla_sparse) option=MLASIM_FLASHMLA_DIR ;;
    flashinfer) option=MLASIM_FLASHINFER_DIR ;;
    *) echo "third_party_kut: unknown kernel '$name' (flashmla, flashmla_sparse, flashinfer)"; return 2 ;;
  esac
  dir=$(checkout "${name%_sparse}") || {
    echo "third_party_kut: no $name checkout (carry .third_party/archives/$name.tar.xz)"
    return 2
  }
  stamp "$name: build"
  t0=$(date +%s)
  cmake -S . -B build-cuda -G Ninja -DGPU_BACKEND=CUDA -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PREFIX" -D$option="$dir" \
    > "$OUT/$name-build.log" 2>&1 &&
    cmake --build build-cuda -j"$(nproc)" --target mlasim mlasim_kut_$name \
      >> "$OUT/$name-build.log" 2>&1
  rc=$?
  echo "$name build rc=$rc in $(( $(date +%s) - t0 )) s"
  [ $rc -eq 0 ] || tail -40 "$OUT/$name-build.log"
  return $rc
}

campaigns() {  # NAME LIBRARY
  local name=$1 lib mode secs dir f t0
  lib=$(realpath "$2")
  local kut=(--kernel-under-test "$lib" --head-dims 576,512)
  local case=tests/kut/cases/flashmla-dense-page64.json
  local expect="expected 1: draft step 0 writes o / lse rows 6..7 past the 6-row buffers, docs/findings.md #2; verify clean, numerics within tolerance"
  if [ "$name" = flashmla_sparse ]; then
    case=tests/kut/cases/flashmla-sparse-v32.json
    expect="expected 0: every sparse decode runs, numerics within tolerance"
  fi
  stamp "$name: one known step"
  timeout 120 "$M" replay "$case" --gpu sentinel "${kut[@]}" > "$OUT/$name-replay-case.log" 2>&1
  echo "$name replay $(basename "$case" .json) rc=$? ($expect)"
  grep -E '^gpu|unsupported|skipped|KUT-|numerics' "$OUT/$name-replay-case.log" | head -20
  timeout 120 "$M" replay "$case" --gpu sentinel "${kut[@]}" \
    --json > "$OUT/$name-replay-case.json" 2> "$OUT/$name-replay-case.json.err"
  for mode in sentinel guard; do
    secs=$SENTINEL_SECONDS
    [ $mode = guard ] && secs=$GUARD_SECONDS
    dir="$OUT/$name-fuzz-$mode"
    stamp "$name: fuzz --gpu $mode, $secs s"
    t0=$(date +%s)
    timeout $((secs + 240)) "$M" fuzz --gpu $mode "${kut[@]}" --seconds "$secs" --jobs "$JOBS" \
      --seed "$SEED" --ignore-known ${FUZZ_FLAGS:-} --out "$dir" > "$OUT/$name-fuzz-$mode.log" \
      2> "$OUT/$name-fuzz-$mode.err"
    echo "$name fuzz --gpu $mode rc=$? in $(( $(date +%s) - t0 )) s (0: nothing new, 1: new findings)"
    cat "$OUT/$name-fuzz-$mode.log"
    tail -3 "$OUT/$name-fuzz-$mode.err"
    stamp "$name: replay the $mode findings"
    for f in "$dir"/*.json; do
      [ -f "$f" ] && grep -q '"finding"' "$f" || continue
      timeout 120 "$M" replay "$f" --gpu $mode "${kut[@]}" > "${f%.json}.replay.log" 2>&1
      printf '%-70s replay rc=%d %s\n' "$(basename "$f" .json)" $? \
        "$(grep -E '^gpu verdict' "${f%.json}.replay.log" | head -1)"
    done
  done
}

M=${MLASIM:-build-cuda/bin/mlasim}
# carried binaries (tools/gpu/pack.sh): their shared libraries lie in lib/ beside them
[ -n "${MLASIM:-}" ] && export LD_LIBRARY_PATH=$(dirname "$(realpath "$MLASIM")")/lib:$LD_LIBRARY_PATH
for name in $KERNELS; do
  var=LIB_$(echo "$name" | tr a-z A-Z)
  lib=${!var:-}
  if [ -z "$lib" ]; then
    build "$name" || continue
    lib=build-cuda/bin/libmlasim_kut_$name.so
  fi
  campaigns "$name" "$lib"
done
stamp "done"
