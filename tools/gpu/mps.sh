# tools/gpu/mps.sh - sourced: a private NVIDIA MPS daemon for one GPU campaign (docs/kernel-under-test.md
# "Several workers on one NVIDIA GPU"). `fuzz --gpu` runs its workers as processes; without MPS
# the driver time-slices their contexts and the rate stops growing at ~4 workers (H200: 65 cases/s
# at 4, 8, 12 and 16 workers); under MPS their kernels and copies share the GPU (16 workers: 564).
#   mps_start  - starts nvidia-cuda-mps-control -d with pipe and log folders of its own (exported,
#                so every process started afterwards is an MPS client) unless MPS=0, the control
#                binary is missing, or CUDA_MPS_PIPE_DIRECTORY is already set (a daemon the caller
#                runs); prints what it did. Returns 0 either way: MPS is an accelerator, not a need.
#   mps_stop   - quits the daemon mps_start started and removes its folders (nothing otherwise);
#                callers trap it on EXIT so an interrupted run leaves no daemon behind.
MLASIM_MPS_STARTED=0
mps_start() {
  if [ "${MPS:-1}" = 0 ]; then echo "mps: off (MPS=0)"; return 0; fi
  if [ -n "${CUDA_MPS_PIPE_DIRECTORY:-}" ]; then
    echo "mps: using the caller's daemon ($CUDA_MPS_PIPE_DIRECTORY)"; return 0
  fi
  if ! command -v nvidia-cuda-mps-control > /dev/null; then
    echo "mps: nvidia-cuda-mps-control not found: workers time-slice the GPU"; return 0
  fi
  local dir
  dir=$(mktemp -d "${TMPDIR:-/tmp}/mlasim-mps.XXXXXX") || return 0
  mkdir -p "$dir/pipe" "$dir/log"
  if CUDA_MPS_PIPE_DIRECTORY=$dir/pipe CUDA_MPS_LOG_DIRECTORY=$dir/log nvidia-cuda-mps-control -d; then
    export CUDA_MPS_PIPE_DIRECTORY=$dir/pipe CUDA_MPS_LOG_DIRECTORY=$dir/log
    MLASIM_MPS_STARTED=1
    echo "mps: daemon started ($dir)"
  else
    echo "mps: the daemon did not start (exclusive-process GPU? another daemon?): workers time-slice"
  fi
  return 0
}
mps_stop() {
  [ "$MLASIM_MPS_STARTED" = 1 ] || return 0
  echo quit | nvidia-cuda-mps-control > /dev/null 2>&1
  MLASIM_MPS_STARTED=0
  rm -rf "${CUDA_MPS_PIPE_DIRECTORY%/pipe}"
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
}
