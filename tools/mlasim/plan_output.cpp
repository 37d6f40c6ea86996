#include "tools/mlasim/plan_output.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>

#include <fmt/format.h>
#include <xtensor/xadapt.hpp>
#include <xtensor/xnpy.hpp>

#include "sim/os_error.h"

namespace mlasim::cli {
namespace {

using ref::Cell;
using ref::Int32Buffer;

// One cell as text: its value, `?` when undefined, `-` when never written.
std::string CellText(const Int32Buffer& b, int64_t i) {
  if (i < 0 || i >= b.size()) return "-";
  switch (b.cells[i]) {
    case Cell::kUnwritten: return "-";
    case Cell::kUndefined: return "?";
    case Cell::kWritten: break;
  }
  return std::to_string(b.data[i]);
}

std::string ListText(const Int32Buffer& b, int64_t begin, int64_t end) {
  std::string s = "[";
  for (int64_t i = begin; i < end; ++i) {
    if (i > begin) s += ',';
    s += CellText(b, i);
  }
  return s + "]";
}

int64_t WrittenElements(const Int32Buffer& b) {
  return std::count_if(b.cells.begin(), b.cells.end(),
                       [](Cell c) { return c != Cell::kUnwritten; });
}

int64_t WrittenRows(const Int32Buffer& b) {
  int64_t rows = 0;
  const int64_t w = std::max<int32_t>(b.row_width, 1);
  for (int64_t r = 0; r * w < b.size(); ++r) {
    bool any = false;
    for (int64_t f = 0; f < w && r * w + f < b.size(); ++f) any = any || b.written(r * w + f);
    rows += any ? 1 : 0;
  }
  return rows;
}

bool AnyUndefined(const ref::Plan& p) {
  for (ref::PlanBufferId id : ref::kInt32PlanBuffers) {
    const auto& cells = p.buffer(id)->cells;
    if (std::find(cells.begin(), cells.end(), Cell::kUndefined) != cells.end()) return true;
  }
  return false;
}

std::string PadRight(const std::string& s, size_t w) {
  return s + std::string(w > s.size() ? w - s.size() : 0, ' ');
}
std::string PadLeft(const std::string& s, size_t w) {
  return std::string(w > s.size() ? w - s.size() : 0, ' ') + s;
}

// A table whose columns are right-aligned (numbers) or left-aligned (ranges, names).
void PrintTable(std::ostream& out, const std::vector<std::string>& header,
                const std::vector<bool>& left, const std::vector<std::vector<std::string>>& rows,
                const std::string& indent) {
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const auto& r : rows)
    for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s = indent;
    for (size_t c = 0; c < cells.size(); ++c) {
      if (c > 0) s += "  ";
      const bool last = c + 1 == cells.size();
      if (left[c])
        s += last ? cells[c] : PadRight(cells[c], width[c]);
      else
        s += PadLeft(cells[c], width[c]);
    }
    s.erase(s.find_last_not_of(' ') + 1);
    out << s << '\n';
  };
  line(header);
  for (const auto& r : rows) line(r);
}

}  // namespace

std::string DescribeInputViolation(const ref::InputViolation& v) {
  std::string s = fmt::format("{}[{}] read past its end ({} entr{})", v.array, v.index, v.size,
                              v.size == 1 ? "y" : "ies");
  if (v.work_row >= 0)
    s += fmt::format(" for work {} {}", v.work_row, ref::WorkFieldName(v.work_field));
  return s + ": value undefined";
}

namespace {

// Decisions and the request, two lines.
void PrintDecisions(std::ostream& out, const ref::PlanRequest& r, const ref::Plan& plan) {
  const ref::PlanDerived& d = plan.derived;
  const int64_t requests = static_cast<int64_t>(r.kv_indptr.size()) - 1;
  out << fmt::format(
      "target {}  revision {}  clusters {}  fold_ratio {}  pack {}  qo_split {}  planner {}  "
      "payload {}  works {}\n",
      ref::ArchName(r.target), ref::RevisionName(r.revision), d.num_clusters, d.fold_ratio,
      d.packed_qo_len_per_wg, d.qo_split ? "yes" : "no",
      d.parallel_planner_used ? "parallel" : "serial", d.payload, d.num_works);
  out << fmt::format(
      "request: {} request{}, qlen {} (max_seqlen_qo {}, uni_seqlen_qo {}), {} heads x {} kv "
      "head{}, q {}, kv {}, page {}, granularity {}, {}, {}",
      requests, requests == 1 ? "" : "s", r.qlen, r.max_seqlen_qo, r.uni_seqlen_qo,
      r.heads_per_head_k, r.num_heads_k, r.num_heads_k == 1 ? "" : "s", ref::DTypeName(r.q_dtype),
      ref::DTypeName(r.kv_dtype), r.page_size, r.kv_granularity,
      r.is_causal ? "causal" : "not causal",
      r.topk >= 0 ? fmt::format("sparse topk {}", r.topk) : std::string("dense"));
  if (r.max_split_per_batch > 0)
    out << fmt::format(", max_split_per_batch {}", r.max_split_per_batch);
  out << "\n\n";
}

// The cluster of each work row, from work_indptr ("?" where it does not say).
std::vector<std::string> ClusterOfWorks(const ref::Plan& plan) {
  const int32_t works = plan.derived.num_works;
  const Int32Buffer& wi = plan.work_indptr;
  std::vector<std::string> cluster_of(std::max(works, 0), "?");
  for (int32_t c = 0; c < plan.derived.num_clusters && c + 1 < wi.size(); ++c) {
    if (wi.cells[c] != Cell::kWritten || wi.cells[c + 1] != Cell::kWritten) continue;
    const int32_t b = std::max(wi.data[c], 0);
    const int32_t e = std::min(wi.data[c + 1], works);
    for (int32_t w = b; w < e; ++w) cluster_of[w] = std::to_string(c);
  }
  return cluster_of;
}

// The work table (spec §6.1 columns).
void PrintWorkTable(std::ostream& out, const ref::Plan& plan) {
  const std::vector<std::string> cluster_of = ClusterOfWorks(plan);
  const Int32Buffer& wi = plan.work_info;
  std::vector<std::vector<std::string>> rows;
  for (int32_t w = 0; w < plan.derived.num_works && w < wi.rows(); ++w) {
    const int64_t base = int64_t{w} * ref::kWorkInfoWidth;
    auto f = [&](int32_t field) { return CellText(wi, base + field); };
    rows.push_back({std::to_string(w), cluster_of[w], f(ref::kBatchIdx), f(ref::kPartialQoLoc),
                    "[" + f(ref::kQoStart) + "," + f(ref::kQoEnd) + ")",
                    "[" + f(ref::kKvStart) + "," + f(ref::kKvEnd) + ")", f(ref::kKvOffset)});
  }
  if (rows.empty()) {
    out << "(no work items)\n";
  } else {
    PrintTable(out, {"work", "cluster", "batch", "partial", "q", "kv", "kv_offset"},
               {false, false, false, false, true, true, false}, rows, "");
  }
  out << '\n';
}

// work_indptr up to num_clusters, the reduce maps' written parts.
void PrintMaps(std::ostream& out, const ref::Plan& plan) {
  const int64_t clusters_end =
      std::min<int64_t>(int64_t{plan.derived.num_clusters} + 1, plan.work_indptr.size());
  std::string fmap;
  const Int32Buffer& fm = plan.reduce_final_map;
  for (int64_t t = 0; t < fm.rows(); ++t) {
    const int64_t f0 = t * ref::kReduceFinalMapWidth + ref::kFinalQoStart;
    const int64_t f1 = t * ref::kReduceFinalMapWidth + ref::kFinalQoEnd;
    if (!fm.written(f0) && !fm.written(f1)) continue;
    if (!fmap.empty()) fmap += ' ';
    fmap += fmt::format("{}:[{},{}]", t, CellText(fm, f0), CellText(fm, f1));
  }
  const std::vector<std::pair<std::string, std::string>> maps = {
      {"work_indptr", ListText(plan.work_indptr, 0, clusters_end)},
      {"reduce_indptr", ListText(plan.reduce_indptr, 0, plan.reduce_indptr.WrittenPrefix())},
      {"reduce_final_map", fmap.empty() ? "(no split tile)" : fmap},
      {"reduce_partial_map",
       ListText(plan.reduce_partial_map, 0, plan.reduce_partial_map.WrittenPrefix())}};
  for (const auto& [name, text] : maps) out << PadRight(name, 20) << text << '\n';
  out << '\n';
}

// The buffers at their info_v1 sizes (ref::kPlanBuffers), with what the planner wrote.
void PrintBufferSizes(std::ostream& out, const ref::Plan& plan) {
  std::vector<std::vector<std::string>> rows;
  int64_t total = 0;
  for (const ref::PlanBufferSpec& spec : ref::kPlanBuffers) {
    const int64_t n = plan.sizes.Rows(spec.id);
    const int64_t bytes = n * spec.row_width * spec.element_bytes;
    total += bytes;
    const std::string shape =
        spec.row_width > 1 ? fmt::format("[{},{}]", n, spec.row_width) : fmt::format("[{}]", n);
    const Int32Buffer* b = plan.buffer(spec.id);
    std::string written = std::to_string(n);  // the two uint64 pointers are always written
    if (b != nullptr)
      written = spec.row_width > 1 ? std::to_string(WrittenRows(*b)) + " rows"
                                   : std::to_string(WrittenElements(*b));
    rows.push_back({spec.name, spec.dtype_name, shape, std::to_string(bytes), written});
  }
  rows.push_back({"total", "", "", std::to_string(total), ""});
  out << "buffers (get_mla_metadata_info_v1 sizes):\n";
  PrintTable(out, {"buffer", "dtype", "shape", "bytes", "written"}, {true, true, true, false, true},
             rows, "  ");
}

// Stores the planner attempted past a buffer's end (a sizing/planner disagreement), then the
// planner's reads of its inputs past their ends.
void PrintOverflowsAndInputReads(std::ostream& out, const ref::Plan& plan) {
  for (ref::PlanBufferId id : ref::kInt32PlanBuffers) {
    const Int32Buffer& b = *plan.buffer(id);
    if (b.oob_writes > 0)
      out << fmt::format(
          "warning: {}: {} store{} past the end of the info_v1 buffer (first at element {})\n",
          ref::GetPlanBufferSpec(id).name, b.oob_writes, b.oob_writes == 1 ? "" : "s",
          b.first_oob_index);
  }
  out << '\n';
  if (plan.input_violations.empty()) {
    out << "input violations: none\n";
  } else {
    out << fmt::format("input violations ({}):\n", plan.input_violations.size());
    for (const ref::InputViolation& v : plan.input_violations)
      out << "  " << DescribeInputViolation(v) << '\n';
  }
  if (AnyUndefined(plan)) out << "? = value undefined (it depends on an input read past its end)\n";
}

}  // namespace

void PrintPlanTable(std::ostream& out, const ref::PlanRequest& r, const ref::Plan& plan) {
  PrintDecisions(out, r, plan);
  PrintWorkTable(out, plan);
  PrintMaps(out, plan);
  PrintBufferSizes(out, plan);
  PrintOverflowsAndInputReads(out, plan);
}

void PrintPlanCheck(std::ostream& out, const ref::PlanCheckReport& report,
                    const std::string& launch) {
  int64_t errors = 0, warnings = 0;
  for (const ref::PlanDiagnostic& d : report.diagnostics)
    ++(d.severity == ref::Severity::kError ? errors : warnings);
  std::string verdict =
      errors == 0 ? "ok" : fmt::format("{} error{}", errors, errors == 1 ? "" : "s");
  if (warnings > 0)
    verdict += fmt::format("{}{} warning{}", errors == 0 ? " (" : ", ", warnings,
                           warnings == 1 ? "" : "s") +
               (errors == 0 ? ")" : "");
  out << fmt::format("\nplan check (launch of {}): {}\n", launch, verdict);
  for (const ref::PlanDiagnostic& d : report.diagnostics)
    out << fmt::format("  {} {}: {}\n", ref::SeverityName(d.severity), ref::PlanDiagName(d.code),
                       d.message);
}

const std::vector<std::string>& NpyFileNames() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const ref::PlanBufferSpec& spec : ref::kPlanBuffers)
      names.push_back(std::string(spec.name) + ".npy");
    return names;
  }();
  return kNames;
}

namespace {

// One buffer as a .npy file's bytes: the memory a caller's GPU would hold. Undefined cells are
// as unknowable as unwritten ones, so both carry the poison value.
std::string NpyBytes(const ref::PlanBufferSpec& spec, const ref::Plan& plan) {
  if (spec.dtype == ref::PlanDType::kUint64) {
    std::vector<uint64_t> ptrs = {plan.work_metadata_ptrs[0], plan.work_metadata_ptrs[1]};
    const std::vector<size_t> shape = {ptrs.size()};
    return xt::dump_npy(xt::adapt(ptrs, shape));
  }
  const Int32Buffer& b = *plan.buffer(spec.id);
  std::vector<int32_t> v(b.data.begin(), b.data.end());
  for (size_t i = 0; i < v.size(); ++i)
    if (b.cells[i] != Cell::kWritten) v[i] = ref::Plan::kPoison;
  const size_t width = static_cast<size_t>(spec.row_width);
  const std::vector<size_t> shape =
      width > 1 ? std::vector<size_t>{v.size() / width, width} : std::vector<size_t>{v.size()};
  return xt::dump_npy(xt::adapt(v, shape));
}

}  // namespace

Status WritePlanNpy(const std::string& dir, const ref::Plan& plan) {
  // Created with its missing parents; a file of that name, a read-only file system or a full
  // disk is refused before the first file, naming the cause (sim/os_error.h).
  MLASIM_RETURN_IF_ERROR(sim::PrepareOutputFolder("--npy", dir, /*create=*/true));
  for (const ref::PlanBufferSpec& spec : ref::kPlanBuffers) {
    const std::string path =
        (std::filesystem::path(dir) / (std::string(spec.name) + ".npy")).string();
    MLASIM_RETURN_IF_ERROR(sim::WriteTextFile("--npy", path, NpyBytes(spec, plan)));
  }
  return OkStatus();
}

}  // namespace mlasim::cli
