#include "fuzz/properties.h"

namespace mlasim::fuzz {

bool IsFoundingSignature(const sim::Violation& v) {
  return v.kind == sim::ViolationKind::kOutOfBounds && v.step == "draft_step_0" &&
         v.call == "sparse_decode" &&
         ((v.buffer == "q" && v.access == sim::Access::kRead) ||
          (v.buffer == "o" && v.access == sim::Access::kWrite));
}

bool IsKnownFamily(const sim::Violation& v, const sim::ReplayReport& r) {
  return sim::MatchKnownBug(v, r) != nullptr;
}

const sim::KnownBug* KnownBugOf(const Failure& f, const std::string& signature) {
  sim::ExecuteOptions opt;
  opt.capture_layout = false;
  auto r = sim::Replay(f.scenario, opt);
  if (!r.ok()) return nullptr;
  const sim::Violation* v = FindSignature(r->result.violations, signature);
  return v ? sim::MatchKnownBug(*v, *r) : nullptr;
}

std::vector<sim::Violation> FixedProfileViolations(const sim::ReplayReport& r) {
  std::vector<sim::Violation> out;
  for (const sim::Violation& v : r.result.violations) {
    const sim::KnownBug* k = sim::MatchKnownBug(v, r);
    if (!(k && k->name == "dcp-token-without-local-kv")) out.push_back(v);
  }
  return out;
}

std::vector<sim::Violation> UnknownViolations(const sim::ReplayReport& r) {
  std::vector<sim::Violation> out;
  for (const sim::Violation& v : r.result.violations)
    if (!IsKnownFamily(v, r)) out.push_back(v);
  return out;
}

}  // namespace mlasim::fuzz
