// Round 6 of issue 10 (docs/performance.md): a campaign hands the plans of a finished case back
// (sim::RecyclePlans) and the next case plans into their memory. The plans, and what the
// simulator finds with them, must be the ones fresh buffers give.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "fuzz/scenario_gen.h"
#include "sim/engine.h"
#include "sim/executor.h"
#include "sim/scenario_json.h"

namespace mlasim::fuzz {
namespace {

// Every element, write state and store count of every aiter plan of `a` and `b`, and the
// violations Execute finds in each, compared; `what` names the case in the failures.
void ExpectSameTrace(const sim::Scenario& s, const sim::Trace& a, const sim::Trace& b,
                     const std::string& what) {
  ASSERT_EQ(a.plans.size(), b.plans.size()) << what;
  for (size_t p = 0; p < a.plans.size(); ++p) {
    for (ref::PlanBufferId id : ref::kInt32PlanBuffers) {
      const ref::Int32Buffer& x = *a.plans[p].plan.buffer(id);
      const ref::Int32Buffer& y = *b.plans[p].plan.buffer(id);
      const std::string where = what + " plan " + std::to_string(p) + " buffer " +
                                std::to_string(static_cast<int>(id));
      EXPECT_EQ(x.data, y.data) << where;
      EXPECT_EQ(x.cells, y.cells) << where;
      EXPECT_EQ(x.row_width, y.row_width) << where;
      EXPECT_EQ(x.oob_writes, y.oob_writes) << where;
      EXPECT_EQ(x.first_oob_index, y.first_oob_index) << where;
      EXPECT_EQ(x.last_oob_index, y.last_oob_index) << where;
      EXPECT_EQ(x.dirty_end, y.dirty_end) << where;
    }
    EXPECT_EQ(a.plans[p].plan.input_violations.size(), b.plans[p].plan.input_violations.size())
        << what;
    EXPECT_EQ(a.plans[p].plan.update_fold_ratios, b.plans[p].plan.update_fold_ratios) << what;
    EXPECT_EQ(a.plans[p].plan.num_works(), b.plans[p].plan.num_works()) << what;
  }
  sim::ExecuteOptions opt;
  opt.capture_layout = false;
  const sim::ExecutionResult ra = sim::Execute(s, a, opt), rb = sim::Execute(s, b, opt);
  ASSERT_EQ(ra.violations.size(), rb.violations.size()) << what;
  for (size_t v = 0; v < ra.violations.size(); ++v) {
    const sim::Violation &x = ra.violations[v], &y = rb.violations[v];
    EXPECT_EQ(x.call + "|" + x.buffer + "|" + x.detail, y.call + "|" + y.buffer + "|" + y.detail)
        << what;
    EXPECT_EQ(x.first_row, y.first_row) << what;
    EXPECT_EQ(x.last_row, y.last_row) << what;
    EXPECT_EQ(x.work_items, y.work_items) << what;
  }
}

// Cases of a --small campaign and of a full-size one, interleaved so that large plans are
// recycled into small ones and back: each expanded with fresh buffers and after the previous
// cases' plans were recycled.
TEST(PlanRecycling, PlansIntoRecycledBuffersAreThePlansOfFreshBuffers) {
  GenConfig small;
  small.swarm = true;
  small.small = true;
  small.max_batch = 64;
  GenConfig full;
  full.swarm = true;
  std::vector<sim::Scenario> cases;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    cases.push_back(ScenarioFromSeed(seed % 3 == 0 ? full : small, seed,
                                     static_cast<int>(10 + seed % 91))
                        .value());
  }
  int64_t reused = 0, recycled_plans = 0;
  sim::ClearRecycledPlans();
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string what = "case " + std::to_string(i);
    sim::ClearRecycledPlans();
    auto fresh = sim::ExpandStep(cases[i]);
    if (!fresh.ok()) continue;  // refused by the planner: nothing to compare
    // The previous two cases' plans (and those of this case's own fresh run) to plan into.
    for (size_t back = 1; back <= 2 && back <= i; ++back) {
      auto before = sim::ExpandStep(cases[i - back]);
      if (before.ok()) sim::RecyclePlans(*before);
    }
    const size_t pool = sim::RecycledPlanCount();
    recycled_plans += static_cast<int64_t>(pool);
    auto again = sim::ExpandStep(cases[i]);
    ASSERT_TRUE(again.ok()) << what;
    reused += pool > sim::RecycledPlanCount();
    ExpectSameTrace(cases[i], *fresh, *again, what);
    // Its own plans, recycled, once more.
    sim::RecyclePlans(*again);
    auto third = sim::ExpandStep(cases[i]);
    ASSERT_TRUE(third.ok()) << what;
    ExpectSameTrace(cases[i], *fresh, *third, what + " (its own plans)");
  }
  sim::ClearRecycledPlans();
  EXPECT_GT(reused, 40);  // most cases planned into recycled memory
  EXPECT_GT(recycled_plans, 80);
}

// Execute marks a plan buffer's written runs from element 0 up to its dirty_end only (round 14,
// docs/performance.md): no element at or past dirty_end may be written in any plan a step
// holds, planned fresh or into recycled memory, updated by decode_update or not, under every
// generator family.
TEST(PlanRecycling, NoPlanOfATraceHoldsAWrittenElementPastItsDirtyEnd) {
  int64_t checked = 0, updated = 0;
  sim::ClearRecycledPlans();
  for (uint64_t seed = 1; seed <= 120; ++seed) {
    GenConfig config;
    config.swarm = true;
    config.small = seed % 2 == 0;
    config.hostile_indices = config.disagreements = seed % 3 == 0;
    config.paged = config.ragged_q = seed % 4 == 1;
    const sim::Scenario s =
        ScenarioFromSeed(config, seed, static_cast<int>(10 + seed % 91)).value();
    auto t = sim::ExpandStep(s);
    if (!t.ok()) continue;
    for (const sim::PlanSnapshot& snap : t->plans) {
      updated += snap.name.find('@') != std::string::npos;
      for (ref::PlanBufferId id : ref::kInt32PlanBuffers) {
        const ref::Int32Buffer& b = *snap.plan.buffer(id);
        const int64_t n = static_cast<int64_t>(b.cells.size());
        int64_t last = -1;
        for (int64_t i = n - 1; i >= 0 && last < 0; --i)
          if (b.cells[static_cast<size_t>(i)] != ref::Cell::kUnwritten) last = i;
        EXPECT_LT(last, b.dirty_end) << "seed " << seed << " plan " << snap.name << " buffer "
                                     << static_cast<int>(id);
        checked += last >= 0;
      }
    }
    sim::RecyclePlans(*t);  // the next seed plans into this memory
  }
  sim::ClearRecycledPlans();
  EXPECT_GT(checked, 500);
  EXPECT_GT(updated, 10);  // decode_update's patched plans among them
}

TEST(PlanRecycling, KeepsAtMostTheBoundAndOnlyAiterPlans) {
  sim::ClearRecycledPlans();
  sim::Trace t;
  t.plans.resize(sim::kRecycledPlansKept + 5);
  for (sim::PlanSnapshot& s : t.plans) s.plan.work_info.data.assign(8, 0);
  t.plans[0].plan.work_info.data.clear();  // no aiter plan memory: not kept
  sim::RecyclePlans(t);
  EXPECT_TRUE(t.plans.empty());
  EXPECT_EQ(sim::RecycledPlanCount(), sim::kRecycledPlansKept);
  sim::ClearRecycledPlans();
  EXPECT_EQ(sim::RecycledPlanCount(), 0u);
}

// A full pool: a plan with more memory than the least of the kept ones replaces it; one with the
// same or less is freed.
TEST(PlanRecycling, AFullPoolKeepsThePlansWithTheMostMemory) {
  sim::ClearRecycledPlans();
  sim::Trace t;
  t.plans.resize(sim::kRecycledPlansKept);
  for (sim::PlanSnapshot& s : t.plans) s.plan.work_info.data.assign(8, 0);
  sim::RecyclePlans(t);
  ASSERT_EQ(sim::RecycledPlanCount(), sim::kRecycledPlansKept);
  const int64_t full = sim::RecycledPlanElements();
  EXPECT_EQ(full, 8 * static_cast<int64_t>(sim::kRecycledPlansKept));
  t.plans.resize(3);
  t.plans[0].plan.work_info.data.assign(8, 0);     // as much: freed
  t.plans[1].plan.work_info.data.assign(1000, 0);  // more: replaces an 8-element plan
  t.plans[2].plan.work_info.data.assign(9, 0);     // more by one: replaces another
  sim::RecyclePlans(t);
  EXPECT_EQ(sim::RecycledPlanCount(), sim::kRecycledPlansKept);
  EXPECT_EQ(sim::RecycledPlanElements(), full - 8 + 1000 - 8 + 9);
  sim::ClearRecycledPlans();
}

// A request the planner refuses leaves the recycled plan it was to fill untouched: it goes back
// to the pool. Outside a campaign (an empty pool) nothing is kept.
TEST(PlanRecycling, ARefusedRequestHandsItsPlanBack) {
  namespace fs = std::filesystem;
  auto refused = sim::LoadScenarioFile(
      (fs::path(MLASIM_SOURCE_DIR) / "tests/cases/bad/unsupported-head-count.json").string());
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  sim::ClearRecycledPlans();
  auto none = sim::ExpandStep(*refused);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().ToString().find("refused by the planner"), std::string::npos)
      << none.status().ToString();
  EXPECT_EQ(sim::RecycledPlanCount(), 0u);

  GenConfig small;
  small.small = true;
  small.max_batch = 64;
  auto planned = sim::ExpandStep(ScenarioFromSeed(small, 1, 50).value());
  ASSERT_TRUE(planned.ok());
  sim::RecyclePlans(*planned);
  const size_t kept = sim::RecycledPlanCount();
  const int64_t elements = sim::RecycledPlanElements();
  ASSERT_GT(kept, 0u);
  EXPECT_FALSE(sim::ExpandStep(*refused).ok());
  EXPECT_EQ(sim::RecycledPlanCount(), kept);
  EXPECT_EQ(sim::RecycledPlanElements(), elements);
  sim::ClearRecycledPlans();
}

}  // namespace
}  // namespace mlasim::fuzz
