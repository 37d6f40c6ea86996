#!/usr/bin/env bash
# scripts/gpu-carry.sh - builds .gpu-carry/prefix: the Debian packages (headers, CMake package
# files, libraries) that a GPU machine without a package registry lacks, copied from this
# machine's installed packages, so tools/gpu/*.sh can configure and build there with
# -DCMAKE_PREFIX_PATH=.gpu-carry/prefix/usr (tools/gpu/common.sh). See docs/kernels.md,
# "A first device run".
#
#   scripts/gpu-carry.sh           build the prefix (needs the packages: scripts/install-deps.sh)
#   scripts/gpu-carry.sh --check   also prove it is complete: configure mlasim with CMake's package
#                                  search confined to the prefix (CMAKE_FIND_ROOT_PATH ONLY)
#
# The GPU image is assumed to have a compiler, CMake, ninja, nvcc and glibc >= 2.36 (it runs the
# Debian 12 shared libraries carried for fmt and Google Benchmark). liblzma is carried as a static
# library only (its shared symlink is dropped), so nothing shadows the image's own liblzma.so.5.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# -dev packages every mlasim build needs (scripts/install-deps.sh) minus the toolchain, and the
# runtime packages of the ones that ship shared libraries.
PACKAGES=(
  libeigen3-dev nlohmann-json3-dev libfmt-dev libfmt9 liblzma-dev
  libgtest-dev libgmock-dev librapidcheck-dev libbenchmark-dev libbenchmark1debian
  libcli11-dev libxtensor-dev xtl-dev
  libgoogle-perftools-dev libtcmalloc-minimal4  # the mlasim program's allocator (MLASIM_ALLOCATOR)
)
PREFIX=.gpu-carry/prefix

missing=()
for p in "${PACKAGES[@]}"; do
  [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" == "install ok installed" ]] ||
    missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "gpu-carry: not installed here: ${missing[*]} (run scripts/install-deps.sh)" >&2
  exit 1
fi

rm -rf "$PREFIX"
mkdir -p "$PREFIX"
# Headers, libraries and package files; not documentation, manuals or sources.
for p in "${PACKAGES[@]}"; do
  dpkg -L "$p" | grep -E '^/usr/(include|lib|share/(cmake|pkgconfig|eigen3))/' | while read -r f; do
    if [[ -f "$f" || -L "$f" ]] && [[ ! -d "$f" ]]; then
      mkdir -p "$PREFIX$(dirname "$f")"
      cp -P --preserve=mode,timestamps "$f" "$PREFIX$f"
    fi
  done
done

# Symbolic links: an absolute target inside the prefix becomes relative; a link whose target is not
# in the prefix (liblzma.so -> /lib/.../liblzma.so.5.x) is dropped, so the static library is used.
while read -r link; do
  target=$(readlink "$link")
  if [[ "$target" == /* ]]; then
    if [[ -e "$PREFIX$target" ]]; then
      ln -sfn "$(realpath --relative-to="$(dirname "$link")" "$PREFIX$target")" "$link"
    else
      rm "$link"
    fi
  elif [[ ! -e "$link" ]]; then
    rm "$link"
  fi
done < <(find "$PREFIX" -type l)

echo "gpu-carry: $PREFIX: ${#PACKAGES[@]} packages, $(find "$PREFIX" -type f | wc -l) files," \
  "$(du -sh "$PREFIX" | cut -f1)"

if [[ "${1:-}" == "--check" ]]; then
  # Configure with every find_package/find_library/find_path confined to the prefix: a package
  # missing from it fails here exactly as it would on the GPU machine.
  rm -rf build-carry-check
  root=$(realpath "$PREFIX")
  if cmake -S . -B build-carry-check -G Ninja -DGPU_BACKEND=NONE -DAMD_DEVICE_CHECK=OFF \
    -DCMAKE_FIND_ROOT_PATH="$root" -DCMAKE_FIND_ROOT_PATH_MODE_PACKAGE=ONLY \
    -DCMAKE_FIND_ROOT_PATH_MODE_LIBRARY=ONLY -DCMAKE_FIND_ROOT_PATH_MODE_INCLUDE=ONLY \
    > build-carry-check.log 2>&1; then
    echo "gpu-carry: check: mlasim configures with packages from $PREFIX only" \
      "(log: build-carry-check.log)"
    rm -rf build-carry-check
  else
    tail -20 build-carry-check.log >&2
    echo "gpu-carry: check FAILED: a package mlasim needs is missing from $PREFIX" >&2
    exit 1
  fi
fi
echo "gpu-carry: device call: carry [\".gpu-carry\"], command \"bash tools/gpu/run.sh\""
