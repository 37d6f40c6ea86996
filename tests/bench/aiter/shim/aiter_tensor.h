// mlasim's stand-in for aiter's aiter_tensor.h: a view of host memory with a length (elements in
// dimension 0), which is all the v1.2 planner's host function reads.
#pragma once

#include <cstdint>

struct aiter_tensor_t {
  void* ptr = nullptr;
  int64_t rows = 0;
  void* data_ptr() const { return ptr; }
  int64_t size(int /*dim*/) const { return rows; }
};
