// File: sim/known_bugs.h
//
// Known bugs by name: the families of violations that real engine profiles still show (or showed
// before a fix), each with its upstream reference, the engine profile that fixes it and the
// signature pattern that recognises it. One table (sim/known_bugs.cpp), read by every consumer:
// `mlasim replay` and `mlasim numerics` print "known: <name>, fixed in <profile>" next to a
// matching violation, the fuzz properties and `mlasim fuzz --ignore-known` skip matches
// (fuzz/properties.h), campaign findings record the match. docs/findings.md describes each.
#pragma once

#include <string>
#include <vector>

#include "sim/replay.h"
#include "sim/violation.h"

namespace mlasim::sim {

// When a known bug applies beyond its signature: a condition on the replayed step.
enum class KnownBugWhen : uint8_t {
  kAlways,
  kDcp,                // decode context parallel (dcp > 1)
  kSparse,             // a sparse (DSA top-k) model
  kUpdateHazardLater,  // a dense draft step >= 1 patches a plan decode_update cannot update
  kPagedUpdateLater,   // a dense draft step >= 1 patches a plan over pages of > 1 token
};

// A violation matches when every part matches: its kind is one of `kinds` (empty: any), its
// signature "step|call|buffer|access|class" matches one of `signatures` ('*' in a part matches
// anything, a trailing '*' any suffix), its consequence text starts with `consequence` ("" = any)
// and `when` holds for the step.
struct KnownBugPattern {
  std::vector<ViolationKind> kinds;
  std::vector<std::string> signatures;
  std::string consequence = "";
  KnownBugWhen when = KnownBugWhen::kAlways;
};

struct KnownBug {
  std::string name;      // "atom-sparse-mtp-plan-over-running-tokens"
  BugClass bug_class;    // the class of the root cause
  std::string upstream;  // "ATOM #2715", or where mlasim documents it ("docs/findings.md #3")
  std::string fixed_in;  // the engine profile that fixes it; "" = open (no profile does)
  std::string summary;   // one sentence
  KnownBugPattern pattern;
};

// Every known bug, in the order matches are tried (the first match names a violation).
const std::vector<KnownBug>& KnownBugs();

// The known bug `v` of replay `r` belongs to, or nullptr.
const KnownBug* MatchKnownBug(const Violation& v, const ReplayReport& r);

// "known: <name> (<upstream>), fixed in <profile>" or "..., open: no profile fixes it".
std::string KnownBugText(const KnownBug& k);

// True when `signature` ("step|call|buffer|access|class") matches `pattern` (KnownBugPattern's
// glob rules). Exposed for tests.
bool SignatureMatches(const std::string& pattern, const std::string& signature);

// True when the step's dense draft steps patch a plan decode_update cannot handle: a fold
// decision that differs from the planner's or per-token q tiles (aiter-mla-metadata.md §9.3).
bool HasUpdateHazard(const ReplayReport& r);

// True when a decode_update of the step patched a plan over KV pages of more than one token,
// which aiter asserts against (page_size == 1, aiter-mla-metadata.md §9.2): it moves pieces by
// tokens while the plan counts pages (docs/findings.md #7).
bool HasPagedUpdate(const ReplayReport& r);

}  // namespace mlasim::sim
