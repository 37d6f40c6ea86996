#include "ref/metadata.h"

#include <algorithm>

namespace mlasim::ref {

void Int32Buffer::Reset(int32_t elements, int32_t width) {
  data.assign(static_cast<size_t>(elements), kPoisonValue);
  cells.assign(static_cast<size_t>(elements), Cell::kUnwritten);
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
  data.resize(n, kPoisonValue);
  if (tracking == CellTracking::kFast) {
    cells.clear();
  } else if (was_tracked) {
    std::fill(cells.begin(), cells.begin() + static_cast<std::ptrdiff_t>(dirty), Cell::kUnwritten);
    cells.resize(n, Cell::kUnwritten);
  } else {
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
  const bool was_tracked = tracked();
  data.resize(n, kPoisonValue);
  if (tracking == CellTracking::kFast)
    cells.clear();
  else if (was_tracked)
    cells.resize(n, Cell::kUnwritten);
  else
    cells.assign(n, Cell::kUnwritten);
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
