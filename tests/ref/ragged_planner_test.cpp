// aiter's non-uniform planner path (uni_seqlen_qo <= 0, ref/planner_ragged.cpp): exact plans of
// small ragged batches (q length 0 and q length = max_seqlen_qo among them) on the serial walk,
// the parallel planner and a paged batch; the same buffers as aiter's own code gives (the
// batches are also among tests/bench/aiter's comparisons); what the path refuses; the checker
// on ragged plans and the mutant it kills.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ref/plan_check.h"
#include "ref/planner.h"

namespace mlasim::ref {
namespace {

// gfx942, 16 heads bf16 (native, no folding), page 1 unless stated: q lengths `q`, KV tokens `kv`.
PlanRequest Ragged(const std::vector<int32_t>& q, const std::vector<int32_t>& kv, int32_t max_q,
                   int32_t cu, int32_t page = 1) {
  PlanRequest r;
  r.target = Arch::kGfx942;
  r.cu_count = cu;
  r.heads_per_head_k = 16;
  r.qlen = r.max_seqlen_qo = max_q;
  r.uni_seqlen_qo = -1;
  r.page_size = page;
  r.kv_granularity = page == 1 ? 16 : 1;
  r.qo_indptr = {0};
  r.kv_indptr = {0};
  for (size_t b = 0; b < q.size(); ++b) {
    const int32_t pages = (kv[b] + page - 1) / page;
    r.qo_indptr.push_back(r.qo_indptr.back() + q[b]);
    r.kv_indptr.push_back(r.kv_indptr.back() + pages);
    r.kv_last_page_lens.push_back(kv[b] == 0 ? page : kv[b] - (pages - 1) * page);
  }
  return r;
}

std::vector<int32_t> Prefix(const Int32Buffer& b, int64_t n) {
  return std::vector<int32_t>(b.data.begin(), b.data.begin() + n);
}

constexpr int32_t kP = Plan::kPoison;  // an element no planner stored

struct Expected {
  std::vector<int32_t> work_indptr;
  std::vector<std::vector<int32_t>> works;  // batch, partial, q0, q1, k0, k1, kv_offset, pad
  std::vector<int32_t> reduce_indptr;       // [0, tiles]
  std::vector<int32_t> final_map;           // rows of split tiles, flattened
  std::vector<int32_t> partial_map;
};

void ExpectPlan(const PlanRequest& r, PlannerChoice choice, const Expected& e) {
  for (CellTracking tracking : {CellTracking::kChecked, CellTracking::kFast}) {
    PlannerOptions o;
    o.choice = choice;
    o.tracking = tracking;
    auto plan = PlanMlaMetadata(r, o);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    const int64_t clusters = static_cast<int64_t>(e.work_indptr.size());
    EXPECT_EQ(Prefix(plan->work_indptr, clusters), e.work_indptr);
    std::vector<std::vector<int32_t>> works;
    for (int32_t w = 0; w < plan->derived.num_works; ++w)
      works.emplace_back(plan->work_info.data.begin() + w * 8,
                         plan->work_info.data.begin() + w * 8 + 8);
    EXPECT_EQ(works, e.works);
    EXPECT_EQ(Prefix(plan->reduce_indptr, static_cast<int64_t>(e.reduce_indptr.size())),
              e.reduce_indptr);
    EXPECT_EQ(Prefix(plan->reduce_final_map, static_cast<int64_t>(e.final_map.size())),
              e.final_map);
    EXPECT_EQ(Prefix(plan->reduce_partial_map, static_cast<int64_t>(e.partial_map.size())),
              e.partial_map);
    if (tracking == CellTracking::kChecked) {
      EXPECT_TRUE(plan->input_violations.empty());
      EXPECT_TRUE(CheckPlan(r, *plan).ok()) << CheckPlan(r, *plan).ToString();
    }
  }
}

// Serial walk: q lengths 4 (= max), 0, 2, 1, 3 over 1200, 17, 0, 90 and 40 KV tokens, 3 clusters.
TEST(RaggedPlanner, SerialWalkPlacesEachRequestsRowsFromQoIndptr) {
  const PlanRequest r = Ragged({4, 0, 2, 1, 3}, {1200, 17, 0, 90, 40}, 4, 3);
  auto plan = PlanMlaMetadata(r);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_FALSE(plan->derived.parallel_planner_used);
  ExpectPlan(
      r, PlannerChoice::kAiterDispatch,
      Expected{
          {0, 1, 4, 6},
          {{0, 0, 0, 4, 0, 896, 304, 0},  // request 0 (q length 4 = max) split over clusters 0, 1
           {0, 4, 0, 4, 896, 1200, 0, 0},
           {1, -1, 4, 4, 1200, 1217, 0, 0},  // q length 0: an empty q range over its 17 keys
           {2, -1, 4, 6, 1217, 1217, 0, 0},  // no KV
           {3, -1, 6, 7, 1217, 1307, 0, 0},
           {4, -1, 7, 10, 1307, 1347, 0, 0}},
          {0, 2, 2, 2, 2, 2},
          {0, 4},
          {0, 4}});
}

// Parallel planner (max_seqlen_qo 1, page 1): q lengths 1, 0, 1, 1.
TEST(RaggedPlanner, ParallelPlannerTakesRowsFromQoIndptr) {
  const PlanRequest r = Ragged({1, 0, 1, 1}, {70, 0, 33, 900}, 1, 2);
  auto plan = PlanMlaMetadata(r);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(plan->derived.parallel_planner_used);
  ExpectPlan(r, PlannerChoice::kAiterDispatch,
             Expected{{0, 4, 5},
                      {{0, -1, 0, 1, 0, 70, 0, 0},
                       {1, -1, 1, 1, 70, 70, 0, 0},  // q length 0, no KV
                       {2, -1, 1, 2, 70, 103, 0, 0},
                       {3, 0, 2, 3, 103, 247, 756, 0},  // request 3 split: partial rows 0 and 1
                       {3, 1, 2, 3, 247, 1003, 0, 0}},
                      {0, 0, 0, 0, 2},
                      {kP, kP, kP, kP, kP, kP, 2, 3},  // the split request's own row (3)
                      {0, 1}});
}

// Page size 16 (kv_offset from the last page's length): q lengths 2 (= max), 0, 2.
TEST(RaggedPlanner, PagedBatchReadsEachRequestsLastPage) {
  const PlanRequest r = Ragged({2, 0, 2}, {300, 30, 7}, 2, 2, 16);
  ExpectPlan(r, PlannerChoice::kAiterDispatch,
             Expected{{0, 1, 4},
                      {{0, 0, 0, 2, 0, 13, 92, 0},  // kv_offset (19 - 13 - 1) x 16 + 12
                       {0, 2, 0, 2, 13, 19, 0, 0},
                       {1, -1, 2, 2, 19, 21, 0, 0},  // q length 0
                       {2, -1, 2, 4, 21, 22, 0, 0}},
                      {0, 2, 2, 2},
                      {0, 2},
                      {0, 2}});
}

TEST(RaggedPlanner, UniSeqlenZeroTakesTheSamePath) {
  PlanRequest minus_one = Ragged({4, 0, 2, 1, 3}, {1200, 17, 0, 90, 40}, 4, 3);
  PlanRequest zero = minus_one;
  zero.uni_seqlen_qo = 0;
  auto a = PlanMlaMetadata(minus_one);
  auto b = PlanMlaMetadata(zero);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->work_info.data, b->work_info.data);
  EXPECT_EQ(a->reduce_partial_map.data, b->reduce_partial_map.data);
}

TEST(RaggedPlanner, RefusesWhatItDoesNotModelNamingTheField) {
  struct Bad {
    PlanRequest r;
    const char* field;
    const char* message;
  };
  PlanRequest sparse = Ragged({1, 0, 1}, {70, 0, 33}, 1, 2);
  sparse.topk = 64;
  PlanRequest short_qo = Ragged({1, 0, 1}, {70, 0, 33}, 1, 2);
  short_qo.qo_indptr.pop_back();
  PlanRequest folded = Ragged({1, 0, 1}, {70, 0, 33}, 1, 2);
  folded.heads_per_head_k = 32;                              // gfx942 bf16 32 heads: folded to 16
  PlanRequest split = Ragged({3, 0, 9}, {70, 0, 33}, 9, 2);  // 9 x 16 heads > 128
  const Bad bad[] = {
      {sparse, "uni_seqlen_qo",
       "non-uniform q lengths (uni_seqlen_qo <= 0) are modelled for dense plans only (topk = -1)"},
      {short_qo, "qo_indptr",
       "non-uniform q lengths (uni_seqlen_qo <= 0) need one entry per kv_indptr entry (4), got 3"},
      {folded, "uni_seqlen_qo",
       "non-uniform q lengths with folded heads (32 heads planned as 16) are not modelled: aiter "
       "reads qo_indptr at the virtual batch index"},
      {split, "max_seqlen_qo",
       "non-uniform q lengths with q tiles split (max_seqlen_qo x heads per KV head = 144 > 128) "
       "are not modelled: aiter's payload reads each request's q length from LDS before storing "
       "it (mla_v12_compute_sum_blocks), an uninitialised read"},
  };
  for (const Bad& b : bad) {
    auto plan = PlanMlaMetadata(b.r);
    ASSERT_FALSE(plan.ok()) << b.field;
    EXPECT_EQ(plan.status().field(), b.field);
    EXPECT_EQ(plan.status().message(), b.message);
  }
}

// The LDS bound: gfx942's 64 KiB hold two ints for 8192 requests; one more is refused.
TEST(RaggedPlanner, LdsBoundAtEightThousandRequests) {
  for (int32_t batch : {8192, 8193}) {
    const PlanRequest r =
        Ragged(std::vector<int32_t>(batch, 1), std::vector<int32_t>(batch, 1), 1, 304);
    auto plan = PlanMlaMetadata(r, {PlannerChoice::kSerial});
    EXPECT_EQ(plan.ok(), batch == 8192) << batch;
    if (!plan.ok()) {
      EXPECT_EQ(plan.status().ToString(),
                "kv_indptr: non-uniform q lengths over more than 8192 requests are not modelled "
                "(aiter's planner keeps two LDS ints per request)");
    }
  }
}

// The checker holds ragged plans to each request's own rows: the mutant that places request b's
// rows at b x max_seqlen_qo (the uniform path's rows) fails it.
TEST(RaggedPlanner, CheckerKillsTheRowsByMaxMutant) {
  const PlanRequest r = Ragged({4, 0, 2, 1, 3}, {1200, 17, 0, 90, 40}, 4, 3);
  auto good = PlanMlaMetadata(r);
  ASSERT_TRUE(good.ok());
  EXPECT_TRUE(CheckPlan(r, *good).ok());
  auto bad = PlanMlaMetadata(r, {PlannerChoice::kAiterDispatch, PlannerMutant::kRaggedRowsByMax});
  ASSERT_TRUE(bad.ok());
  const PlanCheckReport report = CheckPlan(r, *bad);
  EXPECT_FALSE(report.ok());
  EXPECT_NE(report.ToString().find("work_outside_request"), std::string::npos) << report.ToString();
}

// The checker finds a work's tile by its first q row in a list sorted once per plan; a
// qo_indptr that decreases gives tiles out of q order (sorted then), the usual one tiles in
// order (taken as they come). Planned for q lengths {2, 3, 1} (works [0,2) [2,5) [5,6)),
// checked against qo_indptr {2, 5, 0, 2} (tiles [2,5) [5,0) [0,2)): works 0 and 1 find tiles 2
// and 0; only work 2's rows are no tile.
TEST(RaggedPlanner, CheckerFindsTheTilesOfADecreasingQoIndptr) {
  const PlanRequest r = Ragged({2, 3, 1}, {100, 100, 100}, 3, 1);
  auto plan = PlanMlaMetadata(r);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->derived.num_works, 3);
  EXPECT_TRUE(CheckPlan(r, *plan).ok()) << CheckPlan(r, *plan).ToString();
  PlanRequest unsorted = r;
  unsorted.qo_indptr = {2, 5, 0, 2};
  const PlanCheckReport report = CheckPlan(unsorted, *plan);
  std::vector<int32_t> outside;
  for (const PlanDiagnostic& d : report.diagnostics)
    if (d.code == PlanDiag::kWorkOutsideRequest) outside.push_back(d.work);
  EXPECT_EQ(outside, std::vector<int32_t>{2}) << report.ToString();
}

}  // namespace
}  // namespace mlasim::ref
