// File: sim/memory.h
//
// A simulated device address space: named allocations with base, size and row layout, placed by
// an allocator model, which pages are mapped, and which bytes a call wrote this step (written
// extents). Deterministic: addresses depend only on the allocation order and sizes.
//
// Allocator models (AllocatorSpec):
//  - exact:   each buffer alone in a mapping rounded up to the page size, placed so that the buffer
//             ends exactly at the mapping's end, with an unmapped guard page after it: the first
//             byte past any buffer faults (what the GPU runner's guard-page mode does).
//  - caching: PyTorch-like. Sizes rounded up to 512 bytes and packed in allocation order into
//             segments of segment_bytes (2 MiB; larger requests get a segment rounded up to a
//             multiple of it); each segment is mapped whole; one unmapped segment-sized gap
//             separates segments. Overruns land in a neighbour, in slack, or past the segment.
#pragma once

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "sim/scenario.h"

namespace mlasim::sim {

// Sorted, merged half-open byte intervals.
class IntervalSet {
 public:
  void Add(int64_t begin, int64_t end) {
    // Rows written in order: past the last span (a new last span) or from within it (it
    // grows). What the general merge (AddMerged) gives, without its search, erase and insert.
    if (end <= begin) return;
    if (spans_.empty() || begin > spans_.back().second) {
      spans_.push_back({begin, end});
      return;
    }
    if (begin >= spans_.back().first) {
      if (end > spans_.back().second) spans_.back().second = end;
      return;
    }
    AddMerged(begin, end);
  }
  // First sub-interval of [begin, end) not covered, or {end, end} when covered.
  std::pair<int64_t, int64_t> FirstGap(int64_t begin, int64_t end) const;
  bool Covers(int64_t begin, int64_t end) const {
    // One span holding the range (a whole buffer written, rows written in order): no search.
    if (end <= begin) return true;
    if (!spans_.empty() && spans_.back().first <= begin && end <= spans_.back().second) return true;
    return FirstGap(begin, end).first == end;
  }
  // Calls f(r) for each row r of [0, rows), rows of row_bytes (> 0) bytes from byte 0, that the
  // set does not cover whole, in increasing order, each once: the rows meeting a gap, found gap
  // by gap (one search a gap, not a Covers per row: most rows of a written buffer are covered).
  template <class F>
  void ForEachRowNotCovered(int64_t rows, int64_t row_bytes, F&& f) const {
    const int64_t end = rows * row_bytes;
    int64_t next = 0;  // the first row not yet reported (a row may meet two gaps)
    for (int64_t at = 0; at < end;) {
      const auto [g0, g1] = FirstGap(at, end);
      if (g0 >= end) break;
      const int64_t stop = (g1 + row_bytes - 1) / row_bytes;  // past the last row the gap meets
      for (int64_t r = std::max(next, g0 / row_bytes); r < stop; ++r) f(r);
      next = std::max(next, stop);
      at = g1;
    }
  }
  void Clear() { spans_.clear(); }

 private:
  void AddMerged(int64_t begin, int64_t end);  // any non-empty range
  std::vector<std::pair<int64_t, int64_t>> spans_;
};

struct Allocation {
  std::string name;
  uint64_t base = 0;
  int64_t bytes = 0;      // requested size
  int64_t row_bytes = 1;  // bytes per first-dimension row
  int32_t heads = 0;      // for [rows, heads, cols] tensors (fault attribution); 0 = flat
  int32_t cols = 0;
  int32_t elem_bytes = 1;
  std::string dtype;
  bool transient = false;     // belongs to one kernel call (q, o, partial buffers)
  uint64_t mapped_begin = 0;  // the mapping that holds it (exact: its own; caching: its segment)
  uint64_t mapped_end = 0;
  IntervalSet written;  // bytes written this step
};

// The shape facts of a tensor allocation.
struct TensorShape {
  int64_t rows = 0;
  int64_t row_bytes = 1;
  int32_t heads = 0;
  int32_t cols = 0;
  int32_t elem_bytes = 1;
  std::string dtype;
};

class AddressSpace {
 public:
  explicit AddressSpace(const AllocatorSpec& spec);
  // Starts over as AddressSpace(spec) would: no allocations, the cursors at their bases. The
  // memory of the dropped allocations (names, written sets) is kept for the next ones, so a
  // thread that executes step after step (a fuzz campaign) does not allocate it again.
  void Reset(const AllocatorSpec& spec);

  // Persistent allocation (engine buffers that live across steps). Returns its index.
  int32_t Allocate(const std::string& name, const TensorShape& shape);
  // Drops every transient allocation; the next transient allocations reuse the same addresses.
  void BeginCall();
  int32_t AllocateTransient(const std::string& name, const TensorShape& shape);

  const Allocation* Find(const std::string& name) const;
  Allocation* FindMutable(const std::string& name);
  const std::vector<Allocation>& allocations() const { return allocs_; }

  // First unmapped address in [begin, end), or end when every byte is mapped.
  uint64_t FirstUnmapped(uint64_t begin, uint64_t end) const;
  // Allocations other than `self` overlapping [begin, end), by address.
  std::vector<const Allocation*> Overlapping(uint64_t begin, uint64_t end,
                                             const Allocation* self) const;
  // The allocation holding `address`, or the one whose end is nearest below it.
  const Allocation* Nearest(uint64_t address) const;

  nlohmann::json LayoutJson() const;
  const AllocatorSpec& spec() const { return spec_; }

 private:
  int32_t Place(const std::string& name, const TensorShape& shape, bool transient);

  AllocatorSpec spec_;
  std::vector<Allocation> allocs_;
  // Dropped allocations (BeginCall's transients, Reset's all), their strings and written sets
  // kept with their memory for Place to fill in again; never looked at otherwise.
  std::vector<Allocation> spare_;
  uint64_t persistent_cursor_;
  uint64_t transient_base_;
  uint64_t transient_cursor_;
  // caching model: the open segment of each arena
  uint64_t seg_begin_[2] = {0, 0};
  uint64_t seg_end_[2] = {0, 0};
  uint64_t seg_used_[2] = {0, 0};
};

}  // namespace mlasim::sim
