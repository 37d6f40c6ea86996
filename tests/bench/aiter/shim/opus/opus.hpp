// mlasim's stand-in for aiter's opus helpers used by the MLA metadata planner: a warp of ONE
// lane (see hip/hip_runtime.h in this folder).
#pragma once

#include <cstdint>

namespace opus {
constexpr int32_t get_warp_size() {
  return 1;
}
inline int32_t lane_id() {
  return 0;
}
template <typename T>
T shfl(T value, int32_t /*src_lane*/) {
  return value;
}
template <typename T>
constexpr T min(T a, T b) {
  return a < b ? a : b;
}
template <typename T>
constexpr T max(T a, T b) {
  return a > b ? a : b;
}
}  // namespace opus
