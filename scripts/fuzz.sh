#!/usr/bin/env bash
# scripts/fuzz.sh - the libFuzzer harnesses of fuzz/harness/ (docs/fuzzing.md, docs/reliability.md).
#
#   scripts/fuzz.sh build   configure + build build-fuzz/ (clang-14, libFuzzer, ASan + UBSan with
#                           undefined behaviour fatal); the build log goes to build-fuzz.log
#   scripts/fuzz.sh smoke   CI's short run of every harness (make fuzz-smoke): seeded and
#                           reproducible (FUZZ_RUNS inputs; FUZZ_SECONDS caps a slow machine), a
#                           fresh working corpus, the repository's seeds read only, one line each
#   scripts/fuzz.sh long    a long run of every harness (make fuzz-long FUZZ_SECONDS=N): crashes,
#                           leaks, timeouts and out-of-memory inputs saved as named artifacts
#                           without stopping, then the working corpus minimised (-merge=1)
#   scripts/fuzz.sh fold    folds the minimised corpus of the last long run into
#                           tests/fuzz/corpus/<harness>/ (-merge=1: only inputs that add coverage)
#
# Settings (environment or make variables): FUZZ_SECONDS (smoke 15, long 600 per harness),
# FUZZ_RUNS (smoke 20000), FUZZ_SEED (smoke 1; long 0 = libFuzzer picks one and logs it),
# FUZZ_RSS_MB (1024: libFuzzer stops a run above it and saves the input as oom-*), FUZZ_JOBS
# (long: parallel fuzzing processes per harness, default 1), FUZZ_HARNESSES (default: every
# fuzz/harness/*_fuzz.cpp), FUZZ_OUT (smoke: build-fuzz/smoke, long/fold: fuzz-out).
# Exit status: 0 clean, 1 a harness failed (its artifacts and log named on stderr), 2 usage.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

BIN=build-fuzz/bin
SEEDS=tests/fuzz/corpus
RSS_MB=${FUZZ_RSS_MB:-1024}
JOBS=${JOBS:-2}

harnesses() {
  if [[ -n "${FUZZ_HARNESSES:-}" ]]; then
    echo "$FUZZ_HARNESSES"
    return
  fi
  local f
  for f in fuzz/harness/*_fuzz.cpp; do
    f=${f##*/}
    echo "${f%_fuzz.cpp}"
  done
}

build() {
  CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMLASIM_LIBFUZZER=ON -DGPU_BACKEND=NONE ${CMAKE_ARGS:-} > build-fuzz.log 2>&1 &&
    cmake --build build-fuzz -j"$JOBS" --target fuzz_harnesses >> build-fuzz.log 2>&1 || {
    tail -30 build-fuzz.log >&2
    echo "fuzz.sh: building the harnesses failed; log: build-fuzz.log" >&2
    exit 1
  }
}

# Every harness needs its seed corpus: a harness without one would start from nothing.
check_seeds() {
  local h=$1
  if [[ ! -d "$SEEDS/$h" ]] || [[ -z "$(ls -A "$SEEDS/$h")" ]]; then
    echo "fuzz.sh: $SEEDS/$h/ is missing or empty: each harness needs a seed corpus" >&2
    exit 1
  fi
  [[ -x "$BIN/${h}_fuzz" ]] || {
    echo "fuzz.sh: $BIN/${h}_fuzz not built (scripts/fuzz.sh build)" >&2
    exit 1
  }
}

# stat NAME LOG: a libFuzzer -print_final_stats value.
stat() { sed -n "s/^stat::$1: *//p" "$2" | tail -1; }

# One line per harness; on failure the end of its log and the artifacts on stderr.
report() {
  local h=$1 rc=$2 log=$3 dir=$4 ms=$5
  local runs rss cov
  runs=$(stat number_of_executed_units "$log")
  rss=$(stat peak_rss_mb "$log")
  cov=$(grep -aoE 'cov: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
  # Fork mode prints no final stats; its last status line is "#RUNS: cov: ... oom/timeout/crash".
  [[ -n "$runs" ]] || runs=$(grep -aoE '^#[0-9]+: cov' "$log" | tail -1 | tr -dc '0-9')
  # ... nor its jobs' memory: /usr/bin/time's maximum over the process tree (long, when present).
  if [[ -z "$rss" && -s "$dir/time.txt" ]]; then
    rss=$(($(tail -1 "$dir/time.txt") / 1024))
  fi
  printf 'fuzz: %-14s rc=%d %8s runs %6s s  cov %5s  peak %5s MB  %s\n' "$h" "$rc" \
    "${runs:-?}" "$(awk -v m="$ms" 'BEGIN { printf "%.1f", m / 1000 }')" "${cov:-?}" \
    "${rss:-?}" "$log"
  if [[ $rc -ne 0 ]]; then
    grep -E "ERROR|SUMMARY|Test unit written" "$log" | head -8 >&2 || true
    echo "fuzz.sh: $h failed; artifacts: $(ls "$dir"/artifacts 2>/dev/null | tr '\n' ' ')" >&2
    echo "fuzz.sh: reproduce: $BIN/${h}_fuzz $dir/artifacts/<file>" >&2
  fi
}

smoke() {
  local seconds=${FUZZ_SECONDS:-15} runs=${FUZZ_RUNS:-20000} seed=${FUZZ_SEED:-1}
  local out=${FUZZ_OUT:-build-fuzz/smoke} failed=0 h
  echo "fuzz-smoke: seed $seed, at most $runs runs and $seconds s per harness, rss limit" \
    "$RSS_MB MB; logs and artifacts in $out/"
  for h in $(harnesses); do
    check_seeds "$h"
    local dir=$out/$h
    rm -rf "$dir"
    mkdir -p "$dir/corpus" "$dir/artifacts"
    local t0 rc=0
    t0=$(date +%s%N)
    # New inputs go to the fresh $dir/corpus; the repository's seeds are only read.
    # -use_cmp=0: CMP-guided mutations replay values the code compared, addresses among them
    # (ASLR), so with them two runs of one seed diverge; without them a run is reproducible.
    timeout -s INT $((seconds + 60)) "$BIN/${h}_fuzz" -seed="$seed" -runs="$runs" -use_cmp=0 \
      -max_total_time="$seconds" -rss_limit_mb="$RSS_MB" -max_len=8192 -timeout=10 \
      -print_final_stats=1 -artifact_prefix="$dir/artifacts/" "$dir/corpus" "$SEEDS/$h" \
      > "$dir/log" 2>&1 || rc=$?
    report "$h" "$rc" "$dir/log" "$dir" $((($(date +%s%N) - t0) / 1000000))
    if [[ "$(stat number_of_executed_units "$dir/log")" != "$runs" && $rc -eq 0 ]]; then
      echo "  (the $seconds s cap ended $h before $runs runs: this run is not reproducible)"
    fi
    [[ $rc -eq 0 ]] || failed=1
  done
  return $failed
}

long() {
  local seconds=${FUZZ_SECONDS:-600} seed=${FUZZ_SEED:-0} jobs=${FUZZ_JOBS:-1}
  local out=${FUZZ_OUT:-fuzz-out} h
  echo "fuzz-long: $seconds s per harness, $jobs process(es), rss limit $RSS_MB MB; output in $out/"
  for h in $(harnesses); do
    check_seeds "$h"
    local dir=$out/$h
    mkdir -p "$dir/corpus" "$dir/artifacts"
    rm -rf "$dir/minimized"
    mkdir -p "$dir/minimized"
    local t0 rc=0
    t0=$(date +%s%N)
    # Fork mode keeps going after a crash, an out-of-memory or a timeout, saving each input as
    # $dir/artifacts/{crash,oom,timeout,leak}-<sha1>. The working corpus persists between runs.
    local timer=()
    [[ -x /usr/bin/time ]] && timer=(/usr/bin/time -f %M -o "$dir/time.txt")
    "${timer[@]}" "$BIN/${h}_fuzz" -fork="$jobs" -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1 \
      -seed="$seed" -max_total_time="$seconds" -rss_limit_mb="$RSS_MB" -max_len=8192 \
      -timeout=10 -print_final_stats=1 -artifact_prefix="$dir/artifacts/" "$dir/corpus" \
      "$SEEDS/$h" > "$dir/log" 2>&1 || rc=$?
    # The minimised union of the seeds and what the run found.
    "$BIN/${h}_fuzz" -merge=1 -rss_limit_mb="$RSS_MB" -max_len=8192 -timeout=10 \
      "$dir/minimized" "$SEEDS/$h" "$dir/corpus" > "$dir/merge.log" 2>&1 || rc=$?
    report "$h" "$rc" "$dir/log" "$dir" $((($(date +%s%N) - t0) / 1000000))
    echo "  $(grep -aoE 'ft: [0-9]+ corp: [0-9]+' "$dir/log" | tail -1), oom/timeout/crash:" \
      "$(grep -aoE 'oom/timeout/crash: [0-9/]+' "$dir/log" | tail -1 | cut -d' ' -f2);" \
      "$(ls "$dir/artifacts" | wc -l) artifact(s) in $dir/artifacts/," \
      "$(ls "$dir/minimized" | wc -l) input(s) in $dir/minimized/ (fold: make fuzz-fold)"
  done
}

fold() {
  local out=${FUZZ_OUT:-fuzz-out} h
  for h in $(harnesses); do
    check_seeds "$h"
    [[ -d "$out/$h/minimized" ]] || continue
    local before
    before=$(ls "$SEEDS/$h" | wc -l)
    "$BIN/${h}_fuzz" -merge=1 -rss_limit_mb="$RSS_MB" -max_len=8192 -timeout=10 \
      "$SEEDS/$h" "$out/$h/minimized" > "$out/$h/fold.log" 2>&1
    echo "fuzz-fold: $h: $before -> $(ls "$SEEDS/$h" | wc -l) seed inputs in $SEEDS/$h/"
  done
}

case "${1:-}" in
  build) build ;;
  smoke) smoke ;;
  long) long ;;
  fold) fold ;;
  *)
    echo "usage: scripts/fuzz.sh build|smoke|long|fold" >&2
    exit 2
    ;;
esac
