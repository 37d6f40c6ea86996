// File: ref/planner_walk.h (internal to ref/planner*.cpp)
//
// The two planner kernels of aiter's v1.2 fast mode as CPU walks: kn_get_mla_metadata_v1_2
// (serial, aiter-mla-metadata.md §4.5) and kn_get_mla_metadata_v1_2_parallel (§4.6), each
// compiled twice: CellTracking::kChecked keeps the per-element write state, kFast only the
// values (same bytes; the mode is a template parameter so the fast loops carry no per-store
// branch on it).
#pragma once

#include <algorithm>

#include "ref/planner.h"

namespace mlasim::ref::internal {

// floor(n / d) for 0 <= n < 2^32 and 1 <= d < 2^32 by one 64 x 64 -> 128-bit multiply instead of
// a division (Lemire, Kaser, Kurz, "Faster remainder by direct computation", 2019): the walks
// divide by loop-invariant numbers (blocks per cluster, the fold ratio) at every step.
class Divider {
 public:
  explicit Divider(uint32_t d = 1) : d_(d), m_(d <= 1 ? 0 : UINT64_MAX / d + 1) {}
  uint32_t Div(uint32_t n) const {
    if (d_ <= 1) return n;
    return static_cast<uint32_t>((static_cast<unsigned __int128>(m_) * n) >> 64);
  }
  uint32_t Mod(uint32_t n) const { return n - Div(n) * d_; }
  // ceil(a / d) for 0 <= a, a + d - 1 < 2^32.
  int32_t CeilDiv(int32_t a) const {
    return static_cast<int32_t>(Div(static_cast<uint32_t>(a) + d_ - 1));
  }

 private:
  uint32_t d_;
  uint64_t m_;
};

// Everything the walks need, fixed before they start (host decisions and revision rules
// resolved into plain flags).
struct WalkParams {
  const PlanRequest* req = nullptr;
  PlanDerived d;
  bool sparse = false;
  int32_t uni = 1;   // q rows per virtual batch
  int32_t ori = 1;   // tokens per request
  int32_t nb = 0;    // virtual batches the walk visits
  int32_t fold = 1;  // R
  int32_t gran = 16;
  int32_t gran_log2 = 4;
  int32_t page = 1;
  bool page1 = true;  // page == 1
  int32_t ovh = 1;
  int32_t thr = 1;
  int32_t topk_p = -1;
  Divider by_fold, by_ori;  // fold, ori
  int32_t n_tiles = 1;      // q tiles per virtual batch
  int32_t qts = 1;          // q rows per tile
  bool lds_batch_info = true;
  bool causal_trim = true;                   // trim by bt (rules: only if is_causal at 2026-08)
  bool sparse_kv_offset_token_tail = false;  // sparse, fold 1, 2026-08 (#2727)
  bool batch_idx_is_request = true;          // rules.sparse_batch_idx_is_request
  PlannerMutant mutant = PlannerMutant::kNone;
};

// ceil(a / b) for a >= 0, b >= 1 (aiter's integer_divide_ceil).
inline int32_t CeilDivPos(int32_t a, int32_t b) {
  return (a + b - 1) / b;
}

// q tiles of a (virtual) batch of `sq` q rows (§4.3 n_tiles(v)): 1 without q splits, else one
// per row when two rows of heads overflow the pack, else ceil(sq x heads / pack).
inline int32_t QoTilesOf(const PlanDerived& d, int32_t sq) {
  if (!d.qo_split) return 1;
  if (d.planner_heads * 2 > d.packed_qo_len_per_wg) return sq;
  return CeilDivPos(sq * d.planner_heads, d.packed_qo_len_per_wg);
}

// KV blocks of `len` pages: ceil(len / gran) as aiter's integer_divide_ceil_power2 computes it.
inline int32_t Blocks(const WalkParams& p, int32_t len) {
  return (len + p.gran - 1) >> p.gran_log2;
}

// A walk's view of one Int32Buffer: raw pointers, so that stores cost a compare and a move.
// Stores out of range are counted on the buffer (Int32Buffer::RecordOob), never performed; the
// cell state is written only under kChecked. With kBounded false the walk has proved that none
// of its stores can fall outside (see SerialStoresFit, the parallel walk's per-batch check) and
// Put/PutWork skip the compare. The walk declares the extent it wrote with SetWrittenEnd (an
// upper bound is safe: it only widens what the next Prepare restores).
template <CellTracking kMode, bool kBounded = true>
class Sink {
 public:
  explicit Sink(Int32Buffer& b)
      : buffer_(&b), data_(b.data.data()), cells_(b.cells.data()), size_(b.size()) {}
  int64_t size() const { return size_; }
  void Put(int64_t i, int32_t value, Cell cell = Cell::kWritten) const {
    if constexpr (kBounded) {
      if (static_cast<uint64_t>(i) >= static_cast<uint64_t>(size_)) return buffer_->RecordOob(i);
    }
    data_[i] = value;
    if constexpr (kMode == CellTracking::kChecked) cells_[i] = cell;
  }
  // A work_info row: values[0..kWorkInfoWidth) at row `row`; field `undefined_at` (or -1) is
  // Cell::kUndefined.
  void PutWork(int64_t row, const int32_t* values, int32_t undefined_at) const {
    const int64_t base = row * kWorkInfoWidth;
    if (kBounded && (base < 0 || base + kWorkInfoWidth > size_)) {
      for (int32_t f = 0; f < kWorkInfoWidth; ++f)
        Put(base + f, values[f], f == undefined_at ? Cell::kUndefined : Cell::kWritten);
      return;
    }
    // Element by element: a block copy of a row just built on the stack would load it back
    // before the stores reach it (a store-forwarding stall that cost half the walk).
    int32_t* row_data = data_ + base;
    for (int32_t f = 0; f < kWorkInfoWidth; ++f) row_data[f] = values[f];
    if constexpr (kMode == CellTracking::kChecked) {
      std::fill(cells_ + base, cells_ + base + kWorkInfoWidth, Cell::kWritten);
      if (undefined_at >= 0) cells_[base + undefined_at] = Cell::kUndefined;
    }
  }
  // Elements [begin, begin + n) for direct stores, or nullptr unless all of them are in range
  // (the caller then stores through Put). MarkWritten records them written under kChecked.
  int32_t* Span(int64_t begin, int64_t n) const {
    return begin >= 0 && n >= 0 && begin + n <= size_ ? data_ + begin : nullptr;
  }
  void MarkWritten(int64_t begin, int64_t n) const {
    if constexpr (kMode == CellTracking::kChecked)
      std::fill(cells_ + begin, cells_ + begin + n, Cell::kWritten);
  }
  // Put(i, value) for every i in [begin, end), in order.
  void Fill(int64_t begin, int64_t end, int32_t value) const {
    buffer_->template PutFill<kMode>(begin, end, value);
  }
  void SetWrittenEnd(int64_t end) const {
    buffer_->dirty_end = std::max(buffer_->dirty_end, std::min(end, size_));
  }

 private:
  Int32Buffer* buffer_;
  int32_t* data_;
  Cell* cells_;
  int64_t size_;
};

template <CellTracking kMode>
void RunSerial(const WalkParams& p, Plan& plan);
template <CellTracking kMode>
void RunParallel(const WalkParams& p, Plan& plan);
// The same two kernels on non-uniform q lengths (uni_seqlen_qo <= 0, ref/planner_ragged.cpp).
template <CellTracking kMode>
void RunRaggedSerial(const WalkParams& p, Plan& plan);
template <CellTracking kMode>
void RunRaggedParallel(const WalkParams& p, Plan& plan);

}  // namespace mlasim::ref::internal
