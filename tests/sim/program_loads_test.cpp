// sim::ProgramLoads: which built-in decode contracts walk aiter's work_info (their loads sit in
// let expressions, not in read statements). The kernel-under-test numerics pick the plan-driven
// reference for those (fuzz/kut_check_numerics.cpp); FlashMLA's and FlashInfer's contracts plan
// by themselves and load qo_indptr / kv_indptr only.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "sim/contract.h"

namespace mlasim::sim {
namespace {

std::shared_ptr<const Contract> Decode(const char* variant) {
  auto c = BuiltinContract(CallKind::kDecode, variant, "t");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : nullptr;
}

TEST(ProgramLoads, AiterDecodeContractsWalkWorkInfo) {
  for (const char* variant : {"asm", "hk", "opus"}) {
    const auto c = Decode(variant);
    ASSERT_NE(c, nullptr) << variant;
    EXPECT_TRUE(ProgramLoads(c->program, kLoadWorkInfo)) << variant;
    EXPECT_TRUE(ProgramLoads(c->program, kLoadWorkIndptr)) << variant;
  }
}

TEST(ProgramLoads, SelfPlanningContractsLoadOnlyTheRequestIndptrs) {
  for (const char* variant : {"flashmla_dense", "flashinfer_fa3"}) {
    const auto c = Decode(variant);
    ASSERT_NE(c, nullptr) << variant;
    EXPECT_FALSE(ProgramLoads(c->program, kLoadWorkInfo)) << variant;
    EXPECT_FALSE(ProgramLoads(c->program, kLoadWorkIndptr)) << variant;
    EXPECT_TRUE(ProgramLoads(c->program, kLoadQoIndptr)) << variant;
    EXPECT_TRUE(ProgramLoads(c->program, kLoadKvIndptr)) << variant;
  }
}

TEST(ProgramLoads, AnEmptyProgramLoadsNothing) {
  EXPECT_FALSE(ProgramLoads({}, kLoadWorkInfo));
}

}  // namespace
}  // namespace mlasim::sim
