// gpu_api.h - the plain C++ interface to mlasim's GPU code. No GPU headers: host code compiled by
// g++ includes this, and the implementation lives in kernels/*.hip (GPU_BACKEND=CUDA or HIP) or in
// kernels/gpu_none.cpp (GPU_BACKEND=NONE, where available() is false and the rest throws).
//
// All sizes are in bytes. Every call is synchronous: it returns after the device has finished.
// Errors: a failing HIP runtime call throws std::runtime_error whose message names the call
// (for example "hipMalloc(&p, bytes) failed: hipErrorOutOfMemory (out of memory)").
#pragma once

#include <cstddef>
#include <string>

// Functions usable on both sides of a .hip file (plain inline functions in g++ builds).
#if defined(__CUDACC__) || defined(__HIP__)
#define MLASIM_HOST_DEVICE __host__ __device__
#else
#define MLASIM_HOST_DEVICE
#endif

namespace mlasim::gpu {

// True when this build has a GPU backend and at least one device is visible. Never throws, so
// tests can write `if (!gpu::available()) GTEST_SKIP();`.
bool available();

// Name of the current device (hipDeviceProp_t::name), or "none" in a GPU_BACKEND=NONE build.
// Throws std::runtime_error when a GPU backend is built but no device is usable.
std::string device_name();

// Where a sentinel tail no longer holds its pattern. Offsets are bytes from the start of the tail.
// When the tail is intact: bad_bytes == 0 and first_bad_byte == last_bad_byte == -1.
struct SentinelScan {
  long long first_bad_byte;  // lowest offset whose byte differs from the pattern, or -1
  long long last_bad_byte;   // highest offset whose byte differs from the pattern, or -1
  long long bad_bytes;       // how many bytes differ from the pattern
};

// The sentinel pattern: byte i of a tail holds 0xA5 ^ (i & 0xFF). It varies with i, so a shifted
// copy of the tail, a memset or a run of zeros all show up as damage.
MLASIM_HOST_DEVICE inline unsigned char sentinel_byte(std::size_t i) {
  return static_cast<unsigned char>(0xA5u ^ (i & 0xFFu));
}

// Fills `tail_bytes` bytes at device pointer `dev_tail` with the sentinel pattern (byte i =
// 0xA5 ^ (i & 0xFF)). tail_bytes == 0 does nothing. Throws std::invalid_argument when dev_tail is
// null and tail_bytes > 0, std::runtime_error when the kernel launch or a HIP call fails.
void fill_sentinel(void* dev_tail, std::size_t tail_bytes);

// Compares `tail_bytes` bytes at device pointer `dev_tail` with the sentinel pattern and reports
// the first and last differing offsets and the count. Same errors as fill_sentinel.
SentinelScan scan_sentinel(const void* dev_tail, std::size_t tail_bytes);

// Allocates `bytes` bytes of device memory (hipMalloc); contents are undefined. Returns nullptr
// for 0 bytes. Throws std::runtime_error on failure (including out of memory).
void* device_alloc(std::size_t bytes);

// Frees memory from device_alloc (hipFree). nullptr is allowed and does nothing.
// Throws std::runtime_error on failure.
void device_free(void* dev_ptr);

// Copies `bytes` bytes from host memory `host_src` to device memory `dev_dst` (hipMemcpy).
// Throws std::runtime_error on failure.
void copy_to_device(void* dev_dst, const void* host_src, std::size_t bytes);

// Copies `bytes` bytes from device memory `dev_src` to host memory `host_dst` (hipMemcpy).
// Throws std::runtime_error on failure.
void copy_to_host(void* host_dst, const void* dev_src, std::size_t bytes);

}  // namespace mlasim::gpu
