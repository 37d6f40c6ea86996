// Step expansion: the worked example and the table of atom-mtp-flow.md §6, one test per row.
#include "sim/engine.h"

#include <gtest/gtest.h>

#include "tests/sim/sim_builders.h"

namespace mlasim::sim {
namespace {

using test::FindCall;
using test::Lengths;
using test::WorkedExample;

TEST(EngineWorkedExample, RungAndPaddedIndptrs) {
  auto t = ExpandStep(WorkedExample(true, "atom-2026-08"));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->shape.B, 5);
  EXPECT_EQ(t->shape.R, 8);
  EXPECT_EQ(t->shape.scheduled_tokens, 20);
  EXPECT_EQ(t->shape.running_tokens, 32);
  EXPECT_TRUE(t->shape.graph);
  // T1: cu_seqlens_q = 0,4,...,20,20,20,20; kv_indptr = 0,100,3100,3150,5250,5257 then 5257 x 3.
  const ref::PlanRequest& main = t->plans[FindCall(*t, "verify", "main_plan")->plan].request;
  EXPECT_EQ(main.qo_indptr, (std::vector<int32_t>{0, 4, 8, 12, 16, 20, 20, 20, 20}));
  EXPECT_EQ(main.kv_indptr,
            (std::vector<int32_t>{0, 100, 3100, 3150, 5250, 5257, 5257, 5257, 5257}));
  // T2: per-token KV 97,98,99,100 | 2048 x4 | 47..50 | 2048 x4 | 4..7 | 0 x12.
  const ref::PlanRequest& sp = t->plans[FindCall(*t, "verify", "sparse_mtp_plan")->plan].request;
  std::vector<int32_t> want = {97, 98, 99,   100,  2048, 2048, 2048, 2048, 47, 48,
                               49, 50, 2048, 2048, 2048, 2048, 4,    5,    6,  7};
  want.resize(32, 0);
  EXPECT_EQ(Lengths(sp.kv_indptr), want);
}

TEST(EngineWorkedExample, DraftStepLengths) {
  auto t = ExpandStep(WorkedExample(true, "atom-2026-08"));
  ASSERT_TRUE(t.ok());
  // Step 1 sparse lengths (real rows): 101, 2048, 50, 2048, 8; the first pad row inherits
  // sum(r) = 6 plus 1, later pads 1 (draft rows padded to R = 8).
  const auto& s1 = t->plans[FindCall(*t, "draft_step_1", "draft_sparse_plan")->plan].request;
  EXPECT_EQ(Lengths(s1.kv_indptr), (std::vector<int32_t>{101, 2048, 50, 2048, 8, 7, 1, 1}));
  const auto& s2 = t->plans[FindCall(*t, "draft_step_2", "draft_sparse_plan")->plan].request;
  EXPECT_EQ(Lengths(s2.kv_indptr), (std::vector<int32_t>{102, 2048, 51, 2048, 9, 8, 2, 2}));
  // Dense: the transition indptr is cumsum(L - r) = 0,100,3097,3146,5244,5251 (pads stay 5257),
  // then + i per step: step 1 lengths 101, 2998, 50, 2099, 8.
  auto d = ExpandStep(WorkedExample(false, "atom-2026-08"));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  const auto& u1 = d->plans[FindCall(*d, "draft_step_1", "main_plan_update")->plan].request;
  EXPECT_EQ(u1.kv_indptr, (std::vector<int32_t>{0, 101, 3099, 3149, 5248, 5256, 5263, 5264, 5265}));
  EXPECT_EQ(Lengths(u1.kv_indptr)[1], 2998);
  const auto& u2 = d->plans[FindCall(*d, "draft_step_2", "main_plan_update")->plan].request;
  EXPECT_EQ(Lengths(u2.kv_indptr), (std::vector<int32_t>{102, 2999, 51, 2100, 9, 8, 2, 2}));
}

// One test per row of the table in atom-mtp-flow.md §6: q rows, o rows, plan rows of each call
// under each profile.
struct RowCase {
  bool sparse;
  std::string profile;
  std::string step, call;
  int32_t q_rows, plan_rows;  // plan_rows: q rows the plan covers
};

void ExpectRow(const RowCase& rc) {
  auto t = ExpandStep(WorkedExample(rc.sparse, rc.profile));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const Call* c = FindCall(*t, rc.step, rc.call);
  ASSERT_NE(c, nullptr) << rc.step << "/" << rc.call;
  EXPECT_EQ(c->q_rows, rc.q_rows) << rc.profile << " " << rc.step << "/" << rc.call;
  EXPECT_EQ(c->plan_rows, rc.plan_rows) << rc.profile << " " << rc.step << "/" << rc.call;
}

TEST(EngineTable, T1_MainPlanCoversPaddedRequests) {
  // R = 8 requests x Q = 4 rows; pads own rows 20..31 with 0 KV.
  auto t = ExpandStep(WorkedExample(false, "atom-2026-08"));
  ASSERT_TRUE(t.ok());
  const Call* c = FindCall(*t, "verify", "main_plan");
  EXPECT_EQ(c->table_row, "T1");
  EXPECT_EQ(t->plans[c->plan].request.kv_indptr.size(), 9u);
  EXPECT_EQ(c->plan_rows, 32);
}

// The one-sentence notes of a plan build and a decode launch (reports print them), with their
// numbers.
TEST(EngineTable, PlanAndDecodeNotesStateTheirNumbers) {
  auto t = ExpandStep(WorkedExample(false, "atom-2026-08"));
  ASSERT_TRUE(t.ok());
  std::vector<std::string> notes;
  for (const Call& c : t->calls)
    if (c.kind == CallKind::kPlanBuild || c.kind == CallKind::kDecode)
      notes.push_back(c.name + ": " + CallNote(*t, c));
  const std::vector<std::string> want = {"main_plan: plans 8 batches (5 real) into main.*",
                                         "dense_decode: q/o 32 rows, plan covers 32 rows",
                                         "dense_decode: q/o 20 rows, plan covers 32 rows",
                                         "dense_decode: q/o 8 rows, plan covers 8 rows",
                                         "dense_decode: q/o 8 rows, plan covers 8 rows"};
  EXPECT_EQ(notes, want);
}

// CallNote says each kind's sentence from the call's numbers, and keeps a note the engine set.
TEST(EngineTable, CallNoteIsSaidFromTheCallsNumbers) {
  Trace t;
  PlanSnapshot snap;
  snap.buffer_prefix = "sparse_mtp.";
  snap.request.kv_indptr = {0, 3, 9, 9};
  snap.real_requests = 2;
  t.plans.push_back(snap);
  Call c;
  c.kind = CallKind::kPlanBuild;
  c.plan = 0;
  EXPECT_EQ(CallNote(t, c), "plans 3 batches (2 real) into sparse_mtp.*");
  c.plan = 1;  // no such plan: nothing to say
  EXPECT_EQ(CallNote(t, c), "");
  c.kind = CallKind::kDecode;
  c.q_rows = c.o_rows = 20;
  c.plan_rows = 32;
  EXPECT_EQ(CallNote(t, c), "q/o 20 rows, plan covers 32 rows");
  c.o_rows = 16;  // o allocated apart from q (a scenario override)
  EXPECT_EQ(CallNote(t, c), "q 20 rows, o 16 rows, plan covers 32 rows");
  c.kind = CallKind::kReduce;
  EXPECT_EQ(CallNote(t, c), "merges the split tiles' partial rows into o");
  c.kind = CallKind::kIndexFill;
  c.fill_tokens = 7;
  EXPECT_EQ(CallNote(t, c), "writes the index regions of 7 tokens");
  c.kind = CallKind::kPlanUpdate;
  EXPECT_EQ(CallNote(t, c), "");
  c.note = "keeps the plan of capture";  // set by the engine: said as set, whatever the kind
  EXPECT_EQ(CallNote(t, c), "keeps the plan of capture");
  c.kind = CallKind::kDecode;
  EXPECT_EQ(CallNote(t, c), "keeps the plan of capture");
}

TEST(EngineTable, T2_SparsePlanTokensPerProfile) {
  for (const char* p : {"atom-2026-08", "atom-2026-11"}) {
    auto t = ExpandStep(WorkedExample(true, p));
    ASSERT_TRUE(t.ok());
    const Call* c = FindCall(*t, "verify", "sparse_mtp_plan");
    EXPECT_EQ(c->table_row, "T2");
    const size_t batches = t->plans[c->plan].request.kv_indptr.size() - 1;
    EXPECT_EQ(batches, std::string(p) == "atom-2026-08" ? 32u : 20u) << p;
  }
}

TEST(EngineTable, T3_IndexerWritesPaddedTokensInTheGraph) {
  auto t = ExpandStep(WorkedExample(true, "atom-2026-08"));
  const Call* c = FindCall(*t, "verify", "indexer_gather");
  EXPECT_EQ(c->table_row, "T3");
  EXPECT_TRUE(c->graph_replay);
  EXPECT_EQ(c->fill_regions.size(), 32u);
}

TEST(EngineTable, T4_DenseDecodeInTheGraphIsSafe) {
  ExpectRow({false, "atom-2026-08", "verify", "dense_decode", 32, 32});
}

TEST(EngineTable, T5_SparseDecodeInTheGraph) {
  // Plan rows <= q rows (T_r) under both profiles; the parallel planner may leave trailing
  // zero-KV pads without a work item, so the 2026-08 plan covers at most 32 rows.
  ExpectRow({true, "atom-2026-08", "verify", "sparse_decode", 32, 32});
  ExpectRow({true, "atom-2026-11", "verify", "sparse_decode", 32, 20});
}

TEST(EngineTable, T4prime_DcpDensePlansRealRequests) {
  Scenario s = WorkedExample(false, "atom-2026-08");
  s.parallel.dcp = 2;
  auto t = ExpandStep(s);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const Call* c = FindCall(*t, "verify", "main_plan");
  EXPECT_EQ(c->table_row, "T4'");
  EXPECT_EQ(t->plans[c->plan].request.kv_indptr.size(), 6u);  // B + 1
  EXPECT_TRUE(t->plans[c->plan].request.is_cp_round_robin);
  EXPECT_EQ(c->plan_rows, 20);  // B * Q < T_r: safe, pads unplanned
}

TEST(EngineTable, D0a_DraftIndexerWritesScheduledTokens) {
  auto t = ExpandStep(WorkedExample(true, "atom-2026-08"));
  const Call* c = FindCall(*t, "draft_step_0", "indexer_gather");
  EXPECT_EQ(c->table_row, "D0a");
  EXPECT_EQ(c->fill_regions.size(), 20u);
}

TEST(EngineTable, D0b_SparseDraftStep0ReusesTheTargetPlan) {
  // The bug: q has 20 rows, the plan 32 (items 20..31 are out of bounds).
  ExpectRow({true, "atom-2026-08", "draft_step_0", "sparse_decode", 20, 32});
  ExpectRow({true, "atom-2026-11", "draft_step_0", "sparse_decode", 20, 20});
}

TEST(EngineTable, D0b_ParallelPlannerDropsTrailingZeroKvPads) {
  // With aiter's default dispatch the per-token plan is built by the parallel planner, which gives
  // no work item to zero-KV batches that start where the cluster's remaining payload is below the
  // fixed overhead; here all 12 pad tokens land there, so this batch happens not to overrun.
  Scenario s = WorkedExample(true, "atom-2026-08");
  s.serial_planner = false;
  auto t = ExpandStep(s);
  const Call* c = FindCall(*t, "draft_step_0", "sparse_decode");
  EXPECT_EQ(c->q_rows, 20);
  EXPECT_EQ(c->plan_rows, 20);
}

TEST(EngineTable, D0bprime_DenseDraftStep0ReusesTheMainPlan) {
  ExpectRow({false, "atom-2026-08", "draft_step_0", "dense_decode", 20, 32});
  ExpectRow({false, "atom-2026-11", "draft_step_0", "dense_decode", 20, 32});
}

TEST(EngineTable, D0bsecond_DcpDenseDraftStep0IsSafe) {
  Scenario s = WorkedExample(false, "atom-2026-08");
  s.parallel.dcp = 2;
  auto t = ExpandStep(s);
  const Call* c = FindCall(*t, "draft_step_0", "dense_decode");
  EXPECT_EQ(c->table_row, "D0b''");
  EXPECT_EQ(c->q_rows, 20);
  EXPECT_EQ(c->plan_rows, 20);
}

TEST(EngineTable, D0c_DcpSparseRebuildInputsSlicedOnlyAfterTheFix) {
  for (const char* p : {"atom-2026-08", "atom-2026-11"}) {
    Scenario s = WorkedExample(true, p);
    s.parallel.dcp = 2;
    auto t = ExpandStep(s);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    const Call* c = FindCall(*t, "draft_step_0", "dcp_sparse_rebuild");
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->table_row, "D0c");
    const auto& req = t->plans[c->plan].request;
    EXPECT_EQ(req.kv_indptr.size(), 21u);  // B_q + 1
    EXPECT_EQ(req.qo_indptr.size(), std::string(p) == "atom-2026-08" ? 33u : 21u) << p;
  }
}

TEST(EngineTable, Ms_a_SparseDraftPlansAreFreshAtDraftRows) {
  ExpectRow({true, "atom-2026-08", "draft_step_1", "sparse_decode", 8, 8});
  ExpectRow({true, "atom-2026-03", "draft_step_1", "sparse_decode", 5, 5});
}

TEST(EngineTable, Ms_b_DenseDraftPatchesTheTargetPlanOverR) {
  // Snapshot era (atom-2026-03): draft rows B = 5 but the updated plan still covers R = 8 rows.
  ExpectRow({false, "atom-2026-03", "draft_step_1", "dense_decode", 5, 8});
  // Newer drafts run at R rows: safe.
  ExpectRow({false, "atom-2026-08", "draft_step_1", "dense_decode", 8, 8});
}

TEST(EngineTable, Ms_c_ThirtyTwoHeadsRebuildOverRealRequests) {
  Scenario s = WorkedExample(false, "atom-2026-08");
  s.parallel.tp = 4;  // 128 / 4 = 32 heads per rank: no incremental update (#484)
  auto t = ExpandStep(s);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const Call* c = FindCall(*t, "draft_step_1", "draft_plan");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->table_row, "Ms(c)");
  EXPECT_EQ(c->plan_rows, 5);  // B
}

}  // namespace
}  // namespace mlasim::sim
