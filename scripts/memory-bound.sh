#!/usr/bin/env bash
# scripts/memory-bound.sh - issue 19's memory bound (docs/limits.md, "The memory bound"): by
# default, no input of at most 64 MiB makes mlasim use more than 2 GB.
#
#   scripts/memory-bound.sh [MLASIM]       (default build/bin/mlasim)
#
# scripts/memory_bound_inputs.py builds adversarial inputs of at most 64 MiB for every input
# format and command (plan --request, plan --check-golden, replay and numerics scenarios,
# --contract, check CASE_DIR with .npy, explain-fault logs and layouts, fuzz --resume progress
# and finding files): huge arrays, many rows, shapes just under every limit, deep nesting, long
# strings. Each runs at the default limits under /usr/bin/time with its address space capped
# (prlimit --as, MEMORY_BOUND_AS_GB, default 8: a runaway stops instead of taking the machine).
# Prints a markdown table: case, largest input, exit code, peak RSS, wall time, the first line of
# stderr. Exit 1 when any run peaks above MEMORY_BOUND_MB (2000 MB = 2 GB), ends by a signal or
# exits 3 (internal error, out of memory).
#
# Settings: MEMORY_BOUND_DIR (where the inputs go, about 2 GB; default a temporary folder,
# removed at the end), MEMORY_BOUND_ONLY (a grep -E pattern: only the cases it matches).
# Needs python3, /usr/bin/time (Debian package time) and prlimit (util-linux).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

MLASIM=$(realpath "${1:-build/bin/mlasim}")
BOUND_MB=${MEMORY_BOUND_MB:-2000}
AS_GB=${MEMORY_BOUND_AS_GB:-8}
[[ -x "$MLASIM" ]] || { echo "memory-bound.sh: $MLASIM is not built" >&2; exit 2; }
need() { echo "memory-bound.sh: $1 missing ($2)" >&2; exit 2; }
[[ -x /usr/bin/time ]] || need /usr/bin/time "apt-get install time"
command -v prlimit > /dev/null || need prlimit "util-linux"

DIR=${MEMORY_BOUND_DIR:-}
if [[ -z "$DIR" ]]; then
  DIR=$(mktemp -d)
  trap 'rm -rf "$DIR"' EXIT
fi
unset MLASIM_LIMITS  # the defaults: the bound is the default limits' bound
python3 scripts/memory_bound_inputs.py "$DIR" "$MLASIM"

echo "| case | largest input | command | exit | peak RSS | wall |  first line of stderr |"
echo "|---|---|---|---|---|---|---|"
failed=0
while IFS=$'\t' read -r name bytes cmd; do
  if [[ -n "${MEMORY_BOUND_ONLY:-}" ]] && ! grep -qE "$MEMORY_BOUND_ONLY" <<< "$name"; then
    continue
  fi
  rc=0
  # shellcheck disable=SC2086  # the command's words
  (cd "$DIR" && /usr/bin/time -f "%M %e %x" -o "$DIR/time.txt" \
    prlimit --as=$((AS_GB << 30)) -- "$MLASIM" ${cmd#mlasim } > "$DIR/stdout" 2> "$DIR/stderr") ||
    rc=$?
  read -r kb secs _ < <(tail -1 "$DIR/time.txt") || true
  # time writes "Command terminated by signal N" before its line when the command died by one.
  signal=$(grep -o 'terminated by signal [0-9]*' "$DIR/time.txt" || true)
  mb=$(( ${kb:-0} / 1000 ))
  first=$(grep -m1 -v '^$' "$DIR/stderr" | cut -c1-160 | sed 's/|/\\|/g' || true)
  verdict=""
  if (( mb > BOUND_MB )); then verdict=" **over ${BOUND_MB} MB**"; failed=1; fi
  if [[ -n "$signal" || $rc -ge 3 ]]; then verdict+=" **${signal:-exit $rc}**"; failed=1; fi
  # shellcheck disable=SC2016  # backquotes for markdown, not a command
  printf '| %s | %s MiB | `%s` | %s | %s MB%s | %s s | %s |\n' "$name" \
    "$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')" "$cmd" "$rc" "$mb" \
    "$verdict" "${secs:-?}" "$first"
done < "$DIR/cases.tsv"
exit $failed
