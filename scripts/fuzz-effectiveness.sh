#!/usr/bin/env bash
# scripts/fuzz-effectiveness.sh — issue 20 §3: the fuzzer effectiveness benchmark in one command.
# Runs `mlasim effectiveness` (fuzz/effectiveness.h) on one thread with the budgets below and
# writes docs/fuzzing-effectiveness.md: the tables (swarm on and off; shrink policies
# per-signature and first-failure, before and after issue 20 §1), the exact command, the machine,
# the budgets and the CPU time the measurement took.
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
seeds, how many generated cases (and how many CPU seconds) pass before a campaign reports it,
with swarm generation on and off (docs/fuzzing.md) and before and after issue 20 §1: under the
shrink policy \`per-signature\` (after: every signature of every violation is a finding, shrunk
keeping that signature) and \`first-failure\` (before: a case's first violation only, shrunk
keeping any failure, filed under the shrunk case's first violation; docs/fuzzing.md "Shrink
policies"); then how many distinct signatures those campaigns see and report per CPU-minute.

- **Command** (commit $commit): \`${cmd[*]}\`
- **Machine**: ${cpu_model:-unknown CPU}, $(nproc) cores (shared with other jobs: CPU seconds are
  CPU clocks, not wall time), $(uname -sr); one thread at a time.
- **Budgets**: $SEEDS base seeds (1..$SEEDS) per target, swarm mode and policy; at most $CASES cases
  per seed (a seed that reaches the budget without a report counts as not detected, and a median
  that falls on such seeds reads \`> $CASES\`); the unshrunk signature yield runs $SIG_CASES cases
  per seed. The whole measurement took ${cpu_user} s user + ${cpu_sys} s system CPU.
- **Method**: cases are drawn as a one-shard campaign draws them (seed index i of base seed s:
  RapidCheck seed \`s * 0x9E3779B97F4A7C15 + i\`, size \`10 + i % 91\`), with the same seeds for
  swarm on and off and for both policies.
  - A **known bug** is reported when a campaign (\`fuzz::RunCampaign\`, one job, the three ATOM
    profiles atom-2026-03, atom-2026-08, atom-2026-11, \`--small\` shapes: B <= 64, K <= 3, every
    violation a failure) files a finding that the known bug names; its cases are the reporting
    case's seed index + 1, its CPU seconds the campaign's process CPU up to that finding,
    shrinking of every earlier target included. One campaign per seed, swarm mode and policy
    serves every known bug, and the same campaigns give the table of signatures seen against
    findings reported.
  - A **mutant** is detected by the first case that breaks its killing property with the mutant
    injected (its own generator config, as \`mlasim mutants\` runs it). A campaign reports its
    first failing case under either policy, so the cases are the same in both columns; the CPU
    seconds add the search (this thread's CPU clock) and the shrinking that a campaign of that
    policy does before the report (every target of the case per-signature, one first-failure).
    Mutants with a kill search of their own (planner, decode_update, numerics, semantics,
    campaign and attribution mutants) are not found through the scenario generator and shrink
    nothing: swarm does not apply (\`n/a\`) and both policies read the same.
  - Which case reports a target is deterministic; the CPU seconds vary with the machine's load.

EOF
  cat "$tables"
} >"$OUT"
echo "fuzz-effectiveness: wrote $OUT (${cpu_user} s user CPU)" >&2
