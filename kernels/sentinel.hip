// sentinel.hip - device memory helpers and sentinel tails for the GPU runner (HIP names only;
// nvcc builds it through hip_compat.h). The API and its contracts are in gpu_api.h.
#include "kernels/hip_compat.h"
#include "kernels/gpu_api.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>

namespace mlasim::gpu {
namespace {

constexpr int kBlock = 256;
constexpr std::size_t kMaxGrid = 4096;  // grid-stride loops cover the rest

// scan_result indices, one unsigned long long each in device memory.
constexpr int kFirst = 0;  // atomicMin of differing offsets; starts at ~0ull
constexpr int kLast = 1;   // atomicMax of differing offsets; starts at 0
constexpr int kCount = 2;  // atomicAdd of differing bytes; starts at 0

__global__ void __launch_bounds__(kBlock) fill_sentinel_kernel(unsigned char* tail, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    tail[i] = sentinel_byte(i);
  }
}

__global__ void __launch_bounds__(kBlock)
    scan_sentinel_kernel(const unsigned char* tail, std::size_t n, unsigned long long* result) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  unsigned long long first = ~0ull, last = 0, count = 0;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    if (tail[i] != sentinel_byte(i)) {
      if (count == 0) first = i;  // i only grows within a thread
      last = i;
      ++count;
    }
  }
  if (count != 0) {  // one set of atomics per thread, not per byte
    atomicMin(&result[kFirst], first);
    atomicMax(&result[kLast], last);
    atomicAdd(&result[kCount], count);
  }
}

unsigned grid_for(std::size_t n) {
  return static_cast<unsigned>(std::min<std::size_t>((n + kBlock - 1) / kBlock, kMaxGrid));
}

void require_pointer(const void* p, std::size_t bytes, const char* fn) {
  if (p == nullptr && bytes != 0) {
    throw std::invalid_argument(std::string(fn) + ": null device pointer for " + std::to_string(bytes) + " bytes");
  }
}

}  // namespace

bool available() {
  int n = 0;
  if (hipGetDeviceCount(&n) != hipSuccess) {
    (void)hipGetLastError();  // clear the error so later calls do not report it again
    return false;
  }
  return n > 0;
}

std::string device_name() {
  int dev = 0;
  HIP_CHECK(hipGetDevice(&dev));
  hipDeviceProp_t prop{};
  HIP_CHECK(hipGetDeviceProperties(&prop, dev));
  return prop.name;
}

void fill_sentinel(void* dev_tail, std::size_t tail_bytes) {
  require_pointer(dev_tail, tail_bytes, "fill_sentinel");
  if (tail_bytes == 0) return;
  hipLaunchKernelGGL(fill_sentinel_kernel, dim3(grid_for(tail_bytes)), dim3(kBlock), 0, 0,
                     static_cast<unsigned char*>(dev_tail), tail_bytes);
  HIP_CHECK(hipGetLastError());
  HIP_CHECK(hipDeviceSynchronize());
}

SentinelScan scan_sentinel(const void* dev_tail, std::size_t tail_bytes) {
  require_pointer(dev_tail, tail_bytes, "scan_sentinel");
  if (tail_bytes == 0) return SentinelScan{-1, -1, 0};
  const unsigned long long init[3] = {~0ull, 0, 0};
  unsigned long long out[3] = {};
  auto* result = static_cast<unsigned long long*>(device_alloc(sizeof init));
  try {
    copy_to_device(result, init, sizeof init);
    hipLaunchKernelGGL(scan_sentinel_kernel, dim3(grid_for(tail_bytes)), dim3(kBlock), 0, 0,
                       static_cast<const unsigned char*>(dev_tail), tail_bytes, result);
    HIP_CHECK(hipGetLastError());
    copy_to_host(out, result, sizeof out);  // hipMemcpy waits for the kernel
  } catch (...) {
    (void)hipFree(result);  // keep the first error; a failing free here adds nothing
    throw;
  }
  device_free(result);
  if (out[kCount] == 0) return SentinelScan{-1, -1, 0};
  return SentinelScan{static_cast<long long>(out[kFirst]), static_cast<long long>(out[kLast]),
                      static_cast<long long>(out[kCount])};
}

void* device_alloc(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  HIP_CHECK(hipMalloc(&p, bytes));
  return p;
}

void device_free(void* dev_ptr) {
  if (dev_ptr == nullptr) return;
  HIP_CHECK(hipFree(dev_ptr));
}

void copy_to_device(void* dev_dst, const void* host_src, std::size_t bytes) {
  if (bytes == 0) return;
  HIP_CHECK(hipMemcpy(dev_dst, host_src, bytes, hipMemcpyHostToDevice));
}

void copy_to_host(void* host_dst, const void* dev_src, std::size_t bytes) {
  if (bytes == 0) return;
  HIP_CHECK(hipMemcpy(host_dst, dev_src, bytes, hipMemcpyDeviceToHost));
}

}  // namespace mlasim::gpu
