// File: tests/bench/aiter/aiter_v12.h
//
// A plain C++ door into aiter's v1.2 MLA metadata planner (get_mla_metadata_v1_2_device with the
// kernels kn_get_mla_metadata_v1_2 / kn_get_mla_metadata_v1_2_parallel of
// csrc/kernels/mla/metadata/v1_2_device.cuh, aiter e4048607), compiled as host C++ in
// aiter_v12.cpp with the one-lane shim of shim/. Only built with -DMLASIM_AITER_DIR
// (cmake/AiterPlannerBench.cmake). No aiter or mlasim type crosses this header, so the shim's
// macros stay inside aiter_v12.cpp.
#pragma once

#include <cstdint>
#include <string>

namespace mlasim::bench {

enum class AiterDType : uint8_t { kBf16, kFp16, kFp8 };

// The GPU the stubbed hipGetDeviceProperties / get_gpu_arch describe.
struct AiterDevice {
  std::string arch = "gfx942";  // get_gpu_arch()
  int32_t cu_count = 304;       // multiProcessorCount
  int32_t lds_bytes = 65536;    // maxSharedMemoryPerMultiProcessor; at most kAiterShimLdsBytes
  int32_t warp_size = 64;       // warpSize (sizes the launch only; kernels run as one lane)
};
constexpr int32_t kAiterShimLdsBytes = 256 * 1024;

// Arguments of get_mla_metadata_v1_2_device: host arrays in, caller-allocated buffers out
// (element counts as get_mla_metadata_info_v1 returns them).
struct AiterV12Call {
  int32_t batch = 0;                           // B: qo_indptr/kv_indptr hold B+1 entries
  const int32_t* qo_indptr = nullptr;          // [B+1]
  const int32_t* kv_indptr = nullptr;          // [B+1] pages
  const int32_t* kv_last_page_lens = nullptr;  // [B]
  int32_t heads_per_head_k = 16;
  int32_t num_heads_k = 1;
  bool is_causal = true;
  int32_t page_size = 1;
  int32_t kv_granularity = 16;
  int32_t max_seqlen_qo = 1;
  int32_t uni_seqlen_qo = 1;
  int32_t topk = -1;
  int32_t max_split_per_batch = -1;
  AiterDType q_dtype = AiterDType::kBf16;
  AiterDType kv_dtype = AiterDType::kBf16;
  bool is_cp_round_robin = false;

  uint64_t* work_metadata_ptrs = nullptr;  // [2]
  int32_t* work_indptr = nullptr;
  int64_t work_indptr_size = 0;
  int32_t* work_info = nullptr;  // rows of 8
  int64_t work_info_rows = 0;
  int32_t* reduce_indptr = nullptr;
  int64_t reduce_indptr_size = 0;
  int32_t* reduce_final_map = nullptr;  // rows of 2
  int64_t reduce_final_map_rows = 0;
  int32_t* reduce_partial_map = nullptr;
  int64_t reduce_partial_map_size = 0;
};

// Sets the device the next plans see (not thread-safe; the bench is single-threaded).
void SetAiterDevice(const AiterDevice& device);

// Runs aiter's host function and its kernel. Returns "" on success, or the AITER_CHECK message
// when aiter refuses the shape.
std::string RunAiterV12(const AiterV12Call& call);

}  // namespace mlasim::bench
