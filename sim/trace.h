// File: sim/trace.h
//
// The ordered calls of one engine step (atom-mtp-flow.md §4-§7): plan builds, in-place plan
// updates, indexer gathers, decode and reduce launches, each with the tensors it receives
// (rows, row size in bytes, dtype) and the plan snapshot it consumes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ref/flashinfer/mla_plan.h"
#include "ref/flashmla/sched.h"
#include "ref/metadata.h"
#include "ref/plan_check.h"
#include "sim/contract.h"
#include "sim/scenario.h"
#include "sim/violation.h"

namespace mlasim::sim {

// CallKind and CallKindName live in sim/contract.h (a contract is written for one call kind).

// A tensor as one call receives it: a view of `rows` rows of `row_bytes` bytes at the start of an
// allocation of the address space (sim/memory.h).
struct TensorArg {
  std::string role;    // "q", "o", "logits", "attn_lse", "kv_indices", ...
  std::string buffer;  // allocation name
  int64_t rows = 0;    // rows of the view the call receives
  int64_t row_bytes = 0;
  std::string dtype;
  bool transient = false;  // allocated for this call (q, o, partial buffers); else persistent
  int32_t heads = 0;       // [rows, heads, cols] tensors
  int32_t cols = 0;
  int32_t elem_bytes = 1;
  int64_t alloc_bytes = -1;  // bytes allocated when they differ from rows * row_bytes
};

// A persistent engine buffer (allocated once, before the step).
struct PersistentBuffer {
  std::string name;
  int64_t rows = 0;
  int64_t row_bytes = 4;
  std::string dtype = "int32";
};

// A plan as it stands when a call uses it. Updates in place produce a new snapshot over the same
// allocations.
// A plan of another planner dialect than aiter's (CallRow::planner): FlashMLA's decode
// scheduler (tile_scheduler_metadata rows + num_splits) or FlashInfer's MLAPlan, with the input
// it was made for (the batch it planned: B real requests, or B plus padding requests).
struct DialectPlan {
  std::string planner;  // "flashmla" | "flashinfer"
  ref::flashmla::SchedInput flashmla_input;
  ref::flashmla::SchedMeta flashmla;
  int32_t flashmla_accum_rows = 0;  // lse_accum / o_accum rows the API allocates: b + parts
  ref::flashinfer::MLAPlanInput flashinfer_input;
  ref::flashinfer::MLAPlanResult flashinfer;
  int32_t batch() const;  // requests planned
};

// A finding of the dialect's plan checker (ref/flashmla/check.h, ref/flashinfer/check.h) on a
// plan as a decode launch consumes it.
struct DialectFinding {
  std::string code;     // the checker's diagnostic name ("NumSplitsShape", "TileWithoutWork")
  std::string buffer;   // "num_splits", "tile_scheduler_metadata", "mla_work_lists", ...
  int64_t row = -1;     // scheduler row / work item, -1 when not applicable
  int32_t request = -1;  // request, -1 when not applicable
  std::string message;
  BugClass bug_class = BugClass::kA;  // A: planned for another batch than launched; E: stale
};

struct PlanSnapshot {
  std::string name;           // "main", "sparse_mtp", "draft_sparse_1", ...
  std::shared_ptr<const DialectPlan> dialect;  // null: an aiter plan (`plan`)
  std::string buffer_prefix;  // allocation names: <prefix>work_indptr, <prefix>work_info, ...
  ref::PlanRequest request;   // the request it serves now (after an update: the new lengths)
  ref::Plan plan;
  int32_t real_requests = 0;   // requests (tokens for per-token plans) that are not padding
  int32_t q_rows_covered = 0;  // max qo_end over its work items (0 when it has none)
};

// What the index buffers hold after each fill (the scenario's kv_cache model): element e of
// [begin, end) holds base + (e - begin); `values` are explicit elements (hostile values).
struct IndexSegment {
  int64_t begin = 0, end = 0, base = 0;
};
struct IndexContent {
  std::vector<IndexSegment> segments;               // the first holding an element decides it
  std::vector<std::pair<int64_t, int64_t>> values;  // (element, value), sorted by element
  // The segments are sorted by begin and disjoint (a gather finds an element's by binary search;
  // else by a walk in order: a hostile indptr's fill may overlap its own regions).
  bool sorted_disjoint = false;
};

// Whether `segments` are sorted by begin and pairwise disjoint (IndexContent::sorted_disjoint).
bool SortedDisjoint(const std::vector<IndexSegment>& segments);

// The segment of `ct` that holds element e (the first in order), or null. A walk for the few
// segments of a step's fill (one per request or token: the common case, cheaper than a search),
// a binary search for a long sorted, disjoint list (a captured page table's runs).
inline const IndexSegment* SegmentHolding(const IndexContent& ct, int64_t e) {
  if (ct.sorted_disjoint && ct.segments.size() > 32) {
    const auto after =
        std::upper_bound(ct.segments.begin(), ct.segments.end(), e,
                         [](int64_t x, const IndexSegment& g) { return x < g.begin; });
    return after != ct.segments.begin() && e < std::prev(after)->end ? &*std::prev(after) : nullptr;
  }
  for (const IndexSegment& sg : ct.segments)
    if (e >= sg.begin && e < sg.end) return &sg;
  return nullptr;
}

struct Call {
  int32_t index = 0;
  std::string step;       // "verify", "draft_step_0", "draft_step_1", ...
  std::string name;       // "main_plan", "sparse_mtp_plan", "sparse_decode", "reduce", ...
  std::string table_row;  // row of atom-mtp-flow.md §6: T1, T2, T3, T5, D0a, D0b, Ms(a), Ds, ...
  CallKind kind = CallKind::kDecode;
  std::string kernel;  // decode: asm|opus|hk; "mla_reduce_v1"; "get_mla_metadata_v1"; ...
  // The access contract the executor applies (decode, reduce, index fill); null for plan calls.
  std::shared_ptr<const Contract> contract;
  bool graph_replay = false;
  int32_t plan = -1;  // index into Trace::plans
  std::vector<TensorArg> args;
  int32_t q_rows = 0;      // decode/reduce: q rows as allocated
  int32_t o_rows = 0;      // decode/reduce: o rows as allocated (= q_rows unless overridden)
  int32_t plan_rows = 0;   // q rows the plan covers
  // decode/reduce: the head fold of the kernel's q/o view: the plan's fold_ratio for a kernel
  // that walks aiter's work_info (rows x fold of heads / fold), 1 for one that plans by itself
  // from qo_indptr / kv_indptr (FlashMLA, FlashInfer: [tokens, heads]).
  int32_t view_fold = 1;
  int64_t fill_begin = 0;  // kIndexFill: element range written in args[0]
  int64_t fill_end = 0;
  std::vector<std::pair<int64_t, int64_t>> fill_regions;  // kIndexFill: per-token regions
  std::vector<int32_t> fill_indptr;  // kIndexFill: the indptr the fill reads (its regions)
  // kIndexFill with a modelled KV cache: what the fill writes into its regions.
  std::shared_ptr<const IndexContent> fill_content;
  std::string fill_indptr_buffer;    // kIndexFill: the allocation that indptr lives in
  int32_t fill_tokens = 0;           // kIndexFill: tokens the call runs over
  int32_t max_seqlen_q = 1;    // decode: sizes the partial buffers (§10.4)
  int32_t captured_grid = 0;   // decode: workgroups of a captured launch (0: none given)
  int32_t page_size = 1;       // decode: KV page size, tokens
  int32_t launch_grid = -1;    // kernel calls: workgroups the engine launched (-1: the contract's)
  // Scenario overrides applied to this call (docs/scenario.md "calls"), in words, for reports.
  std::vector<std::string> overrides;
  bool sparse = false;         // decode reads per-token index lists
  bool guard_checked = false;  // the engine's plan-rows <= q-rows guard ran before this call
  bool guard_refused = false;  // ... and refused the call (it did not launch)
  // One sentence on what the call does, when it cannot be said from the call's numbers (a kept
  // or stale plan, a dialect's plan or launch, a plan update); empty otherwise: CallNote says it.
  std::string note;
  // decode of a dialect plan: the plan checker's findings on the plan as this launch consumes it
  // (its launched batch, the padding requests' lengths, num_splits as the engine extends it).
  std::vector<DialectFinding> dialect_findings;
};

// Step-level numbers (atom-mtp-flow.md §1).
struct StepShape {
  int32_t B = 0;                 // scheduled requests
  int32_t R = 0;                 // padded rung
  int32_t Q = 1;                 // K + 1
  int32_t scheduled_tokens = 0;  // T_s
  int32_t running_tokens = 0;    // T_r
  int32_t heads_per_rank = 0;    // H
  int32_t kernel_heads = 0;      // Hk
  bool graph = false;
  int32_t sparse_plan_tokens = 0;  // tokens the sparse per-token MTP plan covers
  int32_t draft_rows = 0;          // rows of draft steps 1..K-1
  std::vector<int32_t> kv_lens;    // L_i
  // q_i: each request's verify q tokens (batch.q_lens; Q each unless stated), summing to T_s;
  // qo_indptr of the verify step advances by them.
  std::vector<int32_t> q_lens;
};

struct Trace {
  StepShape shape;
  // KV-cache rows the engine has written before the step (each real request's tokens and the
  // slots of its draft tokens), when the scenario models the cache; other rows are stale.
  std::vector<std::pair<int64_t, int64_t>> kv_written;
  std::vector<PersistentBuffer> persistent;
  std::vector<Call> calls;
  std::vector<PlanSnapshot> plans;
  // What index buffers hold before the first call, by allocation name: a captured call's page
  // table (sim::CheckCall), read by its gathers as a fill's contents would be.
  std::vector<std::pair<std::string, std::shared_ptr<const IndexContent>>> index_contents;
};

// One sentence on what call `c` of trace `t` does (reports, tests): c.note when set, else said
// from the call's numbers, as the engine built it: a plan build's batches, real requests and
// buffers ("plans 8 batches (5 real) into main.*"), a decode's q / o rows against the rows its
// plan covers ("q/o 20 rows, plan covers 32 rows"), a reduce's merge, an index fill's tokens.
// Made on demand: a fuzz case builds every call and reads no sentence unless it reports one.
std::string CallNote(const Trace& t, const Call& c);

}  // namespace mlasim::sim
