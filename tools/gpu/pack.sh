#!/usr/bin/env bash
# tools/gpu/pack.sh DEST - copies the CUDA binaries of build-cuda/bin (mlasim_tests, mlasim,
# mlasim_flashmla_bench when built), the kernel-under-test libraries beside them
# (libmlasim_kut_*.so: mlasim's GPU kernels, the FlashMLA / FlashInfer adapters when built) and the
# shared libraries they need beyond glibc and the CUDA driver into DEST/ and DEST/lib, for a
# device call that runs them with tools/gpu/carried.sh (or tools/gpu/third_party_kut.sh).
# Build first with -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" (docs/kernels.md).
set -euo pipefail
DEST=${1:?usage: pack.sh DEST}
mkdir -p "$DEST/lib"
for b in mlasim_tests mlasim mlasim_flashmla_bench; do
  [ -x "build-cuda/bin/$b" ] || continue
  cp "build-cuda/bin/$b" "$DEST/"
  ldd "build-cuda/bin/$b" | awk '/=> \// {print $3}' | while read -r lib; do
    case $(basename "$lib") in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libcuda.so*) ;;
      libstdc++.so*|libgcc_s.so*) ;;  # the device image has newer ones (and ncu needs those)
      *) cp -L "$lib" "$DEST/lib/" ;;
    esac
  done
done
for lib in build-cuda/bin/libmlasim_kut_*.so; do
  [ -f "$lib" ] && cp "$lib" "$DEST/"
done
ls -la "$DEST" "$DEST/lib"
du -sh "$DEST"
