// Inputs poisoned like FlashMLA's tests (ref/numerics.h NumericsOptions::hostile_table_slots,
// reserve_page_zero), the contract semantics that let the poison reach a real row (each finding
// naming the slot, the value, the work item and the contract field), padding rows an engine
// consumes, and fp8 q scaled over the padded batch. Every new error return and boundary.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>

#include "ref/numerics.h"
#include "ref/planner.h"
#include "tests/ref/plan_builders.h"

namespace mlasim::ref {
namespace {

NumericsOptions Small() {
  NumericsOptions o;
  o.head_dim_qk = 40;
  o.head_dim_v = 32;
  return o;
}

TEST(NumericsPoisonedInputs, UnusedTableSlotsHoldHostilePageIds) {
  const PlanRequest r = test::DenseRequest(Arch::kGfx942, 16, 2, {37, 0, 20}, 4, 16);
  const int32_t used = r.kv_indptr.back();  // 3 + 0 + 2 pages
  NumericsOptions o = Small();
  auto clean = BuildMlaInputs(r, o);
  ASSERT_TRUE(clean.ok());
  EXPECT_EQ(static_cast<int32_t>(clean->kv_indices.size()), used);
  o.hostile_table_slots = 5;
  auto in = BuildMlaInputs(r, o);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  ASSERT_EQ(static_cast<int32_t>(in->kv_indices.size()), used + 5);
  const std::vector<int32_t> tail(in->kv_indices.begin() + used, in->kv_indices.end());
  EXPECT_EQ(tail, (std::vector<int32_t>{-1, in->num_pages, 2147480000, INT_MAX, -1}));
  // The used slots are the same pages as without the poison.
  EXPECT_TRUE(
      std::equal(clean->kv_indices.begin(), clean->kv_indices.end(), in->kv_indices.begin()));
}

TEST(NumericsPoisonedInputs, PageZeroIsGivenToNoRequestAndStaysNaN) {
  const PlanRequest r = test::DenseRequest(Arch::kGfx942, 16, 1, {40, 33, 17, 64}, 4, 16);
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    NumericsOptions o = Small();
    o.seed = seed;
    o.reserve_page_zero = true;
    auto in = BuildMlaInputs(r, o);
    ASSERT_TRUE(in.ok());
    for (int32_t id : in->kv_indices) ASSERT_NE(id, 0) << "seed " << seed;
    for (int64_t x = 0; x < int64_t{16} * o.head_dim_qk; ++x)
      ASSERT_TRUE(std::isnan(in->kv_cache[x])) << "seed " << seed;
  }
}

TEST(NumericsPoisonedInputs, TheReferenceIgnoresThePoison) {
  const PlanRequest r = test::DenseRequest(Arch::kGfx942, 16, 2, {300, 40, 700}, 8, 16);
  const Plan plan = *PlanMlaMetadata(r);
  NumericsOptions o = Small();
  o.hostile_table_slots = 4;
  o.reserve_page_zero = true;
  auto rep = RunPlanNumerics(r, plan, o);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_TRUE(rep->ok);
  EXPECT_TRUE(rep->poison.empty());
  EXPECT_EQ(rep->unexplained_nan, 0);
}

TEST(NumericsPoisonedInputs, LimitsOfTheNewOptions) {
  const PlanRequest r = test::DenseRequest(Arch::kGfx942, 16, 1, {10}, 4);
  NumericsOptions o = Small();
  for (int32_t bad : {-1, 4097}) {
    o.hostile_table_slots = bad;
    EXPECT_EQ(BuildMlaInputs(r, o).status().field(), "hostile_table_slots") << bad;
  }
  for (int32_t ok : {0, 1, 4096}) {
    o.hostile_table_slots = ok;
    auto in = BuildMlaInputs(r, o);
    ASSERT_TRUE(in.ok()) << ok;
    EXPECT_EQ(static_cast<int32_t>(in->kv_indices.size()), 10 + ok);
  }
  o = Small();
  for (double bad : {0.0, -1.0, std::nan(""), HUGE_VAL}) {
    o.padding_q_amplitude = bad;
    EXPECT_EQ(BuildMlaInputs(r, o).status().field(), "padding_q_amplitude") << bad;
  }
}

// A sparse batch with -1 / hostile entries inside each token's top-k list, page 0 (row 0) NaN.
struct SparseCase {
  PlanRequest r = test::SparseRequest(Arch::kGfx942, 16, 2, {40, 9}, 16, 4);
  Plan plan = *PlanMlaMetadata(r);
  MlaInputs in;
  SparseCase() {
    NumericsOptions o = Small();
    o.reserve_page_zero = true;
    in = *BuildMlaInputs(r, o);
    in.topk_indices[3] = -1;  // token 0's fourth entry: within its length, invalid
  }
};

TEST(NumericsPoisonedInputs, ClampToZeroReadsTheNaNOfPageZeroAndNamesTheField) {
  SparseCase c;
  ASSERT_TRUE(std::isnan(c.in.kv_cache[0]));
  auto masked = RunPlanDriven(c.in, c.r, c.plan);
  ASSERT_TRUE(masked.ok());
  EXPECT_TRUE(masked->poison.empty());
  PlanExecOptions clamp;
  clamp.invalid_index = InvalidIndexUse::kClampToZero;
  auto got = RunPlanDriven(c.in, c.r, c.plan, clamp);
  ASSERT_TRUE(got.ok());
  ASSERT_FALSE(got->poison.empty());
  const PoisonFinding& f = got->poison[0];
  EXPECT_EQ(f.kind, PoisonKind::kHostileIndex);
  EXPECT_EQ(f.source, NumericsBuffer::kTopkIndices);
  EXPECT_EQ(f.source_index, 3);  // the slot
  EXPECT_TRUE(f.has_value);
  EXPECT_EQ(f.source_value, -1);  // the hostile value there
  EXPECT_GE(f.work, 0);           // the work item that read it
  EXPECT_EQ(f.via, "invalid_index = clamp_to_zero");
  EXPECT_EQ(f.row_begin, 0);
  EXPECT_NE(f.ToString().find("topk_indices[3] = -1"), std::string::npos) << f.ToString();
  EXPECT_NE(f.ToString().find("(invalid_index = clamp_to_zero)"), std::string::npos);
  // Wrap reads row (-1 mod cache rows): another token's key, used as if valid.
  PlanExecOptions wrap;
  wrap.invalid_index = InvalidIndexUse::kWrap;
  got = RunPlanDriven(c.in, c.r, c.plan, wrap);
  ASSERT_TRUE(got.ok());
  ASSERT_FALSE(got->poison.empty());
  EXPECT_EQ(got->poison[0].via, "invalid_index = wrap");
}

TEST(NumericsPoisonedInputs, ReadThenMaskLetsTheNaNOfAClampedRowThrough) {
  SparseCase c;
  PlanExecOptions o;
  o.invalid_index = InvalidIndexUse::kClampToZero;
  o.read_masked_keys = true;  // loaded, recognised, weight 0: 0 x NaN
  auto got = RunPlanDriven(c.in, c.r, c.plan, o);
  ASSERT_TRUE(got.ok());
  ASSERT_FALSE(got->poison.empty());
  // The finding names the table slot and its value, not only cache row 0: both contract fields
  // let the NaN through.
  const PoisonFinding& f = got->poison[0];
  EXPECT_EQ(f.kind, PoisonKind::kMaskedNaN);
  EXPECT_EQ(f.source, NumericsBuffer::kTopkIndices);
  EXPECT_EQ(f.source_index, 3);
  EXPECT_TRUE(f.has_value);
  EXPECT_EQ(f.source_value, -1);
  EXPECT_GE(f.work, 0);
  EXPECT_EQ(f.via, "invalid_index = clamp_to_zero, masked_keys = read_then_mask");
  // Wrap lands on a row of the cache that is not NaN here: loaded, masked, no finding.
  o.invalid_index = InvalidIndexUse::kWrap;
  got = RunPlanDriven(c.in, c.r, c.plan, o);
  ASSERT_TRUE(got.ok());
  const int64_t wrapped = c.in.num_pages - 1;  // -1 mod cache rows (page size 1)
  if (!std::isnan(c.in.kv_cache[wrapped * c.in.head_dim_qk])) {
    EXPECT_TRUE(got->poison.empty()) << got->poison[0].ToString();
  }
}

// The engine's index fill wrote invalid page ids into slots a kernel reads (the scenario's
// kv_cache.index_values): the reference masks their keys; the plan-driven run does what the
// contract's invalid_index says, and a finding names the slot, the value, the work item and the
// field.
struct EngineIndexCase {
  // Per-token layout of ATOM's sparse path: dense, page 1, one q row per virtual request.
  PlanRequest r = test::DenseRequest(Arch::kGfx942, 16, 1, {30, 12, 50}, 4);
  Plan plan = *PlanMlaMetadata(r);
  NumericsOptions o = Small();
  EngineIndexCase() {
    o.reserve_page_zero = true;
    o.index_values = {{2, -1}, {31, 2147483647}};  // request 0 slot 2, request 1 slot 1
  }
};

TEST(NumericsEngineIndexValues, TheReferenceMasksThemAndAMaskingKernelAgrees) {
  EngineIndexCase c;
  auto in = BuildMlaInputs(c.r, c.o);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_EQ(in->kv_indices[2], -1);
  EXPECT_EQ(in->kv_indices[31], INT_MAX);
  // Masking == the truth: no finding, within tolerance.
  auto rep = RunPlanNumerics(c.r, c.plan, c.o);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_TRUE(rep->ok);
  EXPECT_TRUE(rep->poison.empty()) << rep->poison[0].ToString();
  // The truth without the masked keys differs from the truth with all keys: masking matters.
  NumericsOptions plain = c.o;
  plain.index_values.clear();
  const auto mono_masked = RunMonolithic(*in);
  const auto mono_all = RunMonolithic(*BuildMlaInputs(c.r, plain));
  ASSERT_TRUE(mono_masked.ok() && mono_all.ok());
  EXPECT_NE(mono_masked->o[0], mono_all->o[0]);
  EXPECT_EQ(mono_masked->o[16 * 32 * 2], mono_all->o[16 * 32 * 2]);  // request 2: untouched
}

TEST(NumericsEngineIndexValues, FaultClampAndReadThenMaskEachNameSlotWorkAndField) {
  EngineIndexCase c;
  struct Want {
    InvalidIndexUse use;
    bool read_masked;
    PoisonKind kind;
    const char* via;
  };
  const Want wants[] = {
      {InvalidIndexUse::kFault, false, PoisonKind::kOutOfRangeRead, "invalid_index = fault"},
      {InvalidIndexUse::kClampToZero, false, PoisonKind::kHostileIndex,
       "invalid_index = clamp_to_zero"},
      {InvalidIndexUse::kClampToZero, true, PoisonKind::kMaskedNaN,
       "invalid_index = clamp_to_zero, masked_keys = read_then_mask"},
      {InvalidIndexUse::kWrap, false, PoisonKind::kHostileIndex, "invalid_index = wrap"},
  };
  for (const Want& w : wants) {
    NumericsOptions o = c.o;
    o.invalid_index = w.use;
    o.read_masked_keys = w.read_masked;
    auto rep = RunPlanNumerics(c.r, c.plan, o);
    ASSERT_TRUE(rep.ok()) << w.via;
    ASSERT_GE(rep->poison.size(), 2u) << w.via;
    const PoisonFinding& f = rep->poison[0];
    EXPECT_EQ(f.kind, w.kind) << w.via;
    EXPECT_EQ(f.output, NumericsBuffer::kO);
    EXPECT_EQ(f.row_begin, 0) << w.via;  // request 0's q row
    EXPECT_EQ(f.source, NumericsBuffer::kKvIndices);
    EXPECT_EQ(f.source_index, 2) << w.via;
    EXPECT_EQ(f.source_value, -1) << w.via;
    EXPECT_GE(f.work, 0) << w.via;
    EXPECT_EQ(f.via, w.via);
    bool second = false;  // request 1's slot 31 = INT_MAX is named too
    for (const PoisonFinding& g : rep->poison)
      second |= g.row_begin == 1 && g.source_index == 31 && g.source_value == INT_MAX;
    EXPECT_TRUE(second) << w.via;
  }
}

TEST(NumericsEngineIndexValues, ErrorsAndIgnoredElements) {
  EngineIndexCase c;
  NumericsOptions o = c.o;
  o.index_values = {{-1, 0}};
  EXPECT_EQ(BuildMlaInputs(c.r, o).status().field(), "index_values");
  o.index_values = {{0, int64_t{INT_MAX} + 1}};
  EXPECT_EQ(BuildMlaInputs(c.r, o).status().field(), "index_values");
  o.index_values = {{0, int64_t{INT_MIN} - 1}};
  EXPECT_EQ(BuildMlaInputs(c.r, o).status().field(), "index_values");
  // Boundaries: INT_MIN / INT_MAX are values; the last used slot (91) is set, the first unused
  // one (92, read by no kernel) is ignored.
  o.index_values = {{0, INT_MIN}, {91, INT_MAX}, {92, -1}};
  auto in = BuildMlaInputs(c.r, o);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_EQ(in->kv_indices[0], INT_MIN);
  EXPECT_EQ(in->kv_indices[91], INT_MAX);
  EXPECT_EQ(in->kv_indices.size(), 92u);
}

TEST(NumericsPoisonedInputs, ReadThenMaskOfALastPagesNaNTail) {
  // 37 tokens in pages of 16: the last page holds 5 tokens and 11 NaN slots.
  const PlanRequest r = test::DenseRequest(Arch::kGfx942, 16, 1, {37}, 4, 16);
  const Plan plan = *PlanMlaMetadata(r);
  const MlaInputs in = *BuildMlaInputs(r, Small());
  PlanExecOptions o;
  auto never = RunPlanDriven(in, r, plan, o);
  ASSERT_TRUE(never.ok());
  EXPECT_TRUE(never->poison.empty());
  o.read_masked_keys = true;
  auto got = RunPlanDriven(in, r, plan, o);
  ASSERT_TRUE(got.ok());
  ASSERT_FALSE(got->poison.empty());
  EXPECT_EQ(got->poison[0].kind, PoisonKind::kMaskedNaN);
  EXPECT_EQ(got->poison[0].via, "masked_keys = read_then_mask");
  EXPECT_EQ(got->poison[0].row_begin, 0);
}

TEST(NumericsPadding, NeverWrittenPaddingRowsAreCounted) {
  // The parallel planner gives zero-KV request 1 no work item; requests 1 and 2 are padding.
  const PlanRequest r = test::DenseRequest(Arch::kGfx942, 16, 1, {10, 0, 300}, 5);
  const Plan plan = *PlanMlaMetadata(r);
  NumericsOptions o = Small();
  o.real_rows = 1;
  auto rep = RunPlanNumerics(r, plan, o);
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(rep->padding_o_nonfinite, 16 * 32);  // row 1: 16 heads x 32 columns of NaN
  EXPECT_EQ(rep->padding_lse_bad, 16);
  EXPECT_EQ(rep->padding_poisoned_pairs, 16);
  // Only the real row's elements compared: 16 heads x 32 values of o, 16 of lse (the masks of
  // (row, head) pairs spread over each pair's values).
  EXPECT_EQ(rep->o.elements, 16 * 32);
  EXPECT_EQ(rep->lse.elements, 16);
  EXPECT_EQ(rep->o_unpoisoned.elements, 16 * 32);
  // All rows real: nothing counted as padding.
  o.real_rows = -1;
  rep = RunPlanNumerics(r, plan, o);
  ASSERT_TRUE(rep.ok());
  EXPECT_EQ(rep->padding_o_nonfinite, 0);
  EXPECT_EQ(rep->padding_poisoned_pairs, 0);
  EXPECT_EQ(rep->o.elements, 3 * 16 * 32);
}

TEST(NumericsPadding, Fp8QScaledOverThePaddedBatchChangesTheRealRows) {
  PlanRequest r = test::DenseRequest(Arch::kGfx950, 16, 1, {40, 30, 20, 10}, 4);
  r.q_dtype = r.kv_dtype = DType::kFp8;
  const Plan plan = *PlanMlaMetadata(r);
  NumericsOptions o = Small();
  o.real_rows = 2;
  o.padding_q_amplitude = 8;
  using Mode = NumericsOptions::QScaleMode;
  o.q_scale_mode = Mode::kPerTensorReal;
  auto real = RunPlanNumerics(r, plan, o);
  ASSERT_TRUE(real.ok()) << real.status().ToString();
  EXPECT_EQ(real->q_scale, real->q_scale_real);
  EXPECT_TRUE(real->ok);
  o.q_scale_mode = Mode::kPerTensorPadded;
  auto padded = RunPlanNumerics(r, plan, o);
  ASSERT_TRUE(padded.ok());
  EXPECT_EQ(padded->q_scale_real, real->q_scale);
  EXPECT_GT(padded->q_scale, 4 * padded->q_scale_real);  // padding rows set the maximum
  EXPECT_GT(padded->o_unpoisoned.max_abs, real->o_unpoisoned.max_abs);
  o.q_scale_mode = Mode::kStatic;
  auto fixed = RunPlanNumerics(r, plan, o);
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ(fixed->q_scale, 1.0);
}

}  // namespace
}  // namespace mlasim::ref
