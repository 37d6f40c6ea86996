#!/usr/bin/env bash
# `make demo`: the founding fault of seed-fault.md, replayed on the built-in case under the engine
# before the fix (atom-2026-08) and after it (atom-2026-11), then a fault address attributed.
set -uo pipefail
cd "$(dirname "$0")/.."
M=./build/bin/mlasim
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "1. The founding fault: GLM-5.2-like sparse MLA, MTP K=3, 39 requests padded to 40, engine before the fix"
$M replay --builtin seed --profile atom-2026-08
rc=$?
[ "$rc" -eq 1 ] || { echo "demo: expected exit 1 (violations), got $rc"; exit 1; }
cat <<'TXT'

What you see: draft step 0 runs the MTP layer over the 156 real tokens but reuses the sparse
per-token plan the verify step built over the 160 graph-padded tokens. The asm kernel reads q and
writes o for every work item, the 4 zero-KV padding items included, so it reads 4 rows past q and
writes 4 rows past o. With guard pages after each buffer both accesses fault.
TXT

say "2. The same step with the fix (atom-2026-11): plan over scheduled tokens, plan-rows guard"
$M replay --builtin seed --profile atom-2026-11
rc=$?
[ "$rc" -eq 0 ] || { echo "demo: expected exit 0 (clean), got $rc"; exit 1; }

say "3. Why it was intermittent: 35 requests, PyTorch-like caching allocator"
$M replay --builtin seed-b35 --layout-out "$tmp/layout.json" > "$tmp/report.txt"
grep -A4 "read q" "$tmp/report.txt" || true
addr=$($M replay --builtin seed-b35 --json | sed -n 's/.*"fault_address": "\(0x[0-9a-f]*\)".*/\1/p' | head -1)
echo
echo "A ROCm log line for that address, attributed with explain-fault:"
printf 'Memory access fault by GPU node-2 (Agent handle: 0x5a5a) on address %s. Reason: Page not present or supervisor privilege.\n' "$addr" > "$tmp/fault.log"
cat "$tmp/fault.log"
$M explain-fault --layout "$tmp/layout.json" --log "$tmp/fault.log" || exit 1
cat <<'TXT'

The o overrun lands in its segment's slack and nobody notices; the q overrun reads slack and then
hits the unmapped page 22528 bytes past q: the fault addresses of seed-fault.md (20-24 KB past a q
of 140 rows). Whether a step faults depends on the layout and on how many padded tokens aiter's
parallel planner gives a work item (docs/scenario.md).
TXT
