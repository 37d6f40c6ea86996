#include "tools/io/case_plan.h"

#include <cstdlib>
#include <cstring>

#include "ref/limits.h"
#include "tools/io/request_json.h"

namespace mlasim::io {
namespace {

using nlohmann::json;

// The planner's input arrays, which come from tensors (never from config.planner).
constexpr const char* kRequestArrays[] = {"qo_indptr", "kv_indptr", "kv_last_page_lens"};

// Entries of a planner input array: mlasim plan's request limit (2^20 requests) plus one.
// kv_indptr-like arrays: ref/limits.h requests, plus one.
int64_t MaxArrayEntries() {
  return ref::Limit(ref::LimitId::kRequests) + 1;
}

// ParsePlanRequest names array fields "<prefix>.kv_indptr[3]": here they come from tensors.
Status RenameArrayField(const Status& st, const std::string& prefix, const std::string& manifest) {
  for (const char* a : kRequestArrays) {
    const std::string p = prefix + "." + a;
    if (st.field().rfind(p, 0) == 0)
      return InvalidArgumentError(manifest + ":tensors." + a + st.field().substr(p.size()),
                                  st.message());
  }
  return st;
}

StatusOr<std::optional<std::vector<int32_t>>> ReadArray(const CaseFiles& files,
                                                        const CaseManifest& m,
                                                        const std::string& name,
                                                        const CaseLimits& limits) {
  MLASIM_ASSIGN_OR_RETURN(const CaseTensor* t, FindPlannerTensor(m, files, name));
  if (!t) return std::optional<std::vector<int32_t>>();
  if (!t->shape.empty() && t->shape[0] > MaxArrayEntries())
    return InvalidArgumentError(files.Display(kCaseManifestName) + ":tensors." + t->name + ".shape",
                                "holds " + std::to_string(t->shape[0]) +
                                    " entries, above mlasim's limit of " +
                                    std::to_string(MaxArrayEntries()) +
                                    " (requests + 1; raise it with --limit requests=N)");
  MLASIM_ASSIGN_OR_RETURN(std::vector<int32_t> v,
                          ReadInt32Tensor(files, *t, {1}, "get_mla_metadata_v1's " + name, limits));
  return std::optional<std::vector<int32_t>>(std::move(v));
}

Status ReadRequest(const CaseFiles& files, const CaseManifest& m, const CaseLimits& limits,
                   CasePlanner& out) {
  const std::string manifest = files.Display(kCaseManifestName);
  const std::string prefix = manifest + ":config.planner";
  if (!m.config.contains("planner")) {
    out.missing_request = "config.planner (get_mla_metadata_v1's scalar arguments)";
    return OkStatus();
  }
  const json& p = m.config.at("planner");
  if (!p.is_object())
    return InvalidArgumentError(prefix,
                                "must be an object of get_mla_metadata_v1's scalar "
                                "arguments (mlasim.planner_config)");
  for (const char* a : kRequestArrays)
    if (p.contains(a))
      return InvalidArgumentError(prefix + "." + a, std::string("comes from the captured tensor ") +
                                                        a + ", not from config.planner");
  json input = p;
  for (const char* a : kRequestArrays) {
    MLASIM_ASSIGN_OR_RETURN(const std::optional<std::vector<int32_t>> v,
                            ReadArray(files, m, a, limits));
    if (v) input[a] = *v;
  }
  if (!input.contains("kv_indptr")) {
    out.missing_request = "the tensor kv_indptr (alias seqlens_kv_indptr)";
    return OkStatus();
  }
  StatusOr<ref::PlanRequest> r = ParsePlanRequest(input, prefix);
  if (!r.ok()) return RenameArrayField(r.status(), prefix, manifest);
  out.request = std::move(*r);
  return OkStatus();
}

Status ReadBuffers(const CaseFiles& files, const CaseManifest& m, const CaseLimits& limits,
                   CasePlanner& out) {
  const std::string manifest = files.Display(kCaseManifestName);
  std::vector<std::vector<int32_t>> buffers;
  std::string missing;
  for (const std::string& name : PlanBufferNames()) {
    MLASIM_ASSIGN_OR_RETURN(const CaseTensor* t, FindPlannerTensor(m, files, name));
    if (!t) {
      missing += (missing.empty() ? "" : ", ") + name;
      continue;
    }
    const int32_t width = name == "work_info" ? 8 : name == "reduce_final_map" ? 2 : 0;
    const std::string purpose = "aiter's " + name;
    MLASIM_ASSIGN_OR_RETURN(std::vector<int32_t> v,
                            ReadInt32Tensor(files, *t, {width ? 2 : 1}, purpose, limits));
    if (width && t->shape[1] != width)
      return InvalidArgumentError(manifest + ":tensors." + t->name + ".shape",
                                  NpyShapeString(t->shape) + ": " + purpose + " has rows of " +
                                      std::to_string(width) + " int32");
    buffers.push_back(std::move(v));
  }
  if (missing.empty())
    out.buffers = std::move(buffers);
  else
    out.missing_buffers = missing;
  MLASIM_ASSIGN_OR_RETURN(const CaseTensor* ptrs,
                          FindPlannerTensor(m, files, "work_metadata_ptrs"));
  if (ptrs) {
    const std::string entry = manifest + ":tensors." + ptrs->name;
    if (ptrs->dtype != "uint64" && ptrs->dtype != "int64")
      return InvalidArgumentError(entry + ".dtype", "is " + ptrs->dtype +
                                                        "; work_metadata_ptrs holds two uint64 "
                                                        "pointers (int64 where torch has no "
                                                        "uint64)");
    if (ptrs->shape != std::vector<int64_t>{2})
      return InvalidArgumentError(
          entry + ".shape", NpyShapeString(ptrs->shape) + "; work_metadata_ptrs has shape (2,)");
    MLASIM_ASSIGN_OR_RETURN(const std::string bytes, ReadTensorData(files, *ptrs, limits));
    std::vector<uint64_t> v(2);
    std::memcpy(v.data(), bytes.data(), 16);
    out.work_metadata_ptrs = v;
  }
  return OkStatus();
}

}  // namespace

const std::vector<PlannerTensorName>& PlannerTensorNames() {
  static const std::vector<PlannerTensorName> kNames = {
      {"qo_indptr", "seqlens_qo_indptr", "q rows per request, cumulative [B+1]"},
      {"kv_indptr", "seqlens_kv_indptr", "KV pages per request, cumulative [B+1]"},
      {"kv_last_page_lens", nullptr, "tokens in each request's last page [B]"},
      {"work_metadata_ptrs", "work_meta_data", "&work_indptr[0], &work_info[0] (uint64 [2])"},
      {"work_indptr", nullptr, "work items per cluster, cumulative"},
      {"work_info", "work_info_set", "MlaWorkInfo rows [rows, 8]"},
      {"reduce_indptr", nullptr, "partial pieces per q tile, cumulative"},
      {"reduce_final_map", nullptr, "(qo_start, qo_end) per split q tile [tiles, 2]"},
      {"reduce_partial_map", nullptr, "partial row of each piece"},
  };
  return kNames;
}

StatusOr<const CaseTensor*> FindPlannerTensor(const CaseManifest& m, const CaseFiles& files,
                                              const std::string& name) {
  const char* alias = nullptr;
  for (const PlannerTensorName& n : PlannerTensorNames())
    if (name == n.name) alias = n.alias;
  const CaseTensor* t = m.Find(name);
  const CaseTensor* a = alias ? m.Find(alias) : nullptr;
  if (t && a)
    return InvalidArgumentError(files.Display(kCaseManifestName) + ":tensors." + alias,
                                "names the same buffer as tensors." + name + "; capture one");
  return t ? t : a;
}

PlanBufferViews CasePlanner::views() const {
  PlanBufferViews v;
  if (!buffers) return v;
  const auto view = [&](size_t i) {
    return Int32View{(*buffers)[i].data(), static_cast<int64_t>((*buffers)[i].size())};
  };
  v.work_indptr = view(0);
  v.work_info = view(1);
  v.reduce_indptr = view(2);
  v.reduce_final_map = view(3);
  v.reduce_partial_map = view(4);
  return v;
}

StatusOr<CasePlanner> ReadCasePlanner(const CaseFiles& files, const CaseManifest& manifest,
                                      const CaseLimits& limits) {
  CasePlanner out;
  MLASIM_RETURN_IF_ERROR(ReadRequest(files, manifest, limits, out));
  MLASIM_RETURN_IF_ERROR(ReadBuffers(files, manifest, limits, out));
  return out;
}

json CaseLayout(const CaseManifest& m) {
  json allocations = json::array();
  for (const CaseTensor& t : m.tensors) {
    const uint64_t below = static_cast<uint64_t>(-t.span_begin);
    if (t.nbytes == 0 || t.data_ptr == 0 || t.data_ptr < below) continue;
    const uint64_t base = t.data_ptr - below;
    const int64_t bytes = t.span_end - t.span_begin;
    if (base + static_cast<uint64_t>(bytes) < base) continue;
    int64_t row_bytes = t.itemsize;
    if (t.shape.size() >= 2 && t.strides[0] != 0) row_bytes = std::llabs(t.strides[0]) * t.itemsize;
    json a = {
        {"name", t.name}, {"base", HexAddress(base)}, {"bytes", bytes}, {"row_bytes", row_bytes}};
    if (t.shape.size() == 3 && t.shape[1] > 0 && t.shape[2] > 0 && t.strides[2] == 1 &&
        t.strides[1] == t.shape[2] && t.strides[0] == t.shape[1] * t.shape[2]) {
      a["heads"] = t.shape[1];
      a["cols"] = t.shape[2];
      a["elem_bytes"] = t.itemsize;
    }
    allocations.push_back(a);
  }
  return json{{"call_name", m.call}, {"allocations", allocations}};
}

}  // namespace mlasim::io
