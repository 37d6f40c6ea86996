// Kernel contracts of a case directory (tools/io/case_contracts.h): the captured call's contract
// run over its captured buffers and tensor extents through sim::CheckCall.
#include "tools/io/case_contracts.h"

#include <algorithm>

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

// The call's tensors (not plan buffers, not the KV cache: its rows are reached through index
// values a case does not model) that the case captured.
std::vector<const CaseTensor*> CallTensors(const CaseManifest& m, sim::CallKind kind) {
  std::vector<const CaseTensor*> out;
  for (const std::string& role : sim::CallRoles(kind)) {
    if (role == "kv_cache" || role.rfind("work_", 0) == 0 || role.rfind("reduce_", 0) == 0)
      continue;
    if (const CaseTensor* t = m.Find(role)) out.push_back(t);
  }
  return out;
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
StatusOr<std::shared_ptr<const sim::Contract>> CaseContract(const CaseManifest& m,
                                                            const std::string& manifest,
                                                            const CaseContractOptions& o) {
  const std::string kind_name = ConfigString(m, "call_kind");
  MLASIM_ASSIGN_OR_RETURN(
      sim::CallKind kind,
      sim::CallKindOf(m.call, kind_name,
                      manifest + (kind_name.empty() ? ":call" : ":config.call_kind")));
  std::string spec = o.contract, field = "--contract";
  if (spec.empty()) spec = ConfigString(m, "contract"), field = manifest + ":config.contract";
  if (spec.empty()) spec = ConfigString(m, "kernel"), field = manifest + ":config.kernel";
  return sim::ResolveCallContract(kind, spec, field);
}

}  // namespace

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
                          CaseContract(m, manifest, options));
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
