#!/usr/bin/env bash
# tools/gpu/python.sh - the Python package (docs/python.md) with the device's own interpreter and
# torch (CUDA), for ONE device call: builds mlasim._core for that python3 (Release, in build-py/,
# with the carried Debian packages of tools/gpu/common.sh and the device's pip-installed pybind11)
# and runs tests/python with pytest there, so tests/python/test_cuda.py runs on CUDA tensors
# instead of being skipped. Logs: $OUT/python-build.log, $OUT/python-tests.log.
#   PYTHON       the interpreter (default python3: on the device, the one that holds torch)
#   MLASIM       a carried mlasim binary for the tests' `mlasim check` runs (tools/gpu/pack.sh);
#                default: built here too
#   PYBIND11_DIR pybind11's CMake folder (default: the interpreter's pip package says)
#   PY_INCLUDE   Python.h's folder, used when the interpreter's own has none (a carried copy of the
#                same minor version's headers)
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/gpu/common.sh
PY=$(command -v "${PYTHON:-python3}") || { echo "python.sh: no ${PYTHON:-python3}"; exit 2; }
"$PY" - <<'PYEOF' 2>&1 | tee "$OUT/python-env.log"
import sys, sysconfig, os, numpy, torch
inc = sysconfig.get_paths()["include"]
print(f"python {sys.version.split()[0]} ({sys.executable}), numpy {numpy.__version__}, "
      f"torch {torch.__version__}, cuda {torch.cuda.is_available()} "
      f"({torch.cuda.get_device_name(0) if torch.cuda.is_available() else '-'}), "
      f"Python.h {'found' if os.path.exists(os.path.join(inc, 'Python.h')) else 'missing'} in {inc}")
PYEOF
PYBIND11_DIR=${PYBIND11_DIR:-$("$PY" -m pybind11 --cmakedir 2>/dev/null)} ||
  { echo "python.sh: $PY has no pybind11 (pip's pybind11 gives its CMake folder)"; exit 2; }
extra=()
inc=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
if [ ! -f "$inc/Python.h" ] && [ -n "${PY_INCLUDE:-}" ]; then
  extra+=("-DPython3_INCLUDE_DIR=$(realpath "$PY_INCLUDE")")
  echo "python.sh: no Python.h in $inc; using $PY_INCLUDE"
fi
targets=(mlasim_python)
[ -z "${MLASIM:-}" ] && targets+=(mlasim)
t0=$(date +%s)
cmake -S . -B build-py -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PREFIX" \
  -DMLASIM_PYTHON=ON -DPython3_EXECUTABLE="$PY" -Dpybind11_DIR="$PYBIND11_DIR" "${extra[@]}" \
  > "$OUT/python-build.log" 2>&1 &&
  cmake --build build-py -j"$(nproc)" --target "${targets[@]}" >> "$OUT/python-build.log" 2>&1
rc=$?
echo "python.sh: build rc=$rc in $(( $(date +%s) - t0 )) s (pybind11 from $PYBIND11_DIR)"
[ $rc -eq 0 ] || { tail -40 "$OUT/python-build.log"; exit 1; }
BIN=${MLASIM:-build-py/bin/mlasim}
[ -n "${MLASIM:-}" ] && export LD_LIBRARY_PATH=$(dirname "$(realpath "$MLASIM")")/lib:$LD_LIBRARY_PATH
t0=$(date +%s)
PYTHONPATH=$PWD/build-py/python PYTHONDONTWRITEBYTECODE=1 MLASIM_BIN=$(realpath "$BIN") \
  MLASIM_SOURCE_DIR=$PWD timeout 400 "$PY" -m pytest -q -s -rs -p no:cacheprovider tests/python \
  > "$OUT/python-tests.log" 2>&1
rc=$?
echo "python.sh: pytest rc=$rc in $(( $(date +%s) - t0 )) s"
grep -E "passed|failed|error|SKIPPED|us per call" "$OUT/python-tests.log" | tail -30
exit $rc
