#include "tools/mlasim/plan_output.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>

#include <fmt/format.h>
#include <xtensor/xadapt.hpp>
#include <xtensor/xnpy.hpp>

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
  for (const Int32Buffer* b :
       {&p.work_indptr, &p.work_info, &p.reduce_indptr, &p.reduce_final_map, &p.reduce_partial_map})
    if (std::find(b->cells.begin(), b->cells.end(), Cell::kUndefined) != b->cells.end())
      return true;
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

void PrintPlanTable(std::ostream& out, const ref::PlanRequest& r, const ref::Plan& plan) {
  const ref::PlanDerived& d = plan.derived;
  const ref::MetadataSizes& s = plan.sizes;
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

  // Work table. The cluster of a row comes from work_indptr.
  const int32_t works = d.num_works;
  std::vector<std::string> cluster_of(std::max(works, 0), "?");
  for (int32_t c = 0; c < d.num_clusters && c + 1 < plan.work_indptr.size(); ++c) {
    if (plan.work_indptr.cells[c] != Cell::kWritten ||
        plan.work_indptr.cells[c + 1] != Cell::kWritten)
      continue;
    const int32_t b = std::max(plan.work_indptr.data[c], 0);
    const int32_t e = std::min(plan.work_indptr.data[c + 1], works);
    for (int32_t w = b; w < e; ++w) cluster_of[w] = std::to_string(c);
  }
  std::vector<std::vector<std::string>> rows;
  const Int32Buffer& wi = plan.work_info;
  for (int32_t w = 0; w < works && int64_t{w} * 8 + 7 < wi.size(); ++w) {
    const int64_t base = int64_t{w} * 8;
    rows.push_back(
        {std::to_string(w), cluster_of[w], CellText(wi, base + ref::kBatchIdx),
         CellText(wi, base + ref::kPartialQoLoc),
         "[" + CellText(wi, base + ref::kQoStart) + "," + CellText(wi, base + ref::kQoEnd) + ")",
         "[" + CellText(wi, base + ref::kKvStart) + "," + CellText(wi, base + ref::kKvEnd) + ")",
         CellText(wi, base + ref::kKvOffset)});
  }
  if (rows.empty()) {
    out << "(no work items)\n";
  } else {
    PrintTable(out, {"work", "cluster", "batch", "partial", "q", "kv", "kv_offset"},
               {false, false, false, false, true, true, false}, rows, "");
  }
  out << '\n';

  // Reduce maps and work_indptr.
  const int64_t clusters_end =
      std::min<int64_t>(int64_t{d.num_clusters} + 1, plan.work_indptr.size());
  std::string fmap;
  const Int32Buffer& fm = plan.reduce_final_map;
  for (int64_t t = 0; t * 2 + 1 < fm.size(); ++t) {
    if (!fm.written(t * 2) && !fm.written(t * 2 + 1)) continue;
    if (!fmap.empty()) fmap += ' ';
    fmap += fmt::format("{}:[{},{}]", t, CellText(fm, t * 2), CellText(fm, t * 2 + 1));
  }
  const std::vector<std::pair<std::string, std::string>> maps = {
      {"work_indptr", ListText(plan.work_indptr, 0, clusters_end)},
      {"reduce_indptr", ListText(plan.reduce_indptr, 0, plan.reduce_indptr.WrittenPrefix())},
      {"reduce_final_map", fmap.empty() ? "(no split tile)" : fmap},
      {"reduce_partial_map",
       ListText(plan.reduce_partial_map, 0, plan.reduce_partial_map.WrittenPrefix())}};
  for (const auto& [name, text] : maps) out << PadRight(name, 20) << text << '\n';
  out << '\n';

  // Buffers at their info_v1 sizes.
  struct BufRow {
    const char* name;
    const char* dtype;
    int64_t rows;
    int64_t width;  // 0: 1-D
    int64_t elem_bytes;
    std::string written;
  };
  const std::vector<BufRow> bufs = {
      {"work_metadata_ptrs", "uint64", s.work_metadata_ptrs, 0, 8, "2"},
      {"work_indptr", "int32", s.work_indptr, 0, 4,
       std::to_string(WrittenElements(plan.work_indptr))},
      {"work_info", "int32", s.work_info_rows, 8, 4,
       std::to_string(WrittenRows(plan.work_info)) + " rows"},
      {"reduce_indptr", "int32", s.reduce_indptr, 0, 4,
       std::to_string(WrittenElements(plan.reduce_indptr))},
      {"reduce_final_map", "int32", s.reduce_final_map_rows, 2, 4,
       std::to_string(WrittenRows(plan.reduce_final_map)) + " rows"},
      {"reduce_partial_map", "int32", s.reduce_partial_map, 0, 4,
       std::to_string(WrittenElements(plan.reduce_partial_map))}};
  std::vector<std::vector<std::string>> brows;
  int64_t total = 0;
  for (const BufRow& b : bufs) {
    const int64_t bytes = b.rows * std::max<int64_t>(b.width, 1) * b.elem_bytes;
    total += bytes;
    const std::string shape =
        b.width ? fmt::format("[{},{}]", b.rows, b.width) : fmt::format("[{}]", b.rows);
    brows.push_back({b.name, b.dtype, shape, std::to_string(bytes), b.written});
  }
  brows.push_back({"total", "", "", std::to_string(total), ""});
  out << "buffers (get_mla_metadata_info_v1 sizes):\n";
  PrintTable(out, {"buffer", "dtype", "shape", "bytes", "written"}, {true, true, true, false, true},
             brows, "  ");

  // Stores the planner attempted past a buffer's end (a sizing/planner disagreement).
  const std::vector<std::pair<const char*, const Int32Buffer*>> named = {
      {"work_indptr", &plan.work_indptr},
      {"work_info", &plan.work_info},
      {"reduce_indptr", &plan.reduce_indptr},
      {"reduce_final_map", &plan.reduce_final_map},
      {"reduce_partial_map", &plan.reduce_partial_map}};
  for (const auto& [name, b] : named) {
    if (b->oob_writes > 0)
      out << fmt::format(
          "warning: {}: {} store{} past the end of the info_v1 buffer (first at "
          "element {})\n",
          name, b->oob_writes, b->oob_writes == 1 ? "" : "s", b->first_oob_index);
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

const std::vector<std::string>& NpyFileNames() {
  static const std::vector<std::string> kNames = {
      "work_metadata_ptrs.npy", "work_indptr.npy",      "work_info.npy",
      "reduce_indptr.npy",      "reduce_final_map.npy", "reduce_partial_map.npy"};
  return kNames;
}

Status WritePlanNpy(const std::string& dir, const ref::Plan& plan) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    return InvalidArgumentError("--npy", "'" + dir + "' exists and is not a directory");
  fs::create_directories(dir, ec);
  if (ec) return InvalidArgumentError("--npy", "cannot create '" + dir + "': " + ec.message());

  auto write = [&](const std::string& name, const std::string& bytes) -> Status {
    const fs::path path = fs::path(dir) / name;
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    if (f) f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (f) f.close();
    if (!f) return InvalidArgumentError("--npy", "cannot write '" + path.string() + "'");
    return OkStatus();
  };
  // The buffer as a caller's GPU memory would hold it: undefined cells are as unknowable as
  // unwritten ones, so both carry the poison value.
  auto values = [](const Int32Buffer& b) {
    std::vector<int32_t> v = b.data;
    for (size_t i = 0; i < v.size(); ++i)
      if (b.cells[i] != Cell::kWritten) v[i] = ref::Plan::kPoison;
    return v;
  };
  auto npy1 = [&](const Int32Buffer& b) {
    std::vector<int32_t> v = values(b);
    const std::vector<size_t> shape = {v.size()};
    return xt::dump_npy(xt::adapt(v, shape));
  };
  auto npy2 = [&](const Int32Buffer& b, size_t width) {
    std::vector<int32_t> v = values(b);
    const std::vector<size_t> shape = {v.size() / width, width};
    return xt::dump_npy(xt::adapt(v, shape));
  };
  std::vector<uint64_t> ptrs = {plan.work_metadata_ptrs[0], plan.work_metadata_ptrs[1]};
  const std::vector<size_t> ptr_shape = {ptrs.size()};
  const std::vector<std::string> bytes = {xt::dump_npy(xt::adapt(ptrs, ptr_shape)),
                                          npy1(plan.work_indptr),
                                          npy2(plan.work_info, 8),
                                          npy1(plan.reduce_indptr),
                                          npy2(plan.reduce_final_map, 2),
                                          npy1(plan.reduce_partial_map)};
  const auto& names = NpyFileNames();
  for (size_t i = 0; i < names.size(); ++i) MLASIM_RETURN_IF_ERROR(write(names[i], bytes[i]));
  return OkStatus();
}

}  // namespace mlasim::cli
