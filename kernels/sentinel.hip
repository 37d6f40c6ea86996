// sentinel.hip - device memory helpers and sentinel tails for the GPU runner (HIP names only;
// nvcc builds it through hip_compat.h). The API and its contracts are in gpu_api.h.
#include "kernels/hip_compat.h"  // first: the HIP/CUDA names the other headers use

#include "kernels/gpu_api.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <vector>

#if defined(__CUDACC__) && !defined(__HIP__)
#include <cuda.h>  // driver VM types only; the functions come from cudaGetDriverEntryPointByVersion
#endif

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
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    tail[i] = sentinel_byte(i);
  }
}

__global__ void __launch_bounds__(kBlock)
    scan_sentinel_kernel(const unsigned char* tail, std::size_t n, unsigned long long* result) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  unsigned long long first = ~0ull, last = 0, count = 0;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
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

__global__ void __launch_bounds__(kBlock)
    fill_bytes_kernel(unsigned char* p, std::size_t n, unsigned char v) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    p[i] = v;
}

// Batched scans: block (x, r) strides over region r; its result is result[3r .. 3r+2] (kFirst,
// kLast, kCount), initialised by the host with the table.
struct Region {
  unsigned char* p;
  unsigned long long n;
};

__global__ void __launch_bounds__(kBlock)
    scan_sentinels_kernel(const Region* regions, unsigned long long* result) {
  const Region r = regions[blockIdx.y];
  unsigned long long* res = result + 3 * static_cast<std::size_t>(blockIdx.y);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  unsigned long long first = ~0ull, last = 0, count = 0;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < r.n;
       i += stride) {
    if (r.p[i] != sentinel_byte(i)) {
      if (count == 0) first = i;
      last = i;
      ++count;
    }
  }
  if (count != 0) {
    atomicMin(&res[kFirst], first);
    atomicMax(&res[kLast], last);
    atomicAdd(&res[kCount], count);
  }
}

unsigned grid_for(std::size_t n) {
  return static_cast<unsigned>(std::min<std::size_t>((n + kBlock - 1) / kBlock, kMaxGrid));
}

void require_pointer(const void* p, std::size_t bytes, const char* fn) {
  if (p == nullptr && bytes != 0) {
    throw std::invalid_argument(std::string(fn) + ": null device pointer for " +
                                std::to_string(bytes) + " bytes");
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

int device_count() {
  int n = 0;
  if (hipGetDeviceCount(&n) != hipSuccess) {
    (void)hipGetLastError();
    return 0;
  }
  return n;
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

namespace {

// One device scratch per process for the batched calls: the region table, then the results.
std::mutex g_scratch_mu;
void* g_scratch = nullptr;
std::size_t g_scratch_bytes = 0;

// Uploads the region table and 3 initialised result words per region after it into the
// scratch; returns the device table. Caller holds g_scratch_mu.
Region* stage_regions(const SentinelRegion* regions, std::size_t count, std::size_t* max_bytes) {
  std::vector<unsigned char> host(count * (sizeof(Region) + 24));
  *max_bytes = 0;
  for (std::size_t i = 0; i < count; ++i) {
    require_pointer(regions[i].p, regions[i].bytes, "sentinel region");
    const Region r{static_cast<unsigned char*>(regions[i].p), regions[i].bytes};
    std::memcpy(host.data() + i * sizeof(Region), &r, sizeof r);
    *max_bytes = std::max(*max_bytes, regions[i].bytes);
    const unsigned long long init[3] = {~0ull, 0, 0};
    std::memcpy(host.data() + count * sizeof(Region) + i * 24, init, 24);
  }
  if (host.size() > g_scratch_bytes) {
    if (g_scratch != nullptr) HIP_CHECK(hipFree(g_scratch));
    g_scratch = nullptr;
    HIP_CHECK(hipMalloc(&g_scratch, host.size()));
    g_scratch_bytes = host.size();
  }
  copy_to_device(g_scratch, host.data(), host.size());
  return static_cast<Region*>(g_scratch);
}

// Batched scans: at most 65535 regions per launch (grid y).
constexpr std::size_t kMaxRegions = 65535;

}  // namespace

void fill_sentinel_async(void* dev_tail, std::size_t tail_bytes) {
  require_pointer(dev_tail, tail_bytes, "fill_sentinel_async");
  if (tail_bytes == 0) return;
  hipLaunchKernelGGL(fill_sentinel_kernel, dim3(grid_for(tail_bytes)), dim3(kBlock), 0, 0,
                     static_cast<unsigned char*>(dev_tail), tail_bytes);
  HIP_CHECK(hipGetLastError());
}

void scan_sentinels(const SentinelRegion* regions, std::size_t count, SentinelScan* out) {
  for (std::size_t at = 0; at < count; at += kMaxRegions) {
    const std::size_t n = std::min(kMaxRegions, count - at);
    std::lock_guard<std::mutex> lock(g_scratch_mu);
    std::size_t max_bytes = 0;
    Region* table = stage_regions(regions + at, n, &max_bytes);
    auto* result = reinterpret_cast<unsigned long long*>(table + n);
    std::vector<unsigned long long> words(3 * n, 0);
    if (max_bytes > 0) {
      hipLaunchKernelGGL(scan_sentinels_kernel, dim3(grid_for(max_bytes), static_cast<unsigned>(n)),
                         dim3(kBlock), 0, 0, table, result);
      HIP_CHECK(hipGetLastError());
      copy_to_host(words.data(), result, words.size() * sizeof(words[0]));  // waits for it
    }
    for (std::size_t i = 0; i < n; ++i) {
      const unsigned long long* w = words.data() + 3 * i;
      out[at + i] = w[kCount] == 0 ? SentinelScan{-1, -1, 0}
                                   : SentinelScan{static_cast<long long>(w[kFirst]),
                                                  static_cast<long long>(w[kLast]),
                                                  static_cast<long long>(w[kCount])};
    }
  }
}

void device_fill_async(void* dev_dst, std::size_t bytes, unsigned char value) {
  require_pointer(dev_dst, bytes, "device_fill_async");
  if (bytes == 0) return;
  hipLaunchKernelGGL(fill_bytes_kernel, dim3(grid_for(bytes)), dim3(kBlock), 0, 0,
                     static_cast<unsigned char*>(dev_dst), bytes, value);
  HIP_CHECK(hipGetLastError());
}

// ---- the per-process block cache (device_acquire / device_release) ----------------------------
namespace {
constexpr std::size_t kMinBlock = 4096;
constexpr std::size_t kMaxCachedBytes = std::size_t{4} << 30;
std::mutex g_cache_mu;
std::map<std::size_t, std::vector<void*>> g_free_blocks;  // block size -> free blocks
std::map<void*, std::size_t> g_block_size;                // every live or free block
std::size_t g_cached_bytes = 0;

std::size_t block_size(std::size_t bytes) {
  std::size_t b = kMinBlock;
  while (b < bytes) b <<= 1;
  return b;
}
}  // namespace

void* device_acquire(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  const std::size_t size = block_size(bytes);
  {
    std::lock_guard<std::mutex> lock(g_cache_mu);
    auto it = g_free_blocks.find(size);
    if (it != g_free_blocks.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      g_cached_bytes -= size;
      return p;
    }
  }
  void* p = device_alloc(size);
  std::lock_guard<std::mutex> lock(g_cache_mu);
  g_block_size[p] = size;
  return p;
}

void device_release(void* dev_ptr) {
  if (dev_ptr == nullptr) return;
  std::size_t size = 0;
  {
    std::lock_guard<std::mutex> lock(g_cache_mu);
    auto it = g_block_size.find(dev_ptr);
    if (it == g_block_size.end())
      throw std::invalid_argument("device_release: not a block from device_acquire");
    size = it->second;
    if (g_cached_bytes + size <= kMaxCachedBytes) {
      g_free_blocks[size].push_back(dev_ptr);
      g_cached_bytes += size;
      return;
    }
    g_block_size.erase(it);
  }
  device_free(dev_ptr);
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

void device_fill(void* dev_dst, std::size_t bytes, unsigned char value) {
  require_pointer(dev_dst, bytes, "device_fill");
  if (bytes == 0) return;
  hipLaunchKernelGGL(fill_bytes_kernel, dim3(grid_for(bytes)), dim3(kBlock), 0, 0,
                     static_cast<unsigned char*>(dev_dst), bytes, value);
  HIP_CHECK(hipGetLastError());
  HIP_CHECK(hipDeviceSynchronize());
}

void device_synchronize() {
  HIP_CHECK(hipDeviceSynchronize());
}

// ---- guard-page allocations (driver virtual memory) -------------------------------------------
// Layout: [ reserved range: mapped granules | one reserved, unmapped granule ]; the buffer is
// placed at (mapped end - bytes), so its last byte is the last mapped byte and the next byte lies
// in the unmapped granule: any access there faults (illegal address / memory access fault).
namespace {

struct GuardRecord {
  void* base = nullptr;
  std::size_t reserved = 0, mapped = 0;
  unsigned long long handle = 0;
};
std::mutex g_guard_mu;
std::map<void*, GuardRecord> g_guards;

#if defined(__CUDACC__) && !defined(__HIP__)
// NVIDIA: the driver API through the runtime's entry-point query, so nothing links libcuda.
struct Driver {
  CUresult (*reserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long) = nullptr;
  CUresult (*create)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                     unsigned long long) = nullptr;
  CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                  unsigned long long) = nullptr;
  CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t) = nullptr;
  CUresult (*granularity)(size_t*, const CUmemAllocationProp*,
                          CUmemAllocationGranularity_flags) = nullptr;
  CUresult (*unmap)(CUdeviceptr, size_t) = nullptr;
  CUresult (*release)(CUmemGenericAllocationHandle) = nullptr;
  CUresult (*address_free)(CUdeviceptr, size_t) = nullptr;
};

template <class F>
void entry(const char* name, F*& fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q{};
  HIP_CHECK(cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q));
  if (p == nullptr || q != cudaDriverEntryPointSuccess)
    throw std::runtime_error(std::string("driver entry point not found: ") + name);
  fn = reinterpret_cast<F*>(p);
}

const Driver& driver() {
  static const Driver d = [] {
    Driver x;
    entry("cuMemAddressReserve", x.reserve);
    entry("cuMemCreate", x.create);
    entry("cuMemMap", x.map);
    entry("cuMemSetAccess", x.set_access);
    entry("cuMemGetAllocationGranularity", x.granularity);
    entry("cuMemUnmap", x.unmap);
    entry("cuMemRelease", x.release);
    entry("cuMemAddressFree", x.address_free);
    return x;
  }();
  return d;
}

void drv_check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS)
    throw std::runtime_error(std::string(what) + " failed: CUresult " +
                             std::to_string(static_cast<int>(r)));
}

CUmemAllocationProp alloc_prop(int dev) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  return prop;
}

GuardRecord guard_map(std::size_t bytes, int dev) {
  HIP_CHECK(cudaFree(nullptr));  // the primary context must be current for the driver calls
  const Driver& d = driver();
  const CUmemAllocationProp prop = alloc_prop(dev);
  size_t gran = 0;
  drv_check(d.granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
            "cuMemGetAllocationGranularity");
  GuardRecord g;
  g.mapped = (bytes + gran - 1) / gran * gran;
  g.reserved = g.mapped + gran;
  CUdeviceptr base = 0;
  drv_check(d.reserve(&base, g.reserved, gran, 0, 0), "cuMemAddressReserve");
  g.base = reinterpret_cast<void*>(base);
  CUmemGenericAllocationHandle h = 0;
  drv_check(d.create(&h, g.mapped, &prop, 0), "cuMemCreate");
  g.handle = static_cast<unsigned long long>(h);
  drv_check(d.map(base, g.mapped, 0, h, 0), "cuMemMap");
  CUmemAccessDesc acc{};
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  drv_check(d.set_access(base, g.mapped, &acc, 1), "cuMemSetAccess");
  return g;
}

void guard_unmap(const GuardRecord& g) {  // errors ignored: after a fault the context is gone
  const Driver& d = driver();
  const CUdeviceptr base = reinterpret_cast<CUdeviceptr>(g.base);
  (void)d.unmap(base, g.mapped);
  (void)d.release(static_cast<CUmemGenericAllocationHandle>(g.handle));
  (void)d.address_free(base, g.reserved);
}

std::size_t guard_granularity(int dev) {
  HIP_CHECK(cudaFree(nullptr));
  const CUmemAllocationProp prop = alloc_prop(dev);
  size_t gran = 0;
  drv_check(driver().granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
            "cuMemGetAllocationGranularity");
  return gran;
}

#else
// AMD: the same steps with HIP's virtual memory API.
hipMemAllocationProp alloc_prop(int dev) {
  hipMemAllocationProp prop{};
  prop.type = hipMemAllocationTypePinned;
  prop.location.type = hipMemLocationTypeDevice;
  prop.location.id = dev;
  return prop;
}

std::size_t guard_granularity(int dev) {
  const hipMemAllocationProp prop = alloc_prop(dev);
  size_t gran = 0;
  HIP_CHECK(hipMemGetAllocationGranularity(&gran, &prop, hipMemAllocationGranularityMinimum));
  return gran;
}

GuardRecord guard_map(std::size_t bytes, int dev) {
  const hipMemAllocationProp prop = alloc_prop(dev);
  const std::size_t gran = guard_granularity(dev);
  GuardRecord g;
  g.mapped = (bytes + gran - 1) / gran * gran;
  g.reserved = g.mapped + gran;
  HIP_CHECK(hipMemAddressReserve(&g.base, g.reserved, gran, nullptr, 0));
  hipMemGenericAllocationHandle_t h{};
  HIP_CHECK(hipMemCreate(&h, g.mapped, &prop, 0));
  g.handle = reinterpret_cast<unsigned long long>(h);
  HIP_CHECK(hipMemMap(g.base, g.mapped, 0, h, 0));
  hipMemAccessDesc acc{};
  acc.location = prop.location;
  acc.flags = hipMemAccessFlagsProtReadWrite;
  HIP_CHECK(hipMemSetAccess(g.base, g.mapped, &acc, 1));
  return g;
}

void guard_unmap(const GuardRecord& g) {
  (void)hipMemUnmap(g.base, g.mapped);
  (void)hipMemRelease(reinterpret_cast<hipMemGenericAllocationHandle_t>(g.handle));
  (void)hipMemAddressFree(g.base, g.reserved);
}
#endif

}  // namespace

GuardedAllocation device_alloc_guarded(std::size_t bytes) {
  if (bytes == 0) throw std::invalid_argument("device_alloc_guarded: 0 bytes");
  int dev = 0;
  HIP_CHECK(hipGetDevice(&dev));
  const GuardRecord g = guard_map(bytes, dev);
  GuardedAllocation a;
  a.ptr = static_cast<unsigned char*>(g.base) + (g.mapped - bytes);
  a.bytes = bytes;
  a.mapped_bytes = g.mapped;
  a.granularity = g.reserved - g.mapped;
  a.mapped_end = reinterpret_cast<std::uintptr_t>(g.base) + g.mapped;
  std::lock_guard<std::mutex> lock(g_guard_mu);
  g_guards[a.ptr] = g;
  return a;
}

void device_free_guarded(void* ptr) {
  if (ptr == nullptr) return;
  GuardRecord g;
  {
    std::lock_guard<std::mutex> lock(g_guard_mu);
    auto it = g_guards.find(ptr);
    if (it == g_guards.end())
      throw std::invalid_argument("device_free_guarded: not a guarded allocation");
    g = it->second;
    g_guards.erase(it);
  }
  guard_unmap(g);
}

namespace {
std::mutex g_guard_cache_mu;
std::map<std::size_t, std::vector<GuardRecord>> g_free_guards;  // mapped bytes -> free mappings
std::map<void*, GuardRecord> g_acquired_guards;                 // buffer ptr -> its mapping
std::size_t g_guard_cached_bytes = 0;
constexpr std::size_t kMaxCachedGuardBytes = std::size_t{4} << 30;
}  // namespace

GuardedAllocation device_acquire_guarded(std::size_t bytes) {
  if (bytes == 0) throw std::invalid_argument("device_acquire_guarded: 0 bytes");
  int dev = 0;
  HIP_CHECK(hipGetDevice(&dev));
  const std::size_t gran = guard_granularity(dev);
  std::size_t mapped = gran;
  while (mapped < bytes) mapped <<= 1;
  GuardRecord g;
  bool cached = false;
  {
    std::lock_guard<std::mutex> lock(g_guard_cache_mu);
    auto it = g_free_guards.find(mapped);
    if (it != g_free_guards.end() && !it->second.empty()) {
      g = it->second.back();
      it->second.pop_back();
      g_guard_cached_bytes -= mapped;
      cached = true;
    }
  }
  if (!cached) g = guard_map(mapped, dev);
  GuardedAllocation a;
  a.ptr = static_cast<unsigned char*>(g.base) + (g.mapped - bytes);
  a.bytes = bytes;
  a.mapped_bytes = g.mapped;
  a.granularity = g.reserved - g.mapped;
  a.mapped_end = reinterpret_cast<std::uintptr_t>(g.base) + g.mapped;
  std::lock_guard<std::mutex> lock(g_guard_cache_mu);
  g_acquired_guards[a.ptr] = g;
  return a;
}

void device_release_guarded(void* ptr) {
  if (ptr == nullptr) return;
  GuardRecord g;
  {
    std::lock_guard<std::mutex> lock(g_guard_cache_mu);
    auto it = g_acquired_guards.find(ptr);
    if (it == g_acquired_guards.end())
      throw std::invalid_argument(
          "device_release_guarded: not a buffer from device_acquire_guarded");
    g = it->second;
    g_acquired_guards.erase(it);
    if (g_guard_cached_bytes + g.mapped <= kMaxCachedGuardBytes) {
      g_free_guards[g.mapped].push_back(g);
      g_guard_cached_bytes += g.mapped;
      return;
    }
  }
  guard_unmap(g);
}

std::size_t guard_page_granularity() {
  int dev = 0;
  HIP_CHECK(hipGetDevice(&dev));
  return guard_granularity(dev);
}

}  // namespace mlasim::gpu
