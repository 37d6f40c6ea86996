// tests/kut/aiter_shim/aiter_tensor.h - compile-check stand-in for aiter's csrc/include/aiter_tensor.h
// (absent from the pinned archive; README.md here). It declares the tensor descriptor with the
// fields kernels/kut/aiter_kut.cpp fills: base pointer, element count, rank, sizes and strides
// in elements (up to 8 dims), element type (AiterDtype of the archive's aiter_enum.h), device.
// A full aiter checkout's header takes precedence on the include path.
#pragma once

#include <cstddef>
#include <cstdint>

#include "aiter_enum.h"

struct aiter_tensor_t {
  void* ptr;
  size_t numel_;
  int ndim;
  int64_t shape[8];
  int64_t strides[8];
  AiterDtype dtype_;
  int device_id;
};
