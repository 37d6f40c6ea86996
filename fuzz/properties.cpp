#include "fuzz/properties.h"

namespace mlasim::fuzz {

bool IsFoundingSignature(const sim::Violation& v) {
  return v.kind == sim::ViolationKind::kOutOfBounds && v.step == "draft_step_0" &&
         v.call == "sparse_decode" &&
         ((v.buffer == "q" && v.access == "read") || (v.buffer == "o" && v.access == "write"));
}

bool HasUpdateHazard(const sim::ReplayReport& r) {
  for (const sim::PlanSnapshot& p : r.trace.plans) {
    if (p.plan.update_fold_ratios.empty()) continue;
    if (p.plan.derived.qo_split) return true;
    for (int32_t f : p.plan.update_fold_ratios)
      if (f != p.plan.derived.fold_ratio) return true;
  }
  return false;
}

bool IsKnownFamily(const sim::Violation& v, const sim::ReplayReport& r) {
  using K = sim::ViolationKind;
  if (v.step != "verify" && v.step != "draft_step_0" && HasUpdateHazard(r)) return true;
  if (v.kind == K::kGuardRefused) return true;
  if (v.kind == K::kOutOfBounds && (v.call == "sparse_decode" || v.call == "dense_decode") &&
      (v.buffer == "q" || v.buffer == "o") && v.step == "draft_step_0")
    return true;
  if (v.kind == K::kPlanInvalid && v.consequence == "plan_invalid:inconsistent_batch") return true;
  if (v.kind == K::kPlannerInputRead && v.buffer == "num_reject_tokens") return true;
  // DCP: a token that owns no KV on this rank is a zero-KV work item (or none, with the parallel
  // planner); OPUS/HK write nothing for it, so its o/LSE rows stay stale for the cross-rank LSE
  // merge (docs/findings.md).
  if (v.kind == K::kUnwrittenOutput && r.scenario.parallel.dcp > 1) return true;
  // Sparse models size the main plan with is_sparse = True (atom-mtp-flow.md §3), i.e. for
  // one-token batches, while T1 plans Q-token requests; near max_num_seqs the plan outgrows its
  // buffers (docs/findings.md).
  if (v.call == "main_plan" && r.scenario.model.sparse &&
      (v.kind == K::kOutOfBounds || v.kind == K::kPlanInvalid))
    return true;
  return false;
}

std::vector<sim::Violation> FixedProfileViolations(const sim::ReplayReport& r) {
  std::vector<sim::Violation> out;
  for (const sim::Violation& v : r.result.violations)
    if (!(v.kind == sim::ViolationKind::kUnwrittenOutput && r.scenario.parallel.dcp > 1))
      out.push_back(v);
  return out;
}

std::vector<sim::Violation> UnknownViolations(const sim::ReplayReport& r) {
  std::vector<sim::Violation> out;
  for (const sim::Violation& v : r.result.violations)
    if (!IsKnownFamily(v, r)) out.push_back(v);
  return out;
}

}  // namespace mlasim::fuzz
