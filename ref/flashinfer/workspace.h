// File: ref/flashinfer/workspace.h
//
// A workspace as a list of named regions, produced by one allocator that runs in two modes, as
// FlashInfer's AlignedAllocator (include/flashinfer/allocator.h, fb28d72):
//   counting mode: no buffer and no capacity, sizes a workspace (…PlanWorkspaceSize);
//   real mode:     the caller's buffer of `capacity` bytes; a region that does not fit is an
//                  error naming it, the bytes it needs, the alignment, the bytes left and the fix.
// Both modes run the same code, so the size query cannot drift from the layout. Offsets are
// relative to the buffer's base, which (as torch allocations are) is assumed aligned to every
// alignment asked for: FlashInfer's real mode aligns the absolute address, which then gives the
// same offsets.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ref/status.h"

namespace mlasim::ref::flashinfer {

struct WorkspaceRegion {
  std::string name;       // FlashInfer's allocation name ("mla_q_indptr", ...)
  int64_t offset = 0;     // bytes from the workspace base, a multiple of alignment
  int64_t bytes = 0;      // bytes asked for
  int64_t alignment = 1;  // bytes, a power of two
  int64_t end() const { return offset + bytes; }
  bool operator==(const WorkspaceRegion& o) const;
};

class RegionAllocator {
 public:
  static RegionAllocator Counting();
  static RegionAllocator Real(uint64_t capacity_bytes);

  // Next region: offset = allocated bytes rounded up to `alignment`. Errors: InvalidArgument for
  // a negative size or an alignment that is not a power of two; OutOfRange(name) in real mode
  // when padding + bytes exceed what is left ("... Increase the workspace buffer size.").
  StatusOr<int64_t> Allocate(const std::string& name, int64_t bytes, int64_t alignment);

  int64_t allocated_bytes() const { return allocated_; }  // FlashInfer's num_allocated_bytes()
  bool counting() const { return !capacity_.has_value(); }
  const std::vector<WorkspaceRegion>& regions() const { return regions_; }

 private:
  explicit RegionAllocator(std::optional<uint64_t> capacity) : capacity_(capacity) {}
  std::optional<uint64_t> capacity_;
  int64_t allocated_ = 0;
  std::vector<WorkspaceRegion> regions_;
};

// The region called `name`, or nullptr.
const WorkspaceRegion* FindRegion(const std::vector<WorkspaceRegion>& regions,
                                  const std::string& name);

}  // namespace mlasim::ref::flashinfer
