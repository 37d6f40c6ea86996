// File: tests/bench/aiter/aiter_v12.cpp — compiles aiter's v1.2 planner (a build-tree copy of
// csrc/kernels/mla/metadata/v1_2_device.cuh, launches rewritten into calls) with the one-lane
// shim of shim/, behind the plain interface of aiter_v12.h. See cmake/AiterPlannerBench.cmake.
#include <cstdint>

#include "aiter_v12.h"

// The workgroup's LDS: aiter's kernels declare `extern __shared__ uint8_t p_smem[]`.
alignas(64) uint8_t p_smem[mlasim::bench::kAiterShimLdsBytes];

#include "v1_2_device.cuh"  // NOLINT: generated in the build tree from the aiter checkout

namespace mlasim::bench {
namespace {

AiterDtype ToAiter(AiterDType d) {
  switch (d) {
    case AiterDType::kBf16: return AITER_DTYPE_bf16;
    case AiterDType::kFp16: return AITER_DTYPE_fp16;
    case AiterDType::kFp8: return AITER_DTYPE_fp8;
  }
  return AITER_DTYPE_bf16;
}

aiter_tensor_t View(const void* p, int64_t rows) {
  return aiter_tensor_t{const_cast<void*>(p), rows};
}

}  // namespace

void SetAiterDevice(const AiterDevice& device) {
  mlasim_aiter_shim::DeviceModel& d = mlasim_aiter_shim::Device();
  d.arch = device.arch;
  d.prop.multiProcessorCount = device.cu_count;
  d.prop.warpSize = device.warp_size;
  d.prop.maxSharedMemoryPerMultiProcessor =
      device.lds_bytes < kAiterShimLdsBytes ? device.lds_bytes : kAiterShimLdsBytes;
}

std::string RunAiterV12(const AiterV12Call& c) {
  const aiter_tensor_t qo = View(c.qo_indptr, c.batch + 1);
  const aiter_tensor_t kv = View(c.kv_indptr, c.batch + 1);
  const aiter_tensor_t lpl = View(c.kv_last_page_lens, c.batch);
  aiter_tensor_t ptrs = View(c.work_metadata_ptrs, 2);
  aiter_tensor_t work_info = View(c.work_info, c.work_info_rows);
  aiter_tensor_t work_indptr = View(c.work_indptr, c.work_indptr_size);
  aiter_tensor_t reduce_indptr = View(c.reduce_indptr, c.reduce_indptr_size);
  aiter_tensor_t final_map = View(c.reduce_final_map, c.reduce_final_map_rows);
  aiter_tensor_t partial_map = View(c.reduce_partial_map, c.reduce_partial_map_size);
  try {
    get_mla_metadata_v1_2_device(
        qo, kv, lpl, c.heads_per_head_k, c.num_heads_k, c.is_causal, c.page_size, c.kv_granularity,
        c.max_seqlen_qo, c.uni_seqlen_qo, c.topk, c.max_split_per_batch, ToAiter(c.q_dtype),
        ToAiter(c.kv_dtype), ToAiter(c.q_dtype), ToAiter(c.kv_dtype), c.is_cp_round_robin,
        MlaVersion::V32, ptrs, work_info, work_indptr, reduce_indptr, final_map, partial_map);
  } catch (const std::exception& e) {
    return e.what();
  }
  return std::string();
}

}  // namespace mlasim::bench
