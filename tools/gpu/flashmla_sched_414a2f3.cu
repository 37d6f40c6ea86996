// File: tools/gpu/flashmla_sched_414a2f3.cu: calls FlashMLA 414a2f3's get_mla_metadata_func as
// csrc/flash_api.cpp's get_mla_metadata does. flash_fwd_mla_kernel.h defines that function, so
// it is included in this translation unit only.
#include "flashmla_sched_harness.h"

#include "flash_fwd_mla_kernel.h"

void RunFlashMlaSched414a2f3(const FlashMlaSchedLaunch& l) {
  Mla_metadata_params p = {};
  p.seqlens_k_ptr = l.seqlens_k;
  p.tile_scheduler_metadata_ptr = l.sched_meta;
  p.num_splits_ptr = l.num_splits;
  p.batch_size = l.batch_size;
  p.block_size_n = l.block_size_n;
  p.fixed_overhead_num_blocks = l.fixed_overhead_num_blocks;
  p.num_sm_parts = l.num_sm_parts;
  get_mla_metadata_func(p, l.stream);
}
