// mlasim's own host-C++ stand-in for <hip/hip_runtime.h>, written for compiling aiter's v1.2 MLA
// metadata planner (csrc/kernels/mla/metadata/v1_2_device.cuh) as ordinary C++ so that it can be
// timed and compared against ref::PlanMlaMetadata in one process (tests/bench/aiter/).
//
// A kernel runs as ONE lane of ONE workgroup: threadIdx = 0, blockDim = 1, warp size 1 (shuffles
// return their own value, reductions return their input), __syncthreads is a no-op, and the
// launches `k<<<grid, block, lds, stream>>>(p)` are rewritten into plain calls `k(p)` at build
// time (cmake/AiterRewrite.cmake). LDS is one static array (`p_smem`, defined by the bench). The
// device-properties query answers from `mlasim_aiter_shim::Device()`, which the bench sets.
// Nothing here is copied from HIP or aiter: only the names they use are provided.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __shared__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)

struct dim3 {
  uint32_t x = 1, y = 1, z = 1;
  constexpr dim3(uint32_t a = 1, uint32_t b = 1, uint32_t c = 1) : x(a), y(b), z(c) {}
};

// One lane of one workgroup.
struct MlasimShimIndex {
  uint32_t x, y, z;
};
inline constexpr MlasimShimIndex threadIdx{0, 0, 0};
inline constexpr MlasimShimIndex blockIdx{0, 0, 0};
inline constexpr MlasimShimIndex blockDim{1, 1, 1};
inline void __syncthreads() {}

using hipStream_t = void*;
using hipDevice_t = int;
enum hipError_t { hipSuccess = 0 };

struct hipDeviceProp_t {
  int multiProcessorCount = 0;
  int warpSize = 0;
  int maxSharedMemoryPerMultiProcessor = 0;
  char gcnArchName[64] = {};
};

namespace mlasim_aiter_shim {
// The device the stubbed properties query describes (set by the bench before each plan).
struct DeviceModel {
  hipDeviceProp_t prop;
  std::string arch = "gfx942";
};
inline DeviceModel& Device() {
  static DeviceModel device;
  return device;
}
}  // namespace mlasim_aiter_shim

inline hipError_t hipGetDevice(hipDevice_t* dev) {
  *dev = 0;
  return hipSuccess;
}
inline hipError_t hipGetDeviceProperties(hipDeviceProp_t* prop, hipDevice_t) {
  *prop = mlasim_aiter_shim::Device().prop;
  return hipSuccess;
}

// The unqualified integer min/max that device code gets from HIP's headers.
inline int32_t min(int32_t a, int32_t b) {
  return a < b ? a : b;
}
inline int32_t max(int32_t a, int32_t b) {
  return a > b ? a : b;
}
