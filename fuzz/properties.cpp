#include "fuzz/properties.h"

#include "sim/engine.h"

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

std::vector<sim::Violation> NumericsViolations(const sim::ReplayReport& r,
                                               const sim::SemanticsOverride& over) {
  sim::Scenario s = r.scenario;
  const sim::NumericsReduction red = sim::ReduceForNumerics(s, kStepNumericsContext, true);
  auto trace = sim::ExpandStep(s);
  if (!trace.ok()) return {};  // the reduced step is refused: nothing runs
  sim::StepNumericsOptions o;
  o.numerics.head_dim_qk = red.head_dim_qk;
  o.numerics.head_dim_v = red.head_dim_v;
  o.numerics.hostile_table_slots = 4;
  o.numerics.reserve_page_zero = true;
  o.numerics.q_scale_mode = static_cast<ref::NumericsOptions::QScaleMode>(s.engine.q_fp8_scale);
  o.override = over;
  sim::ReplayReport step;
  step.scenario = std::move(s);
  step.trace = std::move(*trace);
  std::vector<sim::Violation> out;
  for (const sim::DecodeNumerics& n : sim::RunStepNumerics(step.scenario, step.trace, o))
    for (const sim::Violation& v : n.violations)
      if (!sim::MatchKnownBug(v, step)) out.push_back(v);
  return out;
}

}  // namespace mlasim::fuzz
