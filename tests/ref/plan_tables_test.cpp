// The one-table-per-concept pieces of ref/ (issue 10 §6): enum <-> string tables, the plan
// buffer table, the shared CheckIndptr; and the checker's zero-cluster and launch-grid checks.
#include <gtest/gtest.h>

#include <string>

#include "ref/indptr.h"
#include "ref/plan_buffers.h"
#include "ref/plan_check.h"
#include "ref/planner.h"
#include "ref/target.h"
#include "tests/ref/plan_builders.h"

namespace mlasim::ref {
namespace {

TEST(EnumTables, NamesRoundTripAndAliasesParse) {
  for (const auto& row : kDTypeNames) EXPECT_EQ(*ParseDType(row.name, "f"), row.value);
  EXPECT_STREQ(DTypeName(DType::kFp8), "fp8");  // the canonical name, not an alias
  EXPECT_EQ(*ParseDType("fp8_e4m3fnuz", "f"), DType::kFp8);
  for (const auto& row : kArchNames) EXPECT_STREQ(ArchName(*ParseArch(row.name, "f")), row.name);
  for (const auto& row : kRevisionNames)
    EXPECT_STREQ(RevisionName(*ParseRevision(row.name, "f")), row.name);
  for (const auto& row : kPlannerChoiceNames)
    EXPECT_STREQ(PlannerChoiceName(*ParsePlannerChoice(row.name, "f")), row.name);
  for (const auto& row : kPlannerMutantNames)
    EXPECT_STREQ(PlannerMutantName(*ParsePlannerMutant(row.name, "f")), row.name);
  for (const auto& row : kPlanDiagNames) EXPECT_STREQ(PlanDiagName(row.value), row.name);
  EXPECT_STREQ(PlannerMutantName(PlannerMutant::kCount), "?");  // not in the table
  EXPECT_STREQ(CellTrackingName(CellTracking::kFast), "fast");
  EXPECT_STREQ(SeverityName(Severity::kWarning), "warning");
}

TEST(EnumTables, UnknownNamesNameTheFieldAndListTheCanonicalNames) {
  const Status dtype = ParseDType("fp64", "input.q_dtype").status();
  EXPECT_EQ(dtype.field(), "input.q_dtype");
  EXPECT_EQ(dtype.message(), "unknown dtype 'fp64' (expected bf16, fp16, fp8 or fp32)");
  EXPECT_EQ(ParseArch("gfx90a", "--target").status().message(),
            "unknown target 'gfx90a' (expected gfx942, gfx950 or sm90)");
  EXPECT_EQ(ParseRevision("2025-01", "r").status().message(),
            "unknown aiter revision '2025-01' (expected 2026-03 or 2026-08)");
  EXPECT_EQ(ParsePlannerChoice("", "--planner").status().message(),
            "unknown planner '' (expected auto, serial or parallel)");
  EXPECT_EQ(ParsePlannerChoice("Serial", "--planner").status().code(),
            StatusCode::kInvalidArgument);  // names are case-sensitive
}

TEST(PlanBufferTable, WidthsSizesAndNamesComeFromOneTable) {
  EXPECT_EQ(kPlanBufferCount, 6);
  for (int i = 0; i < kPlanBufferCount; ++i)
    EXPECT_EQ(static_cast<int>(kPlanBuffers[i].id), i) << kPlanBuffers[i].name;
  EXPECT_EQ(GetPlanBufferSpec(PlanBufferId::kWorkInfo).row_width, 8);
  EXPECT_EQ(GetPlanBufferSpec(PlanBufferId::kReduceFinalMap).row_width, 2);
  EXPECT_EQ(GetPlanBufferSpec(PlanBufferId::kWorkMetadataPtrs).element_bytes, 8);
  MetadataSizes s;
  s.work_indptr = 9;
  s.work_info_rows = 10;
  s.reduce_indptr = 4;
  s.reduce_final_map_rows = 3;
  s.reduce_partial_map = 10;
  EXPECT_EQ(s.Elements(PlanBufferId::kWorkInfo), 80);
  EXPECT_EQ(s.Elements(PlanBufferId::kReduceFinalMap), 6);
  EXPECT_EQ(s.Rows(PlanBufferId::kWorkMetadataPtrs), 2);
  const Plan plan = *PlanMlaMetadata(test::DenseRequest(Arch::kGfx942, 16, 1, {300, 40, 700}, 8));
  for (PlanBufferId id : kInt32PlanBuffers) {
    EXPECT_EQ(plan.buffer(id)->size(), plan.sizes.Elements(id)) << GetPlanBufferSpec(id).name;
    EXPECT_EQ(plan.buffer(id)->row_width, GetPlanBufferSpec(id).row_width);
  }
  EXPECT_EQ(plan.buffer(PlanBufferId::kWorkMetadataPtrs), nullptr);
  EXPECT_STREQ(WorkFieldName(kKvOffset), "kv_offset");
  EXPECT_STREQ(WorkFieldName(kWorkFieldCount), "?");
  EXPECT_STREQ(WorkFieldName(-1), "?");
}

TEST(CheckIndptr, BoundariesAndEveryError) {
  IndptrRule optional;
  optional.required = false;
  IndptrRule from_zero;
  from_zero.starts_at_zero = true;
  EXPECT_TRUE(CheckIndptr({}, "qo_indptr", optional).ok());
  const Status empty = CheckIndptr({}, "kv_indptr");
  EXPECT_EQ(empty.field(), "kv_indptr");
  EXPECT_EQ(empty.message(), "must hold at least one entry (B+1 for B requests)");
  EXPECT_TRUE(CheckIndptr({0}, "kv_indptr").ok());        // B = 0
  EXPECT_TRUE(CheckIndptr({7, 7, 9}, "kv_indptr").ok());  // a slice: any start >= 0
  EXPECT_EQ(CheckIndptr({-1, 3}, "kv_indptr").field(), "kv_indptr[0]");
  const Status start = CheckIndptr({7, 9}, "qo_indptr", from_zero);
  EXPECT_EQ(start.field(), "qo_indptr[0]");
  EXPECT_EQ(start.message(), "must be 0, got 7");
  const Status dec = CheckIndptr({0, 5, 5, 4, 2}, "kv_indptr");
  EXPECT_EQ(dec.field(), "kv_indptr[3]");  // the first decrease
  EXPECT_EQ(dec.message(), "decreases (5 -> 4): an indptr is cumulative");
  EXPECT_TRUE(CheckIndptr({0, INT32_MAX, INT32_MAX}, "kv_indptr").ok());
}

TEST(PlanCheck, ZeroClustersIsOneErrorNamingTheCause) {
  PlanRequest r = test::DenseRequest(Arch::kGfx942, 8, 1, {300, 40}, 1);
  r.num_heads_k = 2;  // 1 CU / 2 KV heads
  const Plan plan = *PlanMlaMetadata(r);
  EXPECT_EQ(plan.derived.num_clusters, 0);
  EXPECT_FALSE(plan.derived.parallel_planner_used);
  EXPECT_EQ(plan.derived.num_works, 0);
  const PlanCheckReport report = CheckPlan(r, plan);
  ASSERT_EQ(report.diagnostics.size(), 1u) << report.ToString();
  EXPECT_EQ(report.diagnostics[0].code, PlanDiag::kZeroClusters);
  EXPECT_EQ(report.diagnostics[0].message,
            "the planner has 0 clusters (cu_count 1 / num_heads_k 2): no workgroup runs, so "
            "none of the 2 requests' output rows is ever written");
  // No request, nothing to run: no error.
  r.kv_indptr = {0};
  r.qo_indptr = {0};
  r.kv_last_page_lens.clear();
  EXPECT_TRUE(CheckPlan(r, *PlanMlaMetadata(r)).ok());
}

// Spec §6.1: 8 clusters, work_indptr [0,1,2,3,4,5,6,6,6] (9 entries).
const Plan& Spec61() {
  static const Plan plan =
      *PlanMlaMetadata(test::DenseRequest(Arch::kGfx942, 16, 1, {300, 40, 700}, 8));
  return plan;
}

TEST(CheckLaunchGrid, ExactGridAndAitersGridPass) {
  EXPECT_EQ(AiterLaunchGrid(Spec61()), 8);
  EXPECT_TRUE(CheckLaunchGrid(Spec61(), 8).diagnostics.empty());
}

TEST(CheckLaunchGrid, OnePastTheBufferReadsPastIt) {
  const PlanCheckReport r = CheckLaunchGrid(Spec61(), 9);
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_EQ(r.diagnostics[0].code, PlanDiag::kLaunchReadsPastBuffer);
  EXPECT_EQ(r.diagnostics[0].index, 9);
  EXPECT_FALSE(r.ok());
}

TEST(CheckLaunchGrid, FewerWorkgroupsThanClusters) {
  const PlanCheckReport one = CheckLaunchGrid(Spec61(), 1);
  ASSERT_EQ(one.diagnostics.size(), 1u);
  EXPECT_EQ(one.diagnostics[0].code, PlanDiag::kLaunchSkipsWork);
  EXPECT_EQ(one.diagnostics[0].work, 1);  // work items [1, 6) never run
  EXPECT_FALSE(one.ok());
  const PlanCheckReport seven = CheckLaunchGrid(Spec61(), 7);  // cluster 7 holds no work
  ASSERT_EQ(seven.diagnostics.size(), 1u);
  EXPECT_EQ(seven.diagnostics[0].severity, Severity::kWarning);
  EXPECT_TRUE(seven.ok());
}

TEST(CheckLaunchGrid, EntriesNoPlannerWrote) {
  PlanRequest r = test::DenseRequest(Arch::kGfx942, 8, 1, {300, 40}, 8);
  r.num_heads_k = 2;  // 4 clusters, work_indptr sized for 8
  const Plan plan = *PlanMlaMetadata(r);
  ASSERT_EQ(plan.derived.num_clusters, 4);
  EXPECT_TRUE(CheckLaunchGrid(plan, 4).ok());
  const PlanCheckReport five = CheckLaunchGrid(plan, 5);  // reads work_indptr[5]
  ASSERT_EQ(five.diagnostics.size(), 1u);
  EXPECT_EQ(five.diagnostics[0].code, PlanDiag::kLaunchReadsUnwritten);
  EXPECT_EQ(five.diagnostics[0].index, 5);
  const PlanCheckReport aiter = CheckLaunchGrid(plan, AiterLaunchGrid(plan));
  ASSERT_EQ(aiter.diagnostics.size(), 1u);
  EXPECT_EQ(aiter.diagnostics[0].message,
            "a launch of 8 workgroups reads 4 entries, work_indptr[5] to [8], which no planner "
            "wrote (the planner has 4 clusters and writes work_indptr[0..4]): stale memory on a "
            "GPU decides which work runs");
}

}  // namespace
}  // namespace mlasim::ref
