// File: ref/metadata.h
//
// aiter's MLA decode metadata in its exact int32 form (aiter-mla-metadata.md §2, §3.2), the
// planner request that produces it, and the per-element write state that lets mlasim say which
// prefix of each buffer a planner wrote and which values depend on undefined memory.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "ref/plan_buffers.h"
#include "ref/status.h"
#include "ref/target.h"

namespace mlasim::ref {

// Arguments of get_mla_metadata_v1 plus the sizing inputs of get_mla_metadata_info_v1, in the
// order and units of the golden corpus's `input` object (aiter-mla-metadata.md §3.1).
struct PlanRequest {
  Arch target = Arch::kGfx942;
  Revision revision = Revision::k2026_08;
  int32_t cu_count = 0;           // multiProcessorCount; 0 = the target profile's count
  int32_t heads_per_head_k = 16;  // q heads per KV head (MLA: all q heads)
  int32_t num_heads_k = 1;        // KV heads (MLA: 1)
  DType q_dtype = DType::kBf16;
  DType kv_dtype = DType::kBf16;
  int32_t page_size = 1;        // tokens per page, power of two
  int32_t kv_granularity = 16;  // split granularity, pages, power of two
  int32_t qlen = 1;             // tokens per request given to the sizing helper
  int32_t max_seqlen_qo = 1;
  int32_t uni_seqlen_qo = 1;  // > 0: every request has this many q rows
  bool is_causal = true;
  int32_t topk = -1;                       // >= 0: aiter-native sparse mode (§8.1), tokens
  int32_t max_split_per_batch = -1;        // global split budget (§4.1), -1 = none
  bool is_cp_round_robin = false;          // disables the causal trim (§4.5)
  std::vector<int32_t> qo_indptr;          // [B+1] q rows per request, cumulative
  std::vector<int32_t> kv_indptr;          // [B+1] pages per request, cumulative
  std::vector<int32_t> kv_last_page_lens;  // [B] tokens in each last page (1..page_size)
};

// Which planner kernel runs. aiter's default dispatch runs the parallel planner whenever it is
// eligible (§4.6); tests can force either one.
enum class PlannerChoice : uint8_t { kAiterDispatch, kSerial, kParallel };

// Element counts of the six buffers as get_mla_metadata_info_v1 returns them (§2).
struct MetadataSizes {
  int32_t work_metadata_ptrs = 2;     // uint64
  int32_t work_indptr = 0;            // max_splits + 1
  int32_t work_info_rows = 0;         // max_work rows of 8 int32
  int32_t reduce_indptr = 0;          // tile_cnt + 1
  int32_t reduce_final_map_rows = 0;  // tile_cnt rows of 2 int32
  int32_t reduce_partial_map = 0;     // max_split_tiles
  // The intermediate values, for reports and the checker.
  int32_t max_splits = 0;
  int32_t max_qo_tiles_per_batch = 0;
  int32_t tile_cnt = 0;

  // Rows of buffer `id` (elements for the flat ones).
  int64_t Rows(PlanBufferId id) const {
    switch (id) {
      case PlanBufferId::kWorkMetadataPtrs: return work_metadata_ptrs;
      case PlanBufferId::kWorkIndptr: return work_indptr;
      case PlanBufferId::kWorkInfo: return work_info_rows;
      case PlanBufferId::kReduceIndptr: return reduce_indptr;
      case PlanBufferId::kReduceFinalMap: return reduce_final_map_rows;
      case PlanBufferId::kReducePartialMap: return reduce_partial_map;
    }
    // Only a cast from an integer outside the enum gets here: a caller's bug.
    AssertFail("id is a PlanBufferId", __FILE__, __LINE__,
               "MetadataSizes::Rows: unknown buffer id");
  }
  // Elements of buffer `id`: Rows(id) x its row width (kPlanBuffers).
  int64_t Elements(PlanBufferId id) const { return Rows(id) * GetPlanBufferSpec(id).row_width; }
};

// Host-side decisions of get_mla_metadata_v1_2_device and the kernel's scalars (§4.1), named as
// the golden corpus's `derived` object names them.
struct PlanDerived {
  int32_t num_clusters = 0;
  int32_t fold_ratio = 1;              // qk_batch_ratio R
  int32_t packed_qo_len_per_wg = 128;  // q tile pack
  bool qo_split = false;
  bool parallel_planner_used = false;
  int32_t num_splits = 0;
  int32_t planner_batches = 0;  // batches after folding (sparse walks x tokens per request)
  int32_t planner_heads = 0;    // heads after folding
  int32_t topk_pages = -1;
  int32_t fixed_overhead_blocks = 0;
  int32_t tail_done_threshold = 0;
  int32_t num_works = 0;
  int32_t payload = 0;  // cost units per cluster (§4.4)
  int32_t sum_blocks = 0;
  int32_t ori_seqlen_qo = 0;  // tokens per request (sparse: from qo_indptr)
  int32_t num_tiles = 0;      // q tiles planned (global tile counter at the end)
};

// Per-element state of a buffer the planner writes.
enum class Cell : uint8_t {
  kUnwritten = 0,  // no planner wrote it: stale memory on a GPU
  kWritten = 1,
  kUndefined = 2,  // written, but from an out-of-range input read: the value is unknowable
};

// Eight consecutive cells read as one word (p must have 8 readable cells), for the scans that
// test many cells at once (the plan checker's work rows, the simulator's loads and CSR walks).
inline uint64_t LoadCells8(const Cell* p) {
  static_assert(sizeof(Cell) == 1 && static_cast<int>(Cell::kUnwritten) == 0,
                "cells are bytes, kUnwritten is 0");
  uint64_t w = 0;
  std::memcpy(&w, p, 8);
  return w;
}
// Whether any of the eight cells packed in `w` (LoadCells8) is Cell::kUnwritten: a zero byte.
constexpr bool AnyUnwritten8(uint64_t w) {
  return ((w - 0x0101010101010101ull) & ~w & 0x8080808080808080ull) != 0;
}

// Whether a plan keeps the per-element write state (Int32Buffer::cells). Both modes produce
// byte-identical `data`, the same out-of-bounds store counts and the same input violations
// (tests/ref/planner_modes_test.cpp proves it over the golden corpus and random requests).
enum class CellTracking : uint8_t {
  kChecked,  // cells kept: what the plan checker, the simulator and the tests read
  kFast,     // values only, `cells` empty: the planner's speed (docs/performance.md)
};

// The value an unwritten element holds (0xA5A5A5A5 as int32): stale memory made visible.
constexpr int32_t kPoisonValue = -0x5A5A5A5B;

// std::allocator, except that an element made without a value (vector::resize(n) growing) is
// default-initialised: its memory is left as it is, no zero is written. Int32Buffer's vectors use
// it to grow within their capacity over elements they poisoned before (the reserve invariant
// below); every other way to make an element (resize(n, v), assign, copies) writes as usual.
// (Such an element keeps the bytes its memory holds: no store is emitted for int32_t or Cell by
// GCC or Clang; MemorySanitizer, which the project does not use, would call them uninitialised.)
template <class T>
struct KeepBytesAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = KeepBytesAllocator<U>;
  };
  KeepBytesAllocator() noexcept = default;
  template <class U>
  KeepBytesAllocator(const KeepBytesAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
template <class T, class U>
bool operator==(const KeepBytesAllocator<T>&, const KeepBytesAllocator<U>&) {
  return true;
}
template <class T, class U>
bool operator!=(const KeepBytesAllocator<T>&, const KeepBytesAllocator<U>&) {
  return false;
}

// One int32 buffer with its write state. Stores outside the buffer are not performed; they are
// recorded in `oob_writes` (a sizing/planner disagreement, bug class D).
//
// Invariant (what lets a plan be rebuilt in place without touching the whole capacity): every
// element at or past `dirty_end` holds kPoisonValue and, when tracked, Cell::kUnwritten (between
// PrepareForRewrite and FinishRewrite, every element at or past `stale_end`). Stores through
// Store()/Put()/PutRow()/PutFill() keep it; code that writes `data` or `cells` directly must not
// hand the buffer back to the planner (PlanMlaMetadataInto with a Plan*).
//
// Reserve invariant (what lets a recycled buffer grow without a fill): the memory past the end,
// [size(), data.capacity()), also holds kPoisonValue, and [cells.size(), cells.capacity())
// Cell::kUnwritten. Prepare and PrepareForRewrite poison what a shrink cuts off (elements below
// dirty_end only) and grow within the capacity without writing (KeepBytesAllocator); a buffer
// that outgrows its memory is poisoned up to its new capacity. Reset, copies and moves keep it;
// direct writes to `data` / `cells`, or resizing them directly, do not.
struct Int32Buffer {
  using Ints = std::vector<int32_t, KeepBytesAllocator<int32_t>>;
  using Cells = std::vector<Cell, KeepBytesAllocator<Cell>>;
  Ints data;
  Cells cells;  // same length as data when tracked; empty (no memory) under CellTracking::kFast
  int32_t row_width = 1;   // kWorkInfoWidth for work_info, kReduceFinalMapWidth for final map
  int64_t oob_writes = 0;  // stores at index >= data.size() (or < 0)
  int64_t first_oob_index = -1;
  int64_t last_oob_index = -1;
  int64_t dirty_end = 0;  // one past the highest element stored since the last Reset/Prepare
  int64_t stale_end = 0;  // during a rewrite: [dirty_end, stale_end) may hold older values

  // A fresh, tracked buffer of `elements` poisoned, unwritten elements.
  void Reset(int32_t elements, int32_t width);
  // The same state as Reset(elements, width) (untracked under kFast), reusing the memory: only
  // [0, dirty_end) is restored, so the cost follows what the last plan wrote, not the capacity.
  void Prepare(int32_t elements, int32_t width, CellTracking tracking);
  // Prepare for a writer that stores EVERY element of the prefix [0, k) it then declares in
  // dirty_end (the planner's work_indptr, work_info, reduce_indptr and reduce_partial_map):
  // earlier values are left in place to be overwritten, and FinishRewrite() restores only what
  // lies past the new prefix, so an element is written once per plan instead of twice.
  void PrepareForRewrite(int32_t elements, int32_t width, CellTracking tracking);
  void FinishRewrite();

  // Stores `value` at `index` with state `cell` (ignored when untracked); out of range: counted.
  void Store(int64_t index, int32_t value, Cell cell = Cell::kWritten) {
    if (static_cast<uint64_t>(index) >= data.size()) return RecordOob(index);
    data[static_cast<size_t>(index)] = value;
    if (!cells.empty()) cells[static_cast<size_t>(index)] = cell;
    if (index >= dirty_end) dirty_end = index + 1;
  }
  // Store() with the tracking mode fixed at compile time (the planner's inner loops).
  template <CellTracking kMode>
  void Put(int64_t index, int32_t value, Cell cell = Cell::kWritten) {
    if (static_cast<uint64_t>(index) >= data.size()) return RecordOob(index);
    data[static_cast<size_t>(index)] = value;
    if constexpr (kMode == CellTracking::kChecked) cells[static_cast<size_t>(index)] = cell;
    if (index >= dirty_end) dirty_end = index + 1;
  }
  // Stores values[0..n) at [base, base + n); element `undefined_at` (if in 0..n-1) gets
  // Cell::kUndefined. Same effect as n Put() calls in order.
  template <CellTracking kMode>
  void PutRow(int64_t base, const int32_t* values, int32_t n, int32_t undefined_at = -1);
  // Put() of `value` at every index in [begin, end), in order.
  template <CellTracking kMode>
  void PutFill(int64_t begin, int64_t end, int32_t value);
  void RecordOob(int64_t index);

  bool tracked() const { return cells.size() == data.size(); }
  // Whether element i was written. Needs a tracked buffer (CellTracking::kChecked).
  bool written(int64_t i) const { return cells[static_cast<size_t>(i)] != Cell::kUnwritten; }
  int64_t size() const { return static_cast<int64_t>(data.size()); }
  int64_t rows() const { return size() / row_width; }
  // Length of the longest written prefix (elements). Needs a tracked buffer.
  int64_t WrittenPrefix() const;
};

template <CellTracking kMode>
void Int32Buffer::PutRow(int64_t base, const int32_t* values, int32_t n, int32_t undefined_at) {
  if (base < 0 || base + n > size()) {
    for (int32_t i = 0; i < n; ++i)
      Put<kMode>(base + i, values[i], i == undefined_at ? Cell::kUndefined : Cell::kWritten);
    return;
  }
  std::copy(values, values + n, data.begin() + base);
  if constexpr (kMode == CellTracking::kChecked) {
    std::fill(cells.begin() + base, cells.begin() + base + n, Cell::kWritten);
    if (undefined_at >= 0 && undefined_at < n) cells[base + undefined_at] = Cell::kUndefined;
  }
  if (base + n > dirty_end) dirty_end = base + n;
}

template <CellTracking kMode>
void Int32Buffer::PutFill(int64_t begin, int64_t end, int32_t value) {
  const int64_t lo = std::max<int64_t>(begin, 0), hi = std::min(end, size());
  for (int64_t i = begin; i < std::min(end, lo); ++i) RecordOob(i);
  if (lo < hi) {
    int32_t* d = data.data();
    for (int64_t i = lo; i < hi; ++i) d[i] = value;  // (a plain loop: vectorised)
    if constexpr (kMode == CellTracking::kChecked)
      std::fill(cells.begin() + lo, cells.begin() + hi, Cell::kWritten);
    if (hi > dirty_end) dirty_end = hi;
  }
  for (int64_t i = std::max(lo, hi); i < end; ++i) RecordOob(i);
}

// A read by the planner of its own input past the input's end (e.g. kv_last_page_lens at a
// folded index, aiter-mla-metadata.md §4.5 / golden README). The value read is unknowable.
struct InputViolation {
  std::string array;        // "kv_last_page_lens"
  int64_t index = 0;        // element read
  int64_t size = 0;         // elements the array holds
  int32_t work_row = -1;    // work_info row whose value depends on it, -1 if none
  int32_t work_field = -1;  // dword of that row
};

// The six buffers as one plan. The value stored in unwritten cells is kPoison.
struct Plan {
  static constexpr int32_t kPoison = kPoisonValue;
  MetadataSizes sizes;
  CellTracking tracking = CellTracking::kChecked;
  PlanDerived derived;
  uint64_t work_metadata_ptrs[2] = {0, 0};  // modelled: offsets, not device pointers
  Int32Buffer work_indptr;
  Int32Buffer work_info;
  Int32Buffer reduce_indptr;
  Int32Buffer reduce_final_map;
  Int32Buffer reduce_partial_map;
  std::vector<InputViolation> input_violations;
  // decode_update history: the fold ratio each update applied (its own native decision).
  std::vector<int32_t> update_fold_ratios;

  int32_t num_works() const { return derived.num_works; }
  // Field f (WorkField) of work row w.
  int32_t work(int32_t w, int32_t f) const {
    return work_info.data[int64_t{w} * kWorkInfoWidth + f];
  }
  // The int32 buffer `id` names (nullptr for work_metadata_ptrs, which is uint64).
  const Int32Buffer* buffer(PlanBufferId id) const { return const_cast<Plan*>(this)->buffer(id); }
  Int32Buffer* buffer(PlanBufferId id) {
    switch (id) {
      case PlanBufferId::kWorkMetadataPtrs: return nullptr;
      case PlanBufferId::kWorkIndptr: return &work_indptr;
      case PlanBufferId::kWorkInfo: return &work_info;
      case PlanBufferId::kReduceIndptr: return &reduce_indptr;
      case PlanBufferId::kReduceFinalMap: return &reduce_final_map;
      case PlanBufferId::kReducePartialMap: return &reduce_partial_map;
    }
    return nullptr;
  }
};

}  // namespace mlasim::ref
