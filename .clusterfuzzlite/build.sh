#!/bin/bash -eu
# ClusterFuzzLite / OSS-Fuzz build script: every fuzz/harness/*_fuzz.cpp into $OUT, each with its
# seed corpus (tests/fuzz/corpus/<name>/ as $OUT/<name>_fuzz_seed_corpus.zip) and options file.
# Compiler and flags come from the environment, as OSS-Fuzz sets them: $CC, $CXX, $CFLAGS,
# $CXXFLAGS (sanitizers, coverage), $LIB_FUZZING_ENGINE (the fuzzer's main), $SRC, $WORK, $OUT.
# Outside a container: scripts/cflite-local.sh sets them and runs this script (docs/reliability.md).
SRC_DIR=${MLASIM_SRC:-$SRC/mlasim}
DEPS=$WORK/deps
BUILD=$WORK/mlasim-build
mkdir -p "$DEPS"

# Dependencies cloned by the Dockerfile; without them (a Debian 12 machine) the system's are used.
if [ -d "$SRC/eigen" ]; then
  cmake -S "$SRC/eigen" -B "$WORK/eigen" -G Ninja -DCMAKE_INSTALL_PREFIX="$DEPS" \
    -DBUILD_TESTING=OFF -DEIGEN_BUILD_DOC=OFF > "$WORK/eigen.log"
  cmake --install "$WORK/eigen" > /dev/null
fi
if [ -d "$SRC/json" ]; then
  cmake -S "$SRC/json" -B "$WORK/json" -G Ninja -DCMAKE_INSTALL_PREFIX="$DEPS" \
    -DJSON_BuildTests=OFF > "$WORK/json.log"
  cmake --install "$WORK/json" > /dev/null
fi
if [ -d "$SRC/fmt" ]; then  # a static library, built with the fuzzing flags like the rest
  cmake -S "$SRC/fmt" -B "$WORK/fmt" -G Ninja -DCMAKE_INSTALL_PREFIX="$DEPS" \
    -DCMAKE_BUILD_TYPE=None -DBUILD_SHARED_LIBS=OFF -DFMT_TEST=OFF -DFMT_DOC=OFF > "$WORK/fmt.log"
  cmake --build "$WORK/fmt" -j"$(nproc)" > /dev/null
  cmake --install "$WORK/fmt" > /dev/null
fi

# Only the harnesses' libraries (MLASIM_FUZZERS_ONLY); flags from $CXXFLAGS alone (build type
# None), linked with $LIB_FUZZING_ENGINE.
cmake -S "$SRC_DIR" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=None -DGPU_BACKEND=NONE \
  -DMLASIM_FUZZERS_ONLY=ON -DMLASIM_FUZZING_ENGINE="$LIB_FUZZING_ENGINE" \
  -DCMAKE_PREFIX_PATH="$DEPS"
cmake --build "$BUILD" -j"$(nproc)" --target fuzz_harnesses

for src in "$SRC_DIR"/fuzz/harness/*_fuzz.cpp; do
  name=$(basename "$src" .cpp)
  seeds="$SRC_DIR/tests/fuzz/corpus/${name%_fuzz}"
  # progress_file and finding_file need fuzz/ and RapidCheck, which this build leaves out.
  [ -x "$BUILD/bin/$name" ] || { echo "build.sh: $name not built here (needs RapidCheck)"; continue; }
  cp "$BUILD/bin/$name" "$OUT/"
  if [ -d "$seeds" ]; then
    rm -f "$OUT/${name}_seed_corpus.zip"
    (cd "$seeds" && zip -q -r "$OUT/${name}_seed_corpus.zip" .)
  fi
  # The same bounds as make fuzz-smoke: inputs up to 8 KiB, 2 GB of memory per run.
  printf '[libfuzzer]\nmax_len = 8192\nrss_limit_mb = 2048\n' > "$OUT/$name.options"
done
