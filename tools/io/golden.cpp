#include "tools/io/golden.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "ref/decode_update.h"
#include "ref/limits.h"
#include "ref/planner.h"
#include "ref/sizing.h"
#include "sim/json_input.h"
#include "tools/io/input_file.h"
#include "tools/io/request_json.h"

namespace mlasim::io {
namespace {

using nlohmann::json;
using ref::Cell;

std::string Str(const json& j) {
  return j.dump();
}

// Expected values (json array, possibly with nulls) vs cells [begin, begin+n) of a buffer.
// A null matches only a Cell::kUndefined cell; an undefined cell matches only a null.
std::optional<GoldenMismatch> CompareCells(const std::string& name, const json& want,
                                           const ref::Int32Buffer& got, int64_t begin) {
  for (size_t i = 0; i < want.size(); ++i) {
    const int64_t idx = begin + static_cast<int64_t>(i);
    if (idx >= got.size())
      return GoldenMismatch{
          -1, name, idx,
          "expected " + Str(want[i]) + ", buffer ends at " + std::to_string(got.size())};
    const Cell c = got.cells[idx];
    if (want[i].is_null()) {
      if (c != Cell::kUndefined)
        return GoldenMismatch{
            -1, name, idx,
            "expected null (undefined input read), got " + std::to_string(got.data[idx])};
      continue;
    }
    if (c == Cell::kUndefined)
      return GoldenMismatch{-1, name, idx, "expected " + Str(want[i]) + ", got undefined"};
    if (c == Cell::kUnwritten)
      return GoldenMismatch{-1, name, idx, "expected " + Str(want[i]) + ", got unwritten"};
    if (!sim::IsInt64(want[i]) || want[i].get<int64_t>() != got.data[idx])  // 0.9 is not 0
      return GoldenMismatch{-1, name, idx,
                            "expected " + Str(want[i]) + ", got " + std::to_string(got.data[idx])};
  }
  return std::nullopt;
}

std::optional<GoldenMismatch> ComparePrefix(const std::string& name, const json& want,
                                            const ref::Int32Buffer& got) {
  if (auto m = CompareCells(name, want, got, 0)) return m;
  const int64_t n = static_cast<int64_t>(want.size());
  if (got.WrittenPrefix() != n)
    return GoldenMismatch{-1, name, n,
                          "written prefix has " + std::to_string(got.WrittenPrefix()) +
                              " elements, expected " + std::to_string(n)};
  return std::nullopt;
}

std::optional<GoldenMismatch> CompareOutput(const json& out, const ref::Plan& plan,
                                            const std::string& prefix) {
  if (auto m = CompareCells(prefix + "work_indptr", out.at("work_indptr"), plan.work_indptr, 0))
    return m;
  const json& wi = out.at("work_info");
  if (static_cast<int64_t>(wi.size()) != plan.derived.num_works)
    return GoldenMismatch{-1, prefix + "work_info", -1,
                          "expected " + std::to_string(wi.size()) + " work rows, got " +
                              std::to_string(plan.derived.num_works)};
  for (size_t w = 0; w < wi.size(); ++w) {
    const int64_t base = static_cast<int64_t>(w) * ref::kWorkInfoWidth;
    if (auto m = CompareCells(prefix + "work_info", wi[w], plan.work_info, base)) return m;
  }
  if (auto m = ComparePrefix(prefix + "reduce_indptr", out.at("reduce_indptr"), plan.reduce_indptr))
    return m;
  // reduce_final_map: exactly the written rows, with their values.
  const json& fm = out.at("reduce_final_map");
  const ref::Int32Buffer& got = plan.reduce_final_map;
  int64_t written_rows = 0;
  for (int64_t t = 0; t * ref::kReduceFinalMapWidth < got.size(); ++t)
    if (got.written(t * ref::kReduceFinalMapWidth + ref::kFinalQoStart)) ++written_rows;
  for (auto it = fm.begin(); it != fm.end(); ++it) {
    const int64_t row = std::stoll(it.key()) * ref::kReduceFinalMapWidth;
    if (auto m = CompareCells(prefix + "reduce_final_map", it.value(), got, row)) return m;
  }
  if (written_rows != static_cast<int64_t>(fm.size()))
    return GoldenMismatch{-1, prefix + "reduce_final_map", -1,
                          "expected " + std::to_string(fm.size()) + " written rows, got " +
                              std::to_string(written_rows)};
  return ComparePrefix(prefix + "reduce_partial_map", out.at("reduce_partial_map"),
                       plan.reduce_partial_map);
}

// The int32 buffers' sizes (the corpus does not record work_metadata_ptrs, always 2).
std::optional<GoldenMismatch> CompareSizes(const json& want, const ref::MetadataSizes& s) {
  for (ref::PlanBufferId id : ref::kInt32PlanBuffers) {
    const std::string name = SizeKey(ref::GetPlanBufferSpec(id));
    const int64_t got = s.Rows(id);
    if (!sim::IsInt64(want.at(name)) || want.at(name).get<int64_t>() != got)
      return GoldenMismatch{-1, "sizes." + name, -1,
                            "expected " + Str(want.at(name)) + ", got " + std::to_string(got)};
  }
  return std::nullopt;
}

std::optional<GoldenMismatch> CompareDerived(const json& want, const ref::PlanDerived& d) {
  const std::pair<const char*, int64_t> ints[] = {
      {"num_clusters", d.num_clusters},
      {"fold_ratio", d.fold_ratio},
      {"packed_qo_len_per_wg", d.packed_qo_len_per_wg},
      {"num_splits", d.num_splits},
      {"planner_batches", d.planner_batches},
      {"planner_heads", d.planner_heads},
      {"topk_pages", d.topk_pages},
      {"fixed_overhead_blocks", d.fixed_overhead_blocks},
      {"tail_done_threshold", d.tail_done_threshold},
      {"num_works", d.num_works}};
  for (const auto& [name, got] : ints) {
    if (want.contains(name) &&
        (!sim::IsInt64(want.at(name)) || want.at(name).get<int64_t>() != got))
      return GoldenMismatch{-1, std::string("derived.") + name, -1,
                            "expected " + Str(want.at(name)) + ", got " + std::to_string(got)};
  }
  const std::pair<const char*, bool> bools[] = {{"qo_split", d.qo_split},
                                                {"parallel_planner_used", d.parallel_planner_used}};
  for (const auto& [name, got] : bools) {
    if (want.contains(name) && want.at(name).get<bool>() != got)
      return GoldenMismatch{-1, std::string("derived.") + name, -1,
                            "expected " + Str(want.at(name)) + ", got " + (got ? "true" : "false")};
  }
  return std::nullopt;
}

std::optional<GoldenMismatch> CheckPlanRecord(const json& rec) {
  auto req = ParsePlanRequest(rec.at("input"), "input", /*allow_update_keys=*/true);
  if (!req.ok()) return GoldenMismatch{-1, "input", -1, req.status().ToString()};
  const int32_t batch = static_cast<int32_t>(req->kv_indptr.size()) - 1;
  auto sizes = ref::GetMlaMetadataInfoV1(*req, batch);
  if (rec.contains("error")) {
    const bool sizing_refused = rec.at("sizes").is_null();
    if (sizing_refused) {
      if (sizes.ok())
        return GoldenMismatch{-1, "error", -1, "aiter's sizing refused, mlasim's did not"};
      return std::nullopt;
    }
    if (!sizes.ok()) return GoldenMismatch{-1, "sizes", -1, sizes.status().ToString()};
    if (auto m = CompareSizes(rec.at("sizes"), *sizes)) return m;
    auto plan = ref::PlanMlaMetadata(*req);
    if (plan.ok())
      return GoldenMismatch{
          -1, "error", -1,
          "aiter refused (" + rec.at("error").get<std::string>() + "), mlasim planned"};
    return std::nullopt;
  }
  if (!sizes.ok()) return GoldenMismatch{-1, "sizes", -1, sizes.status().ToString()};
  if (auto m = CompareSizes(rec.at("sizes"), *sizes)) return m;
  auto plan = ref::PlanMlaMetadata(*req);
  if (!plan.ok()) return GoldenMismatch{-1, "plan", -1, plan.status().ToString()};
  if (auto m = CompareDerived(rec.at("derived"), plan->derived)) return m;
  return CompareOutput(rec.at("output"), *plan, "");
}

// num_reject_tokens / new_kv_indptr of step s: flat lists when steps == 1, lists of lists else.
json StepValue(const json& v, int32_t steps, int32_t s) {
  if (steps == 1) return v;
  return v.is_null() ? json() : v.at(s);
}

std::optional<GoldenMismatch> CheckUpdateRecord(const json& rec) {
  const json& in = rec.at("input");
  auto req = ParsePlanRequest(in, "input", /*allow_update_keys=*/true);
  if (!req.ok()) return GoldenMismatch{-1, "input", -1, req.status().ToString()};
  auto plan = ref::PlanMlaMetadata(*req);
  if (!plan.ok()) return GoldenMismatch{-1, "plan", -1, plan.status().ToString()};
  if (auto m = CompareOutput(rec.at("before"), *plan, "before.")) return m;
  if (Status st = ApplyUpdateChain(rec, *req, *plan, nullptr); !st.ok())
    return GoldenMismatch{-1, "decode_update", -1, st.ToString()};
  return CompareOutput(rec.at("after"), *plan, "after.");
}

}  // namespace

Status ApplyUpdateChain(const json& rec, const ref::PlanRequest& req, ref::Plan& plan,
                        ref::PlanRequest* served) {
  const json& in = rec.at("input");
  const int32_t steps = in.at("steps").get<int32_t>();
  std::vector<int32_t> kv = req.kv_indptr;
  for (int32_t s = 0; s < steps; ++s) {
    ref::DecodeUpdateRequest u;
    u.target = req.target;
    u.revision = req.revision;
    u.heads_per_head_k = req.heads_per_head_k;
    u.num_heads_k = req.num_heads_k;
    u.q_dtype = req.q_dtype;
    u.kv_dtype = req.kv_dtype;
    u.page_size = req.page_size;
    u.kv_granularity = req.kv_granularity;
    u.max_seqlen_qo = in.at("update_max_seqlen_qo").get<int32_t>();
    u.qo_indptr = req.qo_indptr;
    kv = StepValue(in.at("new_kv_indptr"), steps, s).get<std::vector<int32_t>>();
    u.kv_indptr = kv;
    const json rej = StepValue(in.at("num_reject_tokens"), steps, s);
    if (!rej.is_null()) u.num_reject_tokens = rej.get<std::vector<int32_t>>();
    u.has_num_reject_tokens = !rej.is_null();
    MLASIM_RETURN_IF_ERROR(ref::DecodeUpdateMlaMetadataV1(u, plan));
  }
  if (served) {
    *served = req;
    served->kv_indptr = kv;
    served->max_seqlen_qo = served->uni_seqlen_qo = served->qlen = 1;
    for (size_t i = 0; i < served->qo_indptr.size(); ++i)
      served->qo_indptr[i] = static_cast<int32_t>(i);
  }
  return OkStatus();
}

std::optional<GoldenMismatch> CheckGoldenRecord(const json& rec) {
  const int64_t id =
      rec.contains("id") && rec.at("id").is_number_integer() ? rec.at("id").get<int64_t>() : -1;
  std::optional<GoldenMismatch> m;
  try {
    m = rec.contains("before") ? CheckUpdateRecord(rec) : CheckPlanRecord(rec);
  } catch (const json::exception& e) {
    m = GoldenMismatch{-1, "record", -1, std::string("malformed record: ") + e.what()};
  }
  if (m) m->id = id;
  return m;
}

namespace {

// Shape checks of a record's expected values: a wrong type or shape is a malformed record (exit
// 2 naming the JSON path), never a mismatch (exit 1). `Cells`: an array of integers or nulls.
Status Cells(const json& v, const std::string& path, int64_t width = -1) {
  if (!v.is_array()) return InvalidArgumentError(path, "must be an array of integers (or nulls)");
  if (width >= 0 && static_cast<int64_t>(v.size()) != width)
    return InvalidArgumentError(path, "must hold " + std::to_string(width) + " entries (has " +
                                          std::to_string(v.size()) + ")");
  for (size_t i = 0; i < v.size(); ++i)
    if (!v[i].is_null() && !sim::IsInt64(v[i]))
      return InvalidArgumentError(path + "[" + std::to_string(i) + "]",
                                  sim::IsIntegerBeyond64Bits(v[i]) ? sim::NotAnIntegerReason(v[i])
                                                                   : "must be an integer or null");
  return OkStatus();
}

const json* Required(const json& obj, const std::string& key, const std::string& path, Status* st) {
  if (!obj.contains(key)) {
    *st = InvalidArgumentError(path + key, "required key is missing");
    return nullptr;
  }
  return &obj.at(key);
}

// before / after / output: the five buffers as aiter wrote them.
Status ValidateOutput(const json& out, const std::string& path) {
  if (!out.is_object()) return InvalidArgumentError(path, "must be an object");
  Status st;
  for (const char* k : {"work_indptr", "reduce_indptr", "reduce_partial_map"}) {
    const json* v = Required(out, k, path + ".", &st);
    if (!v) return st;
    MLASIM_RETURN_IF_ERROR(Cells(*v, path + "." + k));
  }
  const json* wi = Required(out, "work_info", path + ".", &st);
  if (!wi) return st;
  if (!wi->is_array()) return InvalidArgumentError(path + ".work_info", "must be an array of rows");
  for (size_t w = 0; w < wi->size(); ++w)
    MLASIM_RETURN_IF_ERROR(
        Cells((*wi)[w], path + ".work_info[" + std::to_string(w) + "]", ref::kWorkInfoWidth));
  const json* fm = Required(out, "reduce_final_map", path + ".", &st);
  if (!fm) return st;
  if (!fm->is_object())
    return InvalidArgumentError(path + ".reduce_final_map", "must be an object of rows");
  for (auto it = fm->begin(); it != fm->end(); ++it) {
    const std::string key = it.key();
    const std::string p = path + ".reduce_final_map." + key;
    if (key.empty() || key.size() > 9 || key.find_first_not_of("0123456789") != std::string::npos)
      return InvalidArgumentError(p, "the key must be a row number (decimal, at most 9 digits)");
    MLASIM_RETURN_IF_ERROR(Cells(it.value(), p, ref::kReduceFinalMapWidth));
  }
  return OkStatus();
}

Status ValidateSizes(const json& rec) {
  Status st;
  const json* sizes = Required(rec, "sizes", "", &st);
  if (!sizes) return st;
  if (sizes->is_null() && rec.contains("error")) return OkStatus();  // aiter's sizing refused
  if (!sizes->is_object()) return InvalidArgumentError("sizes", "must be an object");
  for (ref::PlanBufferId id : ref::kInt32PlanBuffers) {
    const std::string name = SizeKey(ref::GetPlanBufferSpec(id));
    const json* v = Required(*sizes, name, "sizes.", &st);
    if (!v) return st;
    if (!sim::IsInt64(*v))
      return InvalidArgumentError("sizes." + name,
                                  sim::IntegerRangeReason(*v, INT64_MIN, INT64_MAX));
  }
  return OkStatus();
}

// derived: the keys CompareDerived reads, typed (the others are aiter's notes, not compared).
Status ValidateDerived(const json& rec) {
  Status st;
  const json* d = Required(rec, "derived", "", &st);
  if (!d) return st;
  if (!d->is_object()) return InvalidArgumentError("derived", "must be an object");
  for (const char* k :
       {"num_clusters", "fold_ratio", "packed_qo_len_per_wg", "num_splits", "planner_batches",
        "planner_heads", "topk_pages", "fixed_overhead_blocks", "tail_done_threshold", "num_works"})
    if (d->contains(k) && !sim::IsInt64(d->at(k)))
      return InvalidArgumentError(std::string("derived.") + k,
                                  sim::IntegerRangeReason(d->at(k), INT64_MIN, INT64_MAX));
  for (const char* k : {"qo_split", "parallel_planner_used"})
    if (d->contains(k) && !d->at(k).is_boolean())
      return InvalidArgumentError(std::string("derived.") + k, "must be true or false");
  return OkStatus();
}

// The update chain's keys of input: steps, update_max_seqlen_qo, new_kv_indptr and
// num_reject_tokens (flat lists for one step, a list per step else).
Status ValidateUpdateInput(const json& in) {
  Status st;
  for (const char* k : {"steps", "update_max_seqlen_qo"}) {
    const json* v = Required(in, k, "input.", &st);
    if (!v) return st;
    const int64_t hi = std::string(k) == "steps" ? 64 : INT32_MAX;
    if (std::string why = sim::IntegerRangeReason(*v, 1, hi); !why.empty())
      return InvalidArgumentError(std::string("input.") + k, why);
  }
  const int64_t steps = in.at("steps").get<int64_t>();
  for (const char* k : {"new_kv_indptr", "num_reject_tokens"}) {
    const json* v = Required(in, k, "input.", &st);
    if (!v) return st;
    const std::string p = std::string("input.") + k;
    if (v->is_null() && std::string(k) == "num_reject_tokens") continue;
    if (steps == 1) {
      MLASIM_RETURN_IF_ERROR(Cells(*v, p));
      continue;
    }
    if (!v->is_array() || static_cast<int64_t>(v->size()) != steps)
      return InvalidArgumentError(p, "must hold one list per step (" + std::to_string(steps) + ")");
    for (size_t i = 0; i < v->size(); ++i)
      if (!(*v)[i].is_null() || std::string(k) != "num_reject_tokens")
        MLASIM_RETURN_IF_ERROR(Cells((*v)[i], p + "[" + std::to_string(i) + "]"));
  }
  return OkStatus();
}

// Every part of a record a check reads, typed: id, error, sizes, derived, output (a plan record)
// or before / after and the update keys of input (a decode-update record). The request itself is
// parsed by CheckRecordLimits.
Status ValidateGoldenRecord(const json& rec) {
  if (rec.contains("id") && !sim::IsInt64(rec.at("id")))
    return InvalidArgumentError("id", sim::IntegerRangeReason(rec.at("id"), INT64_MIN, INT64_MAX));
  if (rec.contains("error") && !rec.at("error").is_string())
    return InvalidArgumentError("error", "must be a string (aiter's refusal)");
  if (rec.contains("before")) {
    if (!rec.at("input").is_object()) return InvalidArgumentError("input", "must be an object");
    MLASIM_RETURN_IF_ERROR(ValidateUpdateInput(rec.at("input")));
    MLASIM_RETURN_IF_ERROR(ValidateOutput(rec.at("before"), "before"));
    Status st;
    const json* after = Required(rec, "after", "", &st);
    if (!after) return st;
    return ValidateOutput(*after, "after");
  }
  MLASIM_RETURN_IF_ERROR(ValidateSizes(rec));
  if (rec.contains("error")) return OkStatus();  // no plan to compare
  MLASIM_RETURN_IF_ERROR(ValidateDerived(rec));
  Status st;
  const json* out = Required(rec, "output", "", &st);
  if (!out) return st;
  return ValidateOutput(*out, "output");
}

// A record's request against mlasim's limits (ref/limits.h) before it is planned: a 2 KB record
// must not make the planner allocate gigabytes. A record whose input cannot be read is malformed.
Status CheckRecordLimits(const json& rec, const std::string& where) {
  StatusOr<ref::PlanRequest> req = ParsePlanRequest(rec.at("input"), "input", true);
  if (!req.ok())
    return InvalidArgumentError(where + ": " + req.status().field(),
                                "malformed record: " + req.status().message());
  if (Status st = ref::CheckRequestLimits(*req); !st.ok())
    return InvalidArgumentError(where + ": input." + st.field(), st.message());
  if (!ref::ValidatePlanRequest(*req).ok()) return OkStatus();  // aiter refuses it too
  const int32_t batch = static_cast<int32_t>(req->kv_indptr.size()) - 1;
  StatusOr<ref::MetadataSizes> sizes = ref::GetMlaMetadataInfoV1(*req, batch);
  if (!sizes.ok()) return OkStatus();  // a sizing refusal is compared with the record's
  if (Status st = ref::CheckSizesLimit(*sizes); !st.ok())
    return InvalidArgumentError(where + ": input.kv_indptr", st.message());
  StatusOr<ref::PlanDerived> derived = ref::DecidePlan(*req, ref::PlannerChoice::kAiterDispatch);
  if (!derived.ok()) return OkStatus();
  if (Status st = ref::CheckPlannerLimits(*req, *derived); !st.ok())
    return InvalidArgumentError(where + ": input." + st.field(), st.message());
  return OkStatus();
}

}  // namespace

Status CheckGoldenLine(const std::string& line, const std::string& where, GoldenSummary* sum,
                       const std::function<void(const GoldenMismatch&)>& on_mismatch) {
  StatusOr<json> parsed = sim::ParseJsonStrict(line, where);
  if (!parsed.ok()) return parsed.status();
  const json& rec = *parsed;
  if (!rec.is_object() || !rec.contains("input") ||
      !(rec.contains("output") || rec.contains("after") || rec.contains("error")))
    return InvalidArgumentError(
        where,
        "not a golden record (an object with \"input\" and \"output\", \"after\" or \"error\")");
  if (Status st = ValidateGoldenRecord(rec); !st.ok())
    return InvalidArgumentError(where + ": " + st.field(), "malformed record: " + st.message());
  try {
    MLASIM_RETURN_IF_ERROR(CheckRecordLimits(rec, where));
  } catch (const json::exception& e) {
    return InvalidArgumentError(where, std::string("malformed record: ") + e.what());
  }
  ++sum->records;
  auto m = CheckGoldenRecord(rec);
  if (m &&
      m->buffer == "record")  // malformed (a missing or mistyped key): bad input, not a mismatch
    return InvalidArgumentError(where, m->detail);
  if (m) {
    on_mismatch(*m);
  } else {
    ++sum->matched;
  }
  return OkStatus();
}

StatusOr<GoldenSummary> CheckGoldenFile(
    const std::string& path, const std::function<void(const GoldenMismatch&)>& on_mismatch) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return InvalidArgumentError(path, "is a directory, not a golden corpus");
  auto input = InputFile::Open(path);  // plain .jsonl or .jsonl.xz
  if (!input.ok()) return input.status();
  std::istream& f = (*input)->stream();
  GoldenSummary sum;
  std::string line;
  int64_t lineno = 0;
  bool too_long = false;
  while (sim::ReadLineBounded(f, &line, &too_long) || too_long) {
    ++lineno;
    if (too_long)
      return InvalidArgumentError(path + ":" + std::to_string(lineno),
                                  "line is longer than the input_bytes limit, " +
                                      std::to_string(ref::Limit(ref::LimitId::kInputBytes)) +
                                      " bytes (not a corpus?; raise it with --limit "
                                      "input_bytes=N)");
    if (line.empty()) continue;
    const std::string where = path + ":" + std::to_string(lineno);
    if (Status st = CheckGoldenLine(line, where, &sum, on_mismatch); !st.ok()) {
      // A line cut short by truncated or corrupt xz data: the xz error says why.
      MLASIM_RETURN_IF_ERROR((*input)->status());
      return st;
    }
  }
  MLASIM_RETURN_IF_ERROR((*input)->status());  // truncated or corrupt .xz: not a short corpus
  return sum;
}

}  // namespace mlasim::io
