// File: tools/gpu/flashmla_sched_harness.h
//
// The FlashMLA scheduler harness (tools/gpu/flashmla_corpus.sh): one launch of FlashMLA's own
// decode scheduler kernel at either revision, on device buffers the caller owns. The two
// wrappers live in their own translation units because each includes its revision's headers
// from the checkout (-DMLASIM_FLASHMLA_DIR / the 414a2f3 checkout); none of their code is here.
#pragma once

#include <cuda_runtime_api.h>

struct FlashMlaSchedLaunch {
  int batch_size = 0;
  int seqlen_q = 1;  // GetDecodeSchedMetaParams.s_q (unused by the kernel)
  int block_size_n = 64;
  int fixed_overhead_num_blocks = 5;
  int topk = -1;
  int extra_topk = -1;
  int num_sm_parts = 0;
  int* seqlens_k = nullptr;          // device [b] or nullptr (sparse)
  int* topk_length = nullptr;        // device [b] or nullptr
  int* extra_topk_length = nullptr;  // device [b] or nullptr
  int* sched_meta = nullptr;         // device [num_sm_parts * 8]
  int* num_splits = nullptr;         // device [b + 1]
  cudaStream_t stream = nullptr;
};

// 9241ae3: smxx::decode::run_get_decoding_sched_meta_kernel (dense or sparse).
void RunFlashMlaSched9241ae3(const FlashMlaSchedLaunch& launch);
// 414a2f3: get_mla_metadata_func (dense only; topk and the length arrays are ignored).
void RunFlashMlaSched414a2f3(const FlashMlaSchedLaunch& launch);
