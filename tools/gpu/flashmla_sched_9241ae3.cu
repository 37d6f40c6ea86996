// File: tools/gpu/flashmla_sched_9241ae3.cu: calls FlashMLA 9241ae3's decode scheduler as
// csrc/api/dense_decode.h and sparse_decode.h do (headers from the FlashMLA checkout).
#include "flashmla_sched_harness.h"

#include "params.h"
#include "smxx/decode/get_decoding_sched_meta/get_decoding_sched_meta.h"

void RunFlashMlaSched9241ae3(const FlashMlaSchedLaunch& l) {
  GetDecodeSchedMetaParams p = {};
  p.b = l.batch_size;
  p.s_q = l.seqlen_q;
  p.block_size_n = l.block_size_n;
  p.fixed_overhead_num_blocks = l.fixed_overhead_num_blocks;
  p.topk = l.topk;
  p.extra_topk = l.extra_topk;
  p.topk_length = l.topk_length;
  p.extra_topk_length = l.extra_topk_length;
  p.seqlens_k_ptr = l.seqlens_k;
  p.tile_scheduler_metadata_ptr = reinterpret_cast<DecodingSchedMeta*>(l.sched_meta);
  p.num_splits_ptr = l.num_splits;
  p.num_sm_parts = l.num_sm_parts;
  p.stream = l.stream;
  smxx::decode::run_get_decoding_sched_meta_kernel(p);
}
