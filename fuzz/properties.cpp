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

namespace {

using K = sim::ViolationKind;

bool UpdateHazard(const sim::Violation& v, const sim::ReplayReport& r) {
  return v.step != "verify" && v.step != "draft_step_0" && HasUpdateHazard(r);
}
bool GuardRefused(const sim::Violation& v, const sim::ReplayReport&) {
  return v.kind == K::kGuardRefused;
}
bool DraftStep0Overrun(const sim::Violation& v, const sim::ReplayReport&) {
  return v.kind == K::kOutOfBounds && (v.call == "sparse_decode" || v.call == "dense_decode") &&
         (v.buffer == "q" || v.buffer == "o") && v.step == "draft_step_0";
}
bool InconsistentRebuild(const sim::Violation& v, const sim::ReplayReport&) {
  return v.kind == K::kPlanInvalid && v.consequence == "plan_invalid:inconsistent_batch";
}
bool RejectTokensRead(const sim::Violation& v, const sim::ReplayReport&) {
  return v.kind == K::kPlannerInputRead && v.buffer == "num_reject_tokens";
}
// DCP: a token that owns no KV on this rank is a zero-KV work item (or none, with the parallel
// planner); OPUS/HK write nothing for it, so its o/LSE rows stay stale for the cross-rank LSE
// merge (docs/findings.md).
bool DcpStaleOutput(const sim::Violation& v, const sim::ReplayReport& r) {
  return v.kind == K::kUnwrittenOutput && r.scenario.parallel.dcp > 1;
}
// Sparse models size the main plan with is_sparse = True (atom-mtp-flow.md §3), i.e. for
// one-token batches, while T1 plans Q-token requests; near max_num_seqs the plan outgrows its
// buffers (docs/findings.md).
bool SparseMainPlanSizing(const sim::Violation& v, const sim::ReplayReport& r) {
  return v.call == "main_plan" && r.scenario.model.sparse &&
         (v.kind == K::kOutOfBounds || v.kind == K::kPlanInvalid);
}

}  // namespace

const std::vector<KnownFamily>& KnownFamilies() {
  static const std::vector<KnownFamily> k = {
      {"draft-step0-overrun", "seed-fault.md; docs/findings.md 1-2", DraftStep0Overrun},
      {"guard-refused", "seed-fault.md (the #2715 guard)", GuardRefused},
      {"dcp-inconsistent-rebuild", "atom-mtp-flow.md §6 D0c", InconsistentRebuild},
      {"reject-tokens-read", "docs/findings.md 3", RejectTokensRead},
      {"update-hazard", "docs/findings.md 4", UpdateHazard},
      {"dcp-stale-output", "docs/findings.md 5", DcpStaleOutput},
      {"sparse-main-plan-sizing", "docs/findings.md 6", SparseMainPlanSizing},
  };
  return k;
}

bool IsKnownFamily(const sim::Violation& v, const sim::ReplayReport& r) {
  for (const KnownFamily& f : KnownFamilies())
    if (f.matches(v, r)) return true;
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
