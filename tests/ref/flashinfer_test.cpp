// FlashInfer's MLAPlan reference (ref/flashinfer/): bit-exact against the golden corpus made by
// FlashInfer's own code (tests/data/flashinfer-mlaplan.jsonl.gz), plus hand-derived plans,
// every boundary and error of the inputs, the workspace allocator, MLAPlanInfo's field table,
// the libstdc++ heap order and the work-capacity report.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "ref/flashinfer/check.h"
#include "ref/flashinfer/cost_heap.h"
#include "ref/flashinfer/mla_plan.h"
#include "ref/numerics.h"
#include "tests/ref/dialect_corpus.h"
#include "tests/ref/flashinfer_corpus.h"

namespace mlasim::ref::flashinfer {
namespace {

const char* kCorpus = MLASIM_SOURCE_DIR "/tests/data/flashinfer-mlaplan.jsonl.gz";

TEST(FlashInferCorpus, ReferenceReproducesEveryRecord) {
  int64_t records = 0, matched = 0, errors = 0, listed = 0, overflows = 0, shown = 0;
  const Status read = test::ForEachGzipLine(kCorpus, [&](const std::string& line) {
    ++records;
    const auto rec = nlohmann::json::parse(line);
    const auto c = test::CaseFromJson(rec.at("input"));
    const auto expected = test::OutcomeFromJson(rec.at("output"));
    ASSERT_TRUE(c.ok() && expected.ok()) << "record " << rec.at("id");
    const auto diffs = test::CompareOutcomes(*expected, test::ReferenceOutcome(c->input));
    if (diffs.empty()) {
      ++matched;
    } else if (shown++ < 5) {
      ADD_FAILURE() << "record " << rec.at("id") << " (" << c->kind << "): " << diffs.front();
    }
    errors += !expected->ok;
    listed += !expected->lists.empty();
    overflows += expected->total_num_works > kMaxTotalNumWorks;
  });
  ASSERT_TRUE(read.ok()) << read.ToString();
  EXPECT_EQ(records, 1200);
  EXPECT_EQ(matched, records);
  // The corpus covers what it claims: errors, listed plans and plans past the capacity.
  EXPECT_GE(errors, 50);
  EXPECT_GE(listed, 400);
  EXPECT_GE(overflows, 5);
}

TEST(DialectCorpus, UnreadableFilesAreErrorsAndLinesRoundTrip) {
  const Status missing = test::ForEachGzipLine("/nonexistent/corpus.jsonl.gz", [](auto&) {});
  EXPECT_EQ(missing.code(), StatusCode::kFailedPrecondition);
  const std::string path = ::testing::TempDir() + "/dialect_corpus_test.jsonl.gz";
  {
    test::GzipLineWriter w(path);
    ASSERT_TRUE(w.ok());
    w.Write("{\"a\":1}");
    w.Write("");
    w.Write("last");
    ASSERT_TRUE(w.Close().ok());
  }
  std::vector<std::string> lines;
  ASSERT_TRUE(test::ForEachGzipLine(path, [&](const std::string& l) { lines.push_back(l); }).ok());
  EXPECT_EQ(lines, (std::vector<std::string>{"{\"a\":1}", "", "last"}));
  EXPECT_EQ(test::ForEachGzipLine(
                path, [](auto&) {}, /*max_line_bytes=*/4)
                .code(),
            StatusCode::kOutOfRange);
  EXPECT_EQ(test::Hex64(test::Fnv1a64(nullptr, 0)), "cbf29ce484222325");  // FNV-1a offset basis
}

// ---- hand-derived plans ----------------------------------------------------------------------

MLAPlanInput SmallInput() {
  // 3 requests, one q token each, 16 heads, KV [300, 40, 700] tokens in pages of 64
  // ([5, 1, 11] pages), 4 SMs.
  MLAPlanInput in;
  in.qo_indptr = {0, 1, 2, 3};
  in.kv_indptr = {0, 5, 6, 17};
  in.kv_len = {300, 40, 700};
  in.num_heads = 16;
  in.head_dim_o = 512;
  in.causal = false;
  in.num_sm = 4;
  in.int_workspace_bytes = 8 << 20;
  in.float_workspace_bytes = 128 << 20;
  return in;
}

// Packed q length 16 per request (avg 16 <= 64): 1 CTA per cluster, 4 clusters, tiles of 64
// rows. Total KV 1040, 260 per cluster -> kv_len_limit = ceil(260 / 256) * 256 = 512.
// Request 0 (300) and 1 (40) are single chunks; request 2 (700 > 512) splits into [0, 512) and
// [512, 700) with partial rows 0 and 16 and one merge entry for its packed rows [32, 48).
// Clusters come off the heap in libstdc++'s order for equal costs: 0, 2, 3, then 1 (cost 0
// while the others hold 428 and 168).
TEST(FlashInferMLAPlan, WorkedExample) {
  auto p = MLAPlan(SmallInput());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->cluster_size, 1);
  EXPECT_EQ(p->num_clusters, 4);
  EXPECT_EQ(p->cluster_tile_q, 64);
  EXPECT_EQ(p->total_kv_lens, 1040);
  EXPECT_EQ(p->kv_len_limit, 512);
  EXPECT_EQ(p->work_indptr, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(p->q_indptr, (std::vector<int32_t>{0, 2, 1, 2}));
  EXPECT_EQ(p->kv_indptr, (std::vector<int32_t>{0, 6, 5, 6}));
  EXPECT_EQ(p->partial_indptr, (std::vector<int32_t>{-1, 16, -1, 0}));
  EXPECT_EQ(p->q_len, (std::vector<int32_t>{1, 1, 1, 1}));
  EXPECT_EQ(p->kv_len, (std::vector<int32_t>{300, 700, 40, 700}));
  EXPECT_EQ(p->q_start, (std::vector<int32_t>{0, 0, 0, 0}));
  EXPECT_EQ(p->kv_start, (std::vector<int32_t>{0, 512, 0, 0}));
  EXPECT_EQ(p->kv_end, (std::vector<int32_t>{300, 700, 40, 512}));
  EXPECT_EQ(p->merge_packed_offset_start, (std::vector<int32_t>{32, 0, 0, 0}));
  EXPECT_EQ(p->merge_packed_offset_end, (std::vector<int32_t>{48, 0, 0, 0}));
  EXPECT_EQ(p->merge_partial_packed_offset_start, (std::vector<int32_t>{0, 0, 0, 0}));
  EXPECT_EQ(p->merge_partial_packed_offset_end, (std::vector<int32_t>{32, 0, 0, 0}));
  EXPECT_EQ(p->merge_partial_stride, (std::vector<int32_t>{16, 0, 0, 0}));
  EXPECT_EQ(p->merge_cta_counter, 1);
  EXPECT_EQ(p->partial_o_nnz, 32);
  // Int workspace: 9 work-list regions of 16384 int32 (65536 bytes) and 5 merge regions of 4
  // int32, in allocation order, each 16-byte aligned.
  EXPECT_EQ(ToVector(p->info),
            (std::vector<int64_t>{1, 4, 0, 65536, 131072, 196608, 196624, 196640, 196656, 196672,
                                  196688, 262224, 327760, 393296, 458832, 524368,
                                  /*partial_o=*/0, /*partial_lse=*/524288}));
  EXPECT_EQ(p->int_allocated_bytes, 589904);
  EXPECT_EQ(p->float_allocated_bytes, 524288 + 2048);  // 2 * 4 * 64 rows * (2 * 512 + 4) bytes
  EXPECT_TRUE(p->overflows.empty());
  ASSERT_EQ(p->int_regions.size(), kIntLists.size());
  EXPECT_EQ(p->int_regions[3], (WorkspaceRegion{"mla_merge_packed_offset_start", 196608, 16, 16}));
  EXPECT_EQ(p->float_regions[1], (WorkspaceRegion{"mla_partial_lse", 524288, 2048, 16}));
}

// Causal: request 0 has 8 q tokens x 16 heads = 128 packed rows, request 1 none (avg 64:
// still 1 CTA per cluster). Tile 1 (the last) sees all 100 KV tokens; tile 0 (tokens 0..3)
// sees 100 - 8 + ceil(64 / 16) = 96. Tiles are planned last to first.
TEST(FlashInferMLAPlan, CausalTrimsEarlierTiles) {
  MLAPlanInput in = SmallInput();
  in.qo_indptr = {0, 8, 8};
  in.kv_indptr = {0, 2, 2};
  in.kv_len = {100, 0};
  in.causal = true;
  auto p = MLAPlan(in);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->cluster_size, 1);
  EXPECT_EQ(p->total_kv_lens, 196);
  EXPECT_EQ(p->kv_len_limit, 192);  // ceil(196 / 4) = 49 -> 192
  EXPECT_EQ(p->q_start, (std::vector<int32_t>{64, 0}));
  EXPECT_EQ(p->kv_end, (std::vector<int32_t>{100, 96}));
  EXPECT_EQ(p->partial_indptr, (std::vector<int32_t>{-1, -1}));
  EXPECT_EQ(p->work_indptr, (std::vector<int32_t>{0, 1, 1, 2, 2}));
  EXPECT_TRUE(CheckMLAPlan(in, *p).ok()) << CheckMLAPlan(in, *p).ToString();
}

// avg packed q length 64 keeps 1 CTA per cluster, 65 takes 2 (num_sm / 2 clusters, 128-row
// tiles); an odd SM count leaves one SM unused.
TEST(FlashInferMLAPlan, ClusterSizeThreshold) {
  MLAPlanInput in = SmallInput();
  in.num_heads = 64;
  in.num_sm = 5;
  EXPECT_EQ(MLAPlan(in)->cluster_size, 1);
  in.num_heads = 65;
  auto p = MLAPlan(in);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->cluster_size, 2);
  EXPECT_EQ(p->num_clusters, 2);
  EXPECT_EQ(p->cluster_tile_q, 128);
  EXPECT_EQ(p->info.num_blks_x, 2);
  EXPECT_EQ(p->info.num_blks_y, 2);
}

// A zero-length KV (and a padded request with no q tokens) still gets one work that writes its
// output; a q-less request gets none.
TEST(FlashInferMLAPlan, ZeroLengthsAndPads) {
  MLAPlanInput in = SmallInput();
  in.qo_indptr = {0, 1, 1, 2};
  in.kv_indptr = {0, 0, 0, 0};
  in.kv_len = {0, 0, 0};
  auto p = MLAPlan(in);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->total_num_works(), 2);
  EXPECT_EQ(p->kv_end, (std::vector<int32_t>{0, 0}));
  EXPECT_EQ(p->kv_len_limit, 32);  // max(ceil(0 / 4), 1) = 1 -> 32
  EXPECT_TRUE(CheckMLAPlan(in, *p).ok());
}

// ---- the work-list capacity (class D) --------------------------------------------------------

// 70 requests x 256 q tokens x 128 heads: 2 CTAs per cluster, 256 tiles of 128 rows each =
// 17920 works > 16384. FlashInfer copies all of them; every work list runs 1536 entries into
// the region after it. The model keeps the full lists and reports each overflowing list.
MLAPlanInput OverflowInput() {
  MLAPlanInput in = SmallInput();
  in.qo_indptr.assign(71, 0);
  in.kv_indptr.assign(71, 0);
  in.kv_len.assign(70, 64);
  for (int i = 0; i < 70; ++i) {
    in.qo_indptr[i + 1] = in.qo_indptr[i] + 256;
    in.kv_indptr[i + 1] = in.kv_indptr[i] + 1;
  }
  in.num_heads = 128;
  in.num_sm = 132;
  return in;
}

TEST(FlashInferMLAPlan, WorkCountPastCapacityIsReportedNotTruncated) {
  const MLAPlanInput in = OverflowInput();
  auto p = MLAPlan(in);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->total_num_works(), 17920);
  EXPECT_EQ(p->q_indptr.size(), 17920u);
  ASSERT_EQ(p->overflows.size(), 8u);  // every work list; work_indptr (67) and merges fit
  EXPECT_EQ(p->overflows[0].region, "mla_q_indptr");
  EXPECT_EQ(p->overflows[0].entries, 17920);
  EXPECT_EQ(p->overflows[0].capacity_entries, kMaxTotalNumWorks);
  EXPECT_EQ(p->overflows[7].region, "mla_kv_end");
  const auto report = CheckMLAPlan(in, *p);
  EXPECT_EQ(report.count(MLAPlanDiag::kWorkCountExceedsCapacity), 8);
  // In the buffer the device receives, kv_indptr's copy overwrote q_indptr's overflow: entry
  // 16384 of q_indptr reads kv_indptr[0] (0), not the request's q offset.
  const IntWorkspaceImage image = RenderIntWorkspace(*p, p->int_allocated_bytes);
  auto word = [&](int64_t byte) {
    int32_t v;
    std::memcpy(&v, &image.bytes[byte], 4);
    return v;
  };
  EXPECT_NE(p->q_indptr[kMaxTotalNumWorks], 0);
  EXPECT_EQ(word(p->info.q_indptr_offset + 4 * kMaxTotalNumWorks), p->kv_indptr[0]);
  // kv_end runs 1536 entries into work_indptr's region (65536 bytes: nothing lands past the
  // allocation); work_indptr's copy then overwrote the first 67 of them.
  EXPECT_EQ(image.bytes_written_past_buffer, 0);
  EXPECT_EQ(word(p->info.work_indptr_offset + 4 * 66), p->work_indptr[66]);
  EXPECT_EQ(word(p->info.work_indptr_offset + 4 * 67), p->kv_end[kMaxTotalNumWorks + 67]);
}

TEST(FlashInferMLAPlan, ImagePastTheBufferIsCounted) {
  const auto p = MLAPlan(SmallInput());
  // 4 works of 4 bytes each in q_indptr at offset 0: a 10-byte buffer holds 2.5 of them.
  const IntWorkspaceImage image = RenderIntWorkspace(*p, 10);
  EXPECT_GT(image.bytes_written_past_buffer, 0);
  EXPECT_EQ(image.bytes.size(), 10u);
}

// ---- inputs: every error names its field ----------------------------------------------------

void ExpectPlanError(const MLAPlanInput& in, StatusCode code, const std::string& field) {
  const auto p = MLAPlan(in);
  EXPECT_EQ(p.status().code(), code) << p.status().ToString();
  EXPECT_EQ(p.status().field(), field) << p.status().ToString();
}

TEST(FlashInferMLAPlanInput, BatchZeroIsRefused) {
  MLAPlanInput in = SmallInput();
  in.qo_indptr = {0};
  in.kv_indptr = {0};
  in.kv_len = {};
  ExpectPlanError(in, StatusCode::kFailedPrecondition, "kv_len");  // FlashInfer: SIGFPE
}

TEST(FlashInferMLAPlanInput, Lengths) {
  MLAPlanInput in = SmallInput();
  in.qo_indptr.pop_back();
  ExpectPlanError(in, StatusCode::kInvalidArgument, "qo_indptr");
  in = SmallInput();
  in.kv_indptr.push_back(17);
  ExpectPlanError(in, StatusCode::kInvalidArgument, "kv_indptr");
}

TEST(FlashInferMLAPlanInput, Indptrs) {
  MLAPlanInput in = SmallInput();
  in.qo_indptr = {0, 2, 1, 3};  // FlashInfer's own check: qo_indptr[2] - qo_indptr[1] < 0
  ExpectPlanError(in, StatusCode::kInvalidArgument, "qo_indptr[2]");
  in = SmallInput();
  in.qo_indptr[0] = -1;
  ExpectPlanError(in, StatusCode::kInvalidArgument, "qo_indptr[0]");
  in = SmallInput();
  in.kv_indptr = {0, 5, 4, 17};
  ExpectPlanError(in, StatusCode::kInvalidArgument, "kv_indptr[2]");
  in = SmallInput();
  in.kv_indptr[0] = -1;
  ExpectPlanError(in, StatusCode::kInvalidArgument, "kv_indptr[0]");
}

TEST(FlashInferMLAPlanInput, KvLenBounds) {
  MLAPlanInput in = SmallInput();
  in.kv_len[1] = -1;
  ExpectPlanError(in, StatusCode::kInvalidArgument, "kv_len[1]");
  in.kv_len[1] = kMaxKvLen + 1;
  ExpectPlanError(in, StatusCode::kInvalidArgument, "kv_len[1]");
  in.kv_len = {0, 0, kMaxKvLen};
  EXPECT_TRUE(MLAPlan(in).ok());
}

TEST(FlashInferMLAPlanInput, Scalars) {
  MLAPlanInput in = SmallInput();
  in.num_heads = 0;
  ExpectPlanError(in, StatusCode::kInvalidArgument, "num_heads");
  in.num_heads = kMaxNumHeads + 1;
  ExpectPlanError(in, StatusCode::kInvalidArgument, "num_heads");
  in.num_heads = kMaxNumHeads;
  EXPECT_TRUE(MLAPlan(in).ok());
  in = SmallInput();
  in.head_dim_o = 0;
  ExpectPlanError(in, StatusCode::kInvalidArgument, "head_dim_o");
  in = SmallInput();
  in.num_sm = 0;
  ExpectPlanError(in, StatusCode::kInvalidArgument, "num_sm");
  in.num_sm = kMaxNumSm + 1;
  ExpectPlanError(in, StatusCode::kInvalidArgument, "num_sm");
  in.num_sm = 1;  // 1 SM, avg packed 16: one 1-CTA cluster
  EXPECT_TRUE(MLAPlan(in).ok());
  in.num_heads = 65;  // 2-CTA clusters on 1 SM: zero clusters (FlashInfer divides by zero)
  ExpectPlanError(in, StatusCode::kFailedPrecondition, "num_sm");
}

TEST(FlashInferMLAPlanInput, PackedOffsetsMustFitInt32) {
  MLAPlanInput in = SmallInput();
  in.num_heads = 1024;
  in.qo_indptr = {0, 1, 2, 1 << 21};  // (2^21) * 1024 = 2^31
  ExpectPlanError(in, StatusCode::kOutOfRange, "qo_indptr");
}

TEST(FlashInferMLAPlanInput, WorkspaceTooSmallNamesTheRegion) {
  MLAPlanInput in = SmallInput();
  in.int_workspace_bytes = 589904;  // exactly enough
  in.float_workspace_bytes = 526336;
  EXPECT_TRUE(MLAPlan(in).ok());
  in.int_workspace_bytes = 589903;
  ExpectPlanError(in, StatusCode::kOutOfRange, "mla_work_indptr");
  in.int_workspace_bytes = 589904;
  in.float_workspace_bytes = 526335;
  ExpectPlanError(in, StatusCode::kOutOfRange, "mla_partial_lse");
  in.float_workspace_bytes = 100;
  ExpectPlanError(in, StatusCode::kOutOfRange, "mla_partial_o");
}

// ---- sizing, allocator, MLAPlanInfo ---------------------------------------------------------

TEST(FlashInferWorkspace, SizeQueryMatchesThePlan) {
  const auto p = MLAPlan(SmallInput());
  const auto z = MLAPlanWorkspaceSize(SmallInput());
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(z->int_bytes, p->int_allocated_bytes);
  EXPECT_EQ(z->float_bytes, p->float_allocated_bytes);
  EXPECT_EQ(z->int_regions, p->int_regions);
  EXPECT_EQ(z->float_regions, p->float_regions);
  EXPECT_EQ(z->info, p->info);
  // H200: 132 SMs, 1 CTA per cluster, head_dim 512
  const auto h200 = MLAPlanWorkspaceSize(132, 1, 512);
  ASSERT_TRUE(h200.ok());
  EXPECT_EQ(h200->int_bytes, 9 * 65536 + 5 * 528);
  EXPECT_EQ(h200->float_bytes, 2 * 132 * 64 * (2 * 512 + 4));
  EXPECT_EQ(MLAPlanWorkspaceSize(132, 3, 512).status().field(), "cluster_size");
  EXPECT_EQ(MLAPlanWorkspaceSize(0, 1, 512).status().field(), "num_sm");
  EXPECT_EQ(MLAPlanWorkspaceSize(132, 1, 0).status().field(), "head_dim_o");
}

TEST(FlashInferWorkspace, MergeRegionsArePaddedTo16Bytes) {
  const auto z = MLAPlanWorkspaceSize(131, 1, 512);  // 131 * 4 = 524 bytes -> next at +528
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(z->info.merge_packed_offset_end_offset - z->info.merge_packed_offset_start_offset, 528);
}

TEST(FlashInferAllocator, CountingAndRealModesGiveTheSameOffsets) {
  RegionAllocator count = RegionAllocator::Counting(), real = RegionAllocator::Real(64);
  for (auto* a : {&count, &real}) {
    EXPECT_EQ(a->Allocate("a", 3, 1).value(), 0);
    EXPECT_EQ(a->Allocate("b", 8, 16).value(), 16);
    EXPECT_EQ(a->Allocate("c", 0, 16).value(), 32);
    EXPECT_EQ(a->allocated_bytes(), 32);
  }
  EXPECT_EQ(count.regions(), real.regions());
  EXPECT_EQ(real.Allocate("d", 32, 16).value(), 32);  // exactly fills 64
  const auto full = real.Allocate("e", 1, 1);
  EXPECT_EQ(full.status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(full.status().field(), "e");
  EXPECT_NE(full.status().message().find("Increase the workspace buffer size"), std::string::npos);
  EXPECT_NE(full.status().message().find("only 0 bytes are left"), std::string::npos);
  EXPECT_EQ(count.Allocate("x", 1, 3).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(count.Allocate("x", -1, 4).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(FindRegion(real.regions(), "b")->offset, 16);
  EXPECT_EQ(FindRegion(real.regions(), "zz"), nullptr);
}

TEST(FlashInferPlanInfo, FieldTableRoundTrip) {
  EXPECT_EQ(kMLAPlanInfoNumFields, 18u);
  EXPECT_STREQ(kMLAPlanInfoFields[0].name, "num_blks_x");
  EXPECT_STREQ(kMLAPlanInfoFields[15].name, "work_indptr_offset");
  EXPECT_STREQ(kMLAPlanInfoFields[17].name, "partial_lse_offset");
  std::vector<int64_t> v(18);
  std::iota(v.begin(), v.end(), 100);
  const auto info = FromVector(v);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->kv_indptr_offset, 103);
  EXPECT_EQ(ToVector(*info), v);
  v.pop_back();
  const auto bad = FromVector(v);
  EXPECT_EQ(bad.status().field(), "plan_info");
  EXPECT_NE(bad.status().message().find("should be 18, but got 17"), std::string::npos);
}

// The heap's tie order is libstdc++'s: checked against std::push_heap / std::pop_heap with
// FlashInfer's comparator on long random sequences with many equal costs.
TEST(FlashInferCostHeap, MatchesLibstdcxxHeapOrder) {
#ifndef __GLIBCXX__
  GTEST_SKIP() << "the reference order is libstdc++'s";
#endif
  using Element = std::pair<int, float>;
  auto comp = [](const Element& a, const Element& b) { return a.second > b.second; };
  SplitMix64 r(7);
  for (int capacity : {1, 2, 3, 4, 7, 64, 132}) {
    CostHeap ours(capacity);
    std::vector<Element> theirs;
    for (int i = 0; i < capacity; ++i) theirs.push_back({i, 0.f});
    for (int step = 0; step < 2000; ++step) {
      std::pop_heap(theirs.begin(), theirs.end(), comp);
      const Element top = theirs.back();
      theirs.pop_back();
      const HeapEntry mine = ours.Pop();
      ASSERT_EQ(mine.index, top.first) << "capacity " << capacity << " step " << step;
      ASSERT_EQ(mine.cost, top.second);
      const float cost = top.second + static_cast<float>(r.Below(4) * 64);  // many ties
      theirs.push_back({top.first, cost});
      std::push_heap(theirs.begin(), theirs.end(), comp);
      ours.Insert({top.first, cost});
    }
  }
}

// ---- the checker on hand-broken plans --------------------------------------------------------

class FlashInferCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    in_ = SmallInput();
    plan_ = *MLAPlan(in_);
  }
  void ExpectFires(MLAPlanDiag code, MLAPlanCheckOptions options = {}) {
    const MLAPlanCheckReport r = CheckMLAPlan(in_, plan_, options);
    EXPECT_GE(r.count(code), 1) << MLAPlanDiagName(code) << " did not fire:\n" << r.ToString();
  }
  // Removes work `w` from every work list and from work_indptr.
  void EraseWork(int32_t w) {
    for (const IntListSpec& spec : kIntLists)
      if (spec.capacity == ListCapacity::kMaxTotalNumWorks &&
          spec.list != &MLAPlanResult::work_indptr)
        (plan_.*spec.list).erase((plan_.*spec.list).begin() + w);
    for (auto& e : plan_.work_indptr) e -= e > w ? 1 : 0;
  }
  MLAPlanInput in_;
  MLAPlanResult plan_;
};

TEST_F(FlashInferCheck, AcceptsTheRealPlan) {
  EXPECT_TRUE(CheckMLAPlan(in_, plan_, {64}).ok()) << CheckMLAPlan(in_, plan_, {64}).ToString();
}
TEST_F(FlashInferCheck, LaunchShape) {
  plan_.info.num_blks_y = 3;
  ExpectFires(MLAPlanDiag::kLaunchShape);
}
TEST_F(FlashInferCheck, WorkIndptrShape) {
  plan_.work_indptr.back() = 3;
  ExpectFires(MLAPlanDiag::kWorkIndptrShape);
}
TEST_F(FlashInferCheck, WorkIndptrDecreasing) {
  plan_.work_indptr = {0, 2, 1, 3, 4};
  ExpectFires(MLAPlanDiag::kWorkIndptrDecreasing);
}
TEST_F(FlashInferCheck, WorkListLength) {
  plan_.kv_end.pop_back();
  ExpectFires(MLAPlanDiag::kWorkListLength);
}
TEST_F(FlashInferCheck, WorkUnknownRequest) {
  plan_.kv_len[2] = 41;
  ExpectFires(MLAPlanDiag::kWorkUnknownRequest);
}
TEST_F(FlashInferCheck, QStartInvalid) {
  plan_.q_start[0] = 64;  // request 0 has one tile of 16 rows
  ExpectFires(MLAPlanDiag::kQStartInvalid);
  ExpectFires(MLAPlanDiag::kTileWithoutWork);
}
TEST_F(FlashInferCheck, TileWithoutWork) {
  EraseWork(2);  // request 1's only work
  ExpectFires(MLAPlanDiag::kTileWithoutWork);
}
TEST_F(FlashInferCheck, TileNotCovered) {
  plan_.kv_start[1] = 500;  // request 2's second chunk overlaps the first
  ExpectFires(MLAPlanDiag::kTileNotCovered);
  SetUp();
  plan_.kv_end[0] = 299;  // request 0 stops one token early
  ExpectFires(MLAPlanDiag::kTileNotCovered);
}
TEST_F(FlashInferCheck, KvPastRange) {
  plan_.kv_end[0] = 301;
  ExpectFires(MLAPlanDiag::kKvPastRange);
}
TEST_F(FlashInferCheck, KvPastPages) {
  ExpectFires(MLAPlanDiag::kKvPastPages, {/*page_size=*/32});  // 300 tokens in 5 pages of 32
  EXPECT_TRUE(CheckMLAPlan(in_, plan_, {64}).ok());
}
TEST_F(FlashInferCheck, PartialMismatch) {
  plan_.partial_indptr[0] = 64;  // a lone work writing partial rows nobody merges
  ExpectFires(MLAPlanDiag::kPartialMismatch);
}
TEST_F(FlashInferCheck, PartialRowsOverlap) {
  plan_.partial_indptr[1] = 8;  // rows [8, 24) overlap the first chunk's [0, 16)
  ExpectFires(MLAPlanDiag::kPartialRowsOverlap);
  ExpectFires(MLAPlanDiag::kMergePartialMismatch);
}
TEST_F(FlashInferCheck, PartialRowsExceedCapacity) {
  plan_.partial_indptr[1] = 2 * 4 * 64;  // the float workspace holds 512 rows
  ExpectFires(MLAPlanDiag::kPartialRowsExceedCapacity);
}
TEST_F(FlashInferCheck, MergeListLength) {
  plan_.merge_partial_stride.pop_back();
  ExpectFires(MLAPlanDiag::kMergeListLength);
}
TEST_F(FlashInferCheck, MergeRowsMismatch) {
  plan_.merge_packed_offset_end[0] = 40;  // rows [40, 48) of request 2 never merged
  ExpectFires(MLAPlanDiag::kMergeRowsMismatch);
  SetUp();
  plan_.merge_packed_offset_start[1] = 0;  // a stray merge over request 0's direct rows
  plan_.merge_packed_offset_end[1] = 8;
  ExpectFires(MLAPlanDiag::kMergeRowsMismatch);
}
TEST_F(FlashInferCheck, MergePartialMismatch) {
  plan_.merge_partial_stride[0] = 8;
  ExpectFires(MLAPlanDiag::kMergePartialMismatch);
}

// Every plan the reference makes for the corpus inputs passes the checker, and a random
// corruption of each (one field of one work or merge entry moved) is caught.
TEST(FlashInferCheckCorpus, AcceptsEveryPlanAndCatchesCorruptions) {
  int64_t plans = 0, corrupted = 0, caught = 0;
  SplitMix64 r(11);
  const Status read = test::ForEachGzipLine(kCorpus, [&](const std::string& line) {
    const auto c = test::CaseFromJson(nlohmann::json::parse(line).at("input"));
    auto plan = MLAPlan(c->input);
    if (!plan.ok() || !plan->overflows.empty()) return;
    ++plans;
    const auto report = CheckMLAPlan(c->input, *plan, {c->page_size});
    EXPECT_TRUE(report.ok()) << report.ToString();
    if (plan->total_num_works() == 0) return;  // every request without q tokens
    ++corrupted;
    // Corrupt one work's KV end (one token short), q start or partial row, or the first
    // merge's row end. (One token more would be legal: the kernel masks it causally.)
    const int64_t w = static_cast<int64_t>(r.Below(plan->total_num_works()));
    switch (r.Below(plan->merge_cta_counter > 0 ? 4 : 3)) {
      case 0: plan->kv_end[w] -= 1; break;
      case 1: plan->q_start[w] += plan->cluster_tile_q; break;
      case 2: plan->partial_indptr[w] = plan->partial_indptr[w] < 0 ? 0 : -1; break;
      default: plan->merge_packed_offset_end[0] -= 1; break;
    }
    caught += !CheckMLAPlan(c->input, *plan, {c->page_size}).ok();
  });
  ASSERT_TRUE(read.ok()) << read.ToString();
  EXPECT_GE(plans, 1000);
  EXPECT_GE(corrupted, 1000);
  EXPECT_EQ(caught, corrupted);
}

}  // namespace
}  // namespace mlasim::ref::flashinfer
