// Kernel contracts of a case directory (tools/io/case_contracts.h): the captured call's contract
// run over its captured buffers and tensor extents through sim::CheckCall.
#include "tools/io/case_contracts.h"

#include <algorithm>
#include <filesystem>

#include "ref/planner.h"
#include "sim/call_check.h"

namespace mlasim::io {
namespace {

constexpr size_t kMaxWorkItemsShown = 8;

std::string ConfigString(const CaseManifest& m, const char* key) {
  const auto it = m.config.find(key);
  return it != m.config.end() && it->is_string() ? it->get<std::string>() : "";
}

// A captured plan buffer or planner array by name: from `planner` when it holds it, else read.
StatusOr<std::vector<int32_t>> PlanArray(const CaseFiles& files, const CaseManifest& m,
                                         const CasePlanner& planner, const std::string& name) {
  const auto& names = PlanBufferNames();
  const auto it = std::find(names.begin(), names.end(), name);
  if (it != names.end() && planner.buffers) return (*planner.buffers)[it - names.begin()];
  if (planner.request) {
    if (name == "qo_indptr") return planner.request->qo_indptr;
    if (name == "kv_indptr") return planner.request->kv_indptr;
    if (name == "kv_last_page_lens") return planner.request->kv_last_page_lens;
  }
  MLASIM_ASSIGN_OR_RETURN(const CaseTensor* t, FindPlannerTensor(m, files, name));
  if (!t) return std::vector<int32_t>{};
  const int32_t width = name == "work_info" ? 8 : name == "reduce_final_map" ? 2 : 0;
  return ReadInt32Tensor(files, *t, {width ? 2 : 1}, "aiter's " + name);
}

// The call's tensors that the case captured (not plan buffers; not the KV cache, which
// AddKvCache adds with the page table's values).
std::vector<const CaseTensor*> CallTensors(const CaseManifest& m, sim::CallKind kind) {
  std::vector<const CaseTensor*> out;
  for (const std::string& role : sim::CallRoles(kind)) {
    if (role == "kv_cache" || role.rfind("work_", 0) == 0 || role.rfind("reduce_", 0) == 0)
      continue;
    if (const CaseTensor* t = m.Find(role)) out.push_back(t);
  }
  return out;
}

// The KV cache as the contract's gathers read it (rows = KV tokens: every dimension but the
// last, which is the row's values) and the page table's values, when the case captured both: an
// int32 kv_indices and a KV cache (kv_buffer, kv_cache or kv) of rank >= 2 whose tokens are whole
// pages within the executor's bound. Otherwise the KV rows are left unchecked, as before. In
// aiter's native sparse mode (`sparse`: config.planner.topk >= 0) the index matrix marks its
// invalid entries -1 (aiter-mla-metadata.md §8.1, test_mla_sparse.py), which the kernel does not
// read: those entries are left out (no finding); any other value outside the cache is one.
// Returns why the KV rows are not checked when the case holds both tensors ("" when they are, or
// when it lacks one: nothing to say).
StatusOr<std::string> AddKvCache(const CaseFiles& files, const CaseManifest& m, bool sparse,
                                 sim::CallCheckInput& in) {
  const CaseTensor* idx = m.Find("kv_indices");
  const CaseTensor* kv = m.FindKvCache();
  if (!idx || !kv) return std::string();
  if (idx->dtype != "int32")
    return "kv_indices is " + idx->dtype + ", not the int32 page table the kernel reads";
  StatusOr<sim::CallTensor> t = sim::KvCacheTensor(kv->shape, kv->itemsize, kv->name);
  if (!t.ok()) return kv->name + " " + t.status().message();
  if (t->rows % in.page_size != 0)
    return kv->name + "'s " + std::to_string(t->rows) + " rows are not whole pages of " +
           std::to_string(in.page_size) + " tokens";
  MLASIM_ASSIGN_OR_RETURN(in.kv_indices_values,
                          ReadInt32Tensor(files, *idx, {}, "the page table the KV gathers read"));
  if (sparse) in.kv_indices_masked = -1;
  in.tensors.push_back(*t);
  return std::string();
}

ContractFinding ToFinding(const std::string& call, const sim::Contract& c,
                          const sim::Violation& v) {
  ContractFinding f;
  f.tensor = v.buffer;
  f.access = sim::AccessName(v.access);
  f.rows = v.rows;
  f.first_row = v.first_row;
  f.end_row = v.last_row + 1;
  f.rows_past_end = v.rows_past_end;
  f.rows_before_start = v.rows_before_start;
  f.work_items.assign(v.work_items.begin(),
                      v.work_items.begin() + std::min(v.work_items.size(), kMaxWorkItemsShown));
  f.work_item_count = static_cast<int64_t>(v.work_items.size());
  f.text = sim::CallViolationText(call, c, v, kMaxWorkItemsShown);
  return f;
}

// The contract the case's call runs under, and its kind.
StatusOr<std::shared_ptr<const sim::Contract>> CaseContract(const CaseFiles& files,
                                                            const CaseManifest& m,
                                                            const std::string& manifest,
                                                            const CaseContractOptions& o) {
  const std::string kind_name = ConfigString(m, "call_kind");
  MLASIM_ASSIGN_OR_RETURN(
      sim::CallKind kind,
      sim::CallKindOf(m.call, kind_name,
                      manifest + (kind_name.empty() ? ":call" : ":config.call_kind")));
  const CaseContractSpec c = CaseContractSpecOf(files, m, o);
  return sim::ResolveCallContract(kind, c.spec, c.field);
}

}  // namespace

CaseContractSpec CaseContractSpecOf(const CaseFiles& files, const CaseManifest& m,
                                    const CaseContractOptions& o) {
  const std::string manifest = files.Display(kCaseManifestName);
  if (!o.contract.empty()) return {o.contract, "--contract"};
  std::string spec = ConfigString(m, "contract");
  if (!spec.empty()) {
    if (sim::NamesContractFile(spec) && !files.Directory().empty() &&
        std::filesystem::path(spec).is_relative())
      spec = (std::filesystem::path(files.Directory()) / spec).string();
    return {spec, manifest + ":config.contract"};
  }
  return {ConfigString(m, "kernel"), manifest + ":config.kernel"};
}

StatusOr<ContractCheckResult> CheckCaseContracts(const CaseFiles& files, const CaseManifest& m,
                                                 const CasePlanner& planner,
                                                 const CaseContractOptions& options) {
  const std::string manifest = files.Display(kCaseManifestName);
  ContractCheckResult r;
  const bool named = !options.contract.empty() || !ConfigString(m, "kernel").empty() ||
                     !ConfigString(m, "contract").empty() || !ConfigString(m, "call_kind").empty();
  // A call of unknown kind with tensors a decode passes is an error below, not "not checked".
  StatusOr<sim::CallKind> guessed = sim::CallKindOf(m.call, ConfigString(m, "call_kind"), "call");
  if (!named && CallTensors(m, guessed.ok() ? *guessed : sim::CallKind::kDecode).empty()) {
    r.reason =
        "the case captures none of the call's tensors (q, o, logits, attn_lse, lse, "
        "kv_indices) and names no kernel (config.kernel) or contract (--contract)";
    return r;
  }
  MLASIM_ASSIGN_OR_RETURN(std::shared_ptr<const sim::Contract> contract,
                          CaseContract(files, m, manifest, options));
  sim::CallCheckInput in;
  in.call = m.call;
  in.contract = contract;
  if (planner.request) {
    in.max_seqlen_q = std::max(planner.request->max_seqlen_qo, 1);
    in.page_size = std::max(planner.request->page_size, 1);
    StatusOr<ref::PlanDerived> d =
        ref::DecidePlan(*planner.request, ref::PlannerChoice::kAiterDispatch);
    if (d.ok()) in.fold_ratio = std::max(d->fold_ratio, 1);
  }
  std::vector<int32_t>* arrays[] = {&in.work_indptr,      &in.work_info,          &in.reduce_indptr,
                                    &in.reduce_final_map, &in.reduce_partial_map, &in.qo_indptr,
                                    &in.kv_indptr,        &in.kv_last_page_lens};
  const char* names[] = {"work_indptr",        "work_info", "reduce_indptr", "reduce_final_map",
                         "reduce_partial_map", "qo_indptr", "kv_indptr",     "kv_last_page_lens"};
  for (size_t i = 0; i < 8; ++i) {
    MLASIM_ASSIGN_OR_RETURN(*arrays[i], PlanArray(files, m, planner, names[i]));
  }
  for (const CaseTensor* t : CallTensors(m, contract->call)) {
    MLASIM_ASSIGN_OR_RETURN(sim::CallTensor ct,
                            sim::CallTensorFromShape(t->name, t->shape, t->itemsize, in.fold_ratio,
                                                     manifest + ":tensors." + t->name + ".shape"));
    in.tensors.push_back(std::move(ct));
  }
  if (contract->call == sim::CallKind::kDecode) {
    MLASIM_ASSIGN_OR_RETURN(
        r.kv_rows_unchecked,
        AddKvCache(files, m, planner.request && planner.request->topk >= 0, in));
  }
  StatusOr<std::vector<sim::Violation>> v = sim::CheckCall(in);
  if (!v.ok() && !named && v.status().message().rfind("missing", 0) == 0) {
    // Tensors captured for something else (a fault address, the plan): said, not an error.
    r.reason = "the case lacks " + v.status().field() + " (" + v.status().message() +
               "); name the kernel (config.kernel or --contract) to make this an error";
    return r;
  }
  if (!v.ok()) {
    const std::string f = v.status().field();
    return InvalidArgumentError(manifest + ":" + (f.rfind("tensors.", 0) == 0 ? f : "tensors." + f),
                                v.status().message());
  }
  r.checked = true;
  r.contract = contract->name + " (" + contract->file + ")";
  for (const sim::Violation& x : *v) r.findings.push_back(ToFinding(m.call, *contract, x));
  return r;
}

}  // namespace mlasim::io
