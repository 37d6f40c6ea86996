// One kernel call's contract over given buffers (sim/call_check.h): a one-call trace handed to
// the executor, so the contract semantics have one implementation (sim/executor.cpp).
#include "sim/call_check.h"

#include <algorithm>
#include <climits>

namespace mlasim::sim {
namespace {

Status CheckSize(const std::vector<int32_t>& v, int32_t width, const char* name) {
  if (static_cast<int64_t>(v.size()) > kMaxCallBufferElements)
    return InvalidArgumentError(name, std::to_string(v.size()) + " elements (limit " +
                                          std::to_string(kMaxCallBufferElements) + ")");
  if (v.size() % static_cast<size_t>(width) != 0)
    return InvalidArgumentError(
        name, std::to_string(v.size()) + " elements are not rows of " + std::to_string(width));
  return OkStatus();
}

void Fill(ref::Int32Buffer& b, const std::vector<int32_t>& v, int32_t width) {
  b.data.assign(v.begin(), v.end());  // cells stay empty: every element counts as written
  b.row_width = width;
}

// Whether a contract document names `buffer` outside its prose ("source" / "sources"): a
// program that plans for itself (FlashMLA's, FlashInfer's) never names aiter's plan buffers.
bool NamesBuffer(const nlohmann::json& j, const std::string& buffer) {
  if (j.is_string()) return j.get_ref<const std::string&>().find(buffer) != std::string::npos;
  if (j.is_array())
    return std::any_of(j.begin(), j.end(), [&](const auto& x) { return NamesBuffer(x, buffer); });
  if (!j.is_object()) return false;
  for (auto it = j.begin(); it != j.end(); ++it)
    if (it.key() != "source" && it.key() != "sources" && NamesBuffer(it.value(), buffer))
      return true;
  return false;
}

// The tensors each call kind needs to be checked at all (the rest are checked when given).
Status CheckRequired(const CallCheckInput& in) {
  const bool decode = in.contract->call == CallKind::kDecode;
  const std::vector<const char*> roles = decode
                                             ? std::vector<const char*>{"q", "o"}
                                             : std::vector<const char*>{"o", "logits", "attn_lse"};
  for (const char* r : roles) {
    const bool given = std::any_of(in.tensors.begin(), in.tensors.end(),
                                   [&](const CallTensor& t) { return t.role == r; });
    if (!given)
      return InvalidArgumentError(std::string("tensors.") + r,
                                  std::string("missing: a ") + CallKindName(in.contract->call) +
                                      " call's contract needs its extent");
  }
  const std::vector<std::pair<const char*, const std::vector<int32_t>*>> plan =
      decode ? std::vector<std::pair<const char*, const std::vector<int32_t>*>>{{"work_indptr",
                                                                                 &in.work_indptr},
                                                                                {"work_info",
                                                                                 &in.work_info}}
             : std::vector<std::pair<const char*, const std::vector<int32_t>*>>{
                   {"reduce_indptr", &in.reduce_indptr},
                   {"reduce_final_map", &in.reduce_final_map},
                   {"reduce_partial_map", &in.reduce_partial_map}};
  for (const auto& [name, v] : plan)
    if (v->empty() && NamesBuffer(in.contract->doc, name))
      return InvalidArgumentError(name, "missing (empty): the contract loads from it");
  return OkStatus();
}

// The tensor of `role` among the call's, or null.
const CallTensor* Role(const CallCheckInput& in, const char* role) {
  for (const CallTensor& t : in.tensors)
    if (t.role == role) return &t;
  return nullptr;
}

Status Validate(const CallCheckInput& in) {
  if (!in.contract) return InvalidArgumentError("contract", "no contract given");
  const CallKind k = in.contract->call;
  if (k != CallKind::kDecode && k != CallKind::kReduce)
    return InvalidArgumentError("contract", std::string("a ") + CallKindName(k) +
                                                " contract: only decode and reduce calls are "
                                                "checked against given buffers");
  MLASIM_RETURN_IF_ERROR(CheckSize(in.work_indptr, 1, "work_indptr"));
  MLASIM_RETURN_IF_ERROR(CheckSize(in.work_info, 8, "work_info"));
  MLASIM_RETURN_IF_ERROR(CheckSize(in.reduce_indptr, 1, "reduce_indptr"));
  MLASIM_RETURN_IF_ERROR(CheckSize(in.reduce_final_map, 2, "reduce_final_map"));
  MLASIM_RETURN_IF_ERROR(CheckSize(in.reduce_partial_map, 1, "reduce_partial_map"));
  MLASIM_RETURN_IF_ERROR(CheckSize(in.qo_indptr, 1, "qo_indptr"));
  MLASIM_RETURN_IF_ERROR(CheckSize(in.kv_indptr, 1, "kv_indptr"));
  MLASIM_RETURN_IF_ERROR(CheckSize(in.kv_last_page_lens, 1, "kv_last_page_lens"));
  for (const auto& [v, name] :
       {std::make_pair(in.fold_ratio, "fold_ratio"),
        std::make_pair(in.max_seqlen_q, "max_seqlen_q"), std::make_pair(in.page_size, "page_size")})
    if (v < 1) return InvalidArgumentError(name, std::to_string(v) + " (must be >= 1)");
  const auto& roles = CallRoles(k);
  std::vector<std::string> seen;
  for (const CallTensor& t : in.tensors) {
    const std::string f = "tensors." + t.role;
    if (std::find(roles.begin(), roles.end(), t.role) == roles.end())
      return InvalidArgumentError(
          f, std::string("a ") + CallKindName(k) + " call passes no tensor of this name");
    if (std::find(seen.begin(), seen.end(), t.role) != seen.end())
      return InvalidArgumentError(f, "given twice");
    seen.push_back(t.role);
    if (t.rows < 0 || t.rows > kMaxCallBufferElements || t.heads < 1 || t.cols < 1 ||
        t.elem_bytes < 1)
      return InvalidArgumentError(
          f, "rows " + std::to_string(t.rows) + ", heads " + std::to_string(t.heads) + ", cols " +
                 std::to_string(t.cols) + ": rows must be in [0, 2^26], the others >= 1");
  }
  if (!in.kv_indices_values.empty()) {
    const CallTensor* idx = Role(in, "kv_indices");
    if (!idx || idx->rows != static_cast<int64_t>(in.kv_indices_values.size()))
      return InvalidArgumentError(
          "kv_indices",
          std::to_string(in.kv_indices_values.size()) + " values given for " +
              (idx ? std::to_string(idx->rows) + " elements" : "no kv_indices tensor"));
  }
  return CheckRequired(in);
}

// The page table as the executor's index contents: runs of consecutive pages inside the cache
// as segments (a range of KV rows each), every other value explicit (checked one by one with the
// contract's invalid_index) but `masked`, which holds nothing a gather reads.
std::shared_ptr<const IndexContent> PageTableContent(const std::vector<int32_t>& v, int64_t pages,
                                                     std::optional<int32_t> masked) {
  auto c = std::make_shared<IndexContent>();
  const auto inside = [pages](int64_t x) { return x >= 0 && x < pages; };
  for (size_t i = 0; i < v.size();) {
    if (!inside(v[i])) {
      if (v[i] != masked) c->values.push_back({static_cast<int64_t>(i), v[i]});
      ++i;
      continue;
    }
    size_t j = i + 1;
    while (j < v.size() && inside(v[j]) && int64_t{v[j]} == int64_t{v[j - 1]} + 1) ++j;
    c->segments.push_back({static_cast<int64_t>(i), static_cast<int64_t>(j), v[i]});
    i = j;
  }
  c->sorted_disjoint = true;
  return c;
}

}  // namespace

StatusOr<std::vector<Violation>> CheckCall(const CallCheckInput& in) {
  MLASIM_RETURN_IF_ERROR(Validate(in));
  Trace t;
  PlanSnapshot snap;
  snap.name = in.call;
  ref::Plan& p = snap.plan;
  Fill(p.work_indptr, in.work_indptr, 1);
  Fill(p.work_info, in.work_info, 8);
  Fill(p.reduce_indptr, in.reduce_indptr, 1);
  Fill(p.reduce_final_map, in.reduce_final_map, 2);
  Fill(p.reduce_partial_map, in.reduce_partial_map, 1);
  p.derived.fold_ratio = in.fold_ratio;
  p.derived.num_clusters =
      in.num_clusters >= 0 ? in.num_clusters
                           : std::max<int32_t>(static_cast<int32_t>(in.work_indptr.size()) - 1, 0);
  p.derived.num_works = in.work_indptr.empty() ? 0 : std::max(in.work_indptr.back(), 0);
  snap.request.qo_indptr = in.qo_indptr;
  snap.request.uni_seqlen_qo = 0;  // the call's qo_indptr as passed (sim/kernel_request.h)
  snap.request.kv_indptr = in.kv_indptr;
  snap.request.kv_last_page_lens = in.kv_last_page_lens;
  t.plans.push_back(std::move(snap));
  Call c;
  c.name = in.call;
  c.step = "call";
  c.kind = in.contract->call;
  c.kernel = in.contract->variant;
  c.contract = in.contract;
  c.plan = 0;
  c.max_seqlen_q = in.max_seqlen_q;
  c.page_size = in.page_size;
  c.launch_grid = in.launch_grid;
  for (const CallTensor& x : in.tensors) {
    TensorArg a;
    a.role = a.buffer = x.role;
    a.rows = x.rows;
    a.heads = x.heads;
    a.cols = x.cols;
    a.elem_bytes = x.elem_bytes;
    a.row_bytes = int64_t{x.heads} * x.cols * x.elem_bytes;
    if (x.role == "q") c.q_rows = static_cast<int32_t>(x.rows / in.fold_ratio);
    if (x.role == "o") c.o_rows = static_cast<int32_t>(x.rows / in.fold_ratio);
    c.args.push_back(std::move(a));
  }
  t.calls.push_back(std::move(c));
  const CallTensor* kv = Role(in, "kv_cache");
  if (!in.kv_indices_values.empty() && kv)
    t.index_contents.push_back(
        {"kv_indices",
         PageTableContent(in.kv_indices_values, kv->rows / in.page_size, in.kv_indices_masked)});
  Scenario s;
  ExecuteOptions opt;
  opt.capture_layout = false;
  ExecutionResult r = Execute(s, t, opt);
  std::vector<Violation> out;
  // A walk past loop_trips / call_trips is kept too: the executor runs none of its trips, so the
  // accesses past a buffer it would make are not among the out-of-bounds ones (a work_indptr
  // entry of 2^31 - 1 was clean, one of 1000 a finding). A contract bound's hang is not: its
  // bound reads extents this call may not have (the KV-block bound over index_rows, 0 without
  // kv_indices).
  for (Violation& v : r.violations)
    if (v.kind == ViolationKind::kOutOfBounds ||
        (v.kind == ViolationKind::kUnboundedLoop && v.beyond_limits))
      out.push_back(std::move(v));
  return out;
}

std::string CallViolationText(const std::string& call, const Contract& contract, const Violation& v,
                              size_t max_items) {
  if (v.kind == ViolationKind::kUnboundedLoop)
    return call + " (" + contract.name + ") does not finish: " + v.detail;
  const bool before = v.rows_before_start > 0;
  const int64_t n = before ? v.rows_before_start : v.rows_past_end;
  std::string works;
  for (size_t i = 0; i < v.work_items.size() && i < max_items; ++i)
    works += (works.empty() ? "" : ", ") + std::to_string(v.work_items[i]);
  if (v.work_items.size() > max_items) works += ", ...";
  const char* who = contract.call == CallKind::kReduce ? "tile" : "work item";
  return call + " (" + contract.name + ") " + (v.access == Access::kWrite ? "writes " : "reads ") +
         v.buffer + " rows " + std::to_string(v.first_row) + ".." + std::to_string(v.last_row) +
         " of " + std::to_string(v.rows) + ": " + std::to_string(n) + " row" + (n == 1 ? "" : "s") +
         (before ? " before its start (" : " past its end (") +
         std::to_string(v.work_items.size()) + " " + who + (v.work_items.size() == 1 ? "" : "s") +
         (works.empty() ? "" : ": " + works) + ")";
}

StatusOr<CallKind> CallKindOf(const std::string& call, const std::string& kind,
                              const std::string& field) {
  if (!kind.empty()) return ParseCallKind(kind, field);
  // aiter's planner entry points first: decode_update_mla_metadata_v1 is no decode.
  if (call.find("metadata") != std::string::npos)
    return call.find("update") != std::string::npos ? CallKind::kPlanUpdate : CallKind::kPlanBuild;
  if (call.find("reduce") != std::string::npos) return CallKind::kReduce;
  if (call.find("decode") != std::string::npos) return CallKind::kDecode;
  return InvalidArgumentError(
      field, "unknown call kind of call '" + call + "': name it (decode or reduce)");
}

bool NamesContractFile(const std::string& contract) {
  return contract.find('/') != std::string::npos ||
         (contract.size() > 5 && contract.compare(contract.size() - 5, 5, ".json") == 0);
}

StatusOr<CallTensor> KvCacheTensor(const std::vector<int64_t>& shape, int32_t itemsize,
                                   const std::string& field) {
  if (shape.size() < 2 || shape.back() < 1)
    return InvalidArgumentError(field, "is not [..., D] (rank >= 2, D >= 1): its rows are unknown");
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) {
    if (shape[i] > 0 && rows > kMaxCallBufferElements / shape[i])
      return InvalidArgumentError(field, "holds more than " +
                                             std::to_string(kMaxCallBufferElements) +
                                             " rows, the most one call's check takes");
    rows *= shape[i];  // stays within kMaxCallBufferElements
  }
  CallTensor t;
  t.role = "kv_cache";
  t.rows = rows;
  t.cols = static_cast<int32_t>(std::min<int64_t>(shape.back(), INT32_MAX));
  t.elem_bytes = itemsize;
  return t;
}

StatusOr<std::shared_ptr<const Contract>> ResolveCallContract(CallKind kind,
                                                              const std::string& contract,
                                                              const std::string& field) {
  if (kind != CallKind::kDecode && kind != CallKind::kReduce)
    return InvalidArgumentError(field, std::string("a ") + CallKindName(kind) +
                                           " call is not checked (decode and reduce are)");
  if (!NamesContractFile(contract)) {
    const std::string v =
        contract.empty() ? (kind == CallKind::kDecode ? "asm" : "mla_reduce_v1") : contract;
    return BuiltinContract(kind, v, field);
  }
  StatusOr<Contract> c = LoadContractFile(contract, field);
  if (!c.ok()) return c.status();
  if (c->call != kind)
    return InvalidArgumentError(field, contract + " is a contract for " + CallKindName(c->call) +
                                           " calls, not " + CallKindName(kind));
  return std::make_shared<const Contract>(std::move(*c));
}

StatusOr<CallTensor> CallTensorFromShape(const std::string& role, const std::vector<int64_t>& shape,
                                         int32_t itemsize, int32_t fold_ratio,
                                         const std::string& field) {
  for (int64_t d : shape)
    if (d < 0) return InvalidArgumentError(field, "a negative dimension");
  const bool folds = role == "q" || role == "o";
  // q and o are [tokens, heads, D] in every engine modelled; their heads fold into rows, which a
  // shape of another rank could not say (a 1-d or 2-d q was taken as rows of one head).
  if (folds && shape.size() != 3)
    return InvalidArgumentError(field, "must be [tokens, heads, D]: got " +
                                           std::to_string(shape.size()) + " dimension(s)");
  // Only the rows may be empty: a row of no element has no extent to check.
  for (size_t i = 1; i < shape.size(); ++i)
    if (shape[i] == 0 && role != "kv_indices" && role != "indices")
      return InvalidArgumentError(field, "dimension " + std::to_string(i) +
                                             " is 0: rows of no element");
  CallTensor t;
  t.role = role;
  t.elem_bytes = std::max(itemsize, 1);
  const int64_t fold = folds ? std::max(fold_ratio, 1) : 1;
  t.rows = shape.empty() ? 1 : shape[0] * fold;
  if (role == "kv_indices" || role == "indices") {  // flat: the contracts address elements
    for (size_t i = 1; i < shape.size(); ++i) t.rows *= shape[i];
    t.heads = t.cols = 1;
    return t;
  }
  int64_t heads = 1, cols = 1;
  if (shape.size() >= 3) {
    heads = shape[1];
    if (heads % fold != 0)
      return InvalidArgumentError(
          field, std::to_string(heads) + " heads do not fold by " + std::to_string(fold));
    heads /= fold;
  }
  for (size_t i = shape.size() >= 3 ? 2 : 1; i < shape.size(); ++i) cols *= shape[i];
  if (shape.size() == 2) cols = shape[1];
  if (heads > INT32_MAX || cols > INT32_MAX)
    return InvalidArgumentError(field, "a row of more than 2^31 elements");
  t.heads = static_cast<int32_t>(std::max<int64_t>(heads, 1));
  t.cols = static_cast<int32_t>(std::max<int64_t>(cols, 1));
  return t;
}

}  // namespace mlasim::sim
