// tests/kut/aiter_shim/aiter_stream.h - compile-check stand-in for aiter's
// csrc/include/aiter_stream.h (absent from the pinned archive; README.md here): the setter of the
// stream aiter's torch-free entry points (mla_reduce_v1) launch on. Declaration only.
#pragma once

#include <hip/hip_runtime.h>

namespace aiter {
void setCurrentHIPStream(hipStream_t stream);
}  // namespace aiter
