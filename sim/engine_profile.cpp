#include <string>

#include "sim/scenario.h"

namespace mlasim::sim {
namespace {

std::vector<EngineProfile> Presets() {
  std::vector<EngineProfile> p;
  {
    EngineProfile e;
    e.name = "atom-2026-03";
    e.sparse_mtp_plan_tokens = EngineProfile::SparsePlanTokens::kRunning;
    e.draft_rows = EngineProfile::DraftRows::kScheduled;
    e.plan_rows_guard = false;
    e.dcp_slice_rebuild_inputs = false;
    e.incremental_update = true;
    e.update_uses_verify_width = false;
    e.summary =
        "ATOM after #287 (2026-03-10): draft steps 1..K-1 run eagerly at B rows and patch the "
        "target plan with decode_update, passing max_seqlen_qo = 1 (fixed by #460); sparse MTP "
        "planned over running_tokens (atom-mtp-flow.md §5, §6 rows Ds, §9)";
    p.push_back(e);
  }
  {
    EngineProfile e;
    e.name = "atom-2026-08";
    e.sparse_mtp_plan_tokens = EngineProfile::SparsePlanTokens::kRunning;
    e.draft_rows = EngineProfile::DraftRows::kPadded;
    e.plan_rows_guard = false;
    e.dcp_slice_rebuild_inputs = false;
    e.incremental_update = true;
    e.update_uses_verify_width = true;
    e.summary =
        "ATOM before #2715 (snapshot ffdf3bb5d + DraftGraph #2042): the sparse per-token MTP plan "
        "covers running_tokens (graph-padded), draft step 0 reuses it with q/o of "
        "scheduled_tokens rows, no plan-rows guard, DCP rebuild inputs unsliced "
        "(atom-mtp-flow.md §4, §6 rows T2/D0b/D0c)";
    p.push_back(e);
  }
  {
    EngineProfile e;
    e.name = "atom-2026-11";
    e.sparse_mtp_plan_tokens = EngineProfile::SparsePlanTokens::kScheduled;
    e.draft_rows = EngineProfile::DraftRows::kPadded;
    e.plan_rows_guard = true;
    e.dcp_slice_rebuild_inputs = true;
    e.incremental_update = true;
    e.update_uses_verify_width = true;
    e.summary =
        "ATOM after #2715 (2026-11): sparse per-token MTP plan over scheduled_tokens, plan rows "
        "recorded and checked against q rows in _forward_decode (eager and capture, not under "
        "DCP), DCP rebuild inputs sliced to B_q + 1 / B_q (seed-fault.md, fix as published)";
    p.push_back(e);
  }
  return p;
}

}  // namespace


std::vector<std::string> EngineProfileNames() {
  std::vector<std::string> names;
  for (const EngineProfile& e : Presets()) names.push_back(e.name);
  return names;
}

StatusOr<EngineProfile> GetEngineProfile(const std::string& name, const std::string& field) {
  for (const EngineProfile& e : Presets())
    if (e.name == name) return e;
  std::string known;
  for (const std::string& n : EngineProfileNames()) known += (known.empty() ? "" : ", ") + n;
  return InvalidArgumentError(field,
                              "unknown engine profile '" + name + "' (known: " + known + ")");
}

}  // namespace mlasim::sim
