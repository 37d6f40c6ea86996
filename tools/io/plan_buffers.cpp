#include "tools/io/plan_buffers.h"

#include <fmt/format.h>

#include <climits>

#include "ref/planner.h"
#include "ref/sizing.h"

namespace mlasim::io {
namespace {

using ref::Int32Buffer;
using ref::Plan;

// The five buffers of a plan in PlanBufferNames() order, with their row widths.
struct BufferRef {
  const char* name;
  Int32Buffer Plan::*member;
  Int32View PlanBufferViews::*view;
  int32_t width;
};
constexpr BufferRef kBuffers[] = {
    {"work_indptr", &Plan::work_indptr, &PlanBufferViews::work_indptr, 1},
    {"work_info", &Plan::work_info, &PlanBufferViews::work_info, 8},
    {"reduce_indptr", &Plan::reduce_indptr, &PlanBufferViews::reduce_indptr, 1},
    {"reduce_final_map", &Plan::reduce_final_map, &PlanBufferViews::reduce_final_map, 2},
    {"reduce_partial_map", &Plan::reduce_partial_map, &PlanBufferViews::reduce_partial_map, 1},
};

Status CopyBuffer(const BufferRef& b, const Int32View& v, std::optional<int32_t> unwritten,
                  Int32Buffer& out) {
  if (v.size < 0 || (v.size > 0 && v.data == nullptr))
    return InvalidArgumentError(b.name, "has no data");
  if (v.size > INT32_MAX)
    return InvalidArgumentError(b.name, "holds " + std::to_string(v.size) +
                                            " elements; aiter's buffers are indexed in int32");
  if (v.size % b.width != 0)
    return InvalidArgumentError(b.name, "holds " + std::to_string(v.size) +
                                            " int32, not a multiple of its row width " +
                                            std::to_string(b.width));
  out.row_width = b.width;
  out.data.assign(v.data, v.data + v.size);
  out.cells.assign(static_cast<size_t>(v.size), ref::Cell::kWritten);
  if (unwritten) {
    for (int64_t i = 0; i < v.size; ++i)
      if (v.data[i] == *unwritten) out.cells[static_cast<size_t>(i)] = ref::Cell::kUnwritten;
  }
  out.dirty_end = v.size;  // any element may be written (Int32Buffer's invariant)
  return OkStatus();
}

std::string CellName(const BufferRef& b, int64_t index) {
  if (b.width == 8)
    return fmt::format("{}[{}].{}", b.name, index / 8, ref::WorkFieldName(index % 8));
  if (b.width == 2) return fmt::format("{}[{}][{}]", b.name, index / 2, index % 2);
  return fmt::format("{}[{}]", b.name, index);
}

DecisionDifference Decision(const std::string& name, int64_t captured, int64_t replanned,
                            const char* left = "captured", const char* right = "re-planned") {
  return {name, captured, replanned,
          fmt::format("{}: {} {}, {} {}", name, left, captured, right, replanned)};
}

std::vector<DecisionDifference> CompareDecisions(const ref::PlanDerived& with_change,
                                                 const ref::PlanDerived& without) {
  std::vector<DecisionDifference> out;
  const auto a = DecisionValues(with_change);
  const auto b = DecisionValues(without);
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].second != b[i].second)
      out.push_back(Decision(a[i].first, a[i].second, b[i].second, "captured", "re-planned"));
  return out;
}

// One changed input to try: a name, the value shown, and the change.
struct Candidate {
  std::string input, value, was;
  ref::PlanRequest request;
  ref::PlannerChoice choice;
};

std::vector<Candidate> Candidates(const ref::PlanRequest& r, ref::PlannerChoice choice,
                                  const Plan& captured, const Plan& replanned) {
  std::vector<Candidate> out;
  const int64_t clusters = captured.work_indptr.size() - 1;
  const int64_t cu = int64_t{ref::EffectiveCuCount(r)};
  if (clusters >= 1 && clusters * r.num_heads_k != cu && clusters * r.num_heads_k <= INT32_MAX) {
    Candidate c{"cu_count", std::to_string(clusters * r.num_heads_k), std::to_string(cu), r,
                choice};
    c.request.cu_count = static_cast<int32_t>(clusters * r.num_heads_k);
    out.push_back(c);
  }
  const bool parallel = replanned.derived.parallel_planner_used;
  out.push_back({"planner", parallel ? "serial" : "parallel", parallel ? "parallel" : "serial", r,
                 parallel ? ref::PlannerChoice::kSerial : ref::PlannerChoice::kParallel});
  for (const ref::DType q : {ref::DType::kBf16, ref::DType::kFp8}) {
    for (const ref::DType kv : {ref::DType::kBf16, ref::DType::kFp8}) {
      if (q == r.q_dtype && kv == r.kv_dtype) continue;
      Candidate c{"q_dtype/kv_dtype", std::string(ref::DTypeName(q)) + "/" + ref::DTypeName(kv),
                  std::string(ref::DTypeName(r.q_dtype)) + "/" + ref::DTypeName(r.kv_dtype), r,
                  choice};
      c.request.q_dtype = q;
      c.request.kv_dtype = kv;
      out.push_back(c);
    }
  }
  const ref::Revision other =
      r.revision == ref::Revision::k2026_08 ? ref::Revision::k2026_03 : ref::Revision::k2026_08;
  Candidate c{"revision", ref::RevisionName(other), ref::RevisionName(r.revision), r, choice};
  c.request.revision = other;
  out.push_back(c);
  return out;
}

}  // namespace

const std::vector<std::string>& PlanBufferNames() {
  static const std::vector<std::string> kNames = {"work_indptr", "work_info", "reduce_indptr",
                                                  "reduce_final_map", "reduce_partial_map"};
  return kNames;
}

StatusOr<Plan> PlanFromBuffers(const ref::PlanRequest& request, const PlanBufferViews& views,
                               std::optional<int32_t> unwritten_value, ref::PlannerChoice choice) {
  MLASIM_RETURN_IF_ERROR(ref::ValidatePlanRequest(request));
  MLASIM_ASSIGN_OR_RETURN(const ref::PlanDerived derived, ref::DecidePlan(request, choice));
  Plan plan;
  for (const BufferRef& b : kBuffers)
    MLASIM_RETURN_IF_ERROR(CopyBuffer(b, views.*(b.view), unwritten_value, plan.*(b.member)));
  plan.derived = derived;
  plan.sizes = SizesOf(plan);
  const int64_t clusters = derived.num_clusters;
  plan.derived.num_works = clusters < plan.work_indptr.size() && plan.work_indptr.written(clusters)
                               ? plan.work_indptr.data[static_cast<size_t>(clusters)]
                               : 0;
  return plan;
}

ref::MetadataSizes SizesOf(const Plan& plan) {
  ref::MetadataSizes s;
  s.work_indptr = static_cast<int32_t>(plan.work_indptr.size());
  s.work_info_rows = static_cast<int32_t>(plan.work_info.size() / 8);
  s.reduce_indptr = static_cast<int32_t>(plan.reduce_indptr.size());
  s.reduce_final_map_rows = static_cast<int32_t>(plan.reduce_final_map.size() / 2);
  s.reduce_partial_map = static_cast<int32_t>(plan.reduce_partial_map.size());
  s.max_splits = s.work_indptr - 1;
  s.tile_cnt = s.reduce_final_map_rows;
  return s;
}

PlanDiff DiffPlans(const Plan& captured, const Plan& replanned) {
  PlanDiff d;
  for (const BufferRef& b : kBuffers) {
    const Int32Buffer& cap = captured.*(b.member);
    const Int32Buffer& re = replanned.*(b.member);
    if (re.oob_writes > 0)
      d.stores_past_end.push_back({b.name, re.oob_writes, re.first_oob_index, cap.size()});
    const int64_t n = std::min(cap.size(), re.size());
    for (int64_t i = 0; i < n; ++i) {
      if (re.cells[static_cast<size_t>(i)] != ref::Cell::kWritten) continue;
      ++d.cells_compared;
      const bool unwritten = !cap.written(i);
      if (!unwritten && cap.data[static_cast<size_t>(i)] == re.data[static_cast<size_t>(i)])
        continue;
      ++d.cells_differing;
      if (d.first) continue;
      PlanCellDifference c;
      c.buffer = b.name;
      c.index = i;
      c.row = b.width > 1 ? i / b.width : -1;
      c.field = b.width > 1 ? static_cast<int32_t>(i % b.width) : -1;
      c.captured = cap.data[static_cast<size_t>(i)];
      c.captured_unwritten = unwritten;
      c.replanned = re.data[static_cast<size_t>(i)];
      c.text = fmt::format(
          "{}{}: captured {}, re-planned {}", CellName(b, i),
          b.width > 1 ? fmt::format(" (element {})", i) : std::string(),
          unwritten ? fmt::format("unwritten ({})", c.captured) : std::to_string(c.captured),
          c.replanned);
      d.first = c;
    }
  }
  return d;
}

std::vector<std::pair<std::string, int64_t>> DecisionValues(const ref::PlanDerived& d) {
  return {{"num_clusters", d.num_clusters},
          {"fold_ratio", d.fold_ratio},
          {"packed_qo_len_per_wg", d.packed_qo_len_per_wg},
          {"qo_split", d.qo_split ? 1 : 0},
          {"parallel_planner_used", d.parallel_planner_used ? 1 : 0},
          {"num_splits", d.num_splits},
          {"planner_batches", d.planner_batches},
          {"planner_heads", d.planner_heads},
          {"topk_pages", d.topk_pages},
          {"fixed_overhead_blocks", d.fixed_overhead_blocks},
          {"tail_done_threshold", d.tail_done_threshold},
          {"num_works", d.num_works},
          {"payload", d.payload}};
}

std::vector<DecisionDifference> ObservedDecisionDifferences(const Plan& captured,
                                                            const Plan& replanned) {
  std::vector<DecisionDifference> out;
  const int64_t clusters = captured.work_indptr.size() - 1;
  if (clusters != replanned.derived.num_clusters)
    out.push_back(Decision("num_clusters", clusters, replanned.derived.num_clusters));
  if (clusters >= 0 && captured.work_indptr.written(clusters)) {
    const int64_t works = captured.work_indptr.data[static_cast<size_t>(clusters)];
    if (works != replanned.derived.num_works)
      out.push_back(Decision("num_works", works, replanned.derived.num_works));
  }
  return out;
}

std::optional<Reproduction> FindReproducingInput(const ref::PlanRequest& request,
                                                 ref::PlannerChoice choice, const Plan& captured,
                                                 const Plan& replanned,
                                                 const RequestLimitCheck& limits) {
  const ref::MetadataSizes sizes = SizesOf(captured);
  for (const Candidate& c : Candidates(request, choice, captured, replanned)) {
    if (!ref::ValidatePlanRequest(c.request).ok()) continue;
    StatusOr<ref::PlanDerived> derived = ref::DecidePlan(c.request, c.choice);
    if (!derived.ok() || !limits(c.request, *derived).ok()) continue;
    ref::PlannerOptions options;
    options.choice = c.choice;
    StatusOr<Plan> alt = ref::PlanMlaMetadataInto(c.request, sizes, options);
    if (!alt.ok()) continue;
    const PlanDiff diff = DiffPlans(captured, *alt);
    if (!diff.identical() || diff.cells_compared == 0) continue;
    return Reproduction{c.input, c.value, c.was, CompareDecisions(alt->derived, replanned.derived)};
  }
  return std::nullopt;
}

}  // namespace mlasim::io
