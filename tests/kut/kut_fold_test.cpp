// Head-folded plans through a kernel under test (fuzz::kut_internal::FoldedPlanSkip): a kernel
// whose decode contract walks aiter's work_info is not run over a folded plan (the harness lays q
// out unfolded), a kernel that plans by itself (FlashMLA's and FlashInfer's contracts read
// qo_indptr / kv_indptr only) is; fold ratio 1 always runs.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "fuzz/kut_check_internal.h"
#include "sim/contract.h"

namespace mlasim::fuzz::kut_internal {
namespace {

std::shared_ptr<const sim::Contract> Decode(const char* variant) {
  auto c = sim::BuiltinContract(sim::CallKind::kDecode, variant, "t");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : nullptr;
}

TEST(KutFoldedPlan, AKernelThatWalksWorkInfoSkipsFoldedPlansOnly) {
  const auto asm_decode = Decode("asm");
  ASSERT_NE(asm_decode, nullptr);
  EXPECT_EQ(FoldedPlanSkip(asm_decode.get(), 1), "");
  EXPECT_EQ(FoldedPlanSkip(asm_decode.get(), 2),
            "a head-folded plan (fold ratio 2): the harness lays q out unfolded");
  EXPECT_EQ(FoldedPlanSkip(asm_decode.get(), 4),
            "a head-folded plan (fold ratio 4): the harness lays q out unfolded");
}

TEST(KutFoldedPlan, AKernelThatPlansByItselfRunsFoldedPlans) {
  for (const char* variant : {"flashmla_dense", "flashinfer_fa3"}) {
    const auto c = Decode(variant);
    ASSERT_NE(c, nullptr) << variant;
    EXPECT_EQ(FoldedPlanSkip(c.get(), 4), "") << variant;
    EXPECT_EQ(FoldedPlanSkip(c.get(), 1), "") << variant;
  }
}

TEST(KutFoldedPlan, NoContractIsTakenAsWalkingWorkInfo) {
  EXPECT_EQ(FoldedPlanSkip(nullptr, 1), "");
  EXPECT_EQ(FoldedPlanSkip(nullptr, 3),
            "a head-folded plan (fold ratio 3): the harness lays q out unfolded");
}

}  // namespace
}  // namespace mlasim::fuzz::kut_internal
