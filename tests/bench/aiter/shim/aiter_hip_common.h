// mlasim's stand-in for aiter's aiter_hip_common.h: only what the v1.2 metadata planner uses.
// AITER_CHECK throws (the bench reports it as a refusal); get_gpu_arch() answers from the device
// model of hip/hip_runtime.h; a one-lane warp reduction returns its input.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

#include "hip/hip_runtime.h"

namespace mlasim_aiter_shim {
template <typename... Args>
[[noreturn]] void Fail(const Args&... args) {
  std::ostringstream s;
  (s << ... << args);
  throw std::runtime_error(s.str());
}
}  // namespace mlasim_aiter_shim

#define AITER_CHECK(cond, ...)                         \
  do {                                                 \
    if (!(cond)) mlasim_aiter_shim::Fail(__VA_ARGS__); \
  } while (0)

inline std::string get_gpu_arch() {
  return mlasim_aiter_shim::Device().arch;
}

namespace aiter {
struct AddFunctor {};
template <typename Functor, typename T, int kWarpSize>
T warpReduce(T value) {
  static_assert(kWarpSize == 1, "the shim runs one lane");
  return value;
}
}  // namespace aiter
