// File: tests/third_party/flashinfer_shim.h
//
// Runs FlashInfer's own MLAPlan (include/flashinfer/attention/scheduler.cuh of the checkout
// named by -DMLASIM_FLASHINFER_DIR) on the host, with no GPU: the shim (flashinfer_shim.cpp)
// stubs the four CUDA runtime calls MLAPlan makes. Built only with that option; this header
// exposes mlasim types only, so its users need no CUDA or FlashInfer include path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ref/flashinfer/mla_plan.h"

namespace mlasim::third_party {

struct FlashInferPlanRun {
  bool ok = false;
  std::string error;               // flashinfer::Error::what() when MLAPlan threw
  std::vector<int64_t> plan_info;  // MLAPlanInfo::ToVector(), [18]
  // The page-locked int buffer after MLAPlan returned: int_workspace_bytes of the input plus
  // `slack_bytes`, zero-filled before the call (so overflowing lists land in the slack instead
  // of past the allocation).
  std::vector<uint8_t> page_locked;
  int64_t copied_bytes = -1;   // bytes of the host-to-device cudaMemcpyAsync, -1 if none
  int32_t device_queries = 0;  // cudaDeviceGetAttribute calls (SM count)
};

// FlashInfer's MLAPlan with a page-locked buffer held across calls (for timing: nothing is
// allocated or cleared around the call but what MLAPlan itself does).
class FlashInferPlanner {
 public:
  explicit FlashInferPlanner(size_t page_locked_bytes);  // zero-filled once
  ~FlashInferPlanner();
  FlashInferPlanner(const FlashInferPlanner&) = delete;
  FlashInferPlanner& operator=(const FlashInferPlanner&) = delete;
  // One MLAPlan call: true and plan_info on success, false and `error` when MLAPlan threw or
  // returned a CUDA error. input.int_workspace_bytes must not exceed the held buffer.
  bool Plan(const ref::flashinfer::MLAPlanInput& input, std::vector<int64_t>* plan_info,
            std::string* error);
  const uint8_t* page_locked() const { return buffer_; }
  size_t page_locked_bytes() const { return bytes_; }

 private:
  uint8_t* buffer_;
  size_t bytes_;
};

// One MLAPlan call on `input` (num_sm is what the stubbed cudaDeviceGetAttribute returns).
// The float workspace is a never-dereferenced, 256-byte aligned address: MLAPlan only computes
// offsets in it. Not thread-safe (the stubs share one global state).
FlashInferPlanRun RunFlashInferMLAPlan(const ref::flashinfer::MLAPlanInput& input,
                                       int64_t slack_bytes);

}  // namespace mlasim::third_party
