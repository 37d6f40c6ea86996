# tools/gpu/common.sh - sourced by the device scripts (run.sh, profile.sh): the log folder, the
# carried Debian packages and the CUDA toolchain on the PATH, and build_cuda TARGET... which
# configures build-cuda (GPU_BACKEND=CUDA, sm_90, Release) and builds the targets, logging to
# $OUT/build.log; it prints the build time and returns the build's exit status.
# .gpu-carry/prefix holds the packages the device lacks: `make gpu-carry` (scripts/gpu-carry.sh)
# builds it from this machine's installed packages; name it in the device call's `carry`.
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
PREFIX=$PWD/.gpu-carry/prefix/usr
export LD_LIBRARY_PATH=$PREFIX/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH

build_cuda() {
  local t0 rc
  t0=$(date +%s)
  cmake -S . -B build-cuda -G Ninja -DGPU_BACKEND=CUDA -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PREFIX" > "$OUT/build.log" 2>&1 &&
    cmake --build build-cuda -j"$(nproc)" --target "$@" >> "$OUT/build.log" 2>&1
  rc=$?
  echo "build rc=$rc in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/build.log"
  [ $rc -eq 0 ] || tail -40 "$OUT/build.log"
  return $rc
}
