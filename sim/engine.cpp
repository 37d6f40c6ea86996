#include "sim/engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <string>
#include <string_view>

#include "ref/decode_update.h"
#include "ref/limits.h"
#include "ref/planner.h"
#include "ref/sizing.h"
#include "sim/call_overrides.h"
#include "sim/call_table.h"
#include "sim/engine_dialect.h"

namespace mlasim::sim {
namespace {

// RecyclePlans' plans, per thread (campaign workers each keep their own).
std::vector<ref::Plan>& PlanPool() {
  thread_local std::vector<ref::Plan> pool;
  return pool;
}

// Whether `p`'s buffers hold as many elements as `sizes` asks for.
bool SameSizes(const ref::Plan& p, const ref::MetadataSizes& sizes) {
  for (ref::PlanBufferId id : ref::kInt32PlanBuffers)
    if (p.buffer(id)->size() != sizes.Elements(id)) return false;
  return true;
}

// The elements `sizes` asks for past the memory of `p`'s buffers: what planning into `p` would
// move to new memory and poison there (growth within the memory writes nothing: ref::Int32Buffer's
// reserve invariant).
int64_t ElementsPastMemory(const ref::Plan& p, const ref::MetadataSizes& sizes) {
  int64_t past = 0;
  for (ref::PlanBufferId id : ref::kInt32PlanBuffers) {
    const int64_t have = static_cast<int64_t>(p.buffer(id)->data.capacity());
    past += std::max<int64_t>(sizes.Elements(id) - have, 0);
  }
  return past;
}

// Elements the memory of `p`'s buffers holds.
int64_t PlanMemory(const ref::Plan& p) {
  int64_t elements = 0;
  for (ref::PlanBufferId id : ref::kInt32PlanBuffers)
    elements += static_cast<int64_t>(p.buffer(id)->data.capacity());
  return elements;
}

// Puts `p` in the pool. A full pool keeps the plans with the most memory: the one with the least
// makes room for `p` if `p` has more (large requests then find memory instead of growing).
void KeepPlan(ref::Plan&& p) {
  std::vector<ref::Plan>& pool = PlanPool();
  if (pool.size() < kRecycledPlansKept) {
    pool.push_back(std::move(p));
    return;
  }
  auto least = std::min_element(
      pool.begin(), pool.end(),
      [](const ref::Plan& a, const ref::Plan& b) { return PlanMemory(a) < PlanMemory(b); });
  if (PlanMemory(p) > PlanMemory(*least)) *least = std::move(p);
}

// A recycled plan to plan into (the newest of the sizes asked for, else the newest of those
// whose memory lacks the fewest elements), or a fresh one. The choice changes what planning
// costs, never the plan (PlanRecycling.PlansIntoRecycledBuffersAreThePlansOfFreshBuffers).
ref::Plan TakePlan(const ref::MetadataSizes& sizes) {
  std::vector<ref::Plan>& pool = PlanPool();
  if (pool.empty()) return ref::Plan{};
  size_t pick = pool.size();
  int64_t best = INT64_MAX;
  for (size_t i = pool.size(); i-- > 0;) {
    if (SameSizes(pool[i], sizes)) {
      pick = i;
      break;
    }
    const int64_t past = ElementsPastMemory(pool[i], sizes);
    if (past < best) {
      best = past;
      pick = i;
    }
  }
  ref::Plan p = std::move(pool[pick]);
  pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(pick));
  return p;
}

int32_t Bytes(ref::DType d) {
  switch (d) {
    case ref::DType::kFp8: return 1;
    case ref::DType::kBf16:
    case ref::DType::kFp16: return 2;
    case ref::DType::kFp32: return 4;
  }
  return 4;
}

// A transient q/o/partial tensor of `rows` rows of `h` heads x `cols` elements of `eb` bytes.
TensorArg TransientTensor(const char* role, std::string buffer, int64_t rows, int32_t h,
                          int32_t cols, int32_t eb, ref::DType d) {
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
}

// The kernel's view of an allocation: rows of `h` heads x `cols` (the allocation keeps its bytes).
void ViewRows(TensorArg& a, int32_t h, int32_t cols) {
  if (h == a.heads && cols == a.cols) return;
  const int64_t bytes = a.rows * a.row_bytes;
  a.heads = h;
  a.cols = cols;
  a.row_bytes = int64_t{h} * cols * a.elem_bytes;
  a.rows = bytes / a.row_bytes;
  a.alloc_bytes = bytes;
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

// Token lengths as the engine hands them to the planner: pages per request (cumulative, B + 1
// entries) and the tokens of each last page; a zero-length request has 0 pages and a last page
// of `empty_last` tokens.
struct PagedLens {
  std::vector<int32_t> indptr, last;
};
PagedLens Paged(const std::vector<int32_t>& lens, int32_t page, int32_t empty_last) {
  PagedLens p;
  p.indptr.reserve(lens.size() + 1);
  p.last.reserve(lens.size());
  p.indptr.push_back(0);
  for (const int32_t len : lens) {
    const int32_t pages = (len + page - 1) / page;
    p.indptr.push_back(p.indptr.back() + pages);
    p.last.push_back(len == 0 ? empty_last : len - (pages - 1) * page);
  }
  return p;
}

std::vector<int32_t> Arange(int32_t n) {
  std::vector<int32_t> v(static_cast<size_t>(n) + 1);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// Interprets the engine's call table (sim/call_table.h) for one step of a scenario: every row
// whose guard holds becomes a call of the trace, with its plan built by the reference planner.
class StepBuilder {
 public:
  StepBuilder(const Scenario& s, Trace& t, const CallTable& table, const SimMutantSpec& mutant)
      : s_(s), t_(t), table_(table), mutant_(mutant) {}
  Status Run();

 private:
  // Shape, variables, contracts, buffers.
  void ComputeShape();
  Status EvalVariables();
  Status ResolveContracts();
  Status AllocateBuffers();
  // `what` names the expression in the message of an undefined value (a literal is not made
  // into a string for every evaluation).
  int64_t Eval(const Expr& e, const char* what) const;
  int64_t Eval(const Expr& e, const std::string& what) const { return Eval(e, what.c_str()); }
  // `prefix` + `what` names the expression in the error (spelled only then).
  int64_t Eval(const Expr& e, const std::string& prefix, const char* what) const;
  bool When(const Expr& e) const { return e.empty() || Eval(e, "when") != 0; }
  int64_t Var(std::string_view name) const;
  ref::PlanRequest BaseRequest(int32_t qlen) const;
  // Some real request's verify q length differs from Q (batch.q_lens).
  bool RaggedQ() const {
    return std::any_of(sh_.q_lens.begin(), sh_.q_lens.end(), [&](int32_t q) { return q != sh_.Q; });
  }
  void AddPersistent(std::string name, int64_t rows, int64_t row_bytes, const char* dtype);
  void AddPlanBuffers(const std::string& prefix, const ref::MetadataSizes& sizes);
  // Scenario overrides (docs/scenario.md "calls", "sizing", "capture").
  const CallOverride* Override(const std::string& step, const std::string& call) const;
  // The entry of $.calls that `o` (one of s_.calls) is.
  size_t OverrideIndex(const CallOverride* o) const {
    return static_cast<size_t>(o - s_.calls.data());
  }
  // The override of `call` of `step`, if any, sets only keys that apply to a call of `form`
  // (sim/call_overrides.h).
  Status CheckOverride(const std::string& step, const std::string& call, CallForm form,
                       const std::string& planner) const;
  // CheckOverride of the row's call (a decode: and of its reduce).
  Status CheckRowOverrides(const CallRow& row, const std::string& step) const;
  Status CapturePlans();
  StatusOr<int32_t> PlanFrom(const CallOverride& o, const std::string& step, const CallRow& row);
  std::shared_ptr<const IndexContent> FillContent(const CallRow& row,
                                                  const std::vector<int32_t>& indptr,
                                                  int32_t tokens) const;
  // Rows.
  Status RunStep(const StepSpec& step, const std::string& name);
  Status RunRow(const CallRow& row, const std::string& step);
  Status PlanRow(const CallRow& row, const std::string& step);
  Status UpdateRow(const CallRow& row, const std::string& step);
  Status UpdateRefusal(const std::string& step, const CallRow& row, const PlanSnapshot& patched,
                       const Status& st) const;
  Status FillRow(const CallRow& row, const std::string& step);
  Status DecodeRow(const CallRow& row, const std::string& step);
  // Planner dialects other than aiter's (sim/engine_dialect.h).
  DialectShape Dialect() const;
  Status DialectPlanRow(const CallRow& row, const std::string& step);
  void DialectLaunch(const CallRow& row, const PlanSnapshot& snap, Call* c) const;
  std::vector<int32_t> LaunchLens(const CallRow& row, const PlanSnapshot& snap) const;
  int32_t LaunchSnapshot(const CallRow& row, int32_t plan);
  // The named input builders and indptrs of call tables (InputBuilders(), NamedIndptrs()).
  ref::PlanRequest BuildInputs(const CallRow& row) const;
  std::vector<int32_t> Indptr(const std::string& name, int32_t tokens) const;
  std::vector<int32_t> DraftKvIndptr(int32_t s) const;
  // Draft step s's paged kv arrays over its n rows (page 1: DraftKvIndptr and all-ones last
  // pages, as ATOM computes them; larger pages: each real request grown by s tokens).
  PagedLens DraftPaged(int32_t s, int32_t n) const;
  std::vector<int32_t> DraftSparseIndptr(int32_t s, int32_t n) const;
  // The request of verify token t (B for the padding tokens from T_s on).
  int32_t TokenRequest(int32_t t) const {
    return t < static_cast<int32_t>(token_request_.size()) ? token_request_[t] : sh_.B;
  }
  // Trace plumbing.
  // `o`: the call's override (null if none), whose keys a refusal of the planner names.
  Status BuildPlan(const std::string& step, const CallRow& row, ref::PlanRequest request,
                   int32_t real, const CallOverride* o, int32_t* plan_index);
  Status ReusePlan(const std::string& step, const CallRow& row, ref::PlanRequest request,
                   int32_t* plan_index);
  Status UpdatePlan(const std::string& step, const CallRow& row, int32_t plan_index, int32_t real,
                    int32_t* out_index);
  void SetHandles(const CallRow& row, int32_t plan_index);
  int32_t Handle(const std::string& name) const;
  void Fill(const std::string& step, const CallRow& row, const std::vector<int32_t>& indptr,
            int32_t tokens, bool graph);
  void Decode(const std::string& step, const CallRow& row, int32_t plan, int32_t q_rows,
              bool sparse, bool graph, int32_t max_seqlen_q, bool guard);
  // Decode's pieces: q, o and the split accumulators; the KV index (and cache) arguments; the
  // scenario's overrides as notes; the reduce launch that follows it.
  void AddDecodeTensors(const PlanSnapshot& snap, const CallOverride* o, int32_t fold,
                        int32_t max_seqlen_q, Call* c) const;
  void AddDecodeIndexArgs(bool sparse, Call* c) const;
  static void NoteDecodeOverrides(const CallOverride& o, Call* c);
  static Call ReduceCallOf(const Call& decode, const CallRow& row,
                           const std::shared_ptr<const Contract>& reduce);

  const Scenario& s_;
  Trace& t_;
  const CallTable& table_;
  const SimMutantSpec& mutant_;
  StepShape& sh_ = t_.shape;
  std::vector<int64_t> vars_;
  int32_t draft_ = 0;  // the loop variable of a repeated step (draft step s)
  std::shared_ptr<const Contract> decode_, reduce_;
  std::map<std::string, std::shared_ptr<const Contract>> fills_;
  std::map<std::string, ref::MetadataSizes> capacity_;
  std::map<std::string, DialectSizing> dialect_capacity_;  // flashmla / flashinfer sets
  std::map<std::string, std::shared_ptr<const Contract>> dialect_decode_;  // by planner
  std::shared_ptr<const Contract> dialect_reduce_;
  std::map<std::string, int32_t> handles_;  // plan handle -> index into t_.plans
  int32_t page_ = 1;                        // KV page size, tokens
  std::vector<int32_t> verify_kv_indptr_;   // R+1 entries (pages; pads repeat)
  std::vector<int32_t> verify_last_page_;   // R entries (pads 0)
  std::vector<int32_t> sparse_kv_indptr_;   // T_r+1 entries (pads repeat)
  std::vector<int32_t> token_request_;      // T_s entries: each verify token's request
  std::vector<int64_t> kv_slot_base_;       // first KV-cache row of each request (kv_cache)
  // Plans the engine built at graph capture, by "<step>.<call>" (plan_from "capture").
  std::map<std::string, PlanSnapshot> captured_;
  std::map<std::string, int32_t> built_;  // "<step>.<call>" -> plan index, this step
};

int64_t StepBuilder::Eval(const Expr& e, const char* what) const {
  static const std::string kNoPrefix;
  return Eval(e, kNoPrefix, what);
}

int64_t StepBuilder::Eval(const Expr& e, const std::string& prefix, const char* what) const {
  bool defined = true;
  const int64_t v = e.Eval(vars_.data(), nullptr, Loader(), &defined);
  MLASIM_ASSERT(defined, "call table " + table_.name + ": " + prefix + what + " \"" + e.text() +
                             "\" is undefined (division by zero?)");
  return v;
}

int64_t StepBuilder::Var(std::string_view name) const {
  for (const TableVariable& v : table_.variables)
    if (v.name == name) return vars_[v.slot];
  return 0;
}

void StepBuilder::AddPersistent(std::string name, int64_t rows, int64_t row_bytes,
                                const char* dtype) {
  t_.persistent.push_back(PersistentBuffer{std::move(name), rows, row_bytes, dtype});
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
  r.page_size = page_;
  r.kv_granularity = s_.kv_granularity;
  r.qlen = r.max_seqlen_qo = r.uni_seqlen_qo = qlen;
  r.max_split_per_batch = s_.max_split_per_batch;
  return r;
}

// ---------------------------------------------------------------------------------------------
// Shape, variables, contracts, buffers
// ---------------------------------------------------------------------------------------------

void StepBuilder::ComputeShape() {
  const int32_t B = static_cast<int32_t>(s_.requests.size());
  sh_.B = B;
  sh_.Q = s_.mtp_k + 1;
  sh_.q_lens.reserve(s_.requests.size());
  sh_.kv_lens.reserve(s_.requests.size());
  for (const RequestSpec& r : s_.requests) sh_.q_lens.push_back(QLen(s_, r));
  sh_.scheduled_tokens = ScheduledTokens(s_);
  sh_.R = ChooseRung(s_, B, &sh_.graph);
  sh_.running_tokens = sh_.R * sh_.Q;
  sh_.heads_per_rank = s_.model.heads / s_.parallel.tp;
  sh_.kernel_heads = KernelHeads(s_);
  // KV lengths: L_i = context - rejected_prev; DCP ranks hold the interleaved local share.
  for (const RequestSpec& r : s_.requests) {
    int32_t L = r.context - r.rejected_prev;
    if (s_.parallel.dcp > 1) {
      const int32_t W = s_.parallel.dcp, S = s_.parallel.dcp_interleave;
      L = (L / (S * W)) * S + std::min(L % (S * W), S);  // positions on rank 0
    }
    sh_.kv_lens.push_back(L);
  }
  page_ = s_.kv_cache.page_size;
  std::vector<int32_t> lens(sh_.R, 0);
  for (int32_t i = 0; i < B; ++i) lens[i] = sh_.kv_lens[i];
  PagedLens verify = Paged(lens, page_, 0);
  verify_kv_indptr_ = std::move(verify.indptr);
  verify_last_page_ = std::move(verify.last);
  // One entry per token: request b's q_b tokens are the last q_b of its KV (token j sees
  // L - q_b + j + 1 keys, capped at top-k), then the padding tokens up to T_r with 0.
  sparse_kv_indptr_.assign(1, 0);
  sparse_kv_indptr_.reserve(std::max(sh_.running_tokens, sh_.scheduled_tokens) + 1);
  token_request_.reserve(std::max(sh_.running_tokens, sh_.scheduled_tokens));
  for (int32_t b = 0; b < B; ++b) {
    const int32_t qb = sh_.q_lens[b];
    for (int32_t j = 0; j < qb; ++j) {
      token_request_.push_back(b);
      int32_t count = std::min(sh_.kv_lens[b] - qb + j + 1, s_.model.topk);
      if (!s_.requests[b].topk_lengths.empty()) count = s_.requests[b].topk_lengths[j];
      sparse_kv_indptr_.push_back(sparse_kv_indptr_.back() + std::max(count, 0));
    }
  }
  while (static_cast<int32_t>(sparse_kv_indptr_.size()) <= sh_.running_tokens)
    sparse_kv_indptr_.push_back(sparse_kv_indptr_.back());
}

Status StepBuilder::EvalVariables() {
  vars_.assign(table_.num_slots, 0);
  const EngineProfile& e = s_.engine;
  const std::pair<EngineVar, int64_t> base[] = {
      {kEvB, sh_.B},
      {kEvR, sh_.R},
      {kEvQ, sh_.Q},
      {kEvK, s_.mtp_k},
      {kEvTs, sh_.scheduled_tokens},
      {kEvTr, sh_.running_tokens},
      {kEvH, sh_.heads_per_rank},
      {kEvHk, sh_.kernel_heads},
      {kEvSparse, s_.model.sparse},
      {kEvDcp, s_.parallel.dcp},
      {kEvDp, s_.parallel.dp},
      {kEvGraph, sh_.graph},
      {kEvTopk, s_.model.topk},
      {kEvMaxNumSeqs, s_.graph.max_num_seqs},
      {kEvMaxNumBatchedTokens, s_.graph.max_num_batched_tokens},
      {kEvMaxModelLen, s_.graph.max_model_len},
      {kEvKvWidth, s_.model.kv_lora_rank + s_.model.rope_dim},
      {kEvPlanOverScheduled,
       e.sparse_mtp_plan_tokens == EngineProfile::SparsePlanTokens::kScheduled},
      {kEvDraftRowsPadded, e.draft_rows == EngineProfile::DraftRows::kPadded},
      {kEvPlanRowsGuard, e.plan_rows_guard},
      {kEvDcpSliceRebuildInputs, e.dcp_slice_rebuild_inputs},
      {kEvIncrementalUpdate, e.incremental_update},
      {kEvUpdateUsesVerifyWidth, e.update_uses_verify_width},
      {kEvPlanOverPadded, e.plan_batch == EngineProfile::PlanBatch::kPadded},
      {kEvPadKvLen, e.pad_kv_len},
      {kEvNumSplitsPad, static_cast<int64_t>(e.num_splits_pad)},
      {kEvMetadataCaptured, e.metadata == EngineProfile::Metadata::kCaptured},
      {kEvBackendFlashmla, e.attention_backend == "flashmla"},
      {kEvBackendFlashinfer, e.attention_backend == "flashinfer"}};
  for (const auto& [v, x] : base) vars_[v] = x;
  for (const TableVariable& v : table_.variables) vars_[v.slot] = Eval(v.value, v.name);
  sh_.sparse_plan_tokens = static_cast<int32_t>(Var("sparse_plan_tokens"));
  sh_.draft_rows = static_cast<int32_t>(Var("draft_rows"));
  return OkStatus();
}

Status StepBuilder::ResolveContracts() {
  MLASIM_ASSIGN_OR_RETURN(decode_, ContractFor(s_, CallKind::kDecode, s_.kernel, "$.kernel"));
  std::map<std::string, int64_t> what_if = mutant_.contract_constants;
  if (s_.zero_kv_reads_index_row) what_if["zero_kv_reads_index_row"] = 1;
  MLASIM_ASSIGN_OR_RETURN(decode_, WithConstants(decode_, what_if));
  MLASIM_ASSIGN_OR_RETURN(reduce_, ContractFor(s_, CallKind::kReduce, "mla_reduce_v1", "contract"));
  for (const StepSpec& st : table_.steps) {
    for (const CallRow& row : st.calls) {
      if (row.kind == CallKind::kPlanBuild && row.planner != "aiter" &&
          !dialect_decode_.count(row.planner)) {
        const char* variant = row.planner == "flashmla" ? "flashmla_dense" : "flashinfer_fa3";
        MLASIM_ASSIGN_OR_RETURN(dialect_decode_[row.planner],
                                ContractFor(s_, CallKind::kDecode, variant, "$.kernel"));
        MLASIM_ASSIGN_OR_RETURN(dialect_reduce_,
                                ContractFor(s_, CallKind::kReduce, "in_decode", "contract"));
      }
      if (row.kind != CallKind::kIndexFill || fills_.count(row.kernel)) continue;
      MLASIM_ASSIGN_OR_RETURN(fills_[row.kernel],
                              ContractFor(s_, CallKind::kIndexFill, row.kernel, "contract"));
    }
  }
  return OkStatus();
}

Status StepBuilder::AllocateBuffers() {
  // Room for every buffer a table names (each plan set's five, the persistent ones, the KV
  // cache) without moving the list as it grows.
  t_.persistent.reserve(t_.persistent.size() + 6 * table_.plan_buffers.size() +
                        table_.persistent.size() + 1);
  // Capacities (§3): the builder sizes every buffer once, with the table's sizing inputs.
  for (const PlanBufferSet& b : table_.plan_buffers) {
    if (!When(b.when)) continue;
    int32_t qlen = static_cast<int32_t>(Eval(b.qlen, b.prefix, "qlen"));
    int32_t batch = static_cast<int32_t>(Eval(b.sizing_batch, b.prefix, "sizing_batch"));
    if (b.planner != "aiter") {  // the dialect's own host sizing (sim/engine_dialect.h)
      auto z = SizeDialect(b.planner, batch, qlen, Dialect());
      if (!z.ok())
        return WrappedError(z.status(), "$",
                            "the engine's " + b.prefix +
                                " buffers cannot be sized"
                                " by the " +
                                b.planner + " planner: " + z.status().ToString());
      for (const PersistentBuffer& p : DialectBuffers(b.prefix, *z)) t_.persistent.push_back(p);
      dialect_capacity_[b.prefix] = std::move(*z);
      continue;
    }
    ref::PlanRequest sizing = BaseRequest(qlen);
    sizing.topk = static_cast<int32_t>(Eval(b.topk, b.prefix, "topk"));
    // The scenario's sizing inputs where they differ from the planner's (class D): at most one
    // entry per buffer set (the parser refuses a second).
    const SizingOverride* stated = nullptr;
    for (const SizingOverride& z : s_.sizing) {
      if (z.buffers != b.prefix) continue;
      stated = &z;
      if (z.batch >= 0) batch = z.batch;
      if (z.qlen >= 0) sizing.qlen = sizing.max_seqlen_qo = sizing.uni_seqlen_qo = z.qlen;
      if (z.heads >= 0) sizing.heads_per_head_k = z.heads;
      if (z.cu_count >= 0) sizing.cu_count = z.cu_count;
      if (!z.dtype.empty())
        sizing.q_dtype = sizing.kv_dtype = *ref::ParseDType(z.dtype, "$.sizing.dtype");
      if (z.is_sparse >= 0) sizing.topk = z.is_sparse ? std::max(sizing.topk, 0) : -1;
    }
    StatusOr<ref::MetadataSizes> sized = ref::GetMlaMetadataInfoV1(sizing, batch);
    if (!sized.ok()) {
      const size_t index = stated != nullptr ? static_cast<size_t>(stated - s_.sizing.data()) : 0;
      return WrappedError(
          sized.status(), SizingRefusalPath(sized.status().field(), stated, index),
          "the engine's " + b.prefix + " buffers cannot be sized: " + sized.status().ToString());
    }
    ref::MetadataSizes z = std::move(*sized);
    if (Var("partial_map_per_tile")) z = ref::PartialMapOnePerTile(z);  // the one implementation
    if (const Status st = ref::CheckSizesLimit(z); !st.ok())  // plan_elements, as `mlasim plan`
      return WrappedError(st, "$", "the engine's " + b.prefix + " plan buffers: " + st.ToString());
    capacity_[b.prefix] = z;
    AddPlanBuffers(b.prefix, z);
  }
  for (const PersistentSpec& p : table_.persistent)
    if (When(p.when)) AddPersistent(p.name, Eval(p.rows, p.name), 4, "int32");
  for (const SizingOverride& z : s_.sizing)
    if (!capacity_.count(z.buffers))
      return InvalidArgumentError(
          "$.sizing", "no plan buffers \"" + z.buffers + "\" in this step (the engine sizes: " +
                          [&] {
                            std::string k;
                            for (const auto& [n, c] : capacity_) k += (k.empty() ? "" : ", ") + n;
                            return k;
                          }() +
                          ")");
  if (s_.kv_cache.modelled) {
    // The KV cache: each request's tokens, and room for its K draft tokens, in slots after the
    // previous request's; one spare row. Row = one token of kv_lora_rank + rope_dim values.
    int64_t rows = 0;  // pages until the end, then rows
    kv_slot_base_.reserve(sh_.kv_lens.size());
    t_.kv_written.reserve(sh_.kv_lens.size());
    for (const int32_t L : sh_.kv_lens) {
      kv_slot_base_.push_back(rows);
      t_.kv_written.push_back({rows * page_, rows * page_ + L + s_.mtp_k});
      rows += (L + s_.mtp_k + page_ - 1) / page_;
    }
    rows *= page_;
    if (s_.kv_cache.num_rows > 0) rows = s_.kv_cache.num_rows;
    t_.persistent.push_back(PersistentBuffer{
        "kv_cache", rows + (s_.kv_cache.num_rows > 0 ? 0 : 1),
        int64_t{s_.model.kv_lora_rank + s_.model.rope_dim} * Bytes(s_.model.kv_dtype),
        ref::DTypeName(s_.model.kv_dtype)});
  }
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------
// Input builders and indptrs
// ---------------------------------------------------------------------------------------------

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

// The sparse indptr of draft step s over n rows: each row's KV capped at top-k.
std::vector<int32_t> StepBuilder::DraftSparseIndptr(int32_t s, int32_t n) const {
  const std::vector<int32_t> kv = DraftKvIndptr(s);
  std::vector<int32_t> sparse = {0};
  for (int32_t i = 0; i < n; ++i)
    sparse.push_back(sparse.back() + std::min(kv[i + 1] - kv[i], s_.model.topk));
  return sparse;
}

PagedLens StepBuilder::DraftPaged(int32_t s, int32_t n) const {
  if (page_ == 1) {
    PagedLens p;
    p.indptr = DraftKvIndptr(s);
    p.last.assign(std::max<int32_t>(n, static_cast<int32_t>(p.indptr.size()) - 1), 1);
    return p;
  }
  std::vector<int32_t> lens(std::max(n, sh_.R), 0);
  for (int32_t i = 0; i < sh_.B; ++i) lens[i] = sh_.kv_lens[i] - s_.requests[i].rejected + s;
  return Paged(lens, page_, 1);
}

std::vector<int32_t> StepBuilder::Indptr(const std::string& name, int32_t tokens) const {
  if (name == "verify_kv_indptr") return verify_kv_indptr_;
  if (name == "sparse_kv_indptr") return sparse_kv_indptr_;
  if (name == "draft_kv_indptr") return DraftPaged(draft_, tokens).indptr;
  if (name == "engine_kv_indptr") {  // R requests: the real lengths, padding at pad_kv_len
    std::vector<int32_t> lens(sh_.R, s_.engine.pad_kv_len);
    for (int32_t i = 0; i < sh_.B; ++i) lens[i] = sh_.kv_lens[i];
    return Paged(lens, page_, 0).indptr;
  }
  MLASIM_ASSERT(name == "draft_sparse_indptr", "unknown indptr " + name);
  return DraftSparseIndptr(draft_, tokens);
}

ref::PlanRequest StepBuilder::BuildInputs(const CallRow& row) const {
  const std::string_view in = row.inputs;  // (compared with literals: lengths first)
  const int32_t B = sh_.B, R = sh_.R, Q = sh_.Q;
  if (in == "engine_batch" || in == "capture_batch") {
    // vLLM / SGLang (docs/engines.md): `tokens` requests of Q query tokens each. engine_batch:
    // the step's B real requests, then padding requests of pad_kv_len tokens; capture_batch:
    // the batch the graph was captured with (the scenario's capture.contexts, else R requests
    // of Q tokens, as CapturePlans assumes).
    const bool capture = in == "capture_batch";
    const int32_t n =
        capture
            ? (s_.capture_contexts.empty() ? R : static_cast<int32_t>(s_.capture_contexts.size()))
            : static_cast<int32_t>(Eval(row.tokens, "tokens"));
    std::vector<int32_t> lens(std::max(n, 0), s_.engine.pad_kv_len);
    for (int32_t i = 0; i < n; ++i) {
      if (capture)
        lens[i] = s_.capture_contexts.empty() ? Q : s_.capture_contexts[i];
      else if (i < B)
        lens[i] = sh_.kv_lens[i];
    }
    ref::PlanRequest r = BaseRequest(Q);
    const PagedLens paged = Paged(lens, page_, 0);
    r.qo_indptr.assign(lens.size() + 1, 0);
    for (size_t i = 0; i < lens.size(); ++i) r.qo_indptr[i + 1] = r.qo_indptr[i] + Q;
    r.kv_indptr = paged.indptr;
    r.kv_last_page_lens = paged.last;
    return r;
  }
  if (in == "verify_padded" || in == "verify_real_cprr") {
    // T1: the main plan over R requests with uni q length Q; pads have 0 KV (§2, §4).
    ref::PlanRequest main = BaseRequest(Q);
    main.qo_indptr.assign(R + 1, 0);
    main.kv_indptr = verify_kv_indptr_;
    // Request i's rows start at qo_indptr[i] (ragged under batch.q_lens). The engine still
    // passes uni_seqlen_qo = max_seqlen_qo = Q, so aiter's planner tiles Q rows per request
    // at i x Q whatever qo_indptr says (aiter-mla-metadata.md §4.3).
    for (int32_t i = 1; i <= R; ++i)
      main.qo_indptr[i] = main.qo_indptr[i - 1] + (i <= B ? sh_.q_lens[i - 1] : 0);
    // An engine with non_uniform_q_plan passes uni_seqlen_qo = -1 on a ragged batch: aiter's
    // non-uniform path then places each request's rows from qo_indptr (docs/planner.md).
    if (s_.engine.non_uniform_q_plan && RaggedQ()) main.uni_seqlen_qo = -1;
    main.kv_last_page_lens = verify_last_page_;
    if (in == "verify_real_cprr") {
      // T4': with DCP the dense MTP verify plans the B real requests (cprr; PR #1746).
      main.qo_indptr.resize(B + 1);
      main.kv_indptr.resize(B + 1);
      main.kv_last_page_lens.resize(B);
      main.is_cp_round_robin = true;
    }
    return main;
  }
  const int32_t n = row.tokens.empty() ? 0 : static_cast<int32_t>(Eval(row.tokens, "tokens"));
  ref::PlanRequest r = BaseRequest(1);
  if (in == "per_token") {
    // T2: one qlen-1 batch per token over the first n tokens of the sparse indptr; pads 0 KV.
    r.qo_indptr = Arange(n);
    r.kv_indptr.assign(sparse_kv_indptr_.begin(), sparse_kv_indptr_.begin() + n + 1);
    r.kv_last_page_lens.assign(n, 1);
  } else if (in == "dcp_rebuild") {
    // D0c: kv_indptr from the compacted indptr of n tokens; cu_seqlens_q / last-page lens of
    // q_entries tokens (T_r before #2715 sliced them).
    const int32_t qn = static_cast<int32_t>(Eval(row.q_entries, "q_entries"));
    r.qo_indptr = Arange(qn);
    r.kv_indptr.assign(sparse_kv_indptr_.begin(), sparse_kv_indptr_.begin() + n + 1);
    r.kv_last_page_lens.assign(qn, 1);
  } else if (in == "draft_sparse") {
    // Ms(a): a fresh qlen-1 plan over n rows from the sparse indptr and all-ones last pages.
    r.qo_indptr = Arange(n);
    r.kv_indptr = DraftSparseIndptr(draft_, n);
    r.kv_last_page_lens.assign(n, 1);
  } else {
    MLASIM_ASSERT(in == "draft_fresh", "unknown input builder " + row.inputs);
    // Ms(c) / Ms(d): a fresh qlen-1 build over n requests of the draft step's kv_indptr.
    const PagedLens kv = DraftPaged(draft_, n);
    r.qo_indptr = Arange(n);
    r.kv_indptr.assign(kv.indptr.begin(), kv.indptr.begin() + n + 1);
    r.kv_last_page_lens.assign(kv.last.begin(), kv.last.begin() + n);
  }
  return r;
}

// ---------------------------------------------------------------------------------------------
// Trace plumbing
// ---------------------------------------------------------------------------------------------

Status StepBuilder::BuildPlan(const std::string& step, const CallRow& row, ref::PlanRequest request,
                              int32_t real, const CallOverride* o, int32_t* plan_index) {
  ref::PlannerOptions options;
  options.choice =
      s_.serial_planner ? ref::PlannerChoice::kSerial : ref::PlannerChoice::kAiterDispatch;
  options.mutant = mutant_.planner;
  const ref::MetadataSizes& sizes = capacity_.at(row.capacity);
  ref::Plan planned = TakePlan(sizes);
  // mlasim's limits (ref/limits.h: --limit, MLASIM_LIMITS) hold for the engine's requests as for
  // `mlasim plan`'s: a lowered one is refused here, named by its scenario field.
  Status plan = ref::CheckRequestLimits(request);
  if (plan.ok()) plan = ref::PlanMlaMetadataInto(request, sizes, options, &planned);
  if (!plan.ok()) {
    // A refused request leaves the plan as it was (the planner refuses before it prepares any
    // buffer): a recycled one goes back to the pool, a fresh one has no memory to keep.
    if (planned.work_info.data.capacity() > 0) KeepPlan(std::move(planned));
    // The override's key that set the refused input, else the field the engine derives it from.
    const std::string field =
        PlannerRefusalPath(plan.field(), o, o != nullptr ? OverrideIndex(o) : 0);
    return WrappedError(plan, field,
                        "the engine's " + row.call + " at " + step +
                            " is refused by the planner: " + plan.ToString());
  }
  PlanSnapshot snap;
  snap.name = row.call;
  snap.buffer_prefix = row.buffers;
  snap.request = std::move(request);
  snap.plan = std::move(planned);
  snap.real_requests = real;
  snap.q_rows_covered = CoveredQRows(snap.plan);
  t_.plans.push_back(std::move(snap));
  *plan_index = static_cast<int32_t>(t_.plans.size() - 1);
  Call c;
  c.step = step;
  c.name = row.call;
  c.table_row = row.row;
  c.kind = CallKind::kPlanBuild;
  c.kernel = "get_mla_metadata_v1";
  c.plan = *plan_index;
  c.plan_rows = t_.plans.back().q_rows_covered;
  t_.calls.push_back(std::move(c));  // (its note: CallNote)
  return OkStatus();
}

// The plan of handle row.reuse_plan, kept although the lengths changed (a stale plan).
Status StepBuilder::ReusePlan(const std::string& step, const CallRow& row, ref::PlanRequest request,
                              int32_t* plan_index) {
  PlanSnapshot stale = t_.plans[Handle(row.reuse_plan)];
  stale.request = std::move(request);
  stale.name = row.call + "(stale)";
  t_.plans.push_back(std::move(stale));
  *plan_index = static_cast<int32_t>(t_.plans.size() - 1);
  Call c;
  c.step = step;
  c.name = row.call + "_reuse";
  c.table_row = row.row;
  c.kind = CallKind::kPlanUpdate;
  c.kernel = "(reuse)";
  c.plan = *plan_index;
  c.plan_rows = t_.plans.back().q_rows_covered;
  t_.calls.push_back(std::move(c));
  return OkStatus();
}

Status StepBuilder::UpdatePlan(const std::string& step, const CallRow& row, int32_t plan_index,
                               int32_t real, int32_t* out_index) {
  const PagedLens paged = DraftPaged(draft_, sh_.R);
  const std::vector<int32_t> kv_indptr(paged.indptr.begin(), paged.indptr.begin() + sh_.R + 1);
  const bool rejects = !row.rejects.empty() && Eval(row.rejects, "rejects") != 0;
  PlanSnapshot snap = t_.plans[plan_index];
  snap.plan.input_violations.clear();  // reported with the call that made them
  ref::DecodeUpdateRequest u;
  u.target = s_.target;
  u.revision = s_.revision;
  u.heads_per_head_k = sh_.kernel_heads;
  // The page size stays 1 on purpose, whatever the step's pages: aiter asserts page_size == 1,
  // and the model asks what an engine that patches a paged plan anyway gets (the update moves
  // pieces by tokens over lengths in pages; docs/findings.md #7, the known family
  // decode-update-on-paged-plan, tests/cases/H-decode-update-on-paged-plan.json).
  u.q_dtype = u.kv_dtype = s_.model.kv_dtype;
  u.max_seqlen_qo = s_.engine.update_uses_verify_width ? sh_.Q : 1;
  u.qo_indptr = snap.request.qo_indptr;
  u.kv_indptr = kv_indptr;
  if (rejects) {
    for (const RequestSpec& r : s_.requests) u.num_reject_tokens.push_back(r.rejected);
    u.has_num_reject_tokens = true;
  }
  u.permissive = true;  // the engine calls it whatever the plan; the checker judges the result
  MLASIM_RETURN_IF_ERROR(ref::DecodeUpdateMlaMetadataV1(u, snap.plan));
  // The request the updated plan must now serve: the new lengths, one q row per batch.
  ref::PlanRequest served = snap.request;
  served.kv_indptr = kv_indptr;
  served.qlen = served.max_seqlen_qo = served.uni_seqlen_qo = 1;
  served.qo_indptr = Arange(static_cast<int32_t>(kv_indptr.size()) - 1);
  served.kv_last_page_lens.assign(paged.last.begin(), paged.last.begin() + sh_.R);
  snap.request = std::move(served);
  snap.real_requests = real;
  snap.q_rows_covered = CoveredQRows(snap.plan);
  snap.name = t_.plans[plan_index].name + "@" + step;
  t_.plans.push_back(std::move(snap));
  *out_index = static_cast<int32_t>(t_.plans.size() - 1);
  Call c;
  c.step = step;
  c.name = row.call;
  c.table_row = row.row;
  c.kind = CallKind::kPlanUpdate;
  c.kernel = "decode_update_mla_metadata_v1";
  c.plan = *out_index;
  c.plan_rows = t_.plans.back().q_rows_covered;
  c.note =
      std::string("patches the target plan in place for ") + std::to_string(kv_indptr.size() - 1) +
      " batches" +
      (rejects ? " with num_reject_tokens of " + std::to_string(s_.requests.size()) + " entries"
               : "");
  t_.calls.push_back(std::move(c));
  return OkStatus();
}

void StepBuilder::SetHandles(const CallRow& row, int32_t plan_index) {
  static const std::string kLast = "last";  // (no string made per plan)
  handles_[kLast] = plan_index;
  for (const std::string& h : row.sets) handles_[h] = plan_index;
}

int32_t StepBuilder::Handle(const std::string& name) const {
  const auto it = handles_.find(name);
  MLASIM_ASSERT(it != handles_.end(),
                "call table " + table_.name + " uses plan " + name + " before any row sets it");
  return it->second;
}

void StepBuilder::Fill(const std::string& step, const CallRow& row,
                       const std::vector<int32_t>& indptr, int32_t tokens, bool graph) {
  Call c;
  c.step = step;
  c.name = row.call;
  c.table_row = row.row;
  c.kind = CallKind::kIndexFill;
  c.kernel = row.kernel;
  c.contract = fills_.at(row.kernel);
  c.graph_replay = graph;
  const int32_t n = std::min<int32_t>(tokens, static_cast<int32_t>(indptr.size()) - 1);
  c.fill_regions.reserve(static_cast<size_t>(std::max(n, 0)));
  for (int32_t t = 0; t < n; ++t) c.fill_regions.push_back({indptr[t], indptr[t + 1]});
  c.fill_begin = n > 0 ? indptr[0] : 0;
  c.fill_end = n > 0 ? indptr[n] : 0;
  c.fill_indptr = indptr;
  c.fill_indptr_buffer = row.indices == "kv_indices" ? "kv_indptr" : "sparse_kv_indptr";
  c.fill_tokens = n;
  TensorArg a;
  a.role = "indices";
  a.buffer = row.indices;
  for (const PersistentBuffer& p : t_.persistent)
    if (p.name == row.indices) a.rows = p.rows;
  a.row_bytes = 4;
  a.dtype = "int32";
  c.args.push_back(a);
  t_.calls.push_back(std::move(c));  // (its note: CallNote)
}

void StepBuilder::Decode(const std::string& step, const CallRow& row, int32_t plan, int32_t q_rows,
                         bool sparse, bool graph, int32_t max_seqlen_q, bool guard) {
  const PlanSnapshot& snap = t_.plans[plan];
  const CallOverride* o = Override(step, row.call);
  const bool dialect = snap.dialect != nullptr;
  const auto& decode = dialect ? dialect_decode_.at(snap.dialect->planner) : decode_;
  const auto& reduce = dialect ? dialect_reduce_ : reduce_;
  // aiter's kernels view q/o of a head-folded plan as [rows * R, heads / R]; a kernel whose
  // contract never loads work_info plans by itself and sees [tokens, heads].
  const int32_t fold =
      ProgramLoads(decode->program, kLoadWorkInfo) ? std::max(snap.plan.derived.fold_ratio, 1) : 1;
  // What the engine allocated (q and o can come from independent sources).
  const int64_t q_alloc = o && o->q_rows >= 0 ? o->q_rows : q_rows;
  const int64_t o_alloc = o && o->o_rows >= 0 ? o->o_rows : q_rows;
  Call c;
  c.step = step;
  c.name = row.call;
  c.table_row = row.row;
  c.kind = CallKind::kDecode;
  c.kernel = decode->variant;
  c.contract = decode;
  c.graph_replay = graph;
  c.plan = plan;
  c.page_size = page_;
  c.q_rows = static_cast<int32_t>(q_alloc);
  c.o_rows = static_cast<int32_t>(o_alloc);
  c.plan_rows = snap.q_rows_covered;
  c.view_fold = fold;
  c.sparse = sparse;
  c.max_seqlen_q = max_seqlen_q;
  c.args.reserve(6);  // q, o, logits, attn_lse, kv_indices, kv_cache
  AddDecodeTensors(snap, o, fold, max_seqlen_q, &c);
  AddDecodeIndexArgs(sparse, &c);
  if (o) NoteDecodeOverrides(*o, &c);
  // The engine's plan-rows guard (#2715) refuses a plan wider than q before the launch.
  if (guard) {
    c.guard_checked = true;
    c.guard_refused = snap.q_rows_covered > q_alloc;
  }
  if (dialect) DialectLaunch(row, snap, &c);  // (the call's note: CallNote)
  Call r = ReduceCallOf(c, row, reduce);
  t_.calls.push_back(std::move(c));
  t_.calls.push_back(std::move(r));
}

void StepBuilder::AddDecodeTensors(const PlanSnapshot& snap, const CallOverride* o, int32_t fold,
                                   int32_t max_seqlen_q, Call* c) const {
  const int32_t kv_width = s_.model.kv_lora_rank + s_.model.rope_dim;
  const int32_t qb = Bytes(s_.model.kv_dtype), ob = Bytes(s_.model.model_dtype);
  const int32_t vh = sh_.kernel_heads / fold;  // heads per (folded) row
  // How the kernel actually run views a row: its heads per row and its columns (a kernel built
  // for 576-column rows run on a rope-free model, vLLM #56314, walks fewer, wider rows than q
  // holds).
  // A kernel with fewer heads than the fold ratio still strides one head per folded row (its
  // rows then overrun q, which the executor reports); 0 would leave the view without rows.
  const int32_t view_heads = o && o->kernel_heads > 0 ? std::max(o->kernel_heads / fold, 1) : vh;
  const int32_t view_cols =
      o && o->kernel_q_cols > 0 ? o->kernel_q_cols : static_cast<int32_t>(Var("kernel_q_cols"));
  // mla_decode_fwd views q/o of folded heads as [rows * R, 16, D] (§10.3).
  c->args.push_back(
      TransientTensor("q", "q", int64_t{c->q_rows} * fold, vh, kv_width, qb, s_.model.kv_dtype));
  ViewRows(c->args.back(), view_heads, view_cols);
  c->args.push_back(TransientTensor("o", "o", int64_t{c->o_rows} * fold, vh, s_.model.kv_lora_rank,
                                    ob, s_.model.model_dtype));
  ViewRows(c->args.back(), view_heads, s_.model.kv_lora_rank);
  // A dialect's split accumulators: FlashMLA's lse_accum / o_accum rows (b + num_sm_parts).
  const int64_t partial_rows =
      (snap.dialect != nullptr ? std::max(snap.dialect->flashmla_accum_rows, 1)
                               : int64_t{snap.plan.sizes.reduce_partial_map}) *
      max_seqlen_q;
  c->args.push_back(TransientTensor("logits", "logits", partial_rows, vh, s_.model.kv_lora_rank, 4,
                                    ref::DType::kFp32));
  c->args.push_back(
      TransientTensor("attn_lse", "attn_lse", partial_rows, vh, 1, 4, ref::DType::kFp32));
}

void StepBuilder::AddDecodeIndexArgs(bool sparse, Call* c) const {
  TensorArg idx;
  idx.role = "kv_indices";
  idx.buffer = sparse ? "sparse_kv_indices" : "kv_indices";
  for (const PersistentBuffer& p : t_.persistent)
    if (p.name == idx.buffer) idx.rows = p.rows;
  idx.row_bytes = 4;
  idx.dtype = "int32";
  c->args.push_back(idx);
  if (!s_.kv_cache.modelled) return;
  TensorArg kv;
  kv.role = "kv_cache";
  kv.buffer = "kv_cache";
  for (const PersistentBuffer& p : t_.persistent)  // (string to string: lengths first)
    if (p.name == kv.buffer) kv.rows = p.rows, kv.row_bytes = p.row_bytes;
  kv.heads = 1;
  kv.cols = s_.model.kv_lora_rank + s_.model.rope_dim;
  kv.elem_bytes = Bytes(s_.model.kv_dtype);
  kv.dtype = ref::DTypeName(s_.model.kv_dtype);
  c->args.push_back(kv);
}

void StepBuilder::NoteDecodeOverrides(const CallOverride& o, Call* c) {
  if (o.launch_grid >= 0) c->launch_grid = o.launch_grid;
  auto note = [&](bool set, const std::string& what) {
    if (set) c->overrides.push_back(what);
  };
  note(o.q_rows >= 0, "q allocated with " + std::to_string(o.q_rows) + " rows");
  note(o.o_rows >= 0, "o allocated with " + std::to_string(o.o_rows) + " rows");
  note(o.kernel_heads > 0,
       "the kernel strides " + std::to_string(o.kernel_heads) + " heads per q row");
  note(o.kernel_q_cols > 0,
       "the kernel strides " + std::to_string(o.kernel_q_cols) + " columns per q row");
  note(o.launch_grid >= 0, "launched with " + std::to_string(o.launch_grid) + " workgroups");
  note(!o.plan_from.empty(), "consumes the plan of " + o.plan_from);
}

Call StepBuilder::ReduceCallOf(const Call& decode, const CallRow& row,
                               const std::shared_ptr<const Contract>& reduce) {
  Call r = decode;
  r.dialect_findings.clear();
  r.note.clear();  // (not a dialect decode's launch note: CallNote says the reduce's)
  r.name = ReduceCallName(row.call);
  r.kind = CallKind::kReduce;
  r.kernel = reduce->variant;
  r.contract = reduce;
  r.launch_grid = -1;
  // The reduce reads no KV indices and no KV cache.
  r.args.erase(std::remove_if(r.args.begin(), r.args.end(),
                              [](const TensorArg& a) {  // (as string_views: lengths first)
                                const std::string_view role = a.role;
                                return role == "kv_indices" || role == "kv_cache";
                              }),
               r.args.end());
  return r;  // (its note: CallNote)
}

// ---------------------------------------------------------------------------------------------
// Scenario overrides
// ---------------------------------------------------------------------------------------------

const CallOverride* StepBuilder::Override(const std::string& step, const std::string& call) const {
  if (s_.calls.empty()) return nullptr;  // (the key is not built for a step without overrides)
  const std::string key = step + "." + call;
  for (const CallOverride& o : s_.calls)
    if (o.call == key) return &o;
  return nullptr;
}

// The plans the engine built when it captured its graphs: the same table over the capture batch
// (R requests of capture_contexts, or of Q tokens each), without overrides.
Status StepBuilder::CapturePlans() {
  bool needed = false;
  for (const CallOverride& o : s_.calls) needed = needed || o.plan_from == "capture";
  if (!needed) return OkStatus();
  if (!s_.capture_contexts.empty() && static_cast<int32_t>(s_.capture_contexts.size()) != sh_.R)
    return InvalidArgumentError(
        "$.capture.contexts",
        "needs one context per captured request (the rung R = " + std::to_string(sh_.R) + ")");
  Scenario cap = s_;
  cap.calls.clear();
  cap.requests.assign(sh_.R, RequestSpec());
  for (int32_t i = 0; i < sh_.R; ++i)
    cap.requests[i].context = s_.capture_contexts.empty() ? sh_.Q : s_.capture_contexts[i];
  cap.parallel.dp_scheduled_tokens.clear();
  cap.kv_cache = KvCacheSpec();
  Trace t;
  StepBuilder b(cap, t, table_, mutant_);
  const Status st = b.Run();
  if (!st.ok())
    return WrappedError(st, "$.capture", "the capture batch cannot be planned: " + st.ToString());
  for (const Call& c : t.calls)
    if (c.kind == CallKind::kPlanBuild || c.kind == CallKind::kPlanUpdate)
      captured_[c.step + "." + c.name] = t.plans[c.plan];
  return OkStatus();
}

// The plan an override's plan_from names, added to this trace. Errors name $.calls.
StatusOr<int32_t> StepBuilder::PlanFrom(const CallOverride& o, const std::string& step,
                                        const CallRow& row) {
  if (o.plan_from == "capture") {
    // A plan build's own captured plan; a kernel call's: the plan its handle had at capture.
    std::string key = step + "." + row.call;
    if (row.kind == CallKind::kDecode) {
      const PlanSnapshot& live = t_.plans[Handle(row.plan)];
      for (const auto& [k, snap] : captured_)
        if (snap.name == live.name && k.rfind(step + ".", 0) == 0) key = k;
      if (!captured_.count(key))
        for (const auto& [k, snap] : captured_)
          if (snap.name == live.name) key = k;
    }
    const auto it = captured_.find(key);
    if (it == captured_.end())
      return InvalidArgumentError(CallOverridePath(OverrideIndex(&o), "plan_from"),
                                  "no plan was captured for " + o.call);
    PlanSnapshot snap = it->second;
    snap.name += "(captured)";
    t_.plans.push_back(std::move(snap));
    return static_cast<int32_t>(t_.plans.size() - 1);
  }
  const auto it = built_.find(o.plan_from);
  if (it == built_.end())
    return InvalidArgumentError(CallOverridePath(OverrideIndex(&o), "plan_from"),
                                "\"" + o.plan_from + "\" names no earlier plan call of " + step);
  return it->second;
}

// What a fill writes, with a modelled KV cache: each token's (dense: request's) region holds
// slots of its request from the request's first slot on; then the scenario's index_values.
std::shared_ptr<const IndexContent> StepBuilder::FillContent(const CallRow& row,
                                                             const std::vector<int32_t>& indptr,
                                                             int32_t tokens) const {
  if (!s_.kv_cache.modelled) return nullptr;
  auto content = std::make_shared<IndexContent>();
  const bool per_token = row.indptr == "sparse_kv_indptr";
  const int32_t n = std::min<int32_t>(tokens, static_cast<int32_t>(indptr.size()) - 1);
  for (int32_t t = 0; t < n; ++t) {
    const int32_t request = per_token ? TokenRequest(t) : t;
    if (indptr[t + 1] <= indptr[t] || request >= sh_.B) continue;
    content->segments.push_back({indptr[t], indptr[t + 1], kv_slot_base_[request]});
  }
  for (const KvCacheSpec::IndexValue& v : s_.kv_cache.index_values) {
    if (v.token >= n || v.position >= indptr[v.token + 1] - indptr[v.token]) continue;
    content->values.push_back({int64_t{indptr[v.token]} + v.position, v.value});
  }
  std::sort(content->values.begin(), content->values.end());
  content->sorted_disjoint = SortedDisjoint(content->segments);
  return content;
}

// ---------------------------------------------------------------------------------------------
// Rows and steps
// ---------------------------------------------------------------------------------------------

Status StepBuilder::PlanRow(const CallRow& row, const std::string& step) {
  if (row.planner != "aiter") return DialectPlanRow(row, step);
  ref::PlanRequest request = BuildInputs(row);
  const int32_t real = static_cast<int32_t>(Eval(row.real, "real"));
  const CallOverride* o = Override(step, row.call);
  if (o) {  // the planner told other facts than the sizing (CU count, heads, dtypes)
    if (o->planner_cu_count > 0) request.cu_count = o->planner_cu_count;
    if (o->planner_heads > 0) request.heads_per_head_k = o->planner_heads;
    if (!o->planner_dtype.empty())
      request.q_dtype = request.kv_dtype = *ref::ParseDType(o->planner_dtype, "planner_dtype");
  }
  int32_t plan = -1;
  if (o && !o->plan_from.empty()) {
    // Metadata built elsewhere: this call does not run; its buffers hold that plan.
    MLASIM_ASSIGN_OR_RETURN(const int32_t from, PlanFrom(*o, step, row));
    PlanSnapshot snap = t_.plans[from];
    const std::string origin = o->plan_from;
    snap.request = std::move(request);
    if (snap.name.find("(captured)") == std::string::npos) snap.name += "(stale)";
    t_.plans.push_back(std::move(snap));
    plan = static_cast<int32_t>(t_.plans.size() - 1);
    Call c;
    c.step = step;
    c.name = row.call;
    c.table_row = row.row;
    c.kind = CallKind::kPlanUpdate;
    c.kernel = "(stale: " + origin + ")";
    c.plan = plan;
    c.plan_rows = t_.plans.back().q_rows_covered;
    c.overrides.push_back("plan_from " + origin + ": not rebuilt for this batch");
    c.note = "keeps the plan of " + origin;
    t_.calls.push_back(std::move(c));
  } else if (!row.reuse.empty() && Eval(row.reuse, "reuse") != 0 &&
             handles_.count(row.reuse_plan)) {
    MLASIM_RETURN_IF_ERROR(ReusePlan(step, row, std::move(request), &plan));
  } else {
    MLASIM_RETURN_IF_ERROR(BuildPlan(step, row, std::move(request), real, o, &plan));
    if (o) t_.calls.back().overrides.push_back("planner inputs differ from the sizing's");
  }
  built_[step + "." + row.call] = plan;
  SetHandles(row, plan);
  return OkStatus();
}

DialectShape StepBuilder::Dialect() const {
  DialectShape d;
  d.flashmla_revision = s_.engine.flashmla_revision;
  d.heads = sh_.kernel_heads;
  d.num_sms = s_.cu_count > 0 ? s_.cu_count : kDefaultNumSms;
  d.head_dim_o = s_.model.kv_lora_rank;
  return d;
}

// A plan build of the flashmla or flashinfer dialect: the planner over the row's batch into the
// buffers its own sizing gave; what it writes past them is reported with the call (class D).
Status StepBuilder::DialectPlanRow(const CallRow& row, const std::string& step) {
  // (An override of this call was refused by CheckOverride: no key applies to it.)
  ref::PlanRequest request = BuildInputs(row);
  const DialectSizing& z = dialect_capacity_.at(row.capacity);
  auto plan = PlanDialect(z, request, Dialect());
  if (!plan.ok())
    return WrappedError(plan.status(),
                        plan.status().field() == "batch_size" ? "$.batch.contexts" : "$",
                        "the engine's " + row.call + " at " + step + " is refused by the " +
                            row.planner + " planner: " + plan.status().ToString());
  const bool captured = row.inputs == "capture_batch";
  PlanSnapshot snap;
  snap.name = row.call + (captured ? "(captured)" : "");
  snap.buffer_prefix = row.buffers;
  snap.request = std::move(request);
  snap.plan.derived.fold_ratio = 1;
  snap.real_requests = static_cast<int32_t>(Eval(row.real, "real"));
  snap.q_rows_covered = snap.request.qo_indptr.back();
  auto dialect = std::make_shared<DialectPlan>(std::move(*plan));
  Call c;
  c.step = step;
  c.name = row.call;
  c.table_row = row.row;
  c.kind = CallKind::kPlanBuild;
  c.kernel = row.planner == "flashmla" ? "get_mla_metadata" : "MLAPlan";
  c.dialect_findings = CheckDialectCapacity(*dialect, z);
  for (DialectFinding& f : c.dialect_findings) f.buffer = row.buffers + f.buffer;
  snap.dialect = std::move(dialect);
  t_.plans.push_back(std::move(snap));
  const int32_t index = static_cast<int32_t>(t_.plans.size() - 1);
  c.plan = index;
  c.plan_rows = t_.plans.back().q_rows_covered;
  c.note = "plans " + std::to_string(t_.plans.back().dialect->batch()) + " requests (" +
           std::to_string(t_.plans.back().real_requests) + " real" +
           (captured ? ", at graph capture" : "") + ") into " + row.buffers + "*";
  t_.calls.push_back(std::move(c));
  built_[step + "." + row.call] = index;
  SetHandles(row, index);
  return OkStatus();
}

// The dialect plan as this launch consumes it: the launched requests (the row's `launch`, else
// the planned batch) with this step's lengths, padding requests at pad_kv_len.
std::vector<int32_t> StepBuilder::LaunchLens(const CallRow& row, const PlanSnapshot& snap) const {
  const int32_t n =
      row.launch.empty() ? snap.dialect->batch() : static_cast<int32_t>(Eval(row.launch, "launch"));
  std::vector<int32_t> lens(std::max(n, 0), s_.engine.pad_kv_len);
  for (int32_t i = 0; i < n && i < sh_.B; ++i) lens[i] = sh_.kv_lens[i];
  return lens;
}

// The kernel receives the launch's request arrays (q, the page table, seqlens of the launched
// requests); the plan only schedules them. The snapshot a dialect decode binds: the plan with
// the launch's requests, so the access contract walks what the kernel is handed.
int32_t StepBuilder::LaunchSnapshot(const CallRow& row, int32_t plan) {
  PlanSnapshot launch = t_.plans[plan];
  const std::vector<int32_t> lens = LaunchLens(row, launch);
  ref::PlanRequest& r = launch.request;
  const PagedLens paged = Paged(lens, page_, 0);
  r.qo_indptr.assign(lens.size() + 1, 0);
  for (size_t i = 0; i < lens.size(); ++i) r.qo_indptr[i + 1] = r.qo_indptr[i] + sh_.Q;
  r.kv_indptr = paged.indptr;
  r.kv_last_page_lens = paged.last;
  launch.q_rows_covered = r.qo_indptr.back();
  launch.name += "@launch";
  t_.plans.push_back(std::move(launch));
  return static_cast<int32_t>(t_.plans.size() - 1);
}

void StepBuilder::DialectLaunch(const CallRow& row, const PlanSnapshot& snap, Call* c) const {
  const std::vector<int32_t> lens = LaunchLens(row, snap);
  const int32_t n = static_cast<int32_t>(lens.size());
  const int32_t tail =
      row.num_splits_tail.empty() ? 0 : static_cast<int32_t>(Eval(row.num_splits_tail, "tail"));
  const bool captured = snap.name.find("(captured)") != std::string::npos;
  c->dialect_findings = CheckDialectLaunch(*snap.dialect, lens, sh_.Q, page_, tail,
                                           captured ? BugClass::kE : BugClass::kA);
  for (DialectFinding& f : c->dialect_findings) f.buffer = snap.buffer_prefix + f.buffer;
  // The decode's sentence (CallNote's, from its numbers) and the requests launched: a note its
  // numbers cannot say alone.
  c->note = CallNote(t_, *c) + ", launched over " + std::to_string(n) + " requests";
}

Status StepBuilder::UpdateRow(const CallRow& row, const std::string& step) {
  int32_t plan = -1;
  const int32_t real = static_cast<int32_t>(Eval(row.real, "real"));
  const Status st = UpdatePlan(step, row, Handle(row.plan), real, &plan);
  if (!st.ok()) return UpdateRefusal(step, row, t_.plans[Handle(row.plan)], st);
  SetHandles(row, plan);
  return OkStatus();
}

// decode_update refused the plan it patches (a plan built over other inputs than its buffers were
// sized for: a planner override of the step): the error names that override's key, else "$".
Status StepBuilder::UpdateRefusal(const std::string& step, const CallRow& row,
                                  const PlanSnapshot& patched, const Status& st) const {
  const std::string build = patched.name.substr(0, patched.name.find_first_of("@("));
  std::string field = "$";
  for (size_t i = 0; i < s_.calls.size() && field == "$"; ++i) {
    const CallOverride& o = s_.calls[i];
    if (o.call.substr(o.call.find('.') + 1) != build) continue;
    for (const CallOverrideField& f : CallOverrideFields())
      if (field == "$" && f.is_set(o)) field = CallOverridePath(i, f.key);
  }
  return WrappedError(st, field,
                      "the engine's " + row.call + " at " + step +
                          " is refused by decode_update_mla_metadata_v1: " + st.ToString());
}

Status StepBuilder::FillRow(const CallRow& row, const std::string& step) {
  const int32_t tokens = static_cast<int32_t>(Eval(row.tokens, "tokens"));
  const std::vector<int32_t> indptr = Indptr(row.indptr, tokens);
  Fill(step, row, indptr, tokens, Eval(row.graph, "graph") != 0);
  t_.calls.back().fill_content = FillContent(row, indptr, tokens);
  return OkStatus();
}

Status StepBuilder::DecodeRow(const CallRow& row, const std::string& step) {
  const bool guard = !row.guard.empty() && Eval(row.guard, "guard") != 0;
  int32_t plan = Handle(row.plan);
  const CallOverride* o = Override(step, row.call);
  if (o && !o->plan_from.empty()) {
    MLASIM_ASSIGN_OR_RETURN(plan, PlanFrom(*o, step, row));
  }
  if (t_.plans[plan].dialect) plan = LaunchSnapshot(row, plan);
  Decode(step, row, plan, static_cast<int32_t>(Eval(row.q_rows, "q_rows")),
         Eval(row.sparse, "sparse") != 0, Eval(row.graph, "graph") != 0,
         static_cast<int32_t>(Eval(row.max_seqlen_q, "max_seqlen_q")), guard);
  return OkStatus();
}

Status StepBuilder::CheckOverride(const std::string& step, const std::string& call, CallForm form,
                                  const std::string& planner) const {
  const CallOverride* o = Override(step, call);
  return o != nullptr ? CheckOverrideApplies(*o, OverrideIndex(o), form, planner) : OkStatus();
}

Status StepBuilder::CheckRowOverrides(const CallRow& row, const std::string& step) const {
  switch (row.kind) {
    case CallKind::kPlanBuild:
      return CheckOverride(
          step, row.call,
          row.planner == "aiter" ? CallForm::kAiterPlanBuild : CallForm::kDialectPlanBuild,
          row.planner);
    case CallKind::kPlanUpdate: return CheckOverride(step, row.call, CallForm::kPlanUpdate, "");
    case CallKind::kIndexFill: return CheckOverride(step, row.call, CallForm::kIndexFill, "");
    case CallKind::kDecode:
      MLASIM_RETURN_IF_ERROR(CheckOverride(step, row.call, CallForm::kDecode, ""));
      return CheckOverride(step, ReduceCallName(row.call), CallForm::kReduce, "");
    case CallKind::kReduce: break;
  }
  return OkStatus();
}

Status StepBuilder::RunRow(const CallRow& row, const std::string& step) {
  if (!When(row.when)) return OkStatus();
  // An override key the call's expansion would not read is refused, not dropped (a scenario
  // without overrides, every generated case, skips the lookups).
  if (!s_.calls.empty()) MLASIM_RETURN_IF_ERROR(CheckRowOverrides(row, step));
  switch (row.kind) {
    case CallKind::kPlanBuild: return PlanRow(row, step);
    case CallKind::kPlanUpdate: return UpdateRow(row, step);
    case CallKind::kIndexFill: return FillRow(row, step);
    case CallKind::kDecode: return DecodeRow(row, step);
    case CallKind::kReduce: break;
  }
  return OkStatus();
}

Status StepBuilder::RunStep(const StepSpec& step, const std::string& name) {
  for (const CallRow& row : step.calls) MLASIM_RETURN_IF_ERROR(RunRow(row, name));
  return OkStatus();
}

Status StepBuilder::Run() {
  const std::string& backend = s_.engine.attention_backend;
  if (StatesQLens(s_) && !backend.empty() && backend != "aiter")
    return InvalidArgumentError(
        "$.batch.q_lens", "per-request q lengths are modelled for aiter engines (atom-*); the " +
                              s_.engine.name + " profile's " + backend +
                              " planner takes one q length per batch here");
  if (s_.model.sparse && !table_.sparse_decode)  // it would run the table's dense decode
    return InvalidArgumentError(
        "$.model.sparse",
        "a sparse model is modelled for engines with a sparse decode; the " + s_.engine.name +
            " profile's call table (sim/engines/" + s_.engine.table +
            ".json) has none (every decode row's sparse is 0): state a dense model "
            "(\"sparse\": false) or an atom-* profile");
  ComputeShape();
  t_.calls.reserve(16);  // a step's calls (about 9 in a --small campaign) without regrowth
  t_.plans.reserve(8);
  MLASIM_RETURN_IF_ERROR(EvalVariables());
  MLASIM_RETURN_IF_ERROR(ResolveContracts());
  MLASIM_RETURN_IF_ERROR(AllocateBuffers());
  MLASIM_RETURN_IF_ERROR(CapturePlans());
  for (const StepSpec& step : table_.steps) {
    if (!When(step.when)) continue;
    if (step.loop_var.empty()) {
      MLASIM_RETURN_IF_ERROR(RunStep(step, step.step));
      continue;
    }
    const int64_t from = Eval(step.from, step.step + " from"), to = Eval(step.to, step.step);
    for (int64_t s = from; s < to; ++s) {
      vars_[step.loop_slot] = s;
      draft_ = static_cast<int32_t>(s);
      MLASIM_RETURN_IF_ERROR(RunStep(step, StepName(step, s)));
    }
  }
  for (size_t i = 0; i < t_.calls.size(); ++i) t_.calls[i].index = static_cast<int32_t>(i);
  // Every override must name a call of this step: a misspelt one is an input error.
  for (size_t i = 0; i < s_.calls.size(); ++i) {
    bool found = false;
    for (const Call& c : t_.calls) found = found || c.step + "." + c.name == s_.calls[i].call;
    if (!found)
      return InvalidArgumentError("$.calls[" + std::to_string(i) + "].call",
                                  "no call \"" + s_.calls[i].call + "\" in this step");
  }
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
  const SimMutantSpec& spec = GetSimMutantSpec(mutant);
  MLASIM_ASSIGN_OR_RETURN(std::shared_ptr<const CallTable> table,
                          BuiltinCallTable(s.engine.table, spec.table_variables));
  Trace t;
  StepBuilder b(s, t, *table, spec);
  MLASIM_RETURN_IF_ERROR(b.Run());
  return t;
}

void RecyclePlans(Trace& trace) {
  for (PlanSnapshot& snap : trace.plans) {
    if (snap.dialect || snap.plan.work_info.data.empty()) continue;  // no aiter plan memory
    KeepPlan(std::move(snap.plan));
  }
  trace.plans.clear();
}

size_t RecycledPlanCount() {
  return PlanPool().size();
}

int64_t RecycledPlanElements() {
  int64_t elements = 0;
  for (const ref::Plan& p : PlanPool()) elements += PlanMemory(p);
  return elements;
}

void ClearRecycledPlans() {
  PlanPool().clear();
}

}  // namespace mlasim::sim
