// File: fuzz/properties.h
//
// The simulator properties of issue 5, as predicates over one replayed step. Each returns the
// violations that break it (empty: the property holds for this scenario).
#pragma once

#include <string>
#include <vector>

#include "fuzz/signature.h"  // Signature (campaigns deduplicate by it)
#include "sim/replay.h"

namespace mlasim::fuzz {

// Known families the real engine profiles still show, with where they are documented:
//  - the founding fault (seed-fault.md): decode q/o overrun where plan rows > q rows, and the
//    #2715 guard refusing such a call;
//  - D0c inconsistent rebuild inputs under DCP before #2715 (atom-mtp-flow.md §6);
//  - dense draft step 0 reusing the main plan (row D0b', open point 1: not covered by #2715);
//  - decode_update reading num_reject_tokens past B entries (atom-mtp-flow.md §5, [I]).
//  - decode_update on a plan it cannot update correctly: a fold decision that differs from the
//    planner's (aiter-mla-metadata.md §9.3) or per-token q tiles it does not revisit; everything
//    at draft steps >= 1 of such a step follows from it;
//  - DCP tokens owning no local KV whose o rows no kernel writes (stale rows in the LSE merge);
//  - sparse models' main plan outgrowing buffers sized with is_sparse = True (docs/findings.md).
bool IsKnownFamily(const sim::Violation& v, const sim::ReplayReport& r);

// The known families one by one (IsKnownFamily is any of them), named for docs/findings.md and
// the effectiveness benchmark (fuzz/effectiveness.h).
struct KnownFamily {
  std::string name;  // "dense-draft-step0"
  std::string doc;   // where it is documented
  bool (*matches)(const sim::Violation& v, const sim::ReplayReport& r);
};
const std::vector<KnownFamily>& KnownFamilies();
// True when the step's dense draft steps patch a plan decode_update cannot handle.
bool HasUpdateHazard(const sim::ReplayReport& r);
// The founding fault's own signature: draft step 0, sparse decode, q read or o write past the end.
bool IsFoundingSignature(const sim::Violation& v);

// Fixed engine profile, sparse models: no violation of any kind (but the DCP stale-output
// finding, which #2715 does not address).
std::vector<sim::Violation> FixedProfileViolations(const sim::ReplayReport& r);
// Any real profile: nothing outside the known families (no uninitialised reads, no invalid plans,
// no unbounded loops, no unwritten real output, no sizing overflow, no other overrun).
std::vector<sim::Violation> UnknownViolations(const sim::ReplayReport& r);

}  // namespace mlasim::fuzz
