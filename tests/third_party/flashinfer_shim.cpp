// File: tests/third_party/flashinfer_shim.cpp
//
// The host shim that compiles FlashInfer's MLAPlan with g++ (facts checked in
// ../shared/third_party/README.md): pos_enc.cuh is replaced by the one enum scheduler.cuh
// needs, std::min / std::max are made visible in namespace flashinfer, and the four CUDA
// runtime calls MLAPlan makes are defined here (no libcudart is linked). Written for mlasim;
// no FlashInfer code is copied.
#include "tests/third_party/flashinfer_shim.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>

#include <cuda_runtime_api.h>

#define FLASHINFER_POS_ENC_CUH_  // pos_enc.cuh pulls in kernels MLAPlan does not use
namespace flashinfer {
enum class PosEncodingMode { kNone = 0U, kRoPELlama = 1U, kALiBi = 2U };
using std::max;
using std::min;
}  // namespace flashinfer

#include <flashinfer/attention/scheduler.cuh>

namespace {

struct StubState {
  int num_sm = 0;
  int device_queries = 0;
  int64_t copied_bytes = -1;
};
StubState g_stub;

}  // namespace

extern "C" {

cudaError_t CUDARTAPI cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr, int device) {
  (void)device;
  if (attr != cudaDevAttrMultiProcessorCount) return cudaErrorInvalidValue;
  ++g_stub.device_queries;
  *value = g_stub.num_sm;
  return cudaSuccess;
}

// The device side of the int workspace is not modelled: the copy is recorded, not performed.
cudaError_t CUDARTAPI cudaMemcpyAsync(void* dst, const void* src, size_t count,
                                      enum cudaMemcpyKind kind, cudaStream_t stream) {
  (void)dst, (void)src, (void)kind, (void)stream;
  g_stub.copied_bytes = static_cast<int64_t>(count);
  return cudaSuccess;
}

const char* CUDARTAPI cudaGetErrorString(cudaError_t error) {
  return error == cudaSuccess ? "no error" : "stubbed CUDA error";
}

}  // extern "C"

namespace mlasim::third_party {

FlashInferPlanner::FlashInferPlanner(size_t page_locked_bytes)
    : buffer_(
          static_cast<uint8_t*>(std::aligned_alloc(256, (page_locked_bytes + 511) / 256 * 256))),
      bytes_(page_locked_bytes) {
  std::memset(buffer_, 0, (page_locked_bytes + 511) / 256 * 256);
}

FlashInferPlanner::~FlashInferPlanner() {
  std::free(buffer_);
}

bool FlashInferPlanner::Plan(const ref::flashinfer::MLAPlanInput& in,
                             std::vector<int64_t>* plan_info, std::string* error) {
  if (in.int_workspace_bytes > bytes_) {
    *error = "int workspace larger than the page-locked buffer";
    return false;
  }
  g_stub.num_sm = in.num_sm;
  // Never dereferenced by MLAPlan (offsets only; the copy is stubbed): aligned fake addresses.
  void* float_buffer = reinterpret_cast<void*>(uintptr_t{1} << 24);
  void* int_buffer = reinterpret_cast<void*>(uintptr_t{1} << 40);
  // MLAPlan takes non-const IdType* but only reads them.
  auto* qo = const_cast<int32_t*>(in.qo_indptr.data());
  auto* kv = const_cast<int32_t*>(in.kv_indptr.data());
  auto* kv_len = const_cast<int32_t*>(in.kv_len.data());
  flashinfer::MLAPlanInfo info;
  try {
    const cudaError_t e = flashinfer::MLAPlan<int32_t>(
        float_buffer, in.float_workspace_bytes, int_buffer, buffer_, in.int_workspace_bytes, info,
        qo, kv, kv_len, static_cast<uint32_t>(in.kv_len.size()),
        static_cast<uint32_t>(in.num_heads), static_cast<uint32_t>(in.head_dim_o), in.causal,
        /*stream=*/nullptr);
    if (e != cudaSuccess) {
      *error = "cudaError " + std::to_string(static_cast<int>(e));
      return false;
    }
  } catch (const std::exception& ex) {
    *error = ex.what();
    return false;
  }
  *plan_info = info.ToVector();
  return true;
}

FlashInferPlanRun RunFlashInferMLAPlan(const ref::flashinfer::MLAPlanInput& in,
                                       int64_t slack_bytes) {
  FlashInferPlanRun run;
  g_stub = StubState{in.num_sm, 0, -1};
  FlashInferPlanner planner(in.int_workspace_bytes + static_cast<size_t>(slack_bytes));
  run.ok = planner.Plan(in, &run.plan_info, &run.error);
  run.page_locked.assign(planner.page_locked(),
                         planner.page_locked() + planner.page_locked_bytes());
  run.copied_bytes = g_stub.copied_bytes;
  run.device_queries = g_stub.device_queries;
  return run;
}

}  // namespace mlasim::third_party
