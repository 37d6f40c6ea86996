#include "ref/flashinfer/workspace.h"

#include <fmt/format.h>

#include <limits>

namespace mlasim::ref::flashinfer {

bool WorkspaceRegion::operator==(const WorkspaceRegion& o) const {
  return name == o.name && offset == o.offset && bytes == o.bytes && alignment == o.alignment;
}

RegionAllocator RegionAllocator::Counting() {
  return RegionAllocator(std::nullopt);
}

RegionAllocator RegionAllocator::Real(uint64_t capacity_bytes) {
  return RegionAllocator(capacity_bytes);
}

StatusOr<int64_t> RegionAllocator::Allocate(const std::string& name, int64_t bytes,
                                            int64_t alignment) {
  if (bytes < 0)
    return InvalidArgumentError(name, fmt::format("region size {} is negative", bytes));
  if (alignment < 1 || (alignment & (alignment - 1)) != 0)
    return InvalidArgumentError(name, fmt::format("alignment {} is not a power of two", alignment));
  const int64_t padding = (alignment - allocated_ % alignment) % alignment;
  // Counting mode has the whole int64 range, FlashInfer's size_t max in practice.
  const uint64_t limit = capacity_.value_or(std::numeric_limits<int64_t>::max());
  const uint64_t left = limit - static_cast<uint64_t>(allocated_);
  if (static_cast<uint64_t>(padding) > left ||
      static_cast<uint64_t>(bytes) > left - static_cast<uint64_t>(padding))
    return OutOfRangeError(
        name, fmt::format("buffer overflow when allocating {} bytes with alignment {}, but only "
                          "{} bytes are left of {}. Increase the workspace buffer size.",
                          bytes, alignment, left, limit));
  const int64_t offset = allocated_ + padding;
  allocated_ = offset + bytes;
  regions_.push_back({name, offset, bytes, alignment});
  return offset;
}

const WorkspaceRegion* FindRegion(const std::vector<WorkspaceRegion>& regions,
                                  const std::string& name) {
  for (const WorkspaceRegion& r : regions)
    if (r.name == name) return &r;
  return nullptr;
}

}  // namespace mlasim::ref::flashinfer
