#include "tests/ref/flashinfer_corpus.h"

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>

#include "ref/numerics.h"
#include "tests/ref/dialect_corpus.h"

namespace mlasim::test {
namespace {

namespace fi = ref::flashinfer;
using ref::SplitMix64;

constexpr uint64_t kGenerousIntBytes = 8 << 20;      // FlashInfer's default int workspace
constexpr uint64_t kGenerousFloatBytes = 128 << 20;  // FlashInfer's default float workspace

int32_t Range(SplitMix64& r, int32_t lo, int32_t hi) {
  return lo + static_cast<int32_t>(r.Below(static_cast<uint64_t>(hi - lo) + 1));
}
bool Chance(SplitMix64& r, int percent) {
  return r.Below(100) < static_cast<uint64_t>(percent);
}
int32_t Pick(SplitMix64& r, std::initializer_list<int32_t> v) {
  return *(v.begin() + r.Below(v.size()));
}

int32_t RandomKvLen(SplitMix64& r) {
  if (Chance(r, 10)) return 0;
  if (Chance(r, 15)) return Range(r, 1, 64);
  return Range(r, 1, 1 << Range(r, 7, 17));  // up to 128K tokens
}
int32_t RandomBatch(SplitMix64& r) {
  return Range(r, 1, 1 << Range(r, 0, 9));  // 1..512, small batches as likely as large
}
int32_t RandomNumSm(SplitMix64& r) {
  return Chance(r, 60) ? Pick(r, {132, 114, 78, 148, 108, 66, 16}) : Range(r, 1, 160);
}
int32_t RandomHeads(SplitMix64& r) {
  return Chance(r, 80) ? Pick(r, {16, 32, 64, 128, 8, 1}) : Range(r, 1, 128);
}
int32_t UniformQoLen(SplitMix64& r) {
  return Chance(r, 50) ? 1 : Range(r, 1, 8);
}

// q lengths and KV lengths of one batch of `kind`.
void FillBatch(SplitMix64& r, const std::string& kind, std::vector<int32_t>* qo,
               std::vector<int32_t>* kv) {
  if (kind == "overflow") {  // prefill-like: more than 16384 q tiles (tests the capacity)
    const int32_t b = Range(r, 60, 72), q = Range(r, 280, 320);  // >= 16800 tiles
    qo->assign(b, q);
    for (int32_t i = 0; i < b; ++i) kv->push_back(q + Range(r, 0, 4096));
    return;
  }
  const int32_t b = kind == "small-sm" ? Range(r, 1, 24) : RandomBatch(r);
  const int32_t u = UniformQoLen(r);
  for (int32_t i = 0; i < b; ++i) {
    qo->push_back(kind == "mixed" ? Range(r, 0, 8) : u);
    kv->push_back(RandomKvLen(r));
  }
  if (kind == "padded") {  // CUDA-graph padding to a captured size with zero-length pads
    const int32_t graph = std::max(b, Pick(r, {1, 2, 4, 8, 16, 24, 32, 64, 128, 256, 512}));
    const int32_t pad_qo = Chance(r, 70) ? u : 0;
    for (int32_t i = b; i < graph; ++i) {
      qo->push_back(pad_qo);
      kv->push_back(0);
    }
  }
}

std::string RandomKind(SplitMix64& r, int64_t index) {
  if (index % 199 == 7) return "overflow";
  const uint64_t x = r.Below(100);
  if (x < 45) return "decode";
  if (x < 65) return "padded";
  if (x < 80) return "mixed";
  if (x < 88) return "small-sm";
  if (x < 92) return "bad-qo";
  if (x < 97) return "small-workspace";
  return "big";
}

void SetWorkspaces(SplitMix64& r, const std::string& kind, FlashInferCase* c) {
  auto& in = c->input;
  auto need = fi::MLAPlanWorkspaceSize(in.num_sm, 1, in.head_dim_o);  // cluster 1: the larger
  const uint64_t int_need = need.ok() ? need->int_bytes : kGenerousIntBytes;
  const uint64_t float_need = need.ok() ? need->float_bytes : kGenerousFloatBytes;
  in.int_workspace_bytes = Chance(r, 80) ? kGenerousIntBytes : int_need;
  in.float_workspace_bytes = Chance(r, 80) ? kGenerousFloatBytes : float_need;
  if (kind == "small-workspace") {
    if (Chance(r, 50)) {
      in.int_workspace_bytes = r.Below(int_need);
    } else {
      in.float_workspace_bytes = r.Below(float_need / 2);
    }
  }
}

std::vector<int32_t> Prefix(const std::vector<int32_t>& v) {
  std::vector<int32_t> p(v.size() + 1, 0);
  for (size_t i = 0; i < v.size(); ++i) p[i + 1] = p[i] + v[i];
  return p;
}

template <typename T>
StatusOr<T> Get(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) return InvalidArgumentError(key, "missing");
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgumentError(key, e.what());
  }
}

std::string NormaliseField(const std::string& field) {
  return field.rfind("qo_indptr", 0) == 0 ? "qo_indptr" : field;
}

void CompareList(const std::string& name, const std::vector<int32_t>& e,
                 const std::vector<int32_t>& a, std::vector<std::string>* out) {
  if (e.size() != a.size()) {
    out->push_back(fmt::format("{}: {} entries, expected {}", name, a.size(), e.size()));
    return;
  }
  for (size_t i = 0; i < e.size(); ++i) {
    if (e[i] != a[i]) {
      out->push_back(fmt::format("{}[{}] = {}, expected {}", name, i, a[i], e[i]));
      return;
    }
  }
}

}  // namespace

FlashInferCase RandomFlashInferCase(uint64_t seed, int64_t index) {
  SplitMix64 r = SplitMix64::Stream(seed, static_cast<uint64_t>(index));
  FlashInferCase c;
  c.kind = RandomKind(r, index);
  c.page_size = Pick(r, {1, 16, 32, 64});
  std::vector<int32_t> qo, kv;
  FillBatch(r, c.kind, &qo, &kv);
  auto& in = c.input;
  in.num_heads = c.kind == "overflow" || c.kind == "big" ? 128 : RandomHeads(r);
  if (c.kind == "big") {  // B = 512 x 8 q tokens x 128 heads
    qo.assign(512, 8);
    kv.resize(512, 4096);
  }
  in.num_sm = c.kind == "small-sm" ? Range(r, 1, 8) : RandomNumSm(r);
  in.causal = Chance(r, 50);
  in.head_dim_o = Chance(r, 90) ? 512 : 128;
  in.qo_indptr = Prefix(qo);
  in.kv_len = kv;
  std::vector<int32_t> pages(kv.size());
  for (size_t i = 0; i < kv.size(); ++i) pages[i] = (kv[i] + c.page_size - 1) / c.page_size;
  in.kv_indptr = Prefix(pages);
  if (c.kind == "bad-qo") {  // one request with a negative q length: FlashInfer throws
    const size_t i = 1 + r.Below(qo.size());
    in.qo_indptr[i] = in.qo_indptr[i - 1] - 1;
  }
  // A 1-SM device cannot hold a 2-CTA cluster: FlashInfer would divide by zero (not a corpus case).
  if (in.num_sm == 1 && !fi::MLAPlanWorkspaceSize(in).ok() && c.kind != "bad-qo") in.num_sm = 2;
  SetWorkspaces(r, c.kind, &c);
  return c;
}

nlohmann::json CaseToJson(const FlashInferCase& c) {
  const auto& in = c.input;
  return {{"kind", c.kind},
          {"page_size", c.page_size},
          {"qo_indptr", in.qo_indptr},
          {"kv_indptr", in.kv_indptr},
          {"kv_len", in.kv_len},
          {"num_heads", in.num_heads},
          {"head_dim_o", in.head_dim_o},
          {"causal", in.causal},
          {"num_sm", in.num_sm},
          {"int_workspace_bytes", in.int_workspace_bytes},
          {"float_workspace_bytes", in.float_workspace_bytes}};
}

StatusOr<FlashInferCase> CaseFromJson(const nlohmann::json& j) {
  FlashInferCase c;
  auto& in = c.input;
  MLASIM_ASSIGN_OR_RETURN(c.kind, Get<std::string>(j, "kind"));
  MLASIM_ASSIGN_OR_RETURN(c.page_size, Get<int32_t>(j, "page_size"));
  MLASIM_ASSIGN_OR_RETURN(in.qo_indptr, Get<std::vector<int32_t>>(j, "qo_indptr"));
  MLASIM_ASSIGN_OR_RETURN(in.kv_indptr, Get<std::vector<int32_t>>(j, "kv_indptr"));
  MLASIM_ASSIGN_OR_RETURN(in.kv_len, Get<std::vector<int32_t>>(j, "kv_len"));
  MLASIM_ASSIGN_OR_RETURN(in.num_heads, Get<int32_t>(j, "num_heads"));
  MLASIM_ASSIGN_OR_RETURN(in.head_dim_o, Get<int32_t>(j, "head_dim_o"));
  MLASIM_ASSIGN_OR_RETURN(in.causal, Get<bool>(j, "causal"));
  MLASIM_ASSIGN_OR_RETURN(in.num_sm, Get<int32_t>(j, "num_sm"));
  MLASIM_ASSIGN_OR_RETURN(in.int_workspace_bytes, Get<uint64_t>(j, "int_workspace_bytes"));
  MLASIM_ASSIGN_OR_RETURN(in.float_workspace_bytes, Get<uint64_t>(j, "float_workspace_bytes"));
  return c;
}

int64_t ImageSlackBytes(const fi::MLAPlanInput& in) {
  int64_t tiles = 0;
  for (size_t i = 0; i + 1 < in.qo_indptr.size(); ++i) {
    const int64_t packed = int64_t{in.qo_indptr[i + 1] - in.qo_indptr[i]} * in.num_heads;
    tiles += (std::max<int64_t>(packed, 0) + fi::kCtaTileQ - 1) / fi::kCtaTileQ;
  }
  return 4 * (tiles + in.num_sm + 1);
}

FlashInferOutcome ReferenceOutcome(const fi::MLAPlanInput& in) {
  FlashInferOutcome o;
  const auto plan = fi::MLAPlan(in);
  if (!plan.ok()) {
    o.error_field = NormaliseField(plan.status().field());
    o.error = plan.status().ToString();
    return o;
  }
  o.ok = true;
  o.plan_info = fi::ToVector(plan->info);
  o.int_allocated_bytes = plan->int_allocated_bytes;
  o.total_num_works = plan->total_num_works();
  o.image_bytes = plan->int_allocated_bytes + ImageSlackBytes(in);
  const fi::IntWorkspaceImage image = fi::RenderIntWorkspace(*plan, o.image_bytes);
  o.image_fnv1a64 = Hex64(Fnv1a64(image.bytes.data(), image.bytes.size()));
  if (plan->overflows.empty())
    for (const fi::IntListSpec& spec : fi::kIntLists) o.lists[spec.region] = (*plan).*spec.list;
  return o;
}

FlashInferOutcome OutcomeFromImage(const fi::MLAPlanInput& in,
                                   const std::vector<int64_t>& plan_info,
                                   const std::vector<uint8_t>& image, int64_t copied_bytes) {
  FlashInferOutcome o;
  o.ok = true;
  o.plan_info = plan_info;
  o.int_allocated_bytes = copied_bytes;
  o.image_bytes = std::min<int64_t>(copied_bytes + ImageSlackBytes(in), image.size());
  o.image_fnv1a64 = Hex64(Fnv1a64(image.data(), o.image_bytes));
  const auto info = fi::FromVector(plan_info);
  if (!info.ok()) return o;
  auto read = [&](int64_t offset, int64_t n) {
    std::vector<int32_t> v;
    for (int64_t k = 0; k < n && offset + 4 * k + 4 <= static_cast<int64_t>(image.size()); ++k) {
      uint32_t u = 0;
      for (int b = 0; b < 4; ++b) u |= uint32_t{image[offset + 4 * k + b]} << (8 * b);
      v.push_back(static_cast<int32_t>(u));
    }
    return v;
  };
  const int64_t num_clusters = info->num_blks_y;
  const auto work_indptr = read(info->work_indptr_offset, num_clusters + 1);
  o.total_num_works = work_indptr.empty() ? 0 : work_indptr.back();
  if (o.total_num_works > fi::kMaxTotalNumWorks) return o;
  for (const fi::IntListSpec& spec : fi::kIntLists) {
    int64_t n = spec.capacity == fi::ListCapacity::kNumSm ? in.num_sm : o.total_num_works;
    if (spec.list == &fi::MLAPlanResult::work_indptr) n = num_clusters + 1;
    o.lists[spec.region] = read((*info).*spec.offset, n);
  }
  return o;
}

std::string ErrorFieldOfFlashInferMessage(const std::string& what) {
  const std::string key = "allocating memory for ";
  const size_t at = what.find(key);
  if (at != std::string::npos) {
    const size_t start = at + key.size();
    return what.substr(start, what.find(' ', start) - start);
  }
  if (what.find("qo_indptr[") != std::string::npos) return "qo_indptr";
  return what;
}

std::string StripFlashInferErrorLocation(const std::string& what) {
  const std::string head = "Error in function '";
  if (what.rfind(head, 0) != 0) return what;
  const size_t at = what.find("' at ");
  const size_t colon = at == std::string::npos ? at : what.find(": ", at);
  return colon == std::string::npos ? what : what.substr(colon + 2);
}

nlohmann::json OutcomeToJson(const FlashInferOutcome& o) {
  if (!o.ok) return {{"ok", false}, {"error_field", o.error_field}, {"error", o.error}};
  nlohmann::json j = {{"ok", true},
                      {"plan_info", o.plan_info},
                      {"int_allocated_bytes", o.int_allocated_bytes},
                      {"total_num_works", o.total_num_works},
                      {"image_bytes", o.image_bytes},
                      {"image_fnv1a64", o.image_fnv1a64}};
  if (!o.lists.empty()) j["lists"] = o.lists;
  return j;
}

StatusOr<FlashInferOutcome> OutcomeFromJson(const nlohmann::json& j) {
  FlashInferOutcome o;
  MLASIM_ASSIGN_OR_RETURN(o.ok, Get<bool>(j, "ok"));
  if (!o.ok) {
    MLASIM_ASSIGN_OR_RETURN(o.error_field, Get<std::string>(j, "error_field"));
    MLASIM_ASSIGN_OR_RETURN(o.error, Get<std::string>(j, "error"));
    return o;
  }
  MLASIM_ASSIGN_OR_RETURN(o.plan_info, Get<std::vector<int64_t>>(j, "plan_info"));
  MLASIM_ASSIGN_OR_RETURN(o.int_allocated_bytes, Get<int64_t>(j, "int_allocated_bytes"));
  MLASIM_ASSIGN_OR_RETURN(o.total_num_works, Get<int64_t>(j, "total_num_works"));
  MLASIM_ASSIGN_OR_RETURN(o.image_bytes, Get<int64_t>(j, "image_bytes"));
  MLASIM_ASSIGN_OR_RETURN(o.image_fnv1a64, Get<std::string>(j, "image_fnv1a64"));
  if (j.contains("lists")) {
    using Lists = std::map<std::string, std::vector<int32_t>>;
    MLASIM_ASSIGN_OR_RETURN(o.lists, Get<Lists>(j, "lists"));
  }
  return o;
}

std::vector<std::string> CompareOutcomes(const FlashInferOutcome& e, const FlashInferOutcome& a) {
  std::vector<std::string> out;
  if (e.ok != a.ok) {
    out.push_back(fmt::format("ok = {}, expected {} ({}{})", a.ok, e.ok, e.error, a.error));
    return out;
  }
  if (!e.ok) {
    if (e.error_field != a.error_field)
      out.push_back(fmt::format("error names '{}', expected '{}' ({})", a.error_field,
                                e.error_field, e.error));
    return out;
  }
  if (e.plan_info != a.plan_info) out.push_back("plan_info differs");
  if (e.int_allocated_bytes != a.int_allocated_bytes)
    out.push_back(fmt::format("int_allocated_bytes {}, expected {}", a.int_allocated_bytes,
                              e.int_allocated_bytes));
  if (e.total_num_works != a.total_num_works)
    out.push_back(
        fmt::format("total_num_works {}, expected {}", a.total_num_works, e.total_num_works));
  if (e.image_bytes != a.image_bytes || e.image_fnv1a64 != a.image_fnv1a64)
    out.push_back(fmt::format("image {} bytes {}, expected {} bytes {}", a.image_bytes,
                              a.image_fnv1a64, e.image_bytes, e.image_fnv1a64));
  if (e.lists.empty()) return out;  // the corpus lists small plans only; the image covers all
  if (e.lists.size() != a.lists.size())
    out.push_back(fmt::format("{} lists, expected {}", a.lists.size(), e.lists.size()));
  for (const auto& [name, values] : e.lists) {
    auto it = a.lists.find(name);
    if (it == a.lists.end()) {
      out.push_back(name + " missing");
    } else {
      CompareList(name, values, it->second, &out);
    }
  }
  return out;
}

}  // namespace mlasim::test
