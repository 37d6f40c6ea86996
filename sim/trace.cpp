// File: sim/trace.cpp
#include "sim/trace.h"

#include <fmt/format.h>

namespace mlasim::sim {

std::string CallNote(const Trace& t, const Call& c) {
  if (!c.note.empty()) return c.note;
  const PlanSnapshot* snap =
      c.plan >= 0 && c.plan < static_cast<int32_t>(t.plans.size()) ? &t.plans[c.plan] : nullptr;
  switch (c.kind) {
    case CallKind::kPlanBuild:
      if (snap == nullptr) break;
      return fmt::format("plans {} batches ({} real) into {}*",
                         snap->request.kv_indptr.size() - 1, snap->real_requests,
                         snap->buffer_prefix);
    case CallKind::kDecode:
      if (c.q_rows == c.o_rows)
        return fmt::format("q/o {} rows, plan covers {} rows", c.q_rows, c.plan_rows);
      return fmt::format("q {} rows, o {} rows, plan covers {} rows", c.q_rows, c.o_rows,
                         c.plan_rows);
    case CallKind::kReduce: return "merges the split tiles' partial rows into o";
    case CallKind::kIndexFill:
      return fmt::format("writes the index regions of {} tokens", c.fill_tokens);
    default: break;
  }
  return {};
}

bool SortedDisjoint(const std::vector<IndexSegment>& segments) {
  for (size_t i = 1; i < segments.size(); ++i)
    if (segments[i].begin < segments[i - 1].end) return false;
  return true;
}

}  // namespace mlasim::sim
