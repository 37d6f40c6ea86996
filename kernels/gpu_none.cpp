// gpu_none.cpp - the GPU API of a GPU_BACKEND=NONE build: no device, every device call throws.
#include "kernels/gpu_api.h"

#include <stdexcept>

namespace mlasim::gpu {
namespace {

[[noreturn]] void no_backend() {
  throw std::runtime_error("mlasim was built without a GPU backend (GPU_BACKEND=NONE)");
}

}  // namespace

[[noreturn]] void no_backend_call() {
  no_backend();
}

bool available() {
  return false;
}

int device_count() {
  return 0;
}

std::string device_name() {
  return "none";
}

void fill_sentinel(void*, std::size_t) {
  no_backend();
}

SentinelScan scan_sentinel(const void*, std::size_t) {
  no_backend();
}

void fill_sentinel_async(void*, std::size_t) {
  no_backend();
}

void scan_sentinels(const SentinelRegion*, std::size_t, SentinelScan*) {
  no_backend();
}

void device_fill_async(void*, std::size_t, unsigned char) {
  no_backend();
}

GuardedAllocation device_acquire_guarded(std::size_t) {
  no_backend();
}

void device_release_guarded(void*) {
  no_backend();
}

void* device_acquire(std::size_t) {
  no_backend();
}

void device_release(void*) {
  no_backend();
}

void* device_alloc(std::size_t) {
  no_backend();
}

void device_free(void*) {
  no_backend();
}

void copy_to_device(void*, const void*, std::size_t) {
  no_backend();
}

void copy_to_host(void*, const void*, std::size_t) {
  no_backend();
}

void device_fill(void*, std::size_t, unsigned char) {
  no_backend();
}

void device_synchronize() {
  no_backend();
}

GuardedAllocation device_alloc_guarded(std::size_t) {
  no_backend();
}

void device_free_guarded(void*) {
  no_backend();
}

std::size_t guard_page_granularity() {
  no_backend();
}

}  // namespace mlasim::gpu

namespace mlasim::gpu {

GpuPlan plan_mla_metadata(const ref::PlanRequest&, const ref::MetadataSizes&, ref::PlannerChoice,
                          int) {
  no_backend_call();
}
GpuPlan plan_mla_metadata(const ref::PlanRequest&, ref::PlannerChoice, int) {
  no_backend_call();
}
void decode_update_mla_metadata(const ref::DecodeUpdateRequest&, ref::Plan&) {
  no_backend_call();
}
DecodeResult run_mla_decode(const ref::MlaInputs&, const ref::Plan&, const DecodeOptions&) {
  no_backend_call();
}
ref::AttentionOutput reference_attention(const ref::MlaInputs&) {
  no_backend_call();
}
ref::AttentionOutput reference_attention(const ref::MlaInputs&, const GeneratedTensor&,
                                         const GeneratedTensor&) {
  no_backend_call();
}
DeviceAttention::~DeviceAttention() = default;  // nothing was ever acquired without a backend
std::unique_ptr<DeviceAttention> reference_attention_on_device(const ref::MlaInputs&,
                                                               const GeneratedTensor&,
                                                               const GeneratedTensor&) {
  no_backend_call();
}
ref::CompareResult compare_on_device(const void*, int32_t, const float*, int64_t, int32_t,
                                     const uint8_t*, const ref::Tolerance&) {
  no_backend_call();
}
GeneratedStats inspect_generated(const GeneratedTensor&, int32_t) {
  no_backend_call();
}
void fill_generated(const GeneratedTensor&, int32_t, void*, int64_t) {
  no_backend_call();
}
GeneratedDiff diff_generated(const GeneratedTensor&, int32_t, const void*, int64_t) {
  no_backend_call();
}
double measure_copy_bandwidth(std::size_t, int) {
  no_backend_call();
}
double measure_row_read_bandwidth(const std::vector<int32_t>&, int64_t, int32_t, int) {
  no_backend_call();
}

}  // namespace mlasim::gpu
