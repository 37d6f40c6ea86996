// mlasim's stand-in for aiter's aiter_stream.h: there is no stream, kernels run inline.
#pragma once

#include "hip/hip_runtime.h"

namespace aiter {
inline hipStream_t getCurrentHIPStream() {
  return nullptr;
}
}  // namespace aiter
