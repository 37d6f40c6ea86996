// Golden plans: the worked examples of aiter-mla-metadata.md §6, and cases derived by hand from
// the algorithm of §4.5 (each expectation's derivation is written next to it).
#include "ref/planner.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "ref/decode_update.h"
#include "ref/plan_check.h"
#include "tests/ref/plan_builders.h"

namespace mlasim::ref {
namespace {

using test::DenseRequest;
using test::Prefix;
using test::Rows;
using test::WorkRows;

// A captured plan may hold any int32: a partial row at INT32_MAX ends past int32, and the checker
// says so (it computed the end in int32 before, which overflowed and hid the row; issue 19's
// case_check fuzz harness found it).
TEST(PlanChecker, PartialRowsNearInt32MaxAreCheckedInInt64) {
  const PlanRequest r = DenseRequest(Arch::kGfx942, 16, 1, {300, 40, 700}, 8);
  auto plan = PlanMlaMetadata(r, {PlannerChoice::kSerial});
  ASSERT_TRUE(plan.ok());
  plan->work_info.data[0 * kWorkInfoWidth + kPartialQoLoc] = INT32_MAX;  // work 0: q rows [0, 1)
  const PlanCheckReport rep = CheckPlan(r, *plan);
  bool found = false;
  for (const PlanDiagnostic& d : rep.diagnostics) {
    if (d.code != PlanDiag::kPartialRowsExceedLogits) continue;
    found = true;
    EXPECT_EQ(d.index, int64_t{INT32_MAX});
    EXPECT_EQ(d.message.rfind("work 0 writes partial rows [2147483647,2147483648) but", 0), 0u)
        << d.message;
  }
  EXPECT_TRUE(found);
}

// reduce_indptr is checked entry by entry only when a quick scan of the whole buffer finds
// something (ref/plan_check.cpp, CheckReduceIndptr): each kind of bad entry still gets its
// finding, in the order of the entries, and a good buffer none.
TEST(PlanChecker, ReduceIndptrFindingsSurviveTheQuickScan) {
  const PlanRequest r = DenseRequest(Arch::kGfx942, 16, 1, {300, 40, 700}, 8);
  const auto findings = [&](const std::function<void(Plan&)>& edit) {
    auto plan = PlanMlaMetadata(r, {PlannerChoice::kSerial});
    EXPECT_TRUE(plan.ok());
    if (!plan.ok()) return std::string("no plan");
    EXPECT_EQ(Prefix(plan->reduce_indptr, 4), (std::vector<int32_t>{0, 2, 2, 5}));
    edit(*plan);
    std::string out;
    for (const PlanDiagnostic& d : CheckPlan(r, *plan).diagnostics)
      if (d.code == PlanDiag::kReduceIndptrInvalid)
        out += std::to_string(d.index) + " " + d.message + "\n";
    return out;
  };
  EXPECT_EQ(findings([](Plan&) {}), "");
  // A step of 1, twice: groups 0 and 1 of a single piece (the values alone show it).
  EXPECT_EQ(findings([](Plan& p) { p.reduce_indptr.data[1] = 1; }),
            "1 reduce group 0 has a single piece (groups are empty or >= 2)\n"
            "2 reduce group 1 has a single piece (groups are empty or >= 2)\n");
  // An entry no planner wrote that holds a value that would pass (the cells alone show it).
  EXPECT_EQ(findings([](Plan& p) { p.reduce_indptr.cells[2] = Cell::kUnwritten; }),
            "2 reduce_indptr[2] was never written (the reducer reads the whole buffer)\n");
  EXPECT_EQ(findings([](Plan& p) { p.reduce_indptr.data[2] = 1; }),
            "2 reduce_indptr decreases at 2\n");
  EXPECT_EQ(findings([](Plan& p) { p.reduce_indptr.data[0] = 3; }),
            "0 reduce_indptr[0] is not 0\n1 reduce_indptr decreases at 1\n");
}

// The partial-row findings (overlaps, rows past logits) after the checker's quick scan
// (PartialRowsQuiet): a plan that reports nothing skips the sorted list, any other plan gets the
// findings of the list as before, in its order. Rows out of work order with no overlap between
// neighbours in work order (a row that ends before it begins) still overlap in sorted order.
TEST(PlanChecker, PartialRowFindingsSurviveTheQuickScan) {
  const PlanRequest r = DenseRequest(Arch::kGfx942, 16, 1, {300, 40, 700}, 8);
  const auto field = [](Plan& p, int32_t w, int32_t f) -> int32_t& {
    return p.work_info.data[int64_t{w} * kWorkInfoWidth + f];
  };
  const auto findings = [&](const std::function<void(Plan&)>& edit) {
    auto plan = PlanMlaMetadata(r, {PlannerChoice::kSerial});
    EXPECT_TRUE(plan.ok());
    if (!plan.ok()) return std::string("no plan");
    std::vector<int32_t> locs;  // the split works' partial_qo_loc, in work order
    for (int32_t w = 0; w < plan->num_works(); ++w) locs.push_back(plan->work(w, kPartialQoLoc));
    EXPECT_EQ(locs, (std::vector<int32_t>{0, 1, -1, 2, 3, 4}));
    edit(*plan);
    std::string out;
    for (const PlanDiagnostic& d : CheckPlan(r, *plan).diagnostics)
      if (d.code == PlanDiag::kPartialRowsOverlap || d.code == PlanDiag::kPartialRowsExceedLogits)
        out += std::to_string(d.index) + " " + d.message + "\n";
    return out;
  };
  EXPECT_EQ(findings([](Plan&) {}), "");
  EXPECT_EQ(findings([&](Plan& p) { field(p, 1, kPartialQoLoc) = 0; }),
            "1 works 0 and 1 share partial rows [0,1)\n");
  // Work 3 ends before it begins ([5, 2)), work 4 holds [3, 9), work 5 [9, 10): neighbours in
  // work order do not overlap, but sorted, [3, 9) and [5, 2) do.
  EXPECT_EQ(findings([&](Plan& p) {
              field(p, 3, kPartialQoLoc) = 5;
              field(p, 3, kQoEnd) = field(p, 3, kQoStart) - 3;
              field(p, 4, kPartialQoLoc) = 3;
              field(p, 4, kQoEnd) = field(p, 4, kQoStart) + 6;
              field(p, 5, kPartialQoLoc) = 9;
            }),
            "3 works 4 and 3 share partial rows [5,2)\n");
  EXPECT_EQ(findings([&](Plan& p) { field(p, 5, kPartialQoLoc) = 1000000; }),
            "1000000 work 5 writes partial rows [1000000,1000001) but the partial buffers hold 10 "
            "rows\n");
  // An unwritten partial_qo_loc is not a partial row, whatever it holds.
  EXPECT_EQ(findings([&](Plan& p) {
              field(p, 1, kPartialQoLoc) = 0;
              p.work_info.cells[int64_t{1} * kWorkInfoWidth + kPartialQoLoc] = Cell::kUnwritten;
            }),
            "");
}

// A work row below work_indptr[num_clusters] is unwritten when any field a kernel reads is (the
// checker reads a row's eight cells as one word): each of the seven alone is found, the pad is
// not read.
TEST(PlanChecker, AWorkRowWithAnyReadFieldUnwrittenIsFound) {
  const PlanRequest r = DenseRequest(Arch::kGfx942, 16, 1, {300, 40, 700}, 8);
  for (int32_t field = 0; field < kWorkInfoWidth; ++field) {
    auto plan = PlanMlaMetadata(r, {PlannerChoice::kSerial});
    ASSERT_TRUE(plan.ok());
    plan->work_info.cells[3 * kWorkInfoWidth + field] = Cell::kUnwritten;  // work 3
    std::vector<int64_t> rows;
    for (const PlanDiagnostic& d : CheckPlan(r, *plan).diagnostics)
      if (d.code == PlanDiag::kWorkRowUnwritten) rows.push_back(d.index);
    EXPECT_EQ(rows, field == kPad ? std::vector<int64_t>{} : std::vector<int64_t>{3})
        << "field " << field;
  }
}

// aiter-mla-metadata.md §6.1's work rows (kv [300, 40, 700], qlen 1, 16 heads, 8 clusters, page
// 1, granularity 16): works 0-1 tile 0 (KV [0,240), [240,300)), work 2 tile 1, works 3-5 tile 2.
const Rows kDecode61WorkRows = {{0, 0, 0, 1, 0, 240, 60, 0},    {0, 1, 0, 1, 240, 300, 0, 0},
                                {1, -1, 1, 2, 300, 340, 0, 0},  {2, 2, 2, 3, 340, 580, 460, 0},
                                {2, 3, 2, 3, 580, 820, 220, 0}, {2, 4, 2, 3, 820, 1040, 0, 0}};

// The checker takes a tile's pieces in work order, wherever they sit: a plan that serves its tiles
// in another order than the planner's (tile 2's three pieces first, then tile 0's two, then tile
// 1's one) is as valid, and a finding names the work row where it now is. (CheckPlan reads the
// work rows 0, 1, 2, ... as the pieces when the tiles never decrease in work order, and builds
// the per-tile lists otherwise: this plan takes the second path.)
TEST(PlanChecker, TilesServedOutOfPlanningOrderAreCheckedByTheirOwnPieces) {
  const PlanRequest r = DenseRequest(Arch::kGfx942, 16, 1, {300, 40, 700}, 8);
  auto plan = PlanMlaMetadata(r, {PlannerChoice::kSerial});
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(WorkRows(*plan), kDecode61WorkRows);  // as planned (§6.1)
  EXPECT_TRUE(CheckPlan(r, *plan).diagnostics.empty()) << CheckPlan(r, *plan).ToString();
  Plan moved = *plan;
  const int32_t from[] = {3, 4, 5, 0, 1, 2};  // new row w holds planned row from[w]
  for (int32_t w = 0; w < 6; ++w)
    for (int32_t f = 0; f < kWorkInfoWidth; ++f) {
      moved.work_info.data[w * kWorkInfoWidth + f] =
          plan->work_info.data[from[w] * kWorkInfoWidth + f];
      moved.work_info.cells[w * kWorkInfoWidth + f] =
          plan->work_info.cells[from[w] * kWorkInfoWidth + f];
    }
  EXPECT_TRUE(CheckPlan(r, moved).diagnostics.empty()) << CheckPlan(r, moved).ToString();
  moved.work_info.data[1 * kWorkInfoWidth + kKvOffset] = 221;  // tile 2's second piece: 220
  const PlanCheckReport rep = CheckPlan(r, moved);
  ASSERT_EQ(rep.diagnostics.size(), 1u) << rep.ToString();
  const PlanDiagnostic& d = rep.diagnostics[0];
  EXPECT_EQ(d.code, PlanDiag::kKvOffsetMismatch);
  EXPECT_EQ(d.index, 1 * kWorkInfoWidth + kKvOffset);
  EXPECT_EQ(d.tile, 2);
  EXPECT_EQ(d.work, 1);
  EXPECT_EQ(d.message, "tile 2 (batch 2, q [2,3)): work 1 has kv_offset 221, expected 220");
}

// decode_update never moves a zero-length last piece (§9.3): a request planned with no KV keeps
// its one empty piece when it grows, and the checker names that piece (only an updated plan is
// looked at for this; the plan as planned has none).
TEST(PlanChecker, AGrownRequestsEmptyPieceAfterAnUpdateIsFound) {
  const PlanRequest r = DenseRequest(Arch::kGfx942, 16, 1, {0, 300}, 8);
  auto plan = PlanMlaMetadata(r, {PlannerChoice::kSerial});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const auto empty_pieces = [](const PlanRequest& served, const Plan& p) {
    std::vector<std::string> out;
    for (const PlanDiagnostic& d : CheckPlan(served, p).diagnostics)
      if (d.code == PlanDiag::kUpdateLeftEmptyPiece)
        out.push_back(std::to_string(d.index) + " tile " + std::to_string(d.tile) + " work " +
                      std::to_string(d.work));
    return out;
  };
  EXPECT_EQ(empty_pieces(r, *plan), std::vector<std::string>{});
  DecodeUpdateRequest u;
  u.target = r.target;
  u.heads_per_head_k = r.heads_per_head_k;
  u.qo_indptr = r.qo_indptr;
  u.kv_indptr = {0, 5, 306};  // request 0: 0 -> 5 tokens, request 1: 300 -> 301
  ASSERT_TRUE(DecodeUpdateMlaMetadataV1(u, *plan).ok());
  EXPECT_EQ(empty_pieces(DenseRequest(Arch::kGfx942, 16, 1, {5, 301}, 8), *plan),
            std::vector<std::string>{"0 tile 0 work 0"});
}

TEST(PlannerWorkedExample, Decode_6_1) {
  // §6.1: kv [300, 40, 700], qlen 1, 16 heads, 8 clusters, page 1, gran 16.
  const PlanRequest r = DenseRequest(Arch::kGfx942, 16, 1, {300, 40, 700}, 8);
  for (PlannerChoice choice : {PlannerChoice::kSerial, PlannerChoice::kParallel}) {
    auto plan = PlanMlaMetadata(r, {choice});
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    EXPECT_EQ(plan->derived.payload, 31);
    EXPECT_EQ(Prefix(plan->work_indptr, 9), (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 6, 6}));
    EXPECT_EQ(WorkRows(*plan), kDecode61WorkRows);
    EXPECT_EQ(Prefix(plan->reduce_indptr, 4), (std::vector<int32_t>{0, 2, 2, 5}));
    EXPECT_EQ(test::FinalMap(*plan), (Rows{{0, 0, 1}, {2, 2, 3}}));
    EXPECT_EQ(test::WrittenPrefix(plan->reduce_partial_map), (std::vector<int32_t>{0, 1, 2, 3, 4}));
    EXPECT_TRUE(CheckPlan(r, *plan).ok());
  }
  // aiter's default dispatch picks the parallel planner for this shape (§4.6).
  EXPECT_TRUE(PlanMlaMetadata(r)->derived.parallel_planner_used);
}

TEST(PlannerWorkedExample, Mtp_6_2) {
  // §6.2: same KV, qlen 2: identical KV cut, q ranges by 2, partial rows step by 2.
  const PlanRequest r = DenseRequest(Arch::kGfx942, 16, 2, {300, 40, 700}, 8);
  auto plan = PlanMlaMetadata(r);
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->derived.parallel_planner_used);
  EXPECT_EQ(WorkRows(*plan), (Rows{{0, 0, 0, 2, 0, 240, 60, 0},
                                   {0, 2, 0, 2, 240, 300, 0, 0},
                                   {1, -1, 2, 4, 300, 340, 0, 0},
                                   {2, 4, 4, 6, 340, 580, 460, 0},
                                   {2, 6, 4, 6, 580, 820, 220, 0},
                                   {2, 8, 4, 6, 820, 1040, 0, 0}}));
  EXPECT_EQ(test::WrittenPrefix(plan->reduce_partial_map), (std::vector<int32_t>{0, 2, 4, 6, 8}));
  EXPECT_TRUE(CheckPlan(r, *plan).ok());
}

TEST(PlannerWorkedExample, Native128PerTokenTiles_6_3) {
  // §6.3: native 128 heads (gfx942 fp8), qlen 2 -> one tile per token; causal trim bt=1 for
  // token 0; kv [700, 50], 4 clusters.
  PlanRequest r = DenseRequest(Arch::kGfx942, 128, 2, {700, 50}, 4);
  r.q_dtype = r.kv_dtype = DType::kFp8;
  auto plan = PlanMlaMetadata(r);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->derived.fold_ratio, 1);
  EXPECT_TRUE(plan->derived.qo_split);
  EXPECT_EQ(WorkRows(*plan), (Rows{{0, 0, 0, 1, 0, 640, 60, 0},
                                   {0, 1, 0, 1, 640, 699, 1, 0},
                                   {0, 2, 1, 2, 0, 320, 380, 0},
                                   {0, 3, 1, 2, 320, 700, 0, 0},
                                   {1, -1, 2, 3, 700, 749, 1, 0},
                                   {1, -1, 3, 4, 700, 750, 0, 0}}));
  EXPECT_EQ(Prefix(plan->reduce_indptr, 5), (std::vector<int32_t>{0, 2, 4, 4, 4}));
  EXPECT_TRUE(CheckPlan(r, *plan).ok());
}

TEST(PlannerHandDerived, FoldedHeads) {
  // gfx942 bf16 32 heads is not native -> R = 2 virtual batches of 16 heads sharing the KV.
  // blocks ceil(40/16) = 3; sum = 2 * (3 + 16) = 38; payload = ceil(38/4) + 16 = 26.
  // Cluster 0 takes v0 whole (cost 19, 7 left: too little for v1), cluster 1 takes v1.
  const PlanRequest r = DenseRequest(Arch::kGfx942, 32, 1, {40}, 4);
  auto plan = PlanMlaMetadata(r);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->derived.fold_ratio, 2);
  EXPECT_EQ(plan->derived.payload, 26);
  EXPECT_FALSE(plan->derived.parallel_planner_used);  // folding rules the parallel planner out
  EXPECT_EQ(Prefix(plan->work_indptr, 5), (std::vector<int32_t>{0, 1, 2, 2, 2}));
  EXPECT_EQ(WorkRows(*plan), (Rows{{0, -1, 0, 1, 0, 40, 0, 0}, {1, -1, 1, 2, 0, 40, 0, 0}}));
  // Sizing: 32 heads, qlen 1 -> ceil(32/16) = 2 tiles per batch: tile_cnt 2, max_work 8.
  EXPECT_EQ(plan->sizes.reduce_indptr, 3);
  EXPECT_EQ(plan->sizes.work_info_rows, 8);
  EXPECT_EQ(plan->sizes.reduce_partial_map, 8);
  EXPECT_EQ(Prefix(plan->reduce_indptr, 3), (std::vector<int32_t>{0, 0, 0}));
}

TEST(PlannerHandDerived, PageSize16) {
  // page 16, gran 1 page, overhead max(1, 16/16) = 1 block. 600 tokens = 38 pages (last 8),
  // 40 tokens = 3 pages (last 8). sum = 39 + 4 = 43, 4 clusters -> payload 11 + 1 = 12.
  // Request 0 is cut 11 pages per cluster; kv_offset counts tokens: (38-11-1)*16 + 8 = 424.
  PlanRequest r = DenseRequest(Arch::kGfx942, 16, 1, {600, 40}, 4, /*page=*/16, /*gran=*/1);
  auto plan = PlanMlaMetadata(r);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->derived.payload, 12);
  EXPECT_EQ(Prefix(plan->work_indptr, 5), (std::vector<int32_t>{0, 1, 2, 3, 5}));
  EXPECT_EQ(WorkRows(*plan), (Rows{{0, 0, 0, 1, 0, 11, 424, 0},
                                   {0, 1, 0, 1, 11, 22, 248, 0},
                                   {0, 2, 0, 1, 22, 33, 72, 0},
                                   {0, 3, 0, 1, 33, 38, 0, 0},
                                   {1, -1, 1, 2, 38, 41, 0, 0}}));
  EXPECT_EQ(Prefix(plan->reduce_indptr, 3), (std::vector<int32_t>{0, 4, 4}));
  EXPECT_EQ(test::WrittenPrefix(plan->reduce_partial_map), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(test::FinalMap(*plan), (Rows{{0, 0, 1}}));
  EXPECT_TRUE(CheckPlan(r, *plan).ok());
}

TEST(PlannerHandDerived, SparseTopK) {
  // aiter-native sparse (§8.1): topk 64, 2 requests of 2 tokens, contexts 100 and 10.
  // Virtual batches = tokens; KV per token = min(ctx, 64) -> 64, 64, 10, 10 at rows t*64.
  // blocks 4,4,1,1; sum = 20+20+17+17 = 74 -> payload 37 + 16 = 53 on 2 clusters.
  // kv_offset += L-1-s (HEAD, #2727): token 0 of each request gets +1.
  PlanRequest r = test::SparseRequest(Arch::kGfx942, 16, 2, {100, 10}, 64, 2);
  auto plan = PlanMlaMetadata(r);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->derived.payload, 53);
  EXPECT_EQ(Prefix(plan->work_indptr, 3), (std::vector<int32_t>{0, 2, 4}));
  EXPECT_EQ(WorkRows(*plan), (Rows{{0, -1, 0, 1, 0, 64, 1, 0},
                                   {0, -1, 1, 2, 64, 128, 0, 0},
                                   {1, -1, 2, 3, 128, 138, 1, 0},
                                   {1, -1, 3, 4, 192, 202, 0, 0}}));
  // Sizing with is_sparse: B = 2 requests x qlen 2 = 4 tiles.
  EXPECT_EQ(plan->sizes.reduce_indptr, 5);
  EXPECT_EQ(plan->sizes.work_info_rows, 5);
  EXPECT_TRUE(CheckPlan(r, *plan).ok());
  // 2026-03 (A-mar): batch_idx is the virtual index and kv_offset has no token tail.
  r.revision = Revision::k2026_03;
  auto old = PlanMlaMetadata(r);
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(WorkRows(*old)[0], (std::vector<int32_t>{0, -1, 0, 1, 0, 64, 0, 0}));
  EXPECT_EQ(WorkRows(*old)[2], (std::vector<int32_t>{2, -1, 2, 3, 128, 138, 0, 0}));
}

TEST(PlannerHandDerived, ZeroLengthRequestSerialAndParallelAgree) {
  // kv [0, 50], 2 clusters: sum = 16 + 20 = 36 -> payload 34. Serial: empty work for request
  // 0, then request 1 split 2 blocks | 2 blocks. The parallel scan gives the same plan.
  const PlanRequest r = DenseRequest(Arch::kGfx942, 16, 1, {0, 50}, 2);
  const Rows want = {
      {0, -1, 0, 1, 0, 0, 0, 0}, {1, 0, 1, 2, 0, 32, 18, 0}, {1, 1, 1, 2, 32, 50, 0, 0}};
  for (PlannerChoice choice : {PlannerChoice::kSerial, PlannerChoice::kParallel}) {
    auto plan = PlanMlaMetadata(r, {choice});
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(WorkRows(*plan), want);
    EXPECT_EQ(Prefix(plan->work_indptr, 3), (std::vector<int32_t>{0, 2, 3}));
  }
}

TEST(PlannerHandDerived, ParallelPlannerDropsZeroKvRequest) {
  // kv [40, 0], 2 clusters, payload 34. Request 0 costs 19 (15 left); request 1 costs 16 > 15
  // and 15 <= overhead: the parallel scan "wastes" the cluster with ceil(0/18) = 0 fragments,
  // so request 1 gets no work item and its output row is never written (golden README).
  const PlanRequest r = DenseRequest(Arch::kGfx942, 16, 1, {40, 0}, 2);
  auto par = PlanMlaMetadata(r);
  ASSERT_TRUE(par.ok());
  EXPECT_TRUE(par->derived.parallel_planner_used);
  EXPECT_EQ(WorkRows(*par), (Rows{{0, -1, 0, 1, 0, 40, 0, 0}}));
  EXPECT_EQ(Prefix(par->work_indptr, 3), (std::vector<int32_t>{0, 1, 1}));
  const PlanCheckReport report = CheckPlan(r, *par);
  EXPECT_TRUE(report.ok());
  EXPECT_EQ(report.count(PlanDiag::kTileWithoutWork), 1);
  auto ser = PlanMlaMetadata(r, {PlannerChoice::kSerial});
  EXPECT_EQ(WorkRows(*ser), (Rows{{0, -1, 0, 1, 0, 40, 0, 0}, {1, -1, 1, 2, 40, 40, 0, 0}}));
  EXPECT_EQ(Prefix(ser->work_indptr, 3), (std::vector<int32_t>{0, 1, 2}));
}

TEST(PlannerHandDerived, FoldedPagedReadsLastPageLensPastTheEnd) {
  // gfx942 bf16 64 heads folds by 4; page 16 with a split: kv_offset reads
  // kv_last_page_lens[v] with the virtual index v = 4 > the 1 entry there is (§4.5).
  // 60 pages per virtual batch, sum 4 * 61 = 244 on 3 clusters -> payload 83: v1 is cut after
  // v0, and the cut piece reads kv_last_page_lens[1].
  PlanRequest r = DenseRequest(Arch::kGfx942, 64, 1, {16 * 60}, 3, /*page=*/16, /*gran=*/1);
  auto plan = PlanMlaMetadata(r);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->derived.fold_ratio, 4);
  ASSERT_FALSE(plan->input_violations.empty());
  EXPECT_EQ(plan->input_violations[0].array, "kv_last_page_lens");
  EXPECT_EQ(plan->input_violations[0].size, 1);
  EXPECT_EQ(plan->input_violations[0].index, 1);
  EXPECT_EQ(plan->input_violations[0].work_row, 1);
  EXPECT_EQ(plan->work_info.cells[1 * kWorkInfoWidth + kKvOffset], Cell::kUndefined);
  const PlanCheckReport report = CheckPlan(r, *plan);
  EXPECT_FALSE(report.ok());
  EXPECT_GE(report.count(PlanDiag::kInputReadOutOfRange), 1);
}

TEST(PlannerRefusals, NameTheFieldAndReason) {
  PlanRequest r = DenseRequest(Arch::kGfx942, 20, 1, {100}, 8);
  auto p = PlanMlaMetadata(r);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().field(), "heads_per_head_k");
  EXPECT_NE(p.status().message().find("multiple of 8"), std::string::npos) << p.status().message();
  r.heads_per_head_k = 24;  // a multiple of 8, not of 16, not native: aiter's AITER_CHECK refuses
  p = PlanMlaMetadata(r);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().field(), "heads_per_head_k");
  r = DenseRequest(Arch::kGfx942, 16, 1, {100}, 8, /*page=*/3);
  EXPECT_EQ(PlanMlaMetadata(r).status().field(), "page_size");
  r = DenseRequest(Arch::kGfx942, 16, 1, {100}, 8, 1, /*gran=*/24);
  EXPECT_EQ(PlanMlaMetadata(r).status().field(), "kv_granularity");
  r = DenseRequest(Arch::kGfx942, 16, 1, {100, 5}, 8);
  r.kv_indptr = {0, 100, 50};
  auto dec = PlanMlaMetadata(r);
  EXPECT_EQ(dec.status().field(), "kv_indptr[2]");
  // gfx950 bf16 runs every head count natively, so 24 heads is accepted there.
  r = DenseRequest(Arch::kGfx950, 24, 1, {100}, 8);
  EXPECT_TRUE(PlanMlaMetadata(r).ok());
}

TEST(PlannerTargets, ProfilesAreData) {
  EXPECT_EQ(GetTargetProfile(Arch::kGfx942).cu_count, 304);
  EXPECT_EQ(GetTargetProfile(Arch::kGfx950).cu_count, 256);
  EXPECT_EQ(GetTargetProfile(Arch::kSm90).cu_count, 132);
  PlanRequest r = DenseRequest(Arch::kSm90, 16, 1, {100}, 0);
  auto plan = PlanMlaMetadata(r);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->derived.num_clusters, 132);
  EXPECT_EQ(plan->sizes.work_indptr, 133);
}

}  // namespace
}  // namespace mlasim::ref
