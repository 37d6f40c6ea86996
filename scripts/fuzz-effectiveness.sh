#!/usr/bin/env bash
# scripts/fuzz-effectiveness.sh — issue 20 §3: the fuzzer effectiveness benchmark in one command.
# Runs `mlasim effectiveness` (fuzz/effectiveness.h) on one thread with the budgets below and
# writes docs/fuzzing-effectiveness.md: the tables, the exact command, the machine, the budgets and
# the CPU time the measurement took.
#
#   scripts/fuzz-effectiveness.sh                 # build/bin/mlasim, the default budgets
#   SEEDS=20 CASES=500 SIG_CASES=500 scripts/fuzz-effectiveness.sh
#   MLASIM=build-release/bin/mlasim OUT=/tmp/eff.md scripts/fuzz-effectiveness.sh
set -euo pipefail
cd "$(dirname "$0")/.."

MLASIM=${MLASIM:-build/bin/mlasim}
SEEDS=${SEEDS:-10}
CASES=${CASES:-5000}
SIG_CASES=${SIG_CASES:-5000}
OUT=${OUT:-docs/fuzzing-effectiveness.md}

if [[ ! -x "$MLASIM" ]]; then
  echo "fuzz-effectiveness: $MLASIM not found (cmake --build build --target mlasim)" >&2
  exit 2
fi

cmd=("$MLASIM" effectiveness --seeds "$SEEDS" --cases "$CASES" --signature-cases "$SIG_CASES")
tables=$(mktemp)
trap 'rm -f "$tables"' EXIT
timing=$(mktemp)
trap 'rm -f "$tables" "$timing"' EXIT
"${cmd[@]}" >"$tables"
# CPU seconds of the children (user + system): bash's `times`, run in this shell (not a pipe).
times >"$timing"
read -r cpu_user cpu_sys < <(tail -1 "$timing" | sed -E 's/([0-9]+)m([0-9.]+)s/\1 \2/g' |
  awk '{printf "%.1f %.1f\n", $1 * 60 + $2, $3 * 60 + $4}')
cpu_model=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)

{
  cat <<EOF
# Fuzzer effectiveness (issue 20 §3)

Written by \`scripts/fuzz-effectiveness.sh\`; rerun it to refresh every figure below. In the spirit
of FuzzBench and Magma: for every registered mutant (\`mlasim mutants --list\`, fuzz/mutants.h) and
every known bug (sim/known_bugs.h \`KnownBugs\`, docs/findings.md), over $SEEDS base
seeds, how many generated cases (and how many CPU seconds) pass before the first case that shows
it, with swarm generation on and off (docs/fuzzing.md); then how many distinct failure signatures
the generator reaches per CPU-minute.

- **Command** (commit $commit): \`${cmd[*]}\`
- **Machine**: ${cpu_model:-unknown CPU}, $(nproc) cores (shared with other jobs: CPU seconds are
  this thread's CPU clock, not wall time), $(uname -sr); one thread.
- **Budgets**: $SEEDS base seeds (1..$SEEDS) per target and swarm mode; at most $CASES cases per
  seed (a seed that reaches the budget without detecting counts as not detected, and a median
  that falls on such seeds reads \`> $CASES\`); the signature yield runs $SIG_CASES cases per seed.
  The whole measurement took ${cpu_user} s user + ${cpu_sys} s system CPU.
- **Method**: cases are drawn as a one-shard campaign draws them (seed index i of base seed s:
  RapidCheck seed \`s * 0x9E3779B97F4A7C15 + i\`, size \`10 + i % 91\`), replayed without shrinking,
  with the same seeds for swarm on and off. A mutant is detected by a case that breaks its killing
  property with the mutant injected (its own generator config, as \`mlasim mutants\` runs it); a
  known bug by a case showing a violation it names, cases drawn from the three ATOM profiles
  (atom-2026-03, atom-2026-08, atom-2026-11) with \`--small\` shapes (B <= 64, K <= 3). Mutants
  with a kill search of their own (planner, decode_update, numerics, semantics, campaign and
  attribution mutants) are not found through the scenario generator: swarm does not apply
  (\`n/a\`), one case is one case of that search. Which case detects a target is deterministic; the CPU
  seconds vary with the machine's load.

## Time to first detection

EOF
  sed -n '1,/^$/p' "$tables" | sed '/^$/d'
  cat <<EOF

## Distinct signatures per CPU-minute

Every violation's signature (\`step|call|buffer|access|class\`) over $SIG_CASES cases per seed of
the three ATOM profiles, unshrunk (a campaign also shrinks each new one: docs/fuzzing.md).

EOF
  sed -n '/^$/,$p' "$tables" | sed '1d'
} >"$OUT"
echo "fuzz-effectiveness: wrote $OUT (${cpu_user} s user CPU)" >&2
