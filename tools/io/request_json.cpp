#include "tools/io/request_json.h"

#include <set>
#include <string>

#include "sim/json_input.h"

namespace mlasim::io {
namespace {

using nlohmann::json;

Status Type(const std::string& field, const char* want) {
  return InvalidArgumentError(field, std::string("must be ") + want);
}

// "must be an integer", or "is out of the 64-bit integer range (...)" for a number beyond 64 bits.
Status NotInt(const std::string& field, const json& v) {
  return InvalidArgumentError(field, sim::NotAnIntegerReason(v));
}

Status GetInt(const json& obj, const std::string& key, const std::string& path, int32_t* out) {
  const json& v = obj.at(key);
  if (!v.is_number_integer()) return NotInt(path + "." + key, v);
  if (!sim::IsInt64(v)) return Type(path + "." + key, "a 32-bit integer");
  const int64_t x = v.get<int64_t>();
  if (x < INT32_MIN || x > INT32_MAX) return Type(path + "." + key, "a 32-bit integer");
  *out = static_cast<int32_t>(x);
  return OkStatus();
}

Status GetIntArray(const json& obj, const std::string& key, const std::string& path,
                   std::vector<int32_t>* out) {
  const json& v = obj.at(key);
  if (!v.is_array()) return Type(path + "." + key, "an array of integers");
  out->clear();
  out->reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const json& e = v[i];
    if (!e.is_number_integer()) return NotInt(path + "." + key + "[" + std::to_string(i) + "]", e);
    if (!sim::IsInt64(e))
      return Type(path + "." + key + "[" + std::to_string(i) + "]", "a 32-bit integer");
    const int64_t x = e.get<int64_t>();
    if (x < INT32_MIN || x > INT32_MAX)
      return Type(path + "." + key + "[" + std::to_string(i) + "]", "a 32-bit integer");
    out->push_back(static_cast<int32_t>(x));
  }
  return OkStatus();
}

Status GetString(const json& obj, const std::string& key, const std::string& path,
                 std::string* out) {
  const json& v = obj.at(key);
  if (!v.is_string()) return Type(path + "." + key, "a string");
  *out = v.get<std::string>();
  return OkStatus();
}

Status GetBool(const json& obj, const std::string& key, const std::string& path, bool* out) {
  const json& v = obj.at(key);
  if (!v.is_boolean()) return Type(path + "." + key, "true or false");
  *out = v.get<bool>();
  return OkStatus();
}

json Cells(const ref::Int32Buffer& b, int64_t begin, int64_t end) {
  json a = json::array();
  for (int64_t i = begin; i < end; ++i) {
    if (b.cells[i] == ref::Cell::kUndefined)
      a.push_back(nullptr);
    else
      a.push_back(b.data[i]);
  }
  return a;
}

}  // namespace

namespace {

// Unknown keys and missing required keys.
Status CheckRequestKeys(const json& in, const std::string& path, bool allow_update_keys) {
  static const std::set<std::string> kKeys = {"target",
                                              "cu_count",
                                              "heads_per_head_k",
                                              "num_heads_k",
                                              "q_dtype",
                                              "kv_dtype",
                                              "page_size",
                                              "kv_granularity",
                                              "qlen",
                                              "max_seqlen_qo",
                                              "uni_seqlen_qo",
                                              "is_causal",
                                              "topk",
                                              "max_split_per_batch",
                                              "qo_indptr",
                                              "kv_indptr",
                                              "kv_last_page_lens",
                                              "revision",
                                              "is_cp_round_robin"};
  static const std::set<std::string> kUpdateKeys = {"num_reject_tokens", "new_kv_indptr", "steps",
                                                    "update_max_seqlen_qo"};
  for (auto it = in.begin(); it != in.end(); ++it) {
    if (kKeys.count(it.key())) continue;
    if (allow_update_keys && kUpdateKeys.count(it.key())) continue;
    return InvalidArgumentError(path + "." + it.key(), "unknown key");
  }
  for (const char* k :
       {"target", "cu_count", "heads_per_head_k", "q_dtype", "kv_dtype", "kv_indptr"}) {
    if (!in.contains(k)) return InvalidArgumentError(path + "." + k, "required key is missing");
  }
  return OkStatus();
}

// The enum-valued keys, through ref's name tables.
Status ParseRequestNames(const json& in, const std::string& path, ref::PlanRequest* r) {
  std::string s;
  MLASIM_RETURN_IF_ERROR(GetString(in, "target", path, &s));
  MLASIM_ASSIGN_OR_RETURN(r->target, ref::ParseArch(s, path + ".target"));
  if (in.contains("revision")) {
    MLASIM_RETURN_IF_ERROR(GetString(in, "revision", path, &s));
    MLASIM_ASSIGN_OR_RETURN(r->revision, ref::ParseRevision(s, path + ".revision"));
  }
  MLASIM_RETURN_IF_ERROR(GetString(in, "q_dtype", path, &s));
  MLASIM_ASSIGN_OR_RETURN(r->q_dtype, ref::ParseDType(s, path + ".q_dtype"));
  MLASIM_RETURN_IF_ERROR(GetString(in, "kv_dtype", path, &s));
  MLASIM_ASSIGN_OR_RETURN(r->kv_dtype, ref::ParseDType(s, path + ".kv_dtype"));
  return OkStatus();
}

// The integer and boolean keys (optional ones keep get_mla_metadata_v1's defaults).
Status ParseRequestScalars(const json& in, const std::string& path, ref::PlanRequest* r) {
  MLASIM_RETURN_IF_ERROR(GetInt(in, "cu_count", path, &r->cu_count));
  if (r->cu_count < 1) return InvalidArgumentError(path + ".cu_count", "must be >= 1");
  MLASIM_RETURN_IF_ERROR(GetInt(in, "heads_per_head_k", path, &r->heads_per_head_k));
  const std::pair<const char*, int32_t*> optional_ints[] = {{"num_heads_k", &r->num_heads_k},
                                                            {"page_size", &r->page_size},
                                                            {"kv_granularity", &r->kv_granularity},
                                                            {"max_seqlen_qo", &r->max_seqlen_qo}};
  for (const auto& [key, dest] : optional_ints)
    if (in.contains(key)) MLASIM_RETURN_IF_ERROR(GetInt(in, key, path, dest));
  r->uni_seqlen_qo = r->max_seqlen_qo;
  r->qlen = r->max_seqlen_qo;
  if (in.contains("uni_seqlen_qo"))
    MLASIM_RETURN_IF_ERROR(GetInt(in, "uni_seqlen_qo", path, &r->uni_seqlen_qo));
  if (in.contains("qlen")) MLASIM_RETURN_IF_ERROR(GetInt(in, "qlen", path, &r->qlen));
  if (in.contains("is_causal"))
    MLASIM_RETURN_IF_ERROR(GetBool(in, "is_causal", path, &r->is_causal));
  if (in.contains("is_cp_round_robin"))
    MLASIM_RETURN_IF_ERROR(GetBool(in, "is_cp_round_robin", path, &r->is_cp_round_robin));
  if (in.contains("topk")) MLASIM_RETURN_IF_ERROR(GetInt(in, "topk", path, &r->topk));
  if (in.contains("max_split_per_batch"))
    MLASIM_RETURN_IF_ERROR(GetInt(in, "max_split_per_batch", path, &r->max_split_per_batch));
  return OkStatus();
}

// kv_indptr, then qo_indptr and kv_last_page_lens sized by it (or defaulted).
Status ParseRequestArrays(const json& in, const std::string& path, ref::PlanRequest* r) {
  MLASIM_RETURN_IF_ERROR(GetIntArray(in, "kv_indptr", path, &r->kv_indptr));
  if (r->kv_indptr.empty())
    return InvalidArgumentError(path + ".kv_indptr", "needs B+1 >= 1 entries");
  const size_t batch = r->kv_indptr.size() - 1;
  if (in.contains("qo_indptr")) {
    MLASIM_RETURN_IF_ERROR(GetIntArray(in, "qo_indptr", path, &r->qo_indptr));
    if (r->qo_indptr.size() != batch + 1)
      return InvalidArgumentError(path + ".qo_indptr", "needs " + std::to_string(batch + 1) +
                                                           " entries (kv_indptr has that many)");
  } else {
    for (size_t i = 0; i <= batch; ++i) r->qo_indptr.push_back(static_cast<int32_t>(i) * r->qlen);
  }
  if (in.contains("kv_last_page_lens")) {
    MLASIM_RETURN_IF_ERROR(GetIntArray(in, "kv_last_page_lens", path, &r->kv_last_page_lens));
    if (r->kv_last_page_lens.size() != batch)
      return InvalidArgumentError(path + ".kv_last_page_lens",
                                  "needs " + std::to_string(batch) + " entries (one per request)");
  } else if (r->page_size == 1) {
    r->kv_last_page_lens.assign(batch, 1);
  } else {
    return InvalidArgumentError(path + ".kv_last_page_lens",
                                "required when page_size > 1 (tokens in each last page)");
  }
  return OkStatus();
}

}  // namespace

StatusOr<ref::PlanRequest> ParsePlanRequest(const json& in, const std::string& path,
                                            bool allow_update_keys) {
  if (!in.is_object()) return Type(path, "an object");
  MLASIM_RETURN_IF_ERROR(CheckRequestKeys(in, path, allow_update_keys));
  ref::PlanRequest r;
  MLASIM_RETURN_IF_ERROR(ParseRequestNames(in, path, &r));
  MLASIM_RETURN_IF_ERROR(ParseRequestScalars(in, path, &r));
  MLASIM_RETURN_IF_ERROR(ParseRequestArrays(in, path, &r));
  return r;
}

json PlanRequestToJson(const ref::PlanRequest& r) {
  return json{{"target", ref::ArchName(r.target)},
              {"revision", ref::RevisionName(r.revision)},
              {"cu_count", r.cu_count},
              {"heads_per_head_k", r.heads_per_head_k},
              {"num_heads_k", r.num_heads_k},
              {"q_dtype", ref::DTypeName(r.q_dtype)},
              {"kv_dtype", ref::DTypeName(r.kv_dtype)},
              {"page_size", r.page_size},
              {"kv_granularity", r.kv_granularity},
              {"qlen", r.qlen},
              {"max_seqlen_qo", r.max_seqlen_qo},
              {"uni_seqlen_qo", r.uni_seqlen_qo},
              {"is_causal", r.is_causal},
              {"is_cp_round_robin", r.is_cp_round_robin},
              {"topk", r.topk},
              {"max_split_per_batch", r.max_split_per_batch},
              {"qo_indptr", r.qo_indptr},
              {"kv_indptr", r.kv_indptr},
              {"kv_last_page_lens", r.kv_last_page_lens}};
}

json PlanCheckToJson(const ref::PlanCheckReport& report, int64_t launch_grid,
                     bool launch_grid_given) {
  json diags = json::array();
  for (const ref::PlanDiagnostic& d : report.diagnostics)
    diags.push_back(json{{"severity", ref::SeverityName(d.severity)},
                         {"code", ref::PlanDiagName(d.code)},
                         {"buffer", d.buffer},
                         {"index", d.index},
                         {"tile", d.tile},
                         {"work", d.work},
                         {"message", d.message}});
  return json{{"ok", report.ok()},
              {"launch_grid", launch_grid},
              {"launch_grid_given", launch_grid_given},
              {"diagnostics", diags}};
}

std::string SizeKey(const ref::PlanBufferSpec& spec) {
  return std::string(spec.name) + (spec.row_width > 1 ? "_rows" : "");
}

json SizesToJson(const ref::MetadataSizes& s) {
  json out = json::object();
  for (const ref::PlanBufferSpec& spec : ref::kPlanBuffers) out[SizeKey(spec)] = s.Rows(spec.id);
  return out;
}

json PlanToJson(const ref::Plan& plan) {
  const ref::PlanDerived& d = plan.derived;
  json out;
  const int64_t clusters_end = std::min<int64_t>(d.num_clusters + 1, plan.work_indptr.size());
  out["work_indptr"] = Cells(plan.work_indptr, 0, clusters_end);
  json rows = json::array();
  for (int32_t w = 0; w < d.num_works && w < plan.work_info.rows(); ++w) {
    const int64_t base = int64_t{w} * ref::kWorkInfoWidth;
    rows.push_back(Cells(plan.work_info, base, base + ref::kWorkInfoWidth));
  }
  out["work_info"] = rows;
  out["reduce_indptr"] = Cells(plan.reduce_indptr, 0, plan.reduce_indptr.WrittenPrefix());
  // Written tiles only, each as {"tile": t, "pair": [qo_start, qo_end]} in tile order.
  json fmap = json::array();
  const ref::Int32Buffer& fm = plan.reduce_final_map;
  for (int64_t t = 0; t < fm.rows(); ++t) {
    const int64_t row = t * ref::kReduceFinalMapWidth;
    if (fm.written(row + ref::kFinalQoStart))
      fmap.push_back(json{{"tile", t}, {"pair", Cells(fm, row, row + ref::kReduceFinalMapWidth)}});
  }
  out["reduce_final_map"] = fmap;
  out["reduce_partial_map"] =
      Cells(plan.reduce_partial_map, 0, plan.reduce_partial_map.WrittenPrefix());
  out["sizes"] = SizesToJson(plan.sizes);
  out["derived"] = json{{"num_clusters", d.num_clusters},
                        {"fold_ratio", d.fold_ratio},
                        {"packed_qo_len_per_wg", d.packed_qo_len_per_wg},
                        {"qo_split", d.qo_split},
                        {"parallel_planner_used", d.parallel_planner_used},
                        {"num_splits", d.num_splits},
                        {"planner_batches", d.planner_batches},
                        {"planner_heads", d.planner_heads},
                        {"topk_pages", d.topk_pages},
                        {"fixed_overhead_blocks", d.fixed_overhead_blocks},
                        {"tail_done_threshold", d.tail_done_threshold},
                        {"num_works", d.num_works},
                        {"payload", d.payload}};
  json iv = json::array();
  for (const ref::InputViolation& v : plan.input_violations)
    iv.push_back(json{{"array", v.array},
                      {"index", v.index},
                      {"size", v.size},
                      {"work_row", v.work_row},
                      {"field", ref::WorkFieldName(v.work_field)}});
  out["input_violations"] = iv;
  return out;
}

}  // namespace mlasim::io
