#include "sim/engine.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <string>

#include "ref/decode_update.h"
#include "ref/planner.h"
#include "ref/sizing.h"

namespace mlasim::sim {
namespace {

int32_t Bytes(ref::DType d) {
  switch (d) {
    case ref::DType::kFp8: return 1;
    case ref::DType::kBf16:
    case ref::DType::kFp16: return 2;
    case ref::DType::kFp32: return 4;
  }
  return 4;
}

// q rows (tokens, all heads) a plan can touch: the highest qo_end, in unfolded rows (a folded
// plan addresses R rows of 16 heads per token, §10.3).
int32_t CoveredQRows(const ref::Plan& p) {
  int32_t rows = 0;
  // Work rows past work_info's capacity (a plan whose writes overflow its sizing, class D) were
  // never stored: only the rows the buffer holds count.
  const int64_t held = std::min<int64_t>(p.derived.num_works, p.work_info.size() / 8);
  for (int32_t w = 0; w < held; ++w)
    if (p.work_info.written(int64_t{w} * 8 + ref::kQoEnd))
      rows = std::max(rows, p.work(w, ref::kQoEnd));
  const int32_t fold = std::max(p.derived.fold_ratio, 1);
  return (rows + fold - 1) / fold;
}

std::string Step(int32_t draft) {
  return draft < 0 ? "verify" : "draft_step_" + std::to_string(draft);
}

// Builds the trace call by call.
class StepBuilder {
 public:
  StepBuilder(const Scenario& s, Trace& t, SimMutant m) : s_(s), t_(t), mutant_(m) {}
  Status Run();

 private:
  ref::PlanRequest BaseRequest(int32_t qlen) const;
  void AddPersistent(const std::string& name, int64_t rows, int64_t row_bytes, const char* dtype);
  void AddPlanBuffers(const std::string& prefix, const ref::MetadataSizes& sizes);
  Status BuildPlan(int32_t draft, const std::string& name, const std::string& row,
                   const std::string& prefix, ref::PlanRequest request,
                   const ref::MetadataSizes& capacity, int32_t real, int32_t* plan_index);
  Status UpdatePlan(int32_t draft, int32_t plan_index, const std::vector<int32_t>& kv_indptr,
                    const std::vector<int32_t>* rejects, int32_t real, int32_t* out_index);
  void Fill(int32_t draft, const std::string& name, const std::string& row,
            const std::string& buffer, const std::vector<int32_t>& indptr, int32_t tokens,
            bool graph);
  void Decode(int32_t draft, const std::string& name, const std::string& row, int32_t plan,
              int32_t q_rows, bool sparse, bool graph, int32_t max_seqlen_q, int32_t heads);
  Status VerifyStep();
  Status DraftStep0();
  Status DraftStep(int32_t s);
  std::vector<int32_t> DraftKvIndptr(int32_t s) const;

  Status ResolveContracts();

  const Scenario& s_;
  Trace& t_;
  SimMutant mutant_;
  // The contracts the kernel calls run under (sim/contract.h): the scenario's decode variant (or
  // a user's contract) with the what-if switches of the scenario and the mutant applied.
  std::shared_ptr<const Contract> decode_, reduce_, gather_, generate_;
  StepShape& sh_ = t_.shape;
  int32_t last_draft_sparse_plan_ = -1;
  ref::MetadataSizes main_capacity_, sparse_capacity_, draft_capacity_;
  std::vector<int32_t> verify_kv_indptr_;  // R+1 entries (pads repeat)
  std::vector<int32_t> sparse_kv_indptr_;  // T_r+1 entries (pads repeat)
  int32_t main_plan_ = -1, sparse_plan_ = -1;
};

void StepBuilder::AddPersistent(const std::string& name, int64_t rows, int64_t row_bytes,
                                const char* dtype) {
  t_.persistent.push_back(PersistentBuffer{name, rows, row_bytes, dtype});
}

void StepBuilder::AddPlanBuffers(const std::string& prefix, const ref::MetadataSizes& z) {
  AddPersistent(prefix + "work_metadata_ptrs", 2, 8, "uint64");
  AddPersistent(prefix + "work_indptr", z.work_indptr, 4, "int32");
  AddPersistent(prefix + "work_info", z.work_info_rows, 32, "int32");
  AddPersistent(prefix + "reduce_indptr", z.reduce_indptr, 4, "int32");
  AddPersistent(prefix + "reduce_final_map", z.reduce_final_map_rows, 8, "int32");
  AddPersistent(prefix + "reduce_partial_map", z.reduce_partial_map, 4, "int32");
}

ref::PlanRequest StepBuilder::BaseRequest(int32_t qlen) const {
  ref::PlanRequest r;
  r.target = s_.target;
  r.revision = s_.revision;
  r.cu_count = s_.cu_count;
  r.heads_per_head_k = sh_.kernel_heads;
  r.q_dtype = r.kv_dtype = s_.model.kv_dtype;  // ATOM#287: both from the KV-cache dtype
  r.page_size = 1;
  r.kv_granularity = 16;
  r.qlen = r.max_seqlen_qo = r.uni_seqlen_qo = qlen;
  r.max_split_per_batch = 16;
  return r;
}

Status StepBuilder::BuildPlan(int32_t draft, const std::string& name, const std::string& row,
                              const std::string& prefix, ref::PlanRequest request,
                              const ref::MetadataSizes& capacity, int32_t real,
                              int32_t* plan_index) {
  ref::PlannerOptions options;
  options.choice =
      s_.serial_planner ? ref::PlannerChoice::kSerial : ref::PlannerChoice::kAiterDispatch;
  if (mutant_ == SimMutant::kReduceMapOffByOne)
    options.mutant = ref::PlannerMutant::kPartialMapOffByOne;
  if (mutant_ == SimMutant::kNoTailRule) options.mutant = ref::PlannerMutant::kNoTailRule;
  auto plan = ref::PlanMlaMetadataInto(request, capacity, options);
  if (!plan.ok()) {
    const std::string& f = plan.status().field();
    const std::string field = f == "heads_per_head_k"        ? "$.model.heads"
                              : f == "topk"                  ? "$.model.topk"
                              : f.rfind("kv_indptr", 0) == 0 ? "$.batch.contexts"
                                                             : "$";
    return InvalidArgumentError(field,
                                "the engine's " + name + " at " + Step(draft) +
                                    " is refused by the planner: " + plan.status().ToString());
  }
  PlanSnapshot snap;
  snap.name = name;
  snap.buffer_prefix = prefix;
  snap.request = std::move(request);
  snap.plan = std::move(*plan);
  snap.real_requests = real;
  snap.q_rows_covered = CoveredQRows(snap.plan);
  t_.plans.push_back(std::move(snap));
  *plan_index = static_cast<int32_t>(t_.plans.size() - 1);
  Call c;
  c.step = Step(draft);
  c.name = name;
  c.table_row = row;
  c.kind = CallKind::kPlanBuild;
  c.kernel = "get_mla_metadata_v1";
  c.plan = *plan_index;
  c.plan_rows = t_.plans.back().q_rows_covered;
  c.note = "plans " + std::to_string(t_.plans.back().request.kv_indptr.size() - 1) + " batches (" +
           std::to_string(real) + " real) into " + prefix + "*";
  t_.calls.push_back(std::move(c));
  return OkStatus();
}

Status StepBuilder::UpdatePlan(int32_t draft, int32_t plan_index,
                               const std::vector<int32_t>& kv_indptr,
                               const std::vector<int32_t>* rejects, int32_t real,
                               int32_t* out_index) {
  PlanSnapshot snap = t_.plans[plan_index];
  snap.plan.input_violations.clear();  // reported with the call that made them
  ref::DecodeUpdateRequest u;
  u.target = s_.target;
  u.revision = s_.revision;
  u.heads_per_head_k = sh_.kernel_heads;
  u.q_dtype = u.kv_dtype = s_.model.kv_dtype;
  u.max_seqlen_qo = s_.engine.update_uses_verify_width ? sh_.Q : 1;
  u.qo_indptr = snap.request.qo_indptr;
  u.kv_indptr = kv_indptr;
  if (rejects) {
    u.num_reject_tokens = *rejects;
    u.has_num_reject_tokens = true;
  }
  u.permissive = true;  // the engine calls it whatever the plan; the checker judges the result
  MLASIM_RETURN_IF_ERROR(ref::DecodeUpdateMlaMetadataV1(u, snap.plan));
  // The request the updated plan must now serve: the new lengths, one q row per batch.
  ref::PlanRequest served = snap.request;
  served.kv_indptr = kv_indptr;
  served.qlen = served.max_seqlen_qo = served.uni_seqlen_qo = 1;
  served.qo_indptr.resize(kv_indptr.size());
  std::iota(served.qo_indptr.begin(), served.qo_indptr.end(), 0);
  served.kv_last_page_lens.assign(kv_indptr.size() - 1, 1);
  snap.request = std::move(served);
  snap.real_requests = real;
  snap.q_rows_covered = CoveredQRows(snap.plan);
  snap.name = t_.plans[plan_index].name + "@" + Step(draft);
  t_.plans.push_back(std::move(snap));
  *out_index = static_cast<int32_t>(t_.plans.size() - 1);
  Call c;
  c.step = Step(draft);
  c.name = "main_plan_update";
  c.table_row = "Ms(b)";
  c.kind = CallKind::kPlanUpdate;
  c.kernel = "decode_update_mla_metadata_v1";
  c.plan = *out_index;
  c.plan_rows = t_.plans.back().q_rows_covered;
  c.note =
      std::string("patches the target plan in place for ") + std::to_string(kv_indptr.size() - 1) +
      " batches" +
      (rejects ? " with num_reject_tokens of " + std::to_string(rejects->size()) + " entries" : "");
  t_.calls.push_back(std::move(c));
  return OkStatus();
}

void StepBuilder::Fill(int32_t draft, const std::string& name, const std::string& row,
                       const std::string& buffer, const std::vector<int32_t>& indptr,
                       int32_t tokens, bool graph) {
  Call c;
  c.step = Step(draft);
  c.name = name;
  c.table_row = row;
  c.kind = CallKind::kIndexFill;
  c.kernel = name;
  c.contract = name == "indexer_gather" ? gather_ : generate_;
  c.graph_replay = graph;
  const int32_t n = std::min<int32_t>(tokens, static_cast<int32_t>(indptr.size()) - 1);
  c.fill_indptr = indptr;
  c.fill_indptr_buffer = buffer == "kv_indices" ? "kv_indptr" : "sparse_kv_indptr";
  c.fill_tokens = n;
  for (int32_t t = 0; t < n; ++t) c.fill_regions.push_back({indptr[t], indptr[t + 1]});
  c.fill_begin = n > 0 ? indptr[0] : 0;
  c.fill_end = n > 0 ? indptr[n] : 0;
  TensorArg a;
  a.role = "indices";
  a.buffer = buffer;
  for (const PersistentBuffer& p : t_.persistent)
    if (p.name == buffer) a.rows = p.rows;
  a.row_bytes = 4;
  a.dtype = "int32";
  c.args.push_back(a);
  c.note = "writes the index regions of " + std::to_string(n) + " tokens";
  t_.calls.push_back(std::move(c));
}

void StepBuilder::Decode(int32_t draft, const std::string& name, const std::string& row,
                         int32_t plan, int32_t q_rows, bool sparse, bool graph,
                         int32_t max_seqlen_q, int32_t heads) {
  const PlanSnapshot& snap = t_.plans[plan];
  const int32_t fold = snap.plan.derived.fold_ratio;
  const int32_t kv_width = s_.model.kv_lora_rank + s_.model.rope_dim;
  // The C mutant: the kernel was built for 576-column rows (vLLM #56314): with a narrower q it
  // walks fewer, wider rows than the allocation holds.
  const int32_t kernel_width = mutant_ == SimMutant::kKernelAssumes576Rows ? 576 : kv_width;
  const int32_t qb = Bytes(s_.model.kv_dtype), ob = Bytes(s_.model.model_dtype);
  const int32_t vh = heads / fold;  // heads per (folded) row
  auto tensor = [](const char* role, std::string buffer, int64_t rows, int32_t h, int32_t cols,
                   int32_t eb, ref::DType d) {
    TensorArg a;
    a.role = role;
    a.buffer = std::move(buffer);
    a.rows = rows;
    a.heads = h;
    a.cols = cols;
    a.elem_bytes = eb;
    a.row_bytes = int64_t{h} * cols * eb;
    a.dtype = ref::DTypeName(d);
    a.transient = true;
    return a;
  };
  // mla_decode_fwd views q/o of folded heads as [rows * R, 16, D] (§10.3).
  Call c;
  c.step = Step(draft);
  c.name = name;
  c.table_row = row;
  c.kind = CallKind::kDecode;
  c.kernel = decode_->variant;
  c.contract = decode_;
  c.graph_replay = graph;
  c.plan = plan;
  c.q_rows = q_rows;
  c.plan_rows = snap.q_rows_covered;
  c.sparse = sparse;
  c.max_seqlen_q = max_seqlen_q;
  c.args.push_back(tensor("q", "q", int64_t{q_rows} * fold, vh, kv_width, qb, s_.model.kv_dtype));
  if (kernel_width != kv_width) {
    // The allocation keeps its bytes; the kernel's view has rows of kernel_width columns.
    TensorArg& q = c.args.back();
    const int64_t bytes = q.rows * q.row_bytes;
    q.row_bytes = int64_t{vh} * kernel_width * qb;
    q.cols = kernel_width;
    q.rows = bytes / q.row_bytes;
    q.alloc_bytes = bytes;
  }
  c.args.push_back(tensor("o", "o", int64_t{q_rows} * fold, vh, s_.model.kv_lora_rank, ob,
                          s_.model.model_dtype));
  const int64_t partial_rows = int64_t{snap.plan.sizes.reduce_partial_map} * max_seqlen_q;
  c.args.push_back(
      tensor("logits", "logits", partial_rows, vh, s_.model.kv_lora_rank, 4, ref::DType::kFp32));
  c.args.push_back(tensor("attn_lse", "attn_lse", partial_rows, vh, 1, 4, ref::DType::kFp32));
  TensorArg idx;
  idx.role = "kv_indices";
  idx.buffer = sparse ? "sparse_kv_indices" : "kv_indices";
  for (const PersistentBuffer& p : t_.persistent)
    if (p.name == idx.buffer) idx.rows = p.rows;
  idx.row_bytes = 4;
  idx.dtype = "int32";
  c.args.push_back(idx);
  // The #2715 guard: host integers only, so it runs on eager calls and at capture, never on a
  // graph replay, and it is skipped under DCP (the plan is rebuilt per layer there).
  if (s_.engine.plan_rows_guard && sparse && !graph && s_.parallel.dcp == 1) {
    c.guard_checked = true;
    c.guard_refused = snap.q_rows_covered > q_rows;
  }
  c.note = "q/o " + std::to_string(q_rows) + " rows, plan covers " +
           std::to_string(snap.q_rows_covered) + " rows";
  t_.calls.push_back(c);
  Call r = c;
  r.name = name.substr(0, name.find("_decode")) + "_reduce";
  r.kind = CallKind::kReduce;
  r.kernel = reduce_->variant;
  r.contract = reduce_;
  r.args.pop_back();  // the reduce reads no KV indices
  r.note = "merges the split tiles' partial rows into o";
  t_.calls.push_back(std::move(r));
}

Status StepBuilder::VerifyStep() {
  const int32_t B = sh_.B, R = sh_.R, Q = sh_.Q;
  // T1: the main plan over R requests with uni q length Q; pads have 0 KV (§2, §4).
  ref::PlanRequest main = BaseRequest(Q);
  main.qo_indptr.assign(R + 1, 0);
  main.kv_indptr = verify_kv_indptr_;
  for (int32_t i = 1; i <= R; ++i) main.qo_indptr[i] = std::min(i, B) * Q;
  main.kv_last_page_lens.assign(R, 0);
  std::fill(main.kv_last_page_lens.begin(), main.kv_last_page_lens.begin() + B, 1);
  if (s_.parallel.dcp > 1) {
    // T4': with DCP the dense MTP verify plans the B real requests (cprr; PR #1746).
    main.qo_indptr.resize(B + 1);
    main.kv_indptr.resize(B + 1);
    main.kv_last_page_lens.resize(B);
    main.is_cp_round_robin = true;
  }
  const int32_t main_real = B;
  MLASIM_RETURN_IF_ERROR(BuildPlan(-1, "main_plan", s_.parallel.dcp > 1 ? "T4'" : "T1", "main.",
                                   main, main_capacity_, main_real, &main_plan_));
  if (s_.model.sparse) {
    // T2: the sparse per-token MTP plan: one qlen-1 batch per token; pads 0 KV (§4).
    const int32_t n = sh_.sparse_plan_tokens;
    ref::PlanRequest sp = BaseRequest(1);
    sp.qo_indptr.resize(n + 1);
    std::iota(sp.qo_indptr.begin(), sp.qo_indptr.end(), 0);
    sp.kv_indptr.assign(sparse_kv_indptr_.begin(), sparse_kv_indptr_.begin() + n + 1);
    sp.kv_last_page_lens.assign(n, 1);
    MLASIM_RETURN_IF_ERROR(BuildPlan(-1, "sparse_mtp_plan", "T2", "sparse_mtp.", sp,
                                     sparse_capacity_, sh_.scheduled_tokens, &sparse_plan_));
    const int32_t rows = sh_.graph ? sh_.running_tokens : sh_.scheduled_tokens;
    Fill(-1, "indexer_gather", "T3", "sparse_kv_indices", sparse_kv_indptr_, rows, sh_.graph);
    Decode(-1, "sparse_decode", "T5", sparse_plan_, rows, true, sh_.graph, 1, sh_.kernel_heads);
  } else {
    Fill(-1, "kv_indices_generate", "T1", "kv_indices", verify_kv_indptr_, R, false);
    const int32_t rows = sh_.graph ? sh_.running_tokens : sh_.scheduled_tokens;
    Decode(-1, "dense_decode", s_.parallel.dcp > 1 ? "T4'" : "T4", main_plan_, rows, false,
           sh_.graph, Q, sh_.kernel_heads);
  }
  return OkStatus();
}

Status StepBuilder::DraftStep0() {
  // The MTP layer runs over T_s unpadded rows with the target's metadata unchanged (§5).
  const int32_t rows = sh_.scheduled_tokens;
  if (s_.model.sparse) {
    Fill(0, "indexer_gather", "D0a", "sparse_kv_indices", sparse_kv_indptr_, rows, false);
    if (s_.parallel.dcp > 1) {
      // D0c (newer ATOM, #2118): per-layer rebuild from the compacted DCP indptr of B_q + 1
      // entries; before #2715 cu_seqlens_q / last-page lens stay at T_r + 1 / T_r entries.
      ref::PlanRequest sp = BaseRequest(1);
      const int32_t qn = s_.engine.dcp_slice_rebuild_inputs ? rows : sh_.running_tokens;
      sp.qo_indptr.resize(qn + 1);
      std::iota(sp.qo_indptr.begin(), sp.qo_indptr.end(), 0);
      sp.kv_indptr.assign(sparse_kv_indptr_.begin(), sparse_kv_indptr_.begin() + rows + 1);
      sp.kv_last_page_lens.assign(qn, 1);
      int32_t rebuilt = -1;
      MLASIM_RETURN_IF_ERROR(BuildPlan(0, "dcp_sparse_rebuild", "D0c", "sparse_mtp.", sp,
                                       sparse_capacity_, rows, &rebuilt));
      Decode(0, "sparse_decode", "D0c", rebuilt, rows, true, false, 1, sh_.kernel_heads);
      return OkStatus();
    }
    Decode(0, "sparse_decode", "D0b", sparse_plan_, rows, true, false, 1, sh_.kernel_heads);
  } else {
    Decode(0, "dense_decode", s_.parallel.dcp > 1 ? "D0b''" : "D0b'", main_plan_, rows, false,
           false, sh_.Q, sh_.kernel_heads);
  }
  return OkStatus();
}

// kv_indptr of draft step s (§5 transition): real entries minus cumsum(r), then + i per step for
// entries 0..n; entries past n keep the target's values.
std::vector<int32_t> StepBuilder::DraftKvIndptr(int32_t s) const {
  std::vector<int32_t> out = verify_kv_indptr_;
  int32_t cum = 0;
  for (int32_t i = 1; i <= sh_.B; ++i) {
    cum += s_.requests[i - 1].rejected;
    out[i] -= cum;
  }
  for (int32_t i = 0; i <= sh_.draft_rows && i < static_cast<int32_t>(out.size()); ++i)
    out[i] += s * i;
  return out;
}

Status StepBuilder::DraftStep(int32_t s) {
  const int32_t n = sh_.draft_rows;
  const std::vector<int32_t> kv = DraftKvIndptr(s);
  if (s_.model.sparse) {
    // Ms(a): a fresh qlen-1 plan over n rows from the sparse indptr and all-ones last pages.
    std::vector<int32_t> sparse = {0};
    for (int32_t i = 0; i < n; ++i)
      sparse.push_back(sparse.back() + std::min(kv[i + 1] - kv[i], s_.model.topk));
    ref::PlanRequest sp = BaseRequest(1);
    sp.qo_indptr.resize(n + 1);
    std::iota(sp.qo_indptr.begin(), sp.qo_indptr.end(), 0);
    sp.kv_indptr = sparse;
    sp.kv_last_page_lens.assign(n, 1);
    int32_t plan = -1;
    if (mutant_ == SimMutant::kStalePlanAfterGrowth && last_draft_sparse_plan_ >= 0) {
      // The mutant keeps step 1's plan although every length grew by one.
      PlanSnapshot stale = t_.plans[last_draft_sparse_plan_];
      stale.request = sp;
      stale.name = "draft_sparse_plan(stale)";
      t_.plans.push_back(std::move(stale));
      plan = static_cast<int32_t>(t_.plans.size() - 1);
      Call c;
      c.step = Step(s);
      c.name = "draft_sparse_plan_reuse";
      c.table_row = "Ms(a)";
      c.kind = CallKind::kPlanUpdate;
      c.kernel = "(reuse)";
      c.plan = plan;
      c.plan_rows = t_.plans.back().q_rows_covered;
      t_.calls.push_back(std::move(c));
    } else {
      MLASIM_RETURN_IF_ERROR(
          BuildPlan(s, "draft_sparse_plan", "Ms(a)", "main.", sp, main_capacity_, sh_.B, &plan));
    }
    last_draft_sparse_plan_ = plan;
    Fill(s, "indexer_gather", "Ds", "sparse_kv_indices", sparse, n, false);
    Decode(s, "sparse_decode", "Ds", plan, n, true, false, 1, sh_.kernel_heads);
    return OkStatus();
  }
  const bool dcp = s_.parallel.dcp > 1;
  const bool update = s_.engine.incremental_update && sh_.heads_per_rank != 32 && !dcp;
  int32_t plan = -1;
  if (update) {
    std::vector<int32_t> rejects;
    for (const RequestSpec& r : s_.requests) rejects.push_back(r.rejected);
    std::vector<int32_t> batch_kv(kv.begin(), kv.begin() + sh_.R + 1);
    MLASIM_RETURN_IF_ERROR(
        UpdatePlan(s, main_plan_, batch_kv, s == 1 ? &rejects : nullptr, sh_.B, &plan));
    main_plan_ = plan;
  } else {
    // Ms(c) / Ms(d): a fresh qlen-1 build over the B real requests (DCP: n rows, local KV).
    const int32_t rows = dcp ? n : sh_.B;
    ref::PlanRequest fresh = BaseRequest(1);
    fresh.qo_indptr.resize(rows + 1);
    std::iota(fresh.qo_indptr.begin(), fresh.qo_indptr.end(), 0);
    fresh.kv_indptr.assign(kv.begin(), kv.begin() + rows + 1);
    fresh.kv_last_page_lens.assign(rows, 1);
    MLASIM_RETURN_IF_ERROR(BuildPlan(s, "draft_plan", dcp ? "Ms(d)" : "Ms(c)", "main.", fresh,
                                     main_capacity_, sh_.B, &plan));
  }
  Fill(s, "kv_indices_generate", "M0", "kv_indices", kv, n, false);
  Decode(s, "dense_decode", "Ds", plan, n, false, false, 1, sh_.kernel_heads);
  return OkStatus();
}

Status StepBuilder::ResolveContracts() {
  MLASIM_ASSIGN_OR_RETURN(decode_, ContractFor(s_, CallKind::kDecode, s_.kernel, "$.kernel"));
  std::map<std::string, int64_t> what_if;
  if (s_.zero_kv_reads_index_row || mutant_ == SimMutant::kZeroKvReadsIndexRow)
    what_if["zero_kv_reads_index_row"] = 1;
  if (mutant_ == SimMutant::kZeroKvPageUnderflow) what_if["page_count_underflows"] = 1;
  MLASIM_ASSIGN_OR_RETURN(decode_, WithConstants(decode_, what_if));
  MLASIM_ASSIGN_OR_RETURN(reduce_, ContractFor(s_, CallKind::kReduce, "mla_reduce_v1", "contract"));
  MLASIM_ASSIGN_OR_RETURN(gather_, BuiltinContract(CallKind::kIndexFill, "indexer_gather", "contract"));
  MLASIM_ASSIGN_OR_RETURN(generate_,
                          BuiltinContract(CallKind::kIndexFill, "kv_indices_generate", "contract"));
  for (const auto& c : s_.contracts)
    if (c->call == CallKind::kIndexFill) gather_ = generate_ = c;
  return OkStatus();
}

Status StepBuilder::Run() {
  MLASIM_RETURN_IF_ERROR(ResolveContracts());
  const int32_t B = static_cast<int32_t>(s_.requests.size());
  sh_.B = B;
  sh_.Q = s_.mtp_k + 1;
  sh_.scheduled_tokens = B * sh_.Q;
  sh_.R = ChooseRung(s_, B, &sh_.graph);
  sh_.running_tokens = sh_.R * sh_.Q;
  sh_.heads_per_rank = s_.model.heads / s_.parallel.tp;
  sh_.kernel_heads = KernelHeads(s_);
  sh_.sparse_plan_tokens =
      s_.engine.sparse_mtp_plan_tokens == EngineProfile::SparsePlanTokens::kRunning ||
              mutant_ == SimMutant::kFoundingFault
          ? sh_.running_tokens
          : sh_.scheduled_tokens;
  sh_.draft_rows = s_.engine.draft_rows == EngineProfile::DraftRows::kPadded &&
                           mutant_ != SimMutant::kDraftRowsScheduled
                       ? sh_.R
                       : B;
  // KV lengths: L_i = context - rejected_prev; DCP ranks hold the interleaved local share.
  for (const RequestSpec& r : s_.requests) {
    int32_t L = r.context - r.rejected_prev;
    if (s_.parallel.dcp > 1) {
      const int32_t W = s_.parallel.dcp, S = s_.parallel.dcp_interleave;
      L = (L / (S * W)) * S + std::min(L % (S * W), S);  // positions on rank 0
    }
    sh_.kv_lens.push_back(L);
  }
  verify_kv_indptr_.assign(sh_.R + 1, 0);
  for (int32_t i = 1; i <= sh_.R; ++i)
    verify_kv_indptr_[i] = verify_kv_indptr_[i - 1] + (i <= B ? sh_.kv_lens[i - 1] : 0);
  sparse_kv_indptr_.assign(sh_.running_tokens + 1, 0);
  for (int32_t t = 0; t < sh_.running_tokens; ++t) {
    const int32_t b = t / sh_.Q, j = t % sh_.Q;
    const int32_t count = b < B ? std::min(sh_.kv_lens[b] - sh_.Q + j + 1, s_.model.topk) : 0;
    sparse_kv_indptr_[t + 1] = sparse_kv_indptr_[t] + std::max(count, 0);
  }

  // Capacities (§3): the builder sizes every buffer for max_num_seqs and max_num_batched_tokens.
  const bool size_for_b =
      mutant_ == SimMutant::kSizingScheduledBatch || mutant_ == SimMutant::kSizingPartialMapPerTile;
  const int32_t max_bs = size_for_b ? B : s_.graph.max_num_seqs;
  const int32_t mnbt = s_.graph.max_num_batched_tokens;
  ref::PlanRequest sizing = BaseRequest(sh_.Q);
  sizing.topk = s_.model.sparse ? s_.model.topk : -1;
  MLASIM_ASSIGN_OR_RETURN(main_capacity_, ref::GetMlaMetadataInfoV1(sizing, max_bs));
  sizing = BaseRequest(1);
  sizing.qlen = 1;
  sizing.topk = 0;  // is_sparse = True (§3 sparse-MTP row)
  MLASIM_ASSIGN_OR_RETURN(sparse_capacity_, ref::GetMlaMetadataInfoV1(sizing, max_bs * sh_.Q));
  if (mutant_ == SimMutant::kSizingPartialMapPerTile) {
    main_capacity_.reduce_partial_map = main_capacity_.tile_cnt;
    sparse_capacity_.reduce_partial_map = sparse_capacity_.tile_cnt;
  }
  AddPlanBuffers("main.", main_capacity_);
  if (s_.model.sparse) AddPlanBuffers("sparse_mtp.", sparse_capacity_);
  AddPersistent("kv_indptr", max_bs + 1, 4, "int32");
  AddPersistent("kv_indices", int64_t{max_bs} * s_.graph.max_model_len, 4, "int32");
  AddPersistent("kv_last_page_lens", max_bs, 4, "int32");
  if (s_.model.sparse) {
    AddPersistent("sparse_kv_indptr", mnbt + 1, 4, "int32");
    AddPersistent("sparse_cu_seqlens_q", mnbt + 1, 4, "int32");
    AddPersistent("sparse_kv_last_page_lens", mnbt, 4, "int32");
    AddPersistent("sparse_kv_indices", int64_t{mnbt} * s_.model.topk, 4, "int32");
  }
  MLASIM_RETURN_IF_ERROR(VerifyStep());
  if (s_.mtp_k > 0) {
    MLASIM_RETURN_IF_ERROR(DraftStep0());
    for (int32_t s = 1; s < s_.mtp_k; ++s) MLASIM_RETURN_IF_ERROR(DraftStep(s));
  }
  for (size_t i = 0; i < t_.calls.size(); ++i) t_.calls[i].index = static_cast<int32_t>(i);
  return OkStatus();
}

}  // namespace

int32_t ChooseRung(const Scenario& s, int32_t batch, bool* graph) {
  const int32_t q = s.mtp_k + 1;
  int32_t tokens = batch * q;
  for (int32_t t : s.parallel.dp_scheduled_tokens) tokens = std::max(tokens, t);
  const int32_t padded = (tokens + q - 1) / q;
  const int32_t max_sched = std::min(s.graph.max_num_seqs, s.graph.max_num_batched_tokens / q);
  int32_t best = -1;
  for (int32_t size : s.graph.capture_sizes) {
    if (size > max_sched) continue;  // dropped from the capture list (§2 step 2)
    if (size >= padded && (best < 0 || size < best)) best = size;
  }
  *graph = !s.graph.eager && best >= 0;
  return *graph ? best : batch;
}

int32_t KernelHeads(const Scenario& s) {
  const int32_t h = s.model.heads / s.parallel.tp;
  if (s.parallel.dcp > 1) {
    const int32_t g = h * s.parallel.dcp;
    for (int32_t w : {16, 32, 64, 128})
      if (g <= w) return w;
    return g;
  }
  return std::max(h, 16);
}

StatusOr<Trace> ExpandStep(const Scenario& s, SimMutant mutant) {
  Trace t;
  StepBuilder b(s, t, mutant);
  MLASIM_RETURN_IF_ERROR(b.Run());
  return t;
}

}  // namespace mlasim::sim
