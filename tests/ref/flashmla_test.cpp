// FlashMLA's decode scheduler and sizing (ref/flashmla/): plans derived by hand from the
// kernels' source, both revisions, the quirks the model keeps, every input error and boundary,
// the plan checker on hand-broken plans, and the golden corpus FlashMLA's own kernels wrote on
// the H200 (tests/data/flashmla-sched.jsonl.gz, made on the H200 on 2026-12-02; see
// docs/planners.md).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>

#include "ref/flashmla/check.h"
#include "ref/flashmla/sched.h"
#include "ref/flashmla/sizing.h"
#include "tests/ref/dialect_corpus.h"
#include "tests/ref/flashmla_corpus.h"

namespace mlasim::ref::flashmla {
namespace {

using Words = std::vector<std::vector<int32_t>>;

SchedInput Dense(Revision rev, std::vector<int32_t> seqlens, int32_t parts) {
  SchedInput in;
  in.revision = rev;
  in.batch_size = static_cast<int32_t>(seqlens.size());
  in.num_sm_parts = parts;
  in.seqlens_k = std::move(seqlens);
  return in;
}

Words RowsAsWords(const SchedMeta& m) {
  Words w;
  for (const SchedRow& r : m.rows) w.push_back(RowWords(m.revision, r));
  return w;
}

// seqlens [300, 40, 700] -> blocks [5, 1, 11]; total (5+5)+(1+5)+(11+5) = 32 over 4 parts:
// payload ceil(32/4) + 5 = 13. Part 0 takes request 0 (10) and stops (3 left < 1 + 5).
// Part 1 takes request 1 (6), then 7 - 5 = 2 blocks of request 2. Part 2 takes 13 - 5 = 8
// more (blocks 2..10). Part 3 ends request 2 (1 block + 5).
TEST(FlashMlaSched, WorkedExample9241ae3) {
  auto m = GetDecodingSchedMeta(Dense(Revision::k9241ae3, {300, 40, 700}, 4));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->total_num_blocks, 32);
  EXPECT_EQ(m->payload, 13);
  EXPECT_EQ(m->num_blocks, (std::vector<int32_t>{5, 1, 11}));
  // begin_req, end_req, begin_block, end_block, begin_split, is_first_split, is_last_split
  EXPECT_EQ(RowsAsWords(*m), (Words{{0, 0, 0, 5, 0, 0, 0},
                                    {1, 2, 0, 2, 0, 0, 1},
                                    {2, 2, 2, 10, 1, 1, 1},
                                    {2, 2, 10, 11, 2, 1, 1}}));
  EXPECT_EQ(m->num_splits, (std::vector<int32_t>{0, 1, 2, 5}));
  EXPECT_EQ(m->dynamic_smem_bytes, 4 * (5 * 3 + 1));
  EXPECT_TRUE(CheckSchedMeta(Dense(Revision::k9241ae3, {300, 40, 700}, 4), *m).ok());
}

// The same cut at 414a2f3, in tokens: begin_seqlen = block * 64, a whole request ends at its
// own length (seqlens_k[end]).
TEST(FlashMlaSched, WorkedExample414a2f3) {
  const SchedInput in = Dense(Revision::k414a2f3, {300, 40, 700}, 4);
  auto m = GetDecodingSchedMeta(in);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  // begin_idx, begin_seqlen, end_idx, end_seqlen, begin_n_split_idx
  EXPECT_EQ(
      RowsAsWords(*m),
      (Words{{0, 0, 0, 300, 0}, {1, 0, 2, 128, 0}, {2, 128, 2, 640, 1}, {2, 640, 2, 700, 2}}));
  EXPECT_EQ(m->num_splits, (std::vector<int32_t>{0, 1, 2, 5}));
  EXPECT_EQ(m->dynamic_smem_bytes, 0);
  EXPECT_TRUE(CheckSchedMeta(in, *m).ok());
}

// One request of 5 blocks over 4 parts (payload 3 + 5): parts 2 and 3 begin after the batch.
// 9241ae3 then reads first_block_idx_shared[b], which in its shared layout is
// last_block_idx_shared[0] = 4: begin_block_idx of those rows is 4, not 0. The kernel skips
// rows with begin_req_idx >= b, so the value is never used; the model keeps it bit-exact.
TEST(FlashMlaSched, RowsAfterTheBatchCarryRequestZerosLastBlock) {
  auto m = GetDecodingSchedMeta(Dense(Revision::k9241ae3, {300}, 4));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(RowsAsWords(*m), (Words{{0, 0, 0, 3, 0, 1, 1},
                                    {0, 0, 3, 5, 1, 1, 1},
                                    {1, 0, 4, 5, 0, 0, 0},
                                    {1, 0, 4, 5, 0, 0, 0}}));
  EXPECT_EQ(m->num_splits, (std::vector<int32_t>{0, 2}));
  auto old = GetDecodingSchedMeta(Dense(Revision::k414a2f3, {300}, 4));
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(RowsAsWords(*old)[2], (std::vector<int32_t>{1, 0, 0, 300, 0}));
}

// Zero lengths: 9241ae3 counts one block (so the request costs 1 + 5) and ends it at block 0;
// 414a2f3 counts none. Neither splits a zero-length request.
TEST(FlashMlaSched, ZeroLengthRequests) {
  auto m = GetDecodingSchedMeta(Dense(Revision::k9241ae3, {0, 0}, 2));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->total_num_blocks, 12);
  EXPECT_EQ(RowsAsWords(*m), (Words{{0, 0, 0, 0, 0, 0, 0}, {1, 1, 0, 0, 0, 0, 0}}));
  EXPECT_EQ(m->num_splits, (std::vector<int32_t>{0, 1, 2}));
  auto old = GetDecodingSchedMeta(Dense(Revision::k414a2f3, {0, 0}, 2));
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->total_num_blocks, 10);
  EXPECT_EQ(RowsAsWords(*old), (Words{{0, 0, 1, 0, 0}, {2, 0, 1, 0, 0}}));
  for (const auto& meta : {*m, *old}) {
    SchedInput in = Dense(meta.revision, {0, 0}, 2);
    EXPECT_TRUE(CheckSchedMeta(in, meta).ok()) << CheckSchedMeta(in, meta).ToString();
  }
}

// Sparse (9241ae3): topk (or topk_length, 0 -> 1) tokens; with an extra cache the count is
// rounded up to whole blocks and the extra top-k added. extra_topk = -1 (params.h's
// "disabled") still takes that branch and subtracts one token; the block count, and so the
// plan, is the same as with 0 here, and the consumer agrees (ConsumerBlocks).
TEST(FlashMlaSched, SparseTokenCounts) {
  SchedInput in;
  in.batch_size = 3;
  in.num_sm_parts = 2;
  in.topk = 2048;
  in.extra_topk = 0;
  in.topk_length = {0, 65, 2048};
  auto m = GetDecodingSchedMeta(in);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->seqlen_used, (std::vector<int32_t>{1, 65, 2048}));
  EXPECT_EQ(m->num_blocks, (std::vector<int32_t>{1, 2, 32}));
  EXPECT_EQ(ConsumerBlocks(in), m->num_blocks);
  in.extra_topk = 128;
  in.extra_topk_length = {0, 100, 128};
  auto e = GetDecodingSchedMeta(in);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->seqlen_used, (std::vector<int32_t>{64, 228, 2176}));
  EXPECT_EQ(e->num_blocks, (std::vector<int32_t>{1, 4, 34}));
  EXPECT_EQ(ConsumerBlocks(in), e->num_blocks);
  in.extra_topk = -1;
  in.extra_topk_length.clear();
  auto minus = GetDecodingSchedMeta(in);
  ASSERT_TRUE(minus.ok());
  EXPECT_EQ(minus->seqlen_used, (std::vector<int32_t>{63, 127, 2047}));
  EXPECT_EQ(minus->num_blocks, m->num_blocks);
  EXPECT_EQ(ConsumerBlocks(in), m->num_blocks);
  EXPECT_TRUE(CheckSchedMeta(in, *minus).ok());
}

TEST(FlashMlaSched, RowWordsRoundTrip) {
  const SchedRow row{1, 2, 3, 4, 5, 1, 0};
  for (Revision rev : {Revision::k414a2f3, Revision::k9241ae3}) {
    auto back = RowFromWords(rev, RowWords(rev, row));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(RowWords(rev, *back), RowWords(rev, row));
  }
  EXPECT_EQ(RowWords(Revision::k414a2f3, row), (std::vector<int32_t>{1, 3, 2, 4, 5}));
  EXPECT_EQ(RowFromWords(Revision::k9241ae3, {1, 2}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseRevision("9241ae3").value(), Revision::k9241ae3);
  EXPECT_FALSE(ParseRevision("main").ok());
}

// ---- input errors and boundaries: each names its field --------------------------------------

void ExpectError(const SchedInput& in, StatusCode code, const std::string& field) {
  const Status s = ValidateSchedInput(in);
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_EQ(s.field(), field) << s.ToString();
  EXPECT_FALSE(GetDecodingSchedMeta(in).ok());
}

TEST(FlashMlaSchedInput, BatchSizeBounds) {
  ExpectError(Dense(Revision::k9241ae3, {}, 4), StatusCode::kInvalidArgument, "batch_size");
  EXPECT_TRUE(GetDecodingSchedMeta(Dense(Revision::k9241ae3, {1}, 4)).ok());
  // 414a2f3: static arrays of 4096 ints, b < 4096
  EXPECT_TRUE(
      GetDecodingSchedMeta(Dense(Revision::k414a2f3, std::vector<int32_t>(4095, 7), 8)).ok());
  ExpectError(Dense(Revision::k414a2f3, std::vector<int32_t>(4096, 7), 8), StatusCode::kOutOfRange,
              "batch_size");
  // 9241ae3: 4 * (5b + 1) bytes of dynamic shared memory, 232448 on sm90: b <= 11622
  EXPECT_TRUE(
      GetDecodingSchedMeta(Dense(Revision::k9241ae3, std::vector<int32_t>(11622, 7), 8)).ok());
  ExpectError(Dense(Revision::k9241ae3, std::vector<int32_t>(11623, 7), 8), StatusCode::kOutOfRange,
              "batch_size");
}

TEST(FlashMlaSchedInput, PartsBlockSizeAndOverheadBounds) {
  ExpectError(Dense(Revision::k9241ae3, {1}, 0), StatusCode::kInvalidArgument, "num_sm_parts");
  EXPECT_TRUE(GetDecodingSchedMeta(Dense(Revision::k9241ae3, {1}, kMaxNumSmParts)).ok());
  ExpectError(Dense(Revision::k9241ae3, {1}, kMaxNumSmParts + 1), StatusCode::kInvalidArgument,
              "num_sm_parts");
  SchedInput in = Dense(Revision::k9241ae3, {100}, 2);
  in.block_size_n = 0;
  ExpectError(in, StatusCode::kInvalidArgument, "block_size_n");
  in.block_size_n = 1;
  EXPECT_TRUE(GetDecodingSchedMeta(in).ok());
  in.fixed_overhead_num_blocks = -1;
  ExpectError(in, StatusCode::kInvalidArgument, "fixed_overhead_num_blocks");
  in.fixed_overhead_num_blocks = 0;
  EXPECT_TRUE(GetDecodingSchedMeta(in).ok());
}

TEST(FlashMlaSchedInput, DenseLengths) {
  SchedInput in = Dense(Revision::k9241ae3, {1, 2}, 2);
  in.batch_size = 3;
  ExpectError(in, StatusCode::kInvalidArgument, "seqlens_k");
  ExpectError(Dense(Revision::k9241ae3, {1, -1}, 2), StatusCode::kInvalidArgument, "seqlens_k[1]");
  EXPECT_TRUE(GetDecodingSchedMeta(Dense(Revision::k9241ae3, {0, 1 << 30}, 2)).ok());
  ExpectError(Dense(Revision::k9241ae3, {(1 << 30) + 1}, 2), StatusCode::kInvalidArgument,
              "seqlens_k[0]");
  in = Dense(Revision::k9241ae3, {1}, 2);
  in.topk_length = {1};
  ExpectError(in, StatusCode::kInvalidArgument, "topk_length");
  in.topk = 0;
  ExpectError(in, StatusCode::kInvalidArgument, "topk");
}

TEST(FlashMlaSchedInput, TotalBlocksMustFitInt32) {
  // 64 requests of 2^30 tokens: 64 * (2^24 + 5) blocks > 2^31 - 1
  ExpectError(Dense(Revision::k9241ae3, std::vector<int32_t>(128, 1 << 30), 4),
              StatusCode::kOutOfRange, "seqlens_k");
  EXPECT_TRUE(
      GetDecodingSchedMeta(Dense(Revision::k9241ae3, std::vector<int32_t>(100, 1 << 30), 4)).ok());
}

TEST(FlashMlaSchedInput, SparseFields) {
  SchedInput in;
  in.batch_size = 2;
  in.num_sm_parts = 2;
  in.topk = 128;
  in.extra_topk = 0;
  EXPECT_TRUE(GetDecodingSchedMeta(in).ok());
  in.revision = Revision::k414a2f3;
  ExpectError(in, StatusCode::kInvalidArgument, "topk");
  in.revision = Revision::k9241ae3;
  in.seqlens_k = {1, 2};
  ExpectError(in, StatusCode::kInvalidArgument, "seqlens_k");
  in.seqlens_k.clear();
  in.topk_length = {0, 129};
  ExpectError(in, StatusCode::kInvalidArgument, "topk_length[1]");
  in.topk_length = {0, 128};
  EXPECT_TRUE(GetDecodingSchedMeta(in).ok());
  in.extra_topk_length = {1, 1};
  ExpectError(in, StatusCode::kInvalidArgument, "extra_topk_length");
  in.extra_topk = -2;
  ExpectError(in, StatusCode::kInvalidArgument, "extra_topk");
  in.extra_topk = 64;
  in.extra_topk_length = {1, -1};
  ExpectError(in, StatusCode::kInvalidArgument, "extra_topk_length[1]");
}

// ---- sizing ----------------------------------------------------------------------------------

TEST(FlashMlaSizing, DenseH200) {
  // DeepSeek at TP8 on an H200: h_q 16, h_k 1, s_q 1 -> 132 / 1 / ceil(16 / 64) = 132 parts.
  DenseDecodeShape s{/*batch_size=*/128,
                     /*seqlen_q=*/1,
                     /*num_heads_q=*/16,
                     /*num_heads_k=*/1,  576, 512, 64,
                     /*num_sms=*/132};
  auto z = SizeDenseDecode(Revision::k9241ae3, s);
  ASSERT_TRUE(z.ok()) << z.status().ToString();
  EXPECT_EQ(z->num_sm_parts, 132);
  EXPECT_EQ(z->q_seq_per_hk, 16);
  EXPECT_EQ(z->total_num_splits, 260);
  EXPECT_EQ(z->lse_accum_shape, (std::vector<int64_t>{260, 1, 16}));
  EXPECT_EQ(z->o_accum_shape, (std::vector<int64_t>{260, 1, 16, 512}));
  EXPECT_EQ(z->lse_accum_bytes, 260 * 16 * 4);
  EXPECT_EQ(z->o_accum_bytes, 260 * 16 * 512 * 4);
  EXPECT_EQ(z->combine_max_splits, 160);
  EXPECT_EQ(z->sched_meta_words, 132 * 8);
  EXPECT_EQ(z->num_splits_len, 129);
  // MTP s_q 4 at h_q 128: 4 * 128 = 512 q rows -> 8 row blocks -> 132 / 8 = 16 parts
  s.seqlen_q = 4;
  s.num_heads_q = 128;
  z = SizeDenseDecode(Revision::k414a2f3, s);
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(z->num_sm_parts, 16);
  EXPECT_EQ(z->combine_max_splits, 32);
  EXPECT_EQ(z->lse_accum_shape, (std::vector<int64_t>{144, 1, 512}));
}

// 414a2f3 has no max(.., 1): a launch needing more row blocks than SMs sizes 0 parts (and its
// scheduler would divide by zero); 9241ae3 plans 1.
TEST(FlashMlaSizing, ZeroPartsOnlyAt414a2f3) {
  DenseDecodeShape s{8, 2, 128, 1, 576, 512, 64, /*num_sms=*/3};  // 256 rows -> 4 blocks > 3 SMs
  auto z = SizeDenseDecode(Revision::k9241ae3, s);
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(z->num_sm_parts, 1);
  const auto old = SizeDenseDecode(Revision::k414a2f3, s);
  EXPECT_EQ(old.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(old.status().field(), "num_sms");
  s.num_sms = 4;
  EXPECT_EQ(SizeDenseDecode(Revision::k414a2f3, s)->num_sm_parts, 1);
}

TEST(FlashMlaSizing, DenseErrors) {
  const DenseDecodeShape ok{4, 1, 16, 1, 576, 512, 64, 132};
  auto field_of = [](Revision rev, DenseDecodeShape s) {
    return SizeDenseDecode(rev, s).status().field();
  };
  DenseDecodeShape s = ok;
  s.head_size_k = 512;
  EXPECT_TRUE(SizeDenseDecode(Revision::k9241ae3, s).ok());
  EXPECT_EQ(field_of(Revision::k414a2f3, s), "head_size_k");
  s = ok, s.head_size_v = 576;
  EXPECT_EQ(field_of(Revision::k9241ae3, s), "head_size_v");
  s = ok, s.page_block_size = 32;
  EXPECT_EQ(field_of(Revision::k9241ae3, s), "page_block_size");
  s = ok, s.batch_size = 0;
  EXPECT_EQ(field_of(Revision::k9241ae3, s), "batch_size");
  s = ok, s.num_heads_k = 3;
  EXPECT_EQ(field_of(Revision::k9241ae3, s), "num_heads_k");
  s = ok, s.num_sms = 0;
  EXPECT_EQ(field_of(Revision::k9241ae3, s), "num_sms");
  s = ok, s.num_sms = 161;  // 161 parts: above the combine kernel's 160
  EXPECT_EQ(SizeDenseDecode(Revision::k9241ae3, s).status().code(), StatusCode::kOutOfRange);
  s.num_sms = 160;
  EXPECT_TRUE(SizeDenseDecode(Revision::k9241ae3, s).ok());
}

TEST(FlashMlaSizing, CombineBuckets) {
  EXPECT_EQ(CombineMaxSplits(1).value(), 32);
  EXPECT_EQ(CombineMaxSplits(32).value(), 32);
  EXPECT_EQ(CombineMaxSplits(33).value(), 64);
  EXPECT_EQ(CombineMaxSplits(132).value(), 160);
  EXPECT_EQ(CombineMaxSplits(160).value(), 160);
  EXPECT_FALSE(CombineMaxSplits(161).ok());
}

TEST(FlashMlaSizing, SparseImplementations) {
  SparseDecodeShape s;
  s.batch_size = 64;
  s.num_heads_q = 128;
  s.topk = 2048;
  s.num_sms = 132;
  auto z = SizeSparseDecode(s);  // sm90: 132 / 1 / (128 / 64) = 66
  ASSERT_TRUE(z.ok()) << z.status().ToString();
  EXPECT_EQ(z->num_sm_parts, 66);
  EXPECT_EQ(z->fixed_overhead_num_blocks, 5);
  EXPECT_EQ(z->topk, 2048);
  EXPECT_EQ(z->extra_topk, 0);
  EXPECT_EQ(z->lse_accum_shape, (std::vector<int64_t>{130, 1, 128}));
  s.seqlen_q = 2;
  s.num_heads_q = 64;
  EXPECT_EQ(SizeSparseDecode(s)->num_sm_parts, 66);  // 132 / 2 / 1
  s.arch = Arch::kSm100f;
  s.num_sms = 148;
  EXPECT_EQ(SelectSparseImpl(s).value(), SparseImpl::kSm100Head64);
  EXPECT_EQ(SizeSparseDecode(s)->num_sm_parts, 74);
  s.num_heads_q = 128;
  s.head_size_qk = 512;
  EXPECT_EQ(SelectSparseImpl(s).value(), SparseImpl::kSm100Head128);
  EXPECT_EQ(SizeSparseDecode(s)->num_sm_parts, 37);  // 148 / 2 / 2
  EXPECT_EQ(SizeSparseDecode(s)->fixed_overhead_num_blocks, 3);
  s.head_size_qk = 576;
  EXPECT_EQ(SelectSparseImpl(s).value(), SparseImpl::kSm100Head64x2);
}

TEST(FlashMlaSizing, SparseErrors) {
  SparseDecodeShape ok;
  ok.batch_size = 4;
  ok.topk = 2048;
  ok.num_sms = 132;
  auto field_of = [](SparseDecodeShape s) { return SizeSparseDecode(s).status().field(); };
  SparseDecodeShape s = ok;
  s.num_heads_q = 96;
  EXPECT_EQ(field_of(s), "num_heads_q");
  s = ok, s.num_heads_kv = 2;
  EXPECT_EQ(field_of(s), "num_heads_kv");
  s = ok, s.topk = 100;  // sm90 asserts topk % 64 == 0
  EXPECT_EQ(field_of(s), "topk");
  s = ok, s.topk = 0;
  EXPECT_EQ(field_of(s), "topk");
  s = ok, s.extra_topk = 64;  // V3.2 (d_qk 576) on sm90 has no extra cache
  EXPECT_EQ(field_of(s), "extra_topk");
  s.head_size_qk = 512;
  EXPECT_TRUE(SizeSparseDecode(s).ok());
  s = ok, s.head_size_qk = 640;
  EXPECT_EQ(field_of(s), "head_size_qk");
  s = ok, s.seqlen_q = 0;
  EXPECT_EQ(field_of(s), "seqlen_q");
}

TEST(FlashMlaSizing, SchedInputsFollowTheSizing) {
  DenseDecodeShape s{3, 1, 16, 1, 576, 512, 64, 132};
  const auto z = SizeDenseDecode(Revision::k9241ae3, s);
  const SchedInput in = DenseSchedInput(*z, {10, 20, 30});
  EXPECT_EQ(in.num_sm_parts, 132);
  EXPECT_EQ(in.topk, -1);
  EXPECT_TRUE(GetDecodingSchedMeta(in).ok());
  SparseDecodeShape sp;
  sp.batch_size = 2;
  sp.topk = 512;
  sp.num_sms = 132;
  const SchedInput sin = SparseSchedInput(*SizeSparseDecode(sp), 2, {1, 2}, {});
  EXPECT_EQ(sin.extra_topk, 0);
  EXPECT_TRUE(GetDecodingSchedMeta(sin).ok());
}

// ---- the checker on hand-broken plans --------------------------------------------------------

class FlashMlaCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    in_ = Dense(Revision::k9241ae3, {300, 40, 700}, 4);
    plan_ = *GetDecodingSchedMeta(in_);
  }
  // The checker's report on plan_ after `mutate`; the given code must fire.
  void ExpectFires(SchedDiag code, SchedCheckLimits limits = {}) {
    const SchedCheckReport r = CheckSchedMeta(in_, plan_, limits);
    EXPECT_GE(r.count(code), 1) << SchedDiagName(code) << " did not fire:\n" << r.ToString();
  }
  SchedInput in_;
  SchedMeta plan_;
};

TEST_F(FlashMlaCheck, AcceptsTheRealPlan) {
  EXPECT_TRUE(CheckSchedMeta(in_, plan_).ok());
}
TEST_F(FlashMlaCheck, RowCount) {
  plan_.rows.pop_back();
  ExpectFires(SchedDiag::kRowCount);
}
TEST_F(FlashMlaCheck, NumSplitsShape) {
  plan_.num_splits[0] = 1;
  ExpectFires(SchedDiag::kNumSplitsShape);
  plan_.num_splits = {0, 1};
  ExpectFires(SchedDiag::kNumSplitsShape);
}
TEST_F(FlashMlaCheck, NumSplitsNotIncreasing) {
  plan_.num_splits[2] = 1;
  ExpectFires(SchedDiag::kNumSplitsNotIncreasing);
}
TEST_F(FlashMlaCheck, RowRequestRange) {
  plan_.rows[1].end_req_idx = 3;
  ExpectFires(SchedDiag::kRowRequestRange);
}
TEST_F(FlashMlaCheck, RequestNotConsumed) {
  plan_.rows[3].begin_req_idx = 3;  // skipped by the kernel: request 2 stops at block 10
  ExpectFires(SchedDiag::kRequestNotConsumed);
  ExpectFires(SchedDiag::kSplitCountMismatch);
}
TEST_F(FlashMlaCheck, PieceGapOrOverlap) {
  plan_.rows[2].begin_pos = 3;
  ExpectFires(SchedDiag::kPieceGapOrOverlap);
}
TEST_F(FlashMlaCheck, PiecePastRange) {
  plan_.rows[3].end_pos = 12;
  ExpectFires(SchedDiag::kPiecePastRange);
}
TEST_F(FlashMlaCheck, EmptyPiece) {
  plan_.rows[2].end_pos = 2;
  ExpectFires(SchedDiag::kEmptyPiece);
}
TEST_F(FlashMlaCheck, SplitIndexMismatch) {
  plan_.rows[2].begin_split_idx = 0;
  ExpectFires(SchedDiag::kSplitIndexMismatch);
}
TEST_F(FlashMlaCheck, SplitFlagMismatch) {
  plan_.rows[0].is_first_req_splitted = 1;
  ExpectFires(SchedDiag::kSplitFlagMismatch);
}
TEST_F(FlashMlaCheck, SplitsExceedAccum) {
  ExpectFires(SchedDiag::kSplitsExceedAccum, {/*accum_rows=*/4, 0});
}
TEST_F(FlashMlaCheck, SplitsExceedCombine) {
  ExpectFires(SchedDiag::kSplitsExceedCombine, {0, /*combine_max_splits=*/2});
}
TEST_F(FlashMlaCheck, Revision414a2f3DerivesNoSplitFromRanges) {
  in_.revision = Revision::k414a2f3;
  plan_ = *GetDecodingSchedMeta(in_);
  EXPECT_TRUE(CheckSchedMeta(in_, plan_).ok());
  plan_.rows[0].end_pos = 256;  // request 0 (300 tokens) now ends at block 4 of 5
  ExpectFires(SchedDiag::kRequestNotConsumed);
  ExpectFires(SchedDiag::kSplitFlagMismatch);
}

// ---- the golden corpus -----------------------------------------------------------------------

// The corpus FlashMLA's kernels wrote; MLASIM_FLASHMLA_CORPUS overrides the path (to check a
// fresh device run before committing it).
std::string OutputsPath() {
  const char* env = std::getenv("MLASIM_FLASHMLA_CORPUS");
  return env ? env : MLASIM_SOURCE_DIR "/tests/data/flashmla-sched.jsonl.gz";
}

std::map<int64_t, test::FlashMlaCase> ReadInputs() {
  std::map<int64_t, test::FlashMlaCase> cases;
  const Status s = test::ForEachGzipLine(
      MLASIM_SOURCE_DIR "/tests/data/flashmla-sched-inputs.jsonl.gz", [&](const std::string& l) {
        const auto rec = nlohmann::json::parse(l);
        auto c = test::FlashMlaCaseFromJson(rec.at("input"));
        EXPECT_TRUE(c.ok()) << c.status().ToString();
        if (c.ok()) cases[rec.at("id").get<int64_t>()] = *c;
      });
  EXPECT_TRUE(s.ok()) << s.ToString();
  return cases;
}

TEST(FlashMlaCorpus, InputsAreValidAndCheckedPlansPass) {
  const auto cases = ReadInputs();
  ASSERT_EQ(cases.size(), 1200u);
  int64_t dense_both = 0;
  for (const auto& [id, c] : cases) {
    const auto outcomes = test::ReferenceOutcomes(c);
    ASSERT_TRUE(outcomes.ok()) << "launch " << id << ": " << outcomes.status().ToString();
    dense_both += outcomes->size() == 2;
    for (Revision rev : c.Revisions()) {
      SchedInput in = c.input;
      in.revision = rev;
      const auto report = CheckSchedMeta(in, *GetDecodingSchedMeta(in));
      EXPECT_TRUE(report.ok()) << "launch " << id << ": " << report.ToString();
    }
  }
  EXPECT_EQ(dense_both, 776);
}

TEST(FlashMlaCorpus, ReferenceReproducesEveryRecord) {
  const std::string path = OutputsPath();
  if (!std::filesystem::exists(path))
    GTEST_SKIP() << "PENDING: " << path << " is made on the H200 by tools/gpu/flashmla_corpus.sh "
                 << "(docs/planners.md); until then the model is checked against a host run of "
                 << "the kernels' source";
  const auto cases = ReadInputs();
  int64_t records = 0, matched = 0, shown = 0;
  const Status s = test::ForEachGzipLine(path, [&](const std::string& line) {
    ++records;
    const auto rec = nlohmann::json::parse(line);
    const int64_t id = rec.at("id");
    const auto theirs = test::OutcomesFromJson(rec.at("output"));
    ASSERT_TRUE(theirs.ok() && cases.count(id)) << "record " << id;
    for (const auto& [rev, o] : rec.at("output").items())
      if (rev == "414a2f3") {
        EXPECT_TRUE(o.at("unwritten_words_intact").get<bool>()) << id;
      }
    const auto ours = test::ReferenceOutcomes(cases.at(id));
    if (ours.ok() && *ours == *theirs) {
      ++matched;
    } else if (shown++ < 5) {
      ADD_FAILURE() << "record " << id << " (" << cases.at(id).kind << ") differs";
    }
  });
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(records, 1200);
  EXPECT_EQ(matched, records);
}

}  // namespace
}  // namespace mlasim::ref::flashmla
