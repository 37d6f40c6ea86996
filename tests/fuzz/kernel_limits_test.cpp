// The scenario generator within a kernel's limits (fuzz/kernel_limits.h, GenConfig::kernel;
// docs/kernel-under-test.md "Scenarios the kernel runs"): FlashMLA's limits (dense only, bf16
// KV, pages of exactly 64 tokens) hold for every case, swarm on or off, and for the cases the
// shrinker tries; without limits the same seeds draw sparse, fp8 and page-1 cases (what the
// limits change), and default limits leave every case byte for byte as it was.
#include <gtest/gtest.h>

#include "fuzz/scenario_gen.h"
#include "sim/scenario_json.h"

namespace mlasim::fuzz {
namespace {

KernelLimits FlashMlaLimits() {
  KernelLimits k;
  k.sparse = false;
  k.fp8_kv = false;
  k.page_size_multiple = 64;
  k.max_page_size = 64;
  return k;
}

::testing::AssertionResult Within(const sim::Scenario& s) {
  if (s.model.sparse) return ::testing::AssertionFailure() << "sparse";
  if (s.model.kv_dtype != ref::DType::kBf16) return ::testing::AssertionFailure() << "not bf16";
  if (!s.kv_cache.modelled || s.kv_cache.page_size != 64)
    return ::testing::AssertionFailure() << "page size " << s.kv_cache.page_size;
  return ::testing::AssertionSuccess();
}

TEST(KernelLimitsGen, EveryCaseAndEveryShrinkIsWithinTheLimits) {
  for (const bool swarm : {false, true}) {
    GenConfig limited;
    limited.kernel_inputs = true;
    limited.swarm = swarm;
    limited.kernel = FlashMlaLimits();
    for (uint64_t seed = 0; seed < 150; ++seed) {
      SCOPED_TRACE(seed);
      const rc::Shrinkable<sim::Scenario> c = ScenarioFromSeed(limited, seed, 50);
      EXPECT_TRUE(Within(c.value()));
      if (seed % 10 != 0) continue;
      int n = 0;
      for (auto shrinks = c.shrinks(); n < 20; ++n) {
        auto next = shrinks.next();
        if (!next) break;
        EXPECT_TRUE(Within(next->value())) << "shrink " << n;
      }
    }
  }
}

TEST(KernelLimitsGen, WithoutLimitsTheSameSeedsDrawWhatTheLimitsExclude) {
  GenConfig plain;
  plain.kernel_inputs = true;
  int sparse = 0, fp8 = 0, page1 = 0;
  for (uint64_t seed = 0; seed < 150; ++seed) {
    const sim::Scenario s = ScenarioFromSeed(plain, seed, 50).value();
    sparse += s.model.sparse;
    fp8 += s.model.kv_dtype == ref::DType::kFp8;
    page1 += !s.model.sparse && s.kv_cache.page_size == 1;
  }
  EXPECT_GT(sparse, 0);
  EXPECT_GT(fp8, 0);
  EXPECT_GT(page1, 0);
}

TEST(KernelLimitsGen, DefaultLimitsLeaveEveryCaseAsItWas) {
  GenConfig plain, explicit_defaults;
  plain.kernel_inputs = explicit_defaults.kernel_inputs = true;
  explicit_defaults.kernel = KernelLimits{};
  GenConfig cpu_kernel = explicit_defaults;  // the CPU kernel's limits: it runs everything
  cpu_kernel.kernel.max_page_size = 0;
  cpu_kernel.kernel.page_size_multiple = 0;  // page_size_multiple 0 in its info
  for (uint64_t seed = 0; seed < 60; ++seed) {
    const std::string a = sim::ScenarioToJson(ScenarioFromSeed(plain, seed, 40).value()).dump();
    EXPECT_EQ(a, sim::ScenarioToJson(ScenarioFromSeed(explicit_defaults, seed, 40).value()).dump());
    EXPECT_EQ(a, sim::ScenarioToJson(ScenarioFromSeed(cpu_kernel, seed, 40).value()).dump());
  }
}

// A sparse-only kernel keeps its page size (sparse steps are planned per token) and a kernel
// that takes fp8 alone gets fp8 KV.
TEST(KernelLimitsGen, SparseOnlyAndFp8OnlyKernels) {
  GenConfig c;
  c.kernel_inputs = true;
  c.kernel.dense = false;
  c.kernel.bf16_kv = false;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    const sim::Scenario s = ScenarioFromSeed(c, seed, 50).value();
    EXPECT_TRUE(s.model.sparse);
    EXPECT_EQ(s.model.kv_dtype, ref::DType::kFp8);
    EXPECT_EQ(s.kv_cache.page_size, 1);
  }
}

// FlashMLA's sparse decode (kernels/kut/flashmla_sparse_kut.cu): sparse, fp8, 64 or 128 heads
// per rank. Every case and every shrink keeps a runnable head count; the same seeds without the
// limits draw 16 heads (the common count) and never only 64 / 128.
TEST(KernelLimitsGen, HeadLimitsHoldForEveryCaseAndShrink) {
  GenConfig c;
  c.kernel_inputs = true;
  c.kernel.dense = false;
  c.kernel.bf16_kv = false;
  c.kernel.heads_multiple = 64;
  c.kernel.max_heads = 128;
  GenConfig plain;
  plain.kernel_inputs = true;
  int h64 = 0, h128 = 0, plain16 = 0;
  for (uint64_t seed = 0; seed < 80; ++seed) {
    SCOPED_TRACE(seed);
    const rc::Shrinkable<sim::Scenario> x = ScenarioFromSeed(c, seed, 50);
    const sim::Scenario& s = x.value();
    const int32_t per_rank = s.model.heads / s.parallel.tp;
    EXPECT_TRUE(per_rank == 64 || per_rank == 128) << per_rank;
    h64 += per_rank == 64;
    h128 += per_rank == 128;
    const sim::Scenario p = ScenarioFromSeed(plain, seed, 50).value();
    plain16 += p.model.heads / p.parallel.tp == 16;
    if (seed % 10 != 0) continue;
    int n = 0;
    for (auto shrinks = x.shrinks(); n < 20; ++n) {
      auto next = shrinks.next();
      if (!next) break;
      const int32_t h = next->value().model.heads / next->value().parallel.tp;
      EXPECT_TRUE(h == 64 || h == 128) << "shrink " << n << ": " << h;
    }
  }
  EXPECT_GT(h64, 0);
  EXPECT_GT(h128, 0);
  EXPECT_GT(plain16, 0);
}

TEST(KernelLimitsGen, RunsHeadsAtItsBoundaries) {
  KernelLimits k;
  EXPECT_TRUE(k.RunsHeads(1));
  EXPECT_TRUE(k.RunsHeads(24));
  k.heads_multiple = 64;
  k.max_heads = 128;
  EXPECT_FALSE(k.LimitsNothing());
  EXPECT_FALSE(k.RunsHeads(63));
  EXPECT_TRUE(k.RunsHeads(64));
  EXPECT_FALSE(k.RunsHeads(65));
  EXPECT_TRUE(k.RunsHeads(128));
  EXPECT_FALSE(k.RunsHeads(192));  // a multiple past the maximum
  KernelLimits only_max;
  only_max.max_heads = 32;
  EXPECT_TRUE(only_max.RunsHeads(32));
  EXPECT_FALSE(only_max.RunsHeads(33));
}

}  // namespace
}  // namespace mlasim::fuzz
