// Dense ragged numerics: with a plan of aiter's non-uniform path (uni_seqlen_qo <= 0) the inputs,
// the monolithic reference and the plan-driven one use each request's real q rows. Exact values
// on a hand-built batch: q = 0 makes every score 0, so row i of a request of Lq rows and Lk keys
// (causal) sees keys 0 .. i + Lk - Lq equally: o = the mean of their V values, lse = log(count).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ref/attention.h"
#include "ref/numerics.h"
#include "ref/planner.h"

namespace mlasim::ref {
namespace {

const std::vector<int32_t> kQLens = {3, 0, 1, 2};     // request 1 has no query this step
const std::vector<int32_t> kKeys = {600, 4, 1, 300};  // 4 clusters: requests 0, 3 split
constexpr int32_t kHeads = 16;

PlanRequest Request() {
  PlanRequest r;
  r.target = Arch::kGfx942;
  r.cu_count = 4;
  r.heads_per_head_k = kHeads;
  r.qlen = r.max_seqlen_qo = 3;
  r.uni_seqlen_qo = -1;
  r.qo_indptr = {0};
  r.kv_indptr = {0};
  for (size_t b = 0; b < kQLens.size(); ++b) {
    r.qo_indptr.push_back(r.qo_indptr.back() + kQLens[b]);
    r.kv_indptr.push_back(r.kv_indptr.back() + kKeys[b]);
    r.kv_last_page_lens.push_back(1);
  }
  return r;
}

// V of key j of request b is 1000 b + j; K and q are 0.
MlaInputs Inputs(const PlanRequest& r) {
  MlaInputs in;
  in.num_heads = kHeads;
  in.head_dim_qk = 2;
  in.head_dim_v = 1;
  in.page_size = 1;
  in.qo_indptr = r.qo_indptr;
  in.kv_indptr = r.kv_indptr;
  in.kv_last_page_lens = r.kv_last_page_lens;
  in.num_pages = r.kv_indptr.back();
  for (int32_t p = 0; p < in.num_pages; ++p) in.kv_indices.push_back(p);
  in.kv_cache.assign(static_cast<size_t>(in.num_pages) * 2, 0.0f);
  for (size_t b = 0; b < kQLens.size(); ++b)
    for (int32_t j = 0; j < kKeys[b]; ++j)
      in.kv_cache[(r.kv_indptr[b] + j) * 2] = static_cast<float>(1000 * b + j);
  in.q.assign(static_cast<size_t>(in.q_rows()) * kHeads * 2, 0.0f);
  return in;
}

struct RowValue {
  double o, lse;
};

// Rows in the caller's layout: request 0's three, none for request 1, request 2's one, 3's two.
std::vector<RowValue> ExpectedRows() {
  std::vector<RowValue> rows;
  for (size_t b = 0; b < kQLens.size(); ++b)
    for (int32_t i = 0; i < kQLens[b]; ++i) {
      const int32_t seen = i + kKeys[b] - kQLens[b] + 1;
      rows.push_back({1000.0 * b + (seen - 1) / 2.0, std::log(static_cast<double>(seen))});
    }
  return rows;
}

void ExpectRows(const AttentionOutput& out, const char* what) {
  const std::vector<RowValue> want = ExpectedRows();
  ASSERT_EQ(want.size(), 6u);
  ASSERT_EQ(out.q_rows, 6) << what;  // 3 + 0 + 1 + 2: the empty request has no row
  for (int32_t row = 0; row < out.q_rows; ++row)
    for (int32_t h = 0; h < kHeads; ++h) {
      const size_t at = static_cast<size_t>(row) * kHeads + h;
      EXPECT_NEAR(out.o[at], want[row].o, 1e-9 * (1 + want[row].o)) << what << " row " << row;
      EXPECT_NEAR(out.lse[at], want[row].lse, 1e-12) << what << " row " << row;
    }
}

AttentionPrecision Fp64() {
  AttentionPrecision p;
  p.accumulate = Accumulate::kFp64;
  return p;
}

TEST(RaggedNumerics, MonolithicAndPlanDrivenUseEachRequestsRealRows) {
  const PlanRequest r = Request();
  auto plan = PlanMlaMetadata(r);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const MlaInputs in = Inputs(r);
  auto mono = RunMonolithic(in, Fp64());
  ASSERT_TRUE(mono.ok()) << mono.status().ToString();
  ExpectRows(*mono, "monolithic");
  PlanExecOptions exec;
  exec.precision = Fp64();
  auto driven = RunPlanDriven(in, r, *plan, exec);
  ASSERT_TRUE(driven.ok()) << driven.status().ToString();
  EXPECT_EQ(driven->tiles_reduced, 2);  // requests 0 and 3 are split across clusters
  EXPECT_TRUE(driven->poison.empty());
  ExpectRows(driven->out, "plan-driven");
}

// The mutant that takes every request's q length as max_seqlen_qo (the uniform view) shifts the
// causal diagonal of the shorter requests: request 2's row sees no key, request 3's one fewer.
TEST(RaggedNumerics, IgnoringQLensFailsTheExactValues) {
  const PlanRequest r = Request();
  auto plan = PlanMlaMetadata(r);
  ASSERT_TRUE(plan.ok());
  PlanExecOptions exec;
  exec.precision = Fp64();
  exec.mutant = NumericsMutant::kIgnoreQLens;
  auto driven = RunPlanDriven(Inputs(r), r, *plan, exec);
  ASSERT_TRUE(driven.ok());
  const std::vector<RowValue> want = ExpectedRows();
  EXPECT_EQ(driven->out.o[3 * kHeads], 0.0);  // request 2: no visible key, o = 0
  EXPECT_NE(driven->out.o[3 * kHeads], want[3].o);
  EXPECT_NEAR(driven->out.o[4 * kHeads], 3000.0 + 297 / 2.0, 1e-9 * 4000);  // 298 keys, not 299
  EXPECT_NE(driven->out.o[4 * kHeads], want[4].o);
  EXPECT_NEAR(driven->out.o[0], want[0].o, 1e-9 * 1000);  // request 0 holds the maximum
}

// The generated-input path (RunPlanNumerics: random q and cache, fp32) agrees with itself on the
// ragged batch and reports the ragged row count; the mutant makes it disagree.
TEST(RaggedNumerics, RunPlanNumericsComparesTheRaggedRows) {
  const PlanRequest r = Request();
  auto plan = PlanMlaMetadata(r);
  ASSERT_TRUE(plan.ok());
  NumericsOptions o;
  o.head_dim_qk = 80;
  o.head_dim_v = 64;
  auto rep = RunPlanNumerics(r, *plan, o);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_EQ(rep->q_rows, 6);
  EXPECT_EQ(rep->rows_compared, 6);
  EXPECT_TRUE(rep->ok);
  o.mutant = NumericsMutant::kIgnoreQLens;
  auto bad = RunPlanNumerics(r, *plan, o);
  ASSERT_TRUE(bad.ok());
  EXPECT_FALSE(bad->ok);
}

TEST(RaggedNumerics, RowSeesAKeyFollowsTheRequestsOwnRows) {
  PlanRequest r = Request();
  r.kv_indptr = {0, 600, 604, 604, 605};  // request 2 now has no key; request 3 one key
  r.qo_indptr = {0, 3, 3, 4, 6};
  // Rows 0-2: request 0 (600 keys); row 3: request 2 (no key); rows 4, 5: request 3 (Lq 2,
  // Lk 1: row 0 sees key j <= 0 + 1 - 2 < 0, none; row 1 sees key 0).
  const bool want[] = {true, true, true, false, false, true};
  for (int64_t row = 0; row < 6; ++row) EXPECT_EQ(RowSeesAKey(r, row), want[row]) << row;
}

TEST(RaggedNumerics, InputsNeedQoIndptrFromZero) {
  PlanRequest r = Request();
  for (int32_t& x : r.qo_indptr) x += 2;
  auto in = BuildMlaInputs(r, NumericsOptions{});
  ASSERT_FALSE(in.ok());
  EXPECT_EQ(in.status().ToString(), "qo_indptr: numerics need qo_indptr to start at 0");
}

}  // namespace
}  // namespace mlasim::ref
