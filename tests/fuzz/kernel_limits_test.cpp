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

}  // namespace
}  // namespace mlasim::fuzz
