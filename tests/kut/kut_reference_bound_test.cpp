// The CPU reference's work bound of kernel-under-test campaigns (fuzz/kut_check.h
// KutCheckOptions::max_cpu_reference_macs, docs/kernel-under-test.md): the multiply-add estimate
// it is compared with, exactly, at its boundaries, and the default bound's place between a
// campaign-sized call and a full-size one.
#include <gtest/gtest.h>

#include "fuzz/kut_check_internal.h"

namespace mlasim::fuzz::kut_internal {
namespace {

// Two dense requests of 2 and 1 q rows over 3 and 1 pages of 4 tokens, 2 heads, D 32, Dv 16:
// (2 x 12 + 1 x 4) keys x 2 heads x 48 = 2688.
ref::MlaInputs Dense() {
  ref::MlaInputs in;
  in.num_heads = 2, in.head_dim_qk = 32, in.head_dim_v = 16, in.page_size = 4;
  in.qo_indptr = {0, 2, 3};
  in.kv_indptr = {0, 3, 4};
  in.kv_last_page_lens = {1, 4};
  return in;
}

TEST(KutReferenceBound, DenseCountsEveryPageOfEveryRequest) {
  EXPECT_EQ(CpuReferenceMacs(Dense()), 2688.0);
}

TEST(KutReferenceBound, AnEmptyBatchAndAZeroKvRequestCostNothing) {
  ref::MlaInputs in = Dense();
  in.qo_indptr = {0};
  in.kv_indptr = {0};
  EXPECT_EQ(CpuReferenceMacs(in), 0.0);
  in = Dense();
  in.kv_indptr = {0, 0, 1};  // request 0 has no KV
  EXPECT_EQ(CpuReferenceMacs(in), 1 * 4 * 2 * 48.0);
}

TEST(KutReferenceBound, AFallingKvIndptrCountsNoKeysNotNegativeOnes) {
  ref::MlaInputs in = Dense();
  in.kv_indptr = {0, 5, 2};  // request 1: -3 pages
  EXPECT_EQ(CpuReferenceMacs(in), 2 * 20 * 2 * 48.0);
}

TEST(KutReferenceBound, SparseCountsAtMostTopkKeysPerRow) {
  ref::MlaInputs in = Dense();
  in.page_size = 1;
  in.kv_indptr = {0, 100, 103};
  for (const auto& [topk, keys] : {std::pair{0, 0}, {1, 2 * 1 + 1 * 1}, {3, 2 * 3 + 1 * 3},
                                   {4, 2 * 4 + 1 * 3}, {100, 2 * 100 + 1 * 3}, {101, 2 * 100 + 3}}) {
    in.topk = topk;
    EXPECT_EQ(CpuReferenceMacs(in), keys * 2 * 48.0) << "topk " << topk;
  }
}

TEST(KutReferenceBound, HostileShapesDoNotOverflow) {
  ref::MlaInputs in = Dense();
  in.num_heads = 128, in.head_dim_qk = 1024, in.head_dim_v = 512;
  in.page_size = 1 << 30;
  in.qo_indptr = {0, 1 << 30};
  in.kv_indptr = {0, (1 << 30) + ((1 << 30) - 1)};
  in.kv_last_page_lens = {1};
  EXPECT_GT(CpuReferenceMacs(in), 1e30);
}

// The default bound (2^31) passes a CI campaign's call (B 64 x qlen 4 rows, 2k keys, 16 heads,
// head dims 32,16: 0.4 G) and stops a full-size one (B 128, 8k keys, 128 heads, 576 + 512: 146 T).
TEST(KutReferenceBound, TheDefaultBoundSitsBetweenACampaignCallAndAFullSizeOne) {
  const double bound = static_cast<double>(KutCheckOptions{}.max_cpu_reference_macs);
  EXPECT_EQ(bound, 2147483648.0);
  EXPECT_LT(64.0 * 4 * 2048 * 16 * 48, bound);
  EXPECT_GT(128.0 * 8192 * 128 * 1088, bound);
}

}  // namespace
}  // namespace mlasim::fuzz::kut_internal
