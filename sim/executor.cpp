#include "sim/executor.h"

#include <algorithm>
#include <map>

#include "ref/plan_check.h"
#include "sim/contracts.h"

namespace mlasim::sim {
namespace {

using ref::Cell;

// Out-of-bounds or unwritten rows of one (buffer, access, kind), merged over work items.
struct Aggregate {
  ViolationKind kind;
  std::string buffer;
  std::string access;
  int64_t rows = 0;
  int64_t row_bytes = 0;
  int64_t first = INT64_MAX;
  int64_t last = -1;
  std::vector<int32_t> works;
};

class CallExecutor {
 public:
  CallExecutor(const Scenario& s, const Trace& t, const ExecuteOptions& opt, AddressSpace& as,
               ExecutionResult& out)
      : s_(s), t_(t), opt_(opt), as_(as), out_(out) {}

  void Run(const Call& c);
  void CaptureLayout(const Call& c, bool has_violation) {
    if (!opt_.capture_layout) {
      out_.layout_call = c.index;
      return;
    }
    out_.layout = as_.LayoutJson();
    out_.layout["call"] = c.index;
    out_.layout["step"] = c.step;
    out_.layout["call_name"] = c.name;
    out_.layout["has_violation"] = has_violation;
    out_.layout_call = c.index;
  }
  void Finish() {
    if (out_.layout_call < 0 && last_kernel_call_) CaptureLayout(*last_kernel_call_, false);
  }

 private:
  void PlanCall(const Call& c);
  void FillCall(const Call& c);
  void DecodeCall(const Call& c);
  void ReduceCall(const Call& c);
  void AllocateTensors(const Call& c);
  const TensorArg* Arg(const Call& c, const char* role) const;
  // Touch rows [r0, r1) of the tensor `a` (a view of its allocation).
  void Touch(const TensorArg& a, bool write, int64_t r0, int64_t r1, int32_t who);
  void ReadPlanCells(const Call& c, const std::string& buffer, const ref::Int32Buffer& b,
                     int64_t begin, int64_t end, int32_t who);
  void Flush(const Call& c);
  void Add(const Call& c, Violation v);

  const Scenario& s_;
  const Trace& t_;
  const ExecuteOptions& opt_;
  AddressSpace& as_;
  ExecutionResult& out_;
  std::map<std::pair<std::string, int>, Aggregate> agg_;  // (buffer, kind*2 + write)
  bool skip_reduce_ = false;
  bool loop_reported_ = false;
  const Call* last_kernel_call_ = nullptr;
};

const TensorArg* CallExecutor::Arg(const Call& c, const char* role) const {
  for (const TensorArg& a : c.args)
    if (a.role == role) return &a;
  return nullptr;
}

void CallExecutor::Add(const Call& c, Violation v) {
  v.step = c.step;
  v.call = c.name;
  v.call_index = c.index;
  v.table_row = c.table_row;
  v.kernel = c.kernel;
  out_.violations.push_back(std::move(v));
}

void CallExecutor::Touch(const TensorArg& a, bool write, int64_t r0, int64_t r1, int32_t who) {
  if (r1 <= r0) return;
  Allocation* alloc = as_.FindMutable(a.buffer);
  const int64_t in_end = std::min(r1, a.rows);
  if (alloc && r0 < in_end) {
    const int64_t b0 = std::max<int64_t>(r0, 0) * a.row_bytes, b1 = in_end * a.row_bytes;
    if (write) {
      alloc->written.Add(b0, b1);
    } else if (!alloc->written.Covers(b0, b1)) {
      const auto gap = alloc->written.FirstGap(b0, b1);
      Aggregate& g = agg_[{a.buffer, static_cast<int>(ViolationKind::kUninitializedRead) * 2}];
      g.kind = ViolationKind::kUninitializedRead;
      g.buffer = a.buffer;
      g.access = "read";
      g.rows = a.rows;
      g.row_bytes = a.row_bytes;
      g.first = std::min(g.first, gap.first / a.row_bytes);
      g.last = std::max(g.last, (gap.second - 1) / a.row_bytes);
      if (g.works.empty() || g.works.back() != who) g.works.push_back(who);
    }
  }
  if (r1 > a.rows) {
    Aggregate& g = agg_[{a.buffer, static_cast<int>(ViolationKind::kOutOfBounds) * 2 + write}];
    g.kind = ViolationKind::kOutOfBounds;
    g.buffer = a.buffer;
    g.access = write ? "write" : "read";
    g.rows = a.rows;
    g.row_bytes = a.row_bytes;
    g.first = std::min(g.first, std::max(r0, a.rows));
    g.last = std::max(g.last, r1 - 1);
    if (g.works.empty() || g.works.back() != who) g.works.push_back(who);
  }
}

void CallExecutor::ReadPlanCells(const Call& c, const std::string& buffer,
                                 const ref::Int32Buffer& b, int64_t begin, int64_t end,
                                 int32_t who) {
  (void)c;
  for (int64_t i = begin; i < end; ++i) {
    if (i < b.size() && b.cells[i] != Cell::kUnwritten) continue;
    TensorArg a;
    a.buffer = buffer;
    a.rows = b.size() / b.row_width;
    a.row_bytes = int64_t{b.row_width} * 4;
    const int64_t row = i / b.row_width;
    if (i >= b.size()) {
      Touch(a, false, row, row + 1, who);
    } else {
      Aggregate& g = agg_[{buffer, static_cast<int>(ViolationKind::kUninitializedRead) * 2}];
      g.kind = ViolationKind::kUninitializedRead;
      g.buffer = buffer;
      g.access = "read";
      g.rows = a.rows;
      g.row_bytes = a.row_bytes;
      g.first = std::min(g.first, row);
      g.last = std::max(g.last, row);
      if (g.works.empty() || g.works.back() != who) g.works.push_back(who);
    }
    return;
  }
}

void CallExecutor::PlanCall(const Call& c) {
  const PlanSnapshot& snap = t_.plans[c.plan];
  const ref::Plan& p = snap.plan;
  const std::pair<const char*, const ref::Int32Buffer*> bufs[] = {
      {"work_indptr", &p.work_indptr},
      {"work_info", &p.work_info},
      {"reduce_indptr", &p.reduce_indptr},
      {"reduce_final_map", &p.reduce_final_map},
      {"reduce_partial_map", &p.reduce_partial_map}};
  for (const auto& [name, b] : bufs) {
    const std::string full = snap.buffer_prefix + name;
    Allocation* alloc = as_.FindMutable(full);
    if (alloc) {
      for (int64_t i = 0; i < b->size();) {
        if (b->cells[i] == Cell::kUnwritten) {
          ++i;
          continue;
        }
        int64_t j = i;
        while (j < b->size() && b->cells[j] != Cell::kUnwritten) ++j;
        alloc->written.Add(i * 4, j * 4);
        i = j;
      }
    }
    if (b->oob_writes > 0) {
      Violation v;
      v.kind = ViolationKind::kOutOfBounds;
      v.bug_class = "D";
      v.buffer = full;
      v.access = "write";
      v.rows = b->size() / b->row_width;
      v.row_bytes = int64_t{b->row_width} * 4;
      v.first_row = b->first_oob_index / b->row_width;
      v.last_row = b->last_oob_index / b->row_width;
      v.rows_past_end = v.last_row + 1 - v.rows;
      v.bytes_past_end = v.rows_past_end * v.row_bytes;
      v.consequence = "refused";  // the sizing disagreement; the store itself is modelled away
      v.detail = "the planner stores past " + full + " as sized by get_mla_metadata_info_v1";
      Add(c, std::move(v));
    }
  }
  for (const ref::InputViolation& iv : p.input_violations) {
    Violation v;
    v.kind = ViolationKind::kPlannerInputRead;
    v.bug_class = "G";
    v.buffer = iv.array;
    v.access = "read";
    v.rows = iv.size;
    v.row_bytes = 4;
    v.first_row = v.last_row = iv.index;
    v.rows_past_end = iv.index + 1 - iv.size;
    v.bytes_past_end = v.rows_past_end * 4;
    if (iv.work_row >= 0) v.work_items.push_back(iv.work_row);
    v.consequence = "undefined_value";
    v.detail = c.kernel + " reads " + iv.array + "[" + std::to_string(iv.index) + "] of " +
               std::to_string(iv.size) + " entries";
    // Merge repeated reads of the same array in one call.
    bool merged = false;
    for (Violation& prev : out_.violations) {
      if (prev.call_index == c.index && prev.kind == v.kind && prev.buffer == v.buffer) {
        prev.first_row = std::min(prev.first_row, v.first_row);
        prev.last_row = std::max(prev.last_row, v.last_row);
        prev.rows_past_end = prev.last_row + 1 - prev.rows;
        prev.bytes_past_end = prev.rows_past_end * 4;
        if (iv.work_row >= 0) prev.work_items.push_back(iv.work_row);
        merged = true;
        break;
      }
    }
    if (!merged) Add(c, std::move(v));
  }
  // Inputs that disagree on the batch size: the planner takes the count from kv_indptr and never
  // notices (atom-mtp-flow.md §6 row D0c, fixed by slicing in #2715).
  const size_t qn = snap.request.qo_indptr.size(), kn = snap.request.kv_indptr.size();
  if (qn != kn) {
    Violation v;
    v.kind = ViolationKind::kPlanInvalid;
    v.bug_class = "A";
    v.buffer = qn > kn ? "sparse_cu_seqlens_q" : "kv_indptr";
    v.access = "read";
    v.rows = static_cast<int64_t>(std::min(qn, kn));
    v.first_row = static_cast<int64_t>(std::min(qn, kn));
    v.last_row = static_cast<int64_t>(std::max(qn, kn)) - 1;
    v.rows_past_end = v.last_row + 1 - v.rows;
    v.consequence = "plan_invalid:inconsistent_batch";
    v.detail = "the planner receives qo_indptr of " + std::to_string(qn) + " entries but " +
               "kv_indptr of " + std::to_string(kn) + ": one describes padded rows the other lacks";
    Add(c, std::move(v));
  }
  // The plan checker, restricted to tiles of real requests: padding rows are dropped anyway.
  const ref::PlanCheckReport report = ref::CheckPlan(snap.request, p);
  const auto tiles = ref::ExpectedTiles(snap.request, p.derived);
  std::map<ref::PlanDiag, Violation> first;
  for (const ref::PlanDiagnostic& d : report.diagnostics) {
    if (d.severity != ref::Severity::kError || d.code == ref::PlanDiag::kInputReadOutOfRange ||
        d.code == ref::PlanDiag::kBufferOverflow)
      continue;
    if (d.tile >= 0 && d.tile < static_cast<int32_t>(tiles.size()) &&
        tiles[d.tile].request >= snap.real_requests)
      continue;
    auto it = first.find(d.code);
    if (it != first.end()) {
      if (d.work >= 0) it->second.work_items.push_back(d.work);
      continue;
    }
    Violation v;
    v.kind = ViolationKind::kPlanInvalid;
    v.bug_class = d.code == ref::PlanDiag::kUpdateFoldMismatch ? "H" : "F";
    v.buffer = snap.buffer_prefix + d.buffer;
    v.access = "write";
    v.first_row = v.last_row = d.index;
    if (d.work >= 0) v.work_items.push_back(d.work);
    v.consequence = std::string("plan_invalid:") + ref::PlanDiagName(d.code);
    v.detail = d.message;
    first.emplace(d.code, std::move(v));
  }
  for (auto& [code, v] : first) Add(c, std::move(v));
}

void CallExecutor::FillCall(const Call& c) {
  const TensorArg& a = c.args.at(0);
  for (const auto& [b, e] : c.fill_regions) Touch(a, true, b, e, -1);
}

void CallExecutor::AllocateTensors(const Call& c) {
  as_.BeginCall();
  for (const ExtraAllocation& x : s_.allocator.live_before_call) {
    TensorShape sh;
    sh.rows = x.bytes;
    sh.row_bytes = 1;
    sh.dtype = "bytes";
    as_.AllocateTransient(x.name, sh);
    as_.FindMutable(x.name)->written.Add(0, x.bytes);
  }
  for (const TensorArg& a : c.args) {
    if (!a.transient) continue;
    TensorShape sh;
    sh.rows = a.rows;
    sh.row_bytes = a.row_bytes;
    if (a.alloc_bytes >= 0) {  // a view whose rows do not match the allocation's
      sh.rows = a.alloc_bytes;
      sh.row_bytes = 1;
    }
    sh.heads = a.heads;
    sh.cols = a.cols;
    sh.elem_bytes = a.elem_bytes;
    sh.dtype = a.dtype;
    as_.AllocateTransient(a.buffer, sh);
  }
  // q is the previous op's output: written in full before the call.
  if (Allocation* q = as_.FindMutable("q")) q->written.Add(0, q->bytes);
}

void CallExecutor::DecodeCall(const Call& c) {
  AllocateTensors(c);
  skip_reduce_ = false;
  if (c.guard_refused) {
    Violation v;
    v.kind = ViolationKind::kGuardRefused;
    v.bug_class = "A";
    v.buffer = "q";
    v.access = "read";
    v.rows = c.q_rows;
    v.first_row = c.q_rows;
    v.last_row = c.plan_rows - 1;
    v.rows_past_end = c.plan_rows - c.q_rows;
    v.consequence = "refused";
    v.detail = "_forward_decode refuses a sparse MTP plan of " + std::to_string(c.plan_rows) +
               " rows for q of " + std::to_string(c.q_rows) + " rows (the #2715 guard)";
    Add(c, std::move(v));
    skip_reduce_ = true;
    return;
  }
  const PlanSnapshot& snap = t_.plans[c.plan];
  const ref::Plan& p = snap.plan;
  const DecodeContract& contract = GetDecodeContract(s_.kernel);
  const TensorArg& q = *Arg(c, "q");
  const TensorArg& o = *Arg(c, "o");
  const TensorArg& logits = *Arg(c, "logits");
  const TensorArg& lse = *Arg(c, "attn_lse");
  const TensorArg& idx = *Arg(c, "kv_indices");
  const int32_t clusters = p.derived.num_clusters;
  ReadPlanCells(c, snap.buffer_prefix + "work_indptr", p.work_indptr, 0, clusters + 1, -1);
  const int32_t works = p.derived.num_works;
  const int64_t rows_held = p.work_info.size() / 8;
  for (int32_t w = 0; w < works; ++w) {
    ReadPlanCells(c, snap.buffer_prefix + "work_info", p.work_info, int64_t{w} * 8,
                  int64_t{w} * 8 + 7, w);
    // A row past work_info (the planner wrote more works than the sizing allows, class D): its
    // read is reported just above; the planner's stores there were not kept, so what the kernel
    // does with it is not modelled.
    if (w >= rows_held) continue;
    const int32_t q0 = p.work(w, ref::kQoStart), q1 = p.work(w, ref::kQoEnd);
    const int32_t k0 = p.work(w, ref::kKvStart), k1 = p.work(w, ref::kKvEnd);
    const int32_t part = p.work(w, ref::kPartialQoLoc);
    const bool zero = k1 <= k0;
    if (!zero || contract.zero_kv_reads_q) Touch(q, false, q0, q1, w);
    if (!zero || contract.zero_kv_writes_output) {
      if (part < 0) {
        Touch(o, true, q0, q1, w);
      } else {
        Touch(logits, true, part, int64_t{part} + (q1 - q0), w);
        Touch(lse, true, part, int64_t{part} + (q1 - q0), w);
      }
    }
    if (!zero) Touch(idx, false, k0, k1, w);
    if (zero && (opt_.zero_kv_reads_index_row || opt_.mutant == SimMutant::kZeroKvReadsIndexRow))
      Touch(idx, false, k0, int64_t{k0} + 1, w);
    // The kernel walks ceil(len / 16) KV blocks. The J mutant computes the page count of a zero-KV
    // item as (len - 1) / 16 + 1 in unsigned 32-bit arithmetic (ATOM #1301): ~2^28 iterations.
    // The executor bounds every walk by the KV positions the index buffer holds.
    if (opt_.mutant == SimMutant::kZeroKvPageUnderflow && zero) {
      const uint64_t blocks = static_cast<uint32_t>(k1 - k0 - 1) / 16u + 1u;
      const uint64_t bound = static_cast<uint64_t>(idx.rows) / 16u + 1u;
      if (blocks > bound && !loop_reported_) {
        loop_reported_ = true;
        Violation v;
        v.kind = ViolationKind::kUnboundedLoop;
        v.bug_class = "J";
        v.buffer = idx.buffer;
        v.access = "read";
        v.rows = idx.rows;
        v.first_row = k0;
        v.last_row = k0;
        v.work_items.push_back(w);
        v.consequence = "hang";
        v.detail = "work " + std::to_string(w) + " would walk " + std::to_string(blocks) +
                   " KV blocks (bound " + std::to_string(bound) + "): the page count underflowed";
        Add(c, std::move(v));
      }
    }
  }
  Flush(c);
}

void CallExecutor::ReduceCall(const Call& c) {
  if (skip_reduce_) return;
  const PlanSnapshot& snap = t_.plans[c.plan];
  const ref::Plan& p = snap.plan;
  const TensorArg& o = *Arg(c, "o");
  const TensorArg& logits = *Arg(c, "logits");
  const TensorArg& lse = *Arg(c, "attn_lse");
  const ref::Int32Buffer& ri = p.reduce_indptr;
  // The reducer is launched over reduce_indptr.size(0) - 1 tiles and reads the whole indptr.
  ReadPlanCells(c, snap.buffer_prefix + "reduce_indptr", ri, 0, ri.size(), -1);
  for (int64_t t = 0; t + 1 < ri.size(); ++t) {
    if (!ri.written(t) || !ri.written(t + 1)) continue;
    const int32_t g0 = ri.data[t], g1 = ri.data[t + 1];
    if (g1 - g0 < 2) continue;
    const int32_t tile = static_cast<int32_t>(t);
    ReadPlanCells(c, snap.buffer_prefix + "reduce_final_map", p.reduce_final_map, t * 2, t * 2 + 2,
                  tile);
    ReadPlanCells(c, snap.buffer_prefix + "reduce_partial_map", p.reduce_partial_map, g0, g1, tile);
    if (t * 2 + 1 >= p.reduce_final_map.size()) continue;
    const int32_t q0 = p.reduce_final_map.data[t * 2], q1 = p.reduce_final_map.data[t * 2 + 1];
    for (int32_t i = std::max(g0, 0); i < g1 && i < p.reduce_partial_map.size(); ++i) {
      const int32_t row = p.reduce_partial_map.data[i];
      Touch(logits, false, row, int64_t{row} + (q1 - q0), tile);
      Touch(lse, false, row, int64_t{row} + (q1 - q0), tile);
    }
    Touch(o, true, q0, q1, tile);
  }
  Flush(c);
  // Output rows of real tokens that neither kernel wrote (pads are dropped by the engine).
  const Allocation* oa = as_.Find("o");
  if (!oa) return;
  const int32_t fold = p.derived.fold_ratio;
  const int64_t real_rows =
      int64_t{std::min(c.q_rows, snap.real_requests * (c.max_seqlen_q > 1 ? c.max_seqlen_q : 1))} *
      fold;
  int64_t first = -1, last = -1;
  for (int64_t r = 0; r < o.rows; ++r) {
    if (oa->written.Covers(r * o.row_bytes, (r + 1) * o.row_bytes)) continue;
    if (r < real_rows) {
      if (first < 0) first = r;
      last = r;
    } else {
      ++out_.unwritten_pad_rows;
    }
  }
  if (first >= 0) {
    Violation v;
    v.kind = ViolationKind::kUnwrittenOutput;
    v.bug_class = "B";
    v.buffer = "o";
    v.access = "write";
    v.rows = o.rows;
    v.row_bytes = o.row_bytes;
    v.first_row = first;
    v.last_row = last;
    v.consequence = "stale_output";
    v.detail = "o rows of real tokens that no work item or reduce wrote: they keep stale memory";
    Add(c, std::move(v));
  }
}

void CallExecutor::Flush(const Call& c) {
  for (auto& [key, g] : agg_) {
    Violation v;
    v.kind = g.kind;
    v.buffer = g.buffer;
    v.access = g.access;
    v.rows = g.rows;
    v.row_bytes = g.row_bytes;
    v.first_row = g.first;
    v.last_row = g.last;
    v.work_items = g.works;
    const Allocation* a = as_.Find(g.buffer);
    if (g.kind == ViolationKind::kOutOfBounds) {
      v.bug_class = (g.buffer == "q" || g.buffer == "o") ? "A" : "C";
      v.rows_past_end = g.last + 1 - g.rows;
      v.bytes_past_end = v.rows_past_end * g.row_bytes;
      v.consequence = "unobserved";
      if (a) {
        const uint64_t begin = a->base + static_cast<uint64_t>(g.first * g.row_bytes);
        const uint64_t end = a->base + static_cast<uint64_t>((g.last + 1) * g.row_bytes);
        const uint64_t bad = as_.FirstUnmapped(begin, end);
        if (bad < end) {
          v.consequence = "fault";
          v.first_bad_address = bad;
        } else {
          const auto hits = as_.Overlapping(begin, end, a);
          if (!hits.empty())
            v.consequence =
                std::string(g.access == "write" ? "corrupts:" : "reads:") + hits[0]->name;
        }
      }
      v.detail = std::string(g.access == "write" ? "writes " : "reads ") + g.buffer + " rows " +
                 std::to_string(g.first) + ".." + std::to_string(g.last) + " of " +
                 std::to_string(g.rows);
    } else {
      v.bug_class = "E";
      v.consequence = "stale_read";
      v.detail = "reads " + g.buffer + " rows " + std::to_string(g.first) + ".." +
                 std::to_string(g.last) + " that no call wrote this step";
    }
    Add(c, std::move(v));
  }
  agg_.clear();
}

void CallExecutor::Run(const Call& c) {
  const size_t before = out_.violations.size();
  switch (c.kind) {
    case CallKind::kPlanBuild:
    case CallKind::kPlanUpdate: PlanCall(c); break;
    case CallKind::kIndexFill:
      FillCall(c);
      Flush(c);
      break;
    case CallKind::kDecode: DecodeCall(c); break;
    case CallKind::kReduce: ReduceCall(c); break;
  }
  // The layout to write out: the first kernel call with a violation (else, at the end, the
  // last kernel call's, which the address space still holds).
  const bool kernel = c.kind == CallKind::kDecode || c.kind == CallKind::kReduce;
  if (kernel && out_.violations.size() > before && out_.layout_call < 0) CaptureLayout(c, true);
  if (kernel) last_kernel_call_ = &c;
}

}  // namespace

const char* SimMutantName(SimMutant m) {
  switch (m) {
    case SimMutant::kNone: return "none";
    case SimMutant::kFoundingFault: return "engine-sparse-plan-over-running-tokens";
    case SimMutant::kDraftRowsScheduled: return "engine-draft-steps-at-scheduled-rows";
    case SimMutant::kKernelAssumes576Rows: return "kernel-assumes-576-column-rows";
    case SimMutant::kSizingScheduledBatch: return "sizing-for-scheduled-batch";
    case SimMutant::kSizingPartialMapPerTile: return "sizing-partial-map-one-per-tile";
    case SimMutant::kStalePlanAfterGrowth: return "engine-stale-plan-after-lengths-grew";
    case SimMutant::kZeroKvReadsIndexRow: return "kernel-zero-kv-reads-index-row";
    case SimMutant::kReduceMapOffByOne: return "planner-reduce-map-off-by-one-tile";
    case SimMutant::kNoTailRule: return "planner-drops-tail-rule";
    case SimMutant::kZeroKvPageUnderflow: return "kernel-zero-kv-page-count-underflow";
    case SimMutant::kCount: break;
  }
  return "?";
}

const char* ViolationKindName(ViolationKind k) {
  switch (k) {
    case ViolationKind::kOutOfBounds: return "out_of_bounds";
    case ViolationKind::kUninitializedRead: return "uninitialized_read";
    case ViolationKind::kPlanInvalid: return "plan_invalid";
    case ViolationKind::kPlannerInputRead: return "planner_input_read";
    case ViolationKind::kUnwrittenOutput: return "unwritten_output";
    case ViolationKind::kGuardRefused: return "guard_refused";
    case ViolationKind::kUnboundedLoop: return "unbounded_loop";
  }
  return "?";
}

ExecutionResult Execute(const Scenario& s, const Trace& trace, const ExecuteOptions& opt) {
  ExecutionResult out;
  AddressSpace as(s.allocator);
  for (const PersistentBuffer& p : trace.persistent) {
    TensorShape sh;
    sh.rows = p.rows;
    sh.row_bytes = p.row_bytes;
    sh.dtype = p.dtype;
    as.Allocate(p.name, sh);
  }
  // Host-prepared inputs are written before any kernel runs.
  for (const char* host : {"kv_indptr", "kv_last_page_lens", "sparse_kv_indptr",
                           "sparse_cu_seqlens_q", "sparse_kv_last_page_lens"}) {
    if (Allocation* a = as.FindMutable(host)) a->written.Add(0, a->bytes);
  }
  CallExecutor ex(s, trace, opt, as, out);
  for (const Call& c : trace.calls) ex.Run(c);
  ex.Finish();
  return out;
}

}  // namespace mlasim::sim
