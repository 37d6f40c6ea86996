// hip_compat.h - write GPU code with HIP names only; it builds for AMD (hipcc, or clang -x hip)
// and for NVIDIA (nvcc -x cu), where the HIP names below map onto the CUDA runtime.
// Include it only from .hip files: host .cpp files use the plain C++ API in gpu_api.h.
#pragma once

#if defined(__HIPCC__) || defined(__HIP__) || defined(__HIP_PLATFORM_AMD__)
#include <hip/hip_runtime.h>
// Lanes per wavefront, usable as a compile-time size: 64 on gfx9 (CDNA: gfx90a, gfx94x), 32 on wave32 gfx10+.
#define COMPAT_WARP_SIZE __AMDGCN_WAVEFRONT_SIZE
template <class T>
__device__ inline T compat_shfl_xor(T v, int m) {
  return __shfl_xor(v, m);
}
template <class T>
__device__ inline T compat_shfl(T v, int src_lane) {
  return __shfl(v, src_lane);
}

#elif defined(__CUDACC__)
#include <cuda_runtime.h>
#define COMPAT_WARP_SIZE 32
template <class T>
__device__ inline T compat_shfl_xor(T v, int m) {
  return __shfl_xor_sync(0xffffffffu, v, m);
}
template <class T>
__device__ inline T compat_shfl(T v, int src_lane) {
  return __shfl_sync(0xffffffffu, v, src_lane);
}
using hipError_t = cudaError_t;
using hipStream_t = cudaStream_t;
using hipEvent_t = cudaEvent_t;
using hipDeviceProp_t = cudaDeviceProp;
#define hipSuccess cudaSuccess
#define hipMalloc cudaMalloc
#define hipFree cudaFree
#define hipMemcpy cudaMemcpy
#define hipMemcpyAsync cudaMemcpyAsync
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define hipMemcpyDefault cudaMemcpyDefault
#define hipMemset cudaMemset
#define hipMemsetAsync cudaMemsetAsync
#define hipMemGetInfo cudaMemGetInfo
#define hipDeviceSynchronize cudaDeviceSynchronize
#define hipGetLastError cudaGetLastError
#define hipPeekAtLastError cudaPeekAtLastError
#define hipGetErrorName cudaGetErrorName
#define hipGetErrorString cudaGetErrorString
#define hipGetDevice cudaGetDevice
#define hipSetDevice cudaSetDevice
#define hipGetDeviceCount cudaGetDeviceCount
#define hipGetDeviceProperties cudaGetDeviceProperties
#define hipStreamCreate cudaStreamCreate
#define hipStreamDestroy cudaStreamDestroy
#define hipStreamSynchronize cudaStreamSynchronize
#define hipEventCreate cudaEventCreate
#define hipEventDestroy cudaEventDestroy
#define hipEventRecord cudaEventRecord
#define hipEventSynchronize cudaEventSynchronize
#define hipEventElapsedTime cudaEventElapsedTime
#define hipFuncSetAttribute cudaFuncSetAttribute
#define hipFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize
#define HIP_KERNEL_NAME(...) __VA_ARGS__
#define hipLaunchKernelGGL(k, grid, block, shmem, stream, ...) \
  (k)<<<(grid), (block), (shmem), (stream)>>>(__VA_ARGS__)

#else
#error "hip_compat.h needs hipcc/clang -x hip or nvcc; keep GPU code in .hip files"
#endif

#include <stdexcept>
#include <string>

// Checks the result of a HIP runtime call. On failure it throws std::runtime_error naming the
// call, the error and the source location; it never exits the process (only main() does that).
// Use it for every HIP call: HIP 5.2 marks the API [[nodiscard]].
#define HIP_CHECK(expr)                                                                        \
  do {                                                                                         \
    const hipError_t hip_check_err_ = (expr);                                                  \
    if (hip_check_err_ != hipSuccess) {                                                        \
      throw std::runtime_error(std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " + \
                               #expr + " failed: " + hipGetErrorName(hip_check_err_) + " (" +  \
                               hipGetErrorString(hip_check_err_) + ")");                       \
    }                                                                                          \
  } while (0)
