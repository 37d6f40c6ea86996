#include "ref/metadata.h"

#include <algorithm>

namespace mlasim::ref {

namespace {

// Sets v's size to n keeping the reserve invariant (Int32Buffer): v's elements below `dirty` may
// hold other values, all others hold `poison`. A shrink poisons the elements it cuts off below
// `dirty`; growth within the capacity writes nothing; growth past it poisons the new elements
// (the new memory is n elements: nothing lies past them).
template <class V, class T>
void ResizeInReserve(V& v, size_t n, size_t dirty, T poison) {
  const size_t size = v.size();
  if (n < size) {
    const size_t hi = std::min(dirty, size);
    if (n < hi)
      std::fill(v.begin() + static_cast<std::ptrdiff_t>(n),
                v.begin() + static_cast<std::ptrdiff_t>(hi), poison);
    v.resize(n);
  } else if (n <= v.capacity()) {
    v.resize(n);  // [size, n) is reserve memory: poison already
  } else {
    v.reserve(n);
    v.resize(n, poison);
  }
}

// Drops every element and the memory (the reserve invariant holds for an empty capacity).
template <class V>
void Release(V& v) {
  V().swap(v);
}

}  // namespace

void Int32Buffer::Reset(int32_t elements, int32_t width) {
  const size_t n = static_cast<size_t>(elements);
  // The whole capacity poisoned (the reserve invariant), then the size set.
  data.assign(std::max(n, data.capacity()), kPoisonValue);
  data.resize(n);
  cells.assign(std::max(n, cells.capacity()), Cell::kUnwritten);
  cells.resize(n);
  row_width = width;
  oob_writes = 0;
  first_oob_index = last_oob_index = -1;
  dirty_end = stale_end = 0;
}

void Int32Buffer::Prepare(int32_t elements, int32_t width, CellTracking tracking) {
  const size_t n = static_cast<size_t>(std::max(elements, 0));
  const size_t dirty = std::min(static_cast<size_t>(dirty_end), data.size());
  const bool was_tracked = tracked();
  std::fill(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(dirty), kPoisonValue);
  ResizeInReserve(data, n, 0, kPoisonValue);
  if (tracking == CellTracking::kFast) {
    Release(cells);
  } else if (was_tracked) {
    std::fill(cells.begin(), cells.begin() + static_cast<std::ptrdiff_t>(dirty), Cell::kUnwritten);
    ResizeInReserve(cells, n, 0, Cell::kUnwritten);
  } else {
    Release(cells);
    cells.assign(n, Cell::kUnwritten);
  }
  row_width = width;
  oob_writes = 0;
  first_oob_index = last_oob_index = -1;
  dirty_end = 0;
}

void Int32Buffer::PrepareForRewrite(int32_t elements, int32_t width, CellTracking tracking) {
  const size_t n = static_cast<size_t>(std::max(elements, 0));
  const int64_t stale = std::min<int64_t>(dirty_end, static_cast<int64_t>(n));
  const size_t dirty = static_cast<size_t>(std::max<int64_t>(dirty_end, 0));
  const bool was_tracked = tracked();
  ResizeInReserve(data, n, dirty, kPoisonValue);
  if (tracking == CellTracking::kFast) {
    Release(cells);
  } else if (was_tracked) {
    ResizeInReserve(cells, n, dirty, Cell::kUnwritten);
  } else {
    Release(cells);
    cells.assign(n, Cell::kUnwritten);
  }
  row_width = width;
  oob_writes = 0;
  first_oob_index = last_oob_index = -1;
  dirty_end = 0;
  stale_end = std::max<int64_t>(stale, 0);
}

void Int32Buffer::FinishRewrite() {
  const int64_t lo = std::min(dirty_end, size()), hi = std::min(stale_end, size());
  if (lo < hi) {
    std::fill(data.begin() + lo, data.begin() + hi, kPoisonValue);
    if (!cells.empty()) std::fill(cells.begin() + lo, cells.begin() + hi, Cell::kUnwritten);
  }
  stale_end = 0;
}

void Int32Buffer::RecordOob(int64_t index) {
  if (oob_writes == 0) first_oob_index = last_oob_index = index;
  first_oob_index = std::min(first_oob_index, index);
  last_oob_index = std::max(last_oob_index, index);
  ++oob_writes;
}

int64_t Int32Buffer::WrittenPrefix() const {
  MLASIM_ASSERT(tracked(), "WrittenPrefix needs a plan made with CellTracking::kChecked");
  int64_t n = 0;
  while (n < static_cast<int64_t>(cells.size()) && cells[n] != Cell::kUnwritten) ++n;
  return n;
}

const char* WorkFieldName(int32_t field) {
  static const char* kNames[kWorkFieldCount] = {
      "batch_idx", "partial_qo_loc", "qo_start",  "qo_end",
      "kv_start",  "kv_end",         "kv_offset", "pad"};
  return field >= 0 && field < kWorkFieldCount ? kNames[field] : "?";
}

}  // namespace mlasim::ref
