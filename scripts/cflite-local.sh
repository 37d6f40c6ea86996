#!/usr/bin/env bash
# scripts/cflite-local.sh - runs .clusterfuzzlite/build.sh outside a container, with the variables
# OSS-Fuzz's base-builder sets ($SRC, $WORK, $OUT, $CC, $CXX, $CFLAGS, $CXXFLAGS,
# $LIB_FUZZING_ENGINE), then each built harness for a few seconds on its zipped seed corpus, as
# ClusterFuzzLite would. Proves the build script on this machine (docs/reliability.md).
#
#   scripts/cflite-local.sh [address|undefined]     (default address; CFLITE_SECONDS=5 per harness)
#
# Differences from the real image, by necessity: Debian's clang-14 and libstdc++ (the image uses
# its own clang and libc++), and the system's Eigen / fmt / nlohmann_json (the image builds the
# same versions from source: $SRC/eigen etc. are absent here, so build.sh skips them).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
sanitizer=${1:-address}
seconds=${CFLITE_SECONDS:-5}
base=$root/build-cflite-$sanitizer
rm -rf "$base"
mkdir -p "$base/src" "$base/work" "$base/out"
ln -s "$root" "$base/src/mlasim"

case "$sanitizer" in
  address) san="-fsanitize=address -fsanitize-address-use-after-scope" ;;
  undefined)
    checks=array-bounds,bool,builtin,enum,float-divide-by-zero,function,integer-divide-by-zero
    checks=$checks,null,object-size,return,returns-nonnull-attribute,shift,signed-integer-overflow
    checks=$checks,unreachable,vla-bound,vptr
    san="-fsanitize=$checks -fno-sanitize-recover=$checks"
    ;;
  *)
    echo "usage: scripts/cflite-local.sh [address|undefined]" >&2
    exit 2
    ;;
esac
export SRC=$base/src WORK=$base/work OUT=$base/out CC=clang-14 CXX=clang++-14
export CFLAGS="-O1 -fno-omit-frame-pointer -gline-tables-only"
CFLAGS="$CFLAGS -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION $san -fsanitize=fuzzer-no-link"
export CXXFLAGS="$CFLAGS"
export LIB_FUZZING_ENGINE=-fsanitize=fuzzer

t0=$(date +%s)
if ! bash .clusterfuzzlite/build.sh > "$base/build.log" 2>&1; then
  tail -30 "$base/build.log" >&2
  echo "cflite-local: build.sh failed ($sanitizer); log: $base/build.log" >&2
  exit 1
fi
echo "cflite-local: build.sh ($sanitizer) built $(ls "$OUT"/*_fuzz | wc -l) harness(es) in" \
  "$(($(date +%s) - t0)) s: $(cd "$OUT" && ls | tr '\n' ' ')"

failed=0
for fuzzer in "$OUT"/*_fuzz; do
  name=$(basename "$fuzzer")
  corpus=$WORK/corpus-$name
  mkdir -p "$corpus"
  unzip -q -o "$OUT/${name}_seed_corpus.zip" -d "$corpus"
  seeds=$(ls "$corpus" | wc -l)
  rc=0
  # -rss_limit_mb and -max_len as in $name.options; libFuzzer reads no .options file by itself.
  "$fuzzer" -max_total_time="$seconds" -max_len=8192 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$WORK/$name-" "$corpus" > "$WORK/$name.log" 2>&1 || rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$WORK/$name.log")
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$WORK/$name.log")
  echo "cflite-local: $name ($sanitizer): rc=$rc, $runs runs in $seconds s, peak $rss MB," \
    "$seeds seed(s), corpus $(ls "$corpus" | wc -l) after"
  if [[ $rc -ne 0 ]]; then
    grep -E "ERROR|SUMMARY" "$WORK/$name.log" | head -5 >&2
    failed=1
  fi
done
exit $failed
