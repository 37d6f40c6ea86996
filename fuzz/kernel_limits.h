// File: fuzz/kernel_limits.h
//
// What a kernel under test runs, as the scenario generator honours it (`mlasim fuzz --gpu
// --kernel-under-test`, docs/kernel-under-test.md "Scenarios the kernel runs"): the generator
// draws a case as it always does, then keeps it within these limits (dense or sparse, a KV-cache
// dtype the kernel takes, a page size it runs), so a kernel that runs only page 64 bf16 dense
// steps (FlashMLA) gets runnable steps instead of a campaign of skipped calls. The defaults limit
// nothing: campaigns without a kernel generate exactly the cases they generated before.
#pragma once

#include <cstdint>

namespace mlasim::fuzz {

struct KernelLimits {
  bool dense = true, sparse = true;    // call kinds it runs (at least one)
  bool fp8_kv = true, bf16_kv = true;  // KV-cache dtypes of the modelled engine it takes
  int32_t page_size_multiple = 1;      // dense steps: tokens per page a multiple of it (>= 1)
  int32_t max_page_size = 0;           // dense steps: at most this many tokens per page (0: any)
  int32_t heads_multiple = 1;          // q heads per rank a multiple of it (>= 1)
  int32_t max_heads = 0;               // q heads per rank at most this (0: any)

  bool LimitsNothing() const {
    return dense && sparse && fp8_kv && bf16_kv && page_size_multiple <= 1 && max_page_size == 0 &&
           heads_multiple <= 1 && max_heads == 0;
  }
  bool RunsHeads(int32_t h) const {
    return (heads_multiple <= 1 || h % heads_multiple == 0) && (max_heads <= 0 || h <= max_heads);
  }
  // The smallest power-of-two page size (scenarios take powers of two, docs/scenario.md
  // "kv_cache") that is a multiple of page_size_multiple and at most max_page_size (0 when none
  // is): the page size of every dense case whose drawn page size the kernel does not run.
  int32_t RunnablePageSize() const {
    for (int32_t p = 1; p <= 1024; p *= 2)
      if (RunsPageSize(p)) return p;
    return 0;
  }
  bool RunsPageSize(int32_t p) const {
    return (page_size_multiple <= 1 || p % page_size_multiple == 0) &&
           (max_page_size <= 0 || p <= max_page_size);
  }
};

}  // namespace mlasim::fuzz
