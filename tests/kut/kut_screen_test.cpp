// The GPU reference's screen (fuzz/kut_screen.cpp, docs/kernel-under-test.md "The GPU
// reference"): for a plan the plan checker finds clean, the walk without arithmetic
// (ref::RunPlanStructure) marks exactly the (row, head) pairs the head-dim-16 CPU runs mark,
// over the fuzz generator's steps (every family, several seeds); the decision between the two
// at its boundary (one filtered diagnostic takes the head-dim-16 runs); and what the walk gives
// on hand-made plans (racing writes, rows never written).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <string>
#include <vector>

#include "fuzz/kut_check_internal.h"
#include "fuzz/scenario_gen.h"
#include "ref/planner.h"
#include "sim/kernel_request.h"
#include "sim/replay.h"

namespace mlasim::fuzz::kut_internal {
namespace {

constexpr uint64_t kInputSeed = 1;  // the campaigns' default input seed

struct Tally {
  int plans = 0, clean = 0, predicted = 0, rejected = 0;
  int clean_with_undefined = 0;  // clean plans leaving at least one pair undefined
  int64_t undefined_pairs = 0;   // over the clean plans
  int updated = 0;               // clean plans decode_update rewrote
  std::vector<std::string> mismatches;
};

// Both screens of every plan of the step generated from `seed`; for a clean plan the two masks
// (and their refusals) must be equal.
void ScreenStep(const GenConfig& config, uint64_t seed, Tally& t) {
  const sim::Scenario s = ScenarioFromSeed(config, seed, 30).value();
  auto r = sim::Replay(s);
  if (!r.ok()) return;  // a scenario the simulator refuses has no plans to screen
  for (const sim::PlanSnapshot& snap : r->trace.plans) {
    if (snap.dialect) continue;  // a FlashMLA / FlashInfer plan: the kernel plans by itself
    ++t.plans;
    const PlanCheckVerdict verdict = CheckPlanForScreen(snap.request, snap.plan);
    if (verdict == PlanCheckVerdict::kPredicted) ++t.predicted;
    if (verdict == PlanCheckVerdict::kRejected) ++t.rejected;
    if (verdict != PlanCheckVerdict::kClean) continue;
    ++t.clean;
    if (!snap.plan.update_fold_ratios.empty()) ++t.updated;
    const ref::PlanRequest req = sim::KernelRequest(snap.request);
    std::vector<uint8_t> fast, screen;
    const std::string why_fast =
        ScreenPlanPairs(req, snap.plan, kInputSeed, ScreenMethod::kStructure, &fast);
    const std::string why_screen =
        ScreenPlanPairs(req, snap.plan, kInputSeed, ScreenMethod::kHeadDim16, &screen);
    const std::string where = fmt::format("seed {} plan {}", seed, snap.name);
    if (why_fast != why_screen) {
      t.mismatches.push_back(where + ": refusals differ: '" + why_fast + "' vs '" + why_screen +
                             "'");
      continue;
    }
    if (!why_fast.empty()) continue;
    int64_t undefined = 0;
    for (uint8_t u : fast) undefined += u;
    t.undefined_pairs += undefined;
    if (undefined > 0) ++t.clean_with_undefined;
    if (fast == screen) continue;
    size_t at = 0;
    while (at < fast.size() && at < screen.size() && fast[at] == screen[at]) ++at;
    t.mismatches.push_back(
        fmt::format("{}: masks differ first at pair {} (structure {}, head dims "
                    "16 {}; {} vs {} pairs)",
                    where, at, at < fast.size() ? fast[at] : -1,
                    at < screen.size() ? screen[at] : -1, fast.size(), screen.size()));
  }
}

Tally ScreenFamily(const std::vector<std::string>& families, uint64_t first_seed, int steps) {
  GenConfig config;
  config.small = true;
  config.kernel_inputs = true;
  EXPECT_TRUE(EnableFamilies(families, &config).ok());
  Tally t;
  for (uint64_t seed = first_seed; seed < first_seed + steps; ++seed) ScreenStep(config, seed, t);
  return t;
}

void ExpectSameMasks(const Tally& t, const std::string& family) {
  EXPECT_TRUE(t.mismatches.empty()) << family << ": " << t.mismatches.size() << " of " << t.clean
                                    << " clean plans differ, first: " << t.mismatches.front();
  // Not vacuous: clean plans were screened and some leave pairs undefined.
  EXPECT_GT(t.clean, 20) << family;
  std::printf(
      "%s: %d plans, %d clean (%d leave %lld pairs undefined, %d updated), %d predicted, "
      "%d rejected\n",
      family.c_str(), t.plans, t.clean, t.clean_with_undefined,
      static_cast<long long>(t.undefined_pairs), t.updated, t.predicted, t.rejected);
}

TEST(KutScreen, StructureWalkMarksWhatTheHeadDim16RunsMarkOnEveryCleanPlanDefaultFamily) {
  ExpectSameMasks(ScreenFamily({}, 1, 40), "default");
}

TEST(KutScreen, StructureWalkMarksWhatTheHeadDim16RunsMarkOnEveryCleanPlanRaggedQ) {
  ExpectSameMasks(ScreenFamily({"ragged-q"}, 101, 40), "ragged-q");
}

TEST(KutScreen, StructureWalkMarksWhatTheHeadDim16RunsMarkOnEveryCleanPlanPaged) {
  ExpectSameMasks(ScreenFamily({"paged"}, 201, 40), "paged");
}

TEST(KutScreen, StructureWalkMarksWhatTheHeadDim16RunsMarkOnEveryCleanPlanHostileIndices) {
  ExpectSameMasks(ScreenFamily({"hostile-indices"}, 301, 40), "hostile-indices");
}

TEST(KutScreen, StructureWalkMarksWhatTheHeadDim16RunsMarkOnEveryCleanPlanDisagreements) {
  ExpectSameMasks(ScreenFamily({"disagreements"}, 401, 40), "disagreements");
}

TEST(KutScreen, StructureWalkMarksWhatTheHeadDim16RunsMarkOnEveryCleanPlanAllFamilies) {
  ExpectSameMasks(ScreenFamily({"hostile-indices", "disagreements", "paged", "ragged-q"}, 501, 40),
                  "all");
}

// ---- The walk against the plan-driven run, on any plan ----------------------------------------

// A plan made worse in one of a few ways (0: as planned): a second work on the first work's q
// rows (racing writes, rows never written), KV past the page table, a reduce piece before the
// partial buffer, a work_indptr past the written works.
ref::Plan Perturbed(const ref::Plan& plan, int how) {
  ref::Plan p = plan;
  const int64_t works = p.work_info.size() / 8;
  if (how == 1 && works >= 2) {
    p.work_info.data[8 + ref::kQoStart] = p.work_info.data[ref::kQoStart];
    p.work_info.data[8 + ref::kQoEnd] = p.work_info.data[ref::kQoEnd];
  } else if (how == 2 && works >= 1) {
    p.work_info.data[ref::kKvEnd] += 1000;
  } else if (how == 3 && p.reduce_partial_map.size() > 0) {
    p.reduce_partial_map.data[0] = -5;
  } else if (how == 4 && p.work_indptr.size() > 0) {
    p.work_indptr.data.back() += 1;
  }
  return p;
}

// Everything the walk promises to give as the plan-driven run does.
std::string Walked(const StatusOr<ref::PlanDrivenResult>& r) {
  if (!r.ok()) return "error: " + r.status().ToString();
  std::string s =
      fmt::format("works {} tiles {} partial {}/{} keyless {} fold {} dropped {}\n", r->works_run,
                  r->tiles_reduced, r->partial_rows_written, r->partial_rows,
                  r->partial_rows_without_key, r->fold_ratio, r->poison_dropped);
  for (const ref::PoisonFinding& f : r->poison) s += f.ToString() + "\n";
  return s;
}

// The contract semantics the walk is run under: the screen's (defaults) and each field changed.
std::vector<ref::PlanExecOptions> Semantics() {
  std::vector<ref::PlanExecOptions> v(8);
  v[1].empty_rows = ref::EmptyRowPolicy::kNan;
  v[2].empty_rows = ref::EmptyRowPolicy::kSkip;
  v[3].empty_rows = ref::EmptyRowPolicy::kWriteZeroPosInfLse;
  v[4].zero_kv = ref::ZeroKvPolicy::kSkip;
  v[5].invalid_index = ref::InvalidIndexUse::kFault;
  v[6].invalid_index = ref::InvalidIndexUse::kWrap;
  v[7].invalid_index = ref::InvalidIndexUse::kClampToZero;
  v[7].read_masked_keys = true;
  return v;
}

TEST(KutScreen, TheWalkGivesThePoisonOfThePlanDrivenRunOnEveryPlanAndSemantics) {
  GenConfig config;
  config.small = true;
  config.kernel_inputs = true;
  ASSERT_TRUE(EnableFamilies(GeneratorFamilies(), &config).ok());
  int compared = 0, with_poison = 0, racing = 0, out_of_range = 0, masked_nan = 0, empty_nan = 0;
  int failed = 0;
  std::vector<std::string> differ;
  const std::vector<ref::PlanExecOptions> semantics = Semantics();
  for (uint64_t seed = 601; seed < 616; ++seed) {
    const sim::Scenario s = ScenarioFromSeed(config, seed, 30).value();
    auto r = sim::Replay(s);
    if (!r.ok()) continue;
    for (const sim::PlanSnapshot& snap : r->trace.plans) {
      if (snap.dialect) continue;
      const ref::PlanRequest req = sim::KernelRequest(snap.request);
      ref::NumericsOptions no;
      no.seed = kInputSeed;
      no.head_dim_qk = no.head_dim_v = kTinyDim;
      auto values = ref::BuildMlaInputs(req, no);
      no.fill_values = false;
      auto shape = ref::BuildMlaInputs(req, no);
      if (!values.ok() || !shape.ok()) continue;
      for (int how = 0; how <= 4; ++how) {
        const ref::Plan plan = Perturbed(snap.plan, how);
        for (size_t k = 0; k < semantics.size(); ++k) {
          ref::PlanExecOptions exec = semantics[k];
          exec.precision = KutPrecision(true);
          const std::string driven = Walked(ref::RunPlanDriven(*values, req, plan, exec));
          const std::string walk = Walked(
              ref::RunPlanStructure(exec.read_masked_keys ? *values : *shape, req, plan, exec));
          ++compared;
          failed += driven.rfind("error", 0) == 0;
          with_poison += driven.find("\n") + 1 < driven.size();
          racing += driven.find("racing") != std::string::npos;
          out_of_range += driven.find("out_of_range_read") != std::string::npos;
          masked_nan += driven.find("masked_nan") != std::string::npos;
          empty_nan += driven.find("empty_row_nan") != std::string::npos;
          if (driven != walk && differ.size() < 3)
            differ.push_back(
                fmt::format("seed {} plan {} perturbation {} semantics {}:\n{}\nvs "
                            "walk\n{}",
                            seed, snap.name, how, k, driven, walk));
        }
      }
    }
  }
  EXPECT_TRUE(differ.empty()) << differ.front();
  std::printf(
      "%d runs compared: %d with poison, %d racing, %d out-of-range reads, %d masked NaN, "
      "%d empty-row NaN, %d refused\n",
      compared, with_poison, racing, out_of_range, masked_nan, empty_nan, failed);
  EXPECT_GT(racing, 10);
  EXPECT_GT(out_of_range, 10);
  EXPECT_GT(masked_nan, 0);
  EXPECT_GT(empty_nan, 0);
}

// ---- The decision at its boundary --------------------------------------------------------------

// A dense decode of two requests of 3 KV tokens (q length 1, 16 heads, pages of 1) and the
// planner's plan for it: clean, one unsplit work per request.
struct Planned {
  ref::PlanRequest request;
  ref::Plan plan;
};
Planned DensePlan() {
  Planned p;
  p.request.num_heads_k = 1;
  p.request.heads_per_head_k = 16;
  p.request.page_size = 1;
  p.request.uni_seqlen_qo = 1;
  p.request.max_seqlen_qo = 1;
  p.request.qo_indptr = {0, 1, 2};
  p.request.kv_indptr = {0, 3, 6};
  p.request.kv_last_page_lens = {1, 1};
  p.request.cu_count = 4;
  auto plan = ref::PlanMlaMetadata(p.request);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  if (plan.ok()) p.plan = std::move(*plan);
  return p;
}

TEST(KutScreen, APlannerPlanIsCleanAndTakesTheStructureWalk) {
  const Planned p = DensePlan();
  EXPECT_EQ(CheckPlanForScreen(p.request, p.plan), PlanCheckVerdict::kClean);
  EXPECT_EQ(ScreenMethodFor(PlanCheckVerdict::kClean), ScreenMethod::kStructure);
  std::vector<uint8_t> mask;
  EXPECT_EQ(ScreenPlanPairs(p.request, p.plan, kInputSeed, ScreenMethod::kStructure, &mask), "");
  EXPECT_EQ(mask, std::vector<uint8_t>(2 * 16, 0));
}

TEST(KutScreen, OneBufferOverflowMakesThePlanPredictedAndTakesTheHeadDim16Runs) {
  Planned p = DensePlan();
  p.plan.reduce_partial_map.oob_writes = 1;
  p.plan.reduce_partial_map.first_oob_index = p.plan.reduce_partial_map.size();
  EXPECT_EQ(CheckPlanForScreen(p.request, p.plan), PlanCheckVerdict::kPredicted);
  EXPECT_EQ(ScreenMethodFor(PlanCheckVerdict::kPredicted), ScreenMethod::kHeadDim16);
}

TEST(KutScreen, OneInputReadOutOfRangeMakesThePlanPredictedAndTakesTheHeadDim16Runs) {
  Planned p = DensePlan();
  p.plan.input_violations.push_back({"kv_last_page_lens", 2, 2, -1, -1});
  EXPECT_EQ(CheckPlanForScreen(p.request, p.plan), PlanCheckVerdict::kPredicted);
}

TEST(KutScreen, AnotherErrorRejectsThePlanWhateverElseItHolds) {
  Planned p = DensePlan();
  p.plan.input_violations.push_back({"kv_last_page_lens", 2, 2, -1, -1});
  p.plan.work_indptr.data[1] = p.plan.work_indptr.data.back() + 1;  // decreasing after it
  EXPECT_EQ(CheckPlanForScreen(p.request, p.plan), PlanCheckVerdict::kRejected);
  EXPECT_EQ(ScreenMethodFor(PlanCheckVerdict::kRejected), ScreenMethod::kHeadDim16);
}

// ---- The walk on hand-made plans ---------------------------------------------------------------

// Pairs of request r's row (one q row per request here) in `mask`.
int64_t RowPairs(const std::vector<uint8_t>& mask, int32_t row, int32_t heads) {
  int64_t n = 0;
  for (int32_t h = 0; h < heads; ++h) n += mask[static_cast<size_t>(row) * heads + h];
  return n;
}

TEST(KutScreen, TheWalkMarksARowTwoWorksWriteAndARowNoneWrites) {
  Planned p = DensePlan();
  // The work of request 1 (row 1) now claims row 0: row 0 races, row 1 is never written.
  ref::Int32Buffer& wi = p.plan.work_info;
  const int32_t works = p.plan.work_indptr.data.back();
  int32_t moved = 0;
  for (int32_t w = 0; w < works; ++w) {
    if (wi.data[w * 8 + ref::kQoStart] != 1) continue;
    wi.data[w * 8 + ref::kQoStart] = 0;
    wi.data[w * 8 + ref::kQoEnd] = 1;
    ++moved;
  }
  ASSERT_EQ(moved, 1);
  for (const ScreenMethod m : {ScreenMethod::kStructure, ScreenMethod::kHeadDim16}) {
    std::vector<uint8_t> mask;
    ASSERT_EQ(ScreenPlanPairs(p.request, p.plan, kInputSeed, m, &mask), "");
    EXPECT_EQ(RowPairs(mask, 0, 16), 16) << static_cast<int>(m);
    EXPECT_EQ(RowPairs(mask, 1, 16), 16) << static_cast<int>(m);
  }
  ref::NumericsOptions no;
  no.head_dim_qk = no.head_dim_v = kTinyDim;
  no.fill_values = false;
  auto in = ref::BuildMlaInputs(p.request, no);
  ASSERT_TRUE(in.ok());
  auto walk = ref::RunPlanStructure(*in, p.request, p.plan);
  ASSERT_TRUE(walk.ok()) << walk.status().ToString();
  bool racing = false, never = false;
  for (const ref::PoisonFinding& f : walk->poison) {
    racing |= f.kind == ref::PoisonKind::kRacingWrite && f.row_begin == 0;
    never |= f.kind == ref::PoisonKind::kNeverWritten && f.row_begin == 1;
  }
  EXPECT_TRUE(racing);
  EXPECT_TRUE(never);
  EXPECT_TRUE(walk->out.o.empty());
  EXPECT_TRUE(walk->out.lse.empty());
}

TEST(KutScreen, TheWalkTellsARowWhoseKeysAreAllMaskedHasNoKey) {
  const Planned p = DensePlan();
  ref::NumericsOptions no;
  no.head_dim_qk = no.head_dim_v = kTinyDim;
  auto in = ref::BuildMlaInputs(p.request, no);
  ASSERT_TRUE(in.ok());
  for (int32_t slot = 3; slot < 6; ++slot) in->kv_indices[slot] = -1;  // request 1: masked keys
  ref::PlanExecOptions exec;                                           // invalid_index = masked
  exec.empty_rows = ref::EmptyRowPolicy::kNan;
  const std::string driven = Walked(ref::RunPlanDriven(*in, p.request, p.plan, exec));
  EXPECT_NE(driven.find("empty_row_nan: o rows [1,2)"), std::string::npos) << driven;
  EXPECT_EQ(Walked(ref::RunPlanStructure(*in, p.request, p.plan, exec)), driven);
}

TEST(KutScreen, TheWalkNeedsTheCacheOnlyToReadMaskedKeys) {
  const Planned p = DensePlan();
  ref::NumericsOptions no;
  no.head_dim_qk = no.head_dim_v = kTinyDim;
  no.fill_values = false;
  auto in = ref::BuildMlaInputs(p.request, no);
  ASSERT_TRUE(in.ok());
  ref::PlanExecOptions exec;
  EXPECT_TRUE(ref::RunPlanStructure(*in, p.request, p.plan, exec).ok());
  exec.read_masked_keys = true;
  const auto refused = ref::RunPlanStructure(*in, p.request, p.plan, exec);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().ToString().find("kv_cache: read_masked_keys needs the cache's values"),
            std::string::npos)
      << refused.status().ToString();
}

}  // namespace
}  // namespace mlasim::fuzz::kut_internal
