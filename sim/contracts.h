// File: sim/contracts.h
//
// Kernel access contracts as data: which rows of which tensors a kernel touches for a work item.
//
// Persistent MLA decode (aiter-mla-metadata.md §11), per work item w of cluster c:
//   reads  work_info[w], work_indptr[c], work_indptr[c+1]
//   reads  q rows [qo_start, qo_end)                      -- unless zero-KV and the variant skips
//   reads  kv_indices elements [kv_start, kv_end)         -- none for a zero-KV item
//   writes o rows [qo_start, qo_end)           if partial_qo_loc <  0 (unless zero-KV skip)
//   writes logits/attn_lse rows [partial_qo_loc, + qo_end - qo_start) if partial_qo_loc >= 0
// Reduce (mla_reduce_v1, §12), per tile t with n = reduce_indptr[t+1] - reduce_indptr[t] >= 2:
//   reads reduce_indptr[t..t+1], reduce_final_map[t] = (q0, q1), reduce_partial_map entries
//   reads logits/attn_lse rows partial_map[i] + (s - q0) for s in [q0, q1); writes o rows [q0, q1)
// Index fill (indexer top-k gather, kv_indices generation): writes each token's region
//   [indptr[t], indptr[t+1]) for the tokens it runs over (atom-mtp-flow.md §4, §5).
#pragma once

#include "sim/scenario.h"

namespace mlasim::sim {

// What a decode kernel variant does with a work item whose KV range is empty.
struct DecodeContract {
  KernelVariant variant;
  bool zero_kv_reads_q;        // reads its q rows anyway
  bool zero_kv_writes_output;  // writes its o rows (or partial rows) anyway
  const char* source;
};

inline const DecodeContract& GetDecodeContract(KernelVariant v) {
  static const DecodeContract kContracts[] = {
      {KernelVariant::kAsm, true, true,
       "seed-fault.md §4: the persistent kernel reads q and writes o for every work item, "
       "zero-KV padding included (the founding fault)"},
      {KernelVariant::kOpus, false, false,
       "aiter-mla-metadata.md §11.5: OPUS and ds32 return before reading q"},
      {KernelVariant::kHk, true, false,
       "aiter-mla-metadata.md §11.5: HK reads q but its epilogue never runs"},
  };
  for (const DecodeContract& c : kContracts)
    if (c.variant == v) return c;
  return kContracts[0];
}

}  // namespace mlasim::sim
