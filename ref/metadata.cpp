#include "ref/metadata.h"

#include <algorithm>

namespace mlasim::ref {

void Int32Buffer::Reset(int32_t elements, int32_t width) {
  data.assign(static_cast<size_t>(elements), Plan::kPoison);
  cells.assign(static_cast<size_t>(elements), Cell::kUnwritten);
  row_width = width;
  oob_writes = 0;
  first_oob_index = last_oob_index = -1;
}

void Int32Buffer::RecordOob(int64_t index) {
  if (oob_writes == 0) first_oob_index = last_oob_index = index;
  first_oob_index = std::min(first_oob_index, index);
  last_oob_index = std::max(last_oob_index, index);
  ++oob_writes;
}

int64_t Int32Buffer::WrittenPrefix() const {
  int64_t n = 0;
  while (n < static_cast<int64_t>(cells.size()) && cells[n] != Cell::kUnwritten) ++n;
  return n;
}

const char* WorkFieldName(int32_t field) {
  static const char* kNames[8] = {"batch_idx", "partial_qo_loc", "qo_start",  "qo_end",
                                  "kv_start",  "kv_end",         "kv_offset", "pad"};
  return field >= 0 && field < 8 ? kNames[field] : "?";
}

}  // namespace mlasim::ref
