#!/usr/bin/env bash
# Installs the Debian 12 (bookworm) packages that building and testing mlasim needs.
# Idempotent: when every package is already installed it says so and does not touch apt.
# Run as root, or as a user with sudo.
set -euo pipefail

packages=(
  build-essential cmake ninja-build g++
  clang libclang-rt-14-dev      # clang-14 and its runtime: -fsanitize=address,undefined and -fsanitize=fuzzer
  libeigen3-dev librapidcheck-dev libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev
  libgoogle-perftools-dev       # tcmalloc_minimal: the mlasim program's heap allocator (CMakeLists.txt MLASIM_ALLOCATOR)
  zlib1g-dev                    # the FlashInfer / FlashMLA corpora in tests/data/ are gzip JSONL
  liblzma-dev                   # xz: the golden corpora in tests/golden/
  libxtensor-dev xtl-dev        # Debian names xtl "xtl-dev", not "libxtl-dev"
  hipcc                         # clang-15 + ROCm 5.2.3 device libs: HIP builds and the AMD device-code check
  pybind11-dev python3-dev      # the mlasim Python package (python/), built for /usr/bin/python3
  python3-numpy python3-torch python3-pytest  # its tests (tests/python/); torch is the CPU build
  chromium fonts-dejavu-core    # headless browser + the pages' font: tests/pictures/browser_test.cpp
  libpng-dev                    # reads the browser's screenshots in that test
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${#missing[@]} missing package(s): ${missing[*]}"
if [[ $(id -u) -eq 0 ]]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "install-deps: not root and sudo is not installed; as root run:" >&2
  echo "  apt-get update && apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
fi

"${as_root[@]}" apt-get update
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y --no-install-recommends "${missing[@]}"
echo "install-deps: done"
