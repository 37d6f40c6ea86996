// File: fuzz/properties.h
//
// The simulator properties of issue 5, as predicates over one replayed step. Each returns the
// violations that break it (empty: the property holds for this scenario). The known families the
// real engine profiles still show are the registry of sim/known_bugs.h (names, upstream
// references, the profile that fixes each, signature patterns): the properties and
// `--ignore-known` read that one table.
#pragma once

#include <string>
#include <vector>

#include "fuzz/search.h"
#include "fuzz/signature.h"  // Signature (campaigns deduplicate by it)
#include "sim/known_bugs.h"
#include "sim/replay.h"
#include "sim/step_numerics.h"

namespace mlasim::fuzz {

// True when `v` belongs to a known bug of sim::KnownBugs().
bool IsKnownFamily(const sim::Violation& v, const sim::ReplayReport& r);
// The founding fault's own signature: draft step 0, sparse decode, q read or o write past the end.
bool IsFoundingSignature(const sim::Violation& v);

// The known bug of the violation with `signature` that shrunk failure `f` shows (a replay of its
// scenario), or nullptr.
const sim::KnownBug* KnownBugOf(const Failure& f, const std::string& signature);

// Fixed engine profile, sparse models: no violation of any kind (but the DCP stale-output
// finding, known bug dcp-token-without-local-kv, which #2715 does not address).
std::vector<sim::Violation> FixedProfileViolations(const sim::ReplayReport& r);
// Any real profile: nothing outside the known bugs (no uninitialised reads, no invalid plans,
// no unbounded loops, no unwritten real output, no sizing overflow, no other overrun).
std::vector<sim::Violation> UnknownViolations(const sim::ReplayReport& r);

// The engine-step numerics property (docs/numerics.md "Contract semantics on engine steps"): the
// step reduced to numerics sizes (contexts and top-k capped at kStepNumericsContext, head dims
// 80/64), inputs poisoned like FlashMLA's tests, every decode call run by sim::RunStepNumerics
// with its contract's semantics (then `over`) and the index values of the step's fills. Returns
// the violations of calls that fail (poison in real rows, consumed padding, outside tolerance)
// that belong to no known bug. The step is re-expanded from r.scenario: contract edits and
// scenario changes of a mutant are seen, call-table variables are not.
inline constexpr int32_t kStepNumericsContext = 48;
std::vector<sim::Violation> NumericsViolations(const sim::ReplayReport& r,
                                               const sim::SemanticsOverride& over = {});

}  // namespace mlasim::fuzz
