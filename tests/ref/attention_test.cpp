// ref/attention.h against a naive triple-loop reference in fp64 (exact to 1e-12), the empty-row
// rule, input validation, and one case at the real MLA dims (576/512).
#include "ref/attention.h"

#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <limits>

#include "ref/numerics.h"
#include "ref/planner.h"
#include "tests/ref/plan_builders.h"

namespace mlasim::ref {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// The definition, one scalar at a time: for each q row and head, scores over the request's
// visible keys, max, exp, sums, o and lse. No Eigen, no blocking.
AttentionOutput NaiveAttention(const MlaInputs& in) {
  AttentionOutput out;
  out.q_rows = in.q_rows();
  out.num_heads = in.num_heads;
  out.head_dim_v = in.head_dim_v;
  out.o.assign(static_cast<size_t>(out.q_rows) * in.num_heads * in.head_dim_v, 0.0);
  out.lse.assign(static_cast<size_t>(out.q_rows) * in.num_heads, kNegInf);
  const int64_t cache_rows = int64_t{in.num_pages} * in.page_size;
  const double scale = in.effective_sm_scale() * in.q_scale * in.kv_scale;
  for (int32_t b = 0; b < in.num_requests(); ++b) {
    const int64_t lq = in.qo_indptr[b + 1] - in.qo_indptr[b];
    const int64_t pages = in.kv_indptr[b + 1] - in.kv_indptr[b];
    for (int64_t i = 0; i < lq; ++i) {
      const int64_t t = in.qo_indptr[b] + i;
      // The keys row t sees, as cache rows.
      std::vector<int64_t> keys;
      if (in.topk >= 0) {
        for (int64_t e = 0; e < std::min<int64_t>(pages, in.topk); ++e) {
          const int64_t idx = in.topk_indices[t * in.topk + e];
          if (idx >= 0 && idx < cache_rows) keys.push_back(idx);
        }
      } else {
        const int64_t lk = pages == 0 ? 0 : (pages - 1) * in.page_size + in.kv_last_page_lens[b];
        for (int64_t j = 0; j < lk; ++j) {
          if (in.is_causal && j > i + lk - lq) continue;
          keys.push_back(int64_t{in.kv_indices[in.kv_indptr[b] + j / in.page_size]} * in.page_size +
                         j % in.page_size);
        }
      }
      for (int32_t h = 0; h < in.num_heads; ++h) {
        const float* q = in.q.data() + (t * in.num_heads + h) * in.head_dim_qk;
        std::vector<double> s;
        double mx = kNegInf;
        for (int64_t row : keys) {
          double dot = 0;
          for (int32_t x = 0; x < in.head_dim_qk; ++x)
            dot += double{q[x]} * double{in.kv_cache[row * in.head_dim_qk + x]};
          s.push_back(dot * scale);
          mx = std::max(mx, s.back());
        }
        if (keys.empty()) continue;  // o = 0, lse = -inf
        double l = 0;
        for (double& x : s) l += (x = std::exp(x - mx));
        double* o = out.o.data() + (t * in.num_heads + h) * in.head_dim_v;
        for (size_t k = 0; k < keys.size(); ++k)
          for (int32_t x = 0; x < in.head_dim_v; ++x)
            o[x] += s[k] / l * double{in.kv_cache[keys[k] * in.head_dim_qk + x]} * in.kv_scale;
        out.lse[t * in.num_heads + h] = mx + std::log(l);
      }
    }
  }
  return out;
}

void ExpectClose(const std::vector<double>& got, const std::vector<double>& want, double tol,
                 const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(want[i])) {
      ASSERT_EQ(got[i], want[i]) << what << "[" << i << "]";
      continue;
    }
    ASSERT_NEAR(got[i], want[i], tol) << what << "[" << i << "]";
  }
}

struct SmallCase {
  std::vector<int32_t> kv_tokens;
  int32_t qlen = 1;
  int32_t heads = 4;
  int32_t page = 1;
  int32_t topk = -1;
  bool causal = true;
};

// Inputs of a small case with BuildMlaInputs (dims 24/16, values of fp32).
MlaInputs SmallInputs(const SmallCase& c, uint64_t seed) {
  PlanRequest r = c.topk >= 0
                      ? test::SparseRequest(Arch::kGfx942, c.heads, c.qlen, c.kv_tokens, c.topk, 8)
                      : test::DenseRequest(Arch::kGfx942, c.heads, c.qlen, c.kv_tokens, 8, c.page);
  r.is_causal = c.causal;
  NumericsOptions opt;
  opt.seed = seed;
  opt.head_dim_qk = 24;
  opt.head_dim_v = 16;
  opt.q_format = opt.kv_format = NumFormat::kFp32;
  opt.q_scale = 0.5;
  opt.kv_scale = 2.0;
  auto in = BuildMlaInputs(r, opt);
  EXPECT_TRUE(in.ok()) << in.status().ToString();
  return *in;
}

TEST(AttentionMonolithic, MatchesNaiveInFp64) {
  const SmallCase cases[] = {
      {{5, 0, 17, 3}, 1},                // decode with an empty request
      {{9, 2, 30}, 3},                   // MTP: request 1 is shorter than its q rows
      {{9, 2, 30}, 3, 4, 1, -1, false},  // not causal
      {{13, 1, 40, 16}, 2, 4, 4},        // page 4 with partial last pages
      {{20, 7, 0}, 2, 4, 1, 8},          // sparse top-8, one request without context
  };
  AttentionPrecision fp64;
  fp64.accumulate = Accumulate::kFp64;
  uint64_t seed = 100;
  for (const SmallCase& c : cases) {
    const MlaInputs in = SmallInputs(c, ++seed);
    auto got = RunMonolithic(in, fp64);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    const AttentionOutput want = NaiveAttention(in);
    ExpectClose(got->o, want.o, 1e-12, "o");
    ExpectClose(got->lse, want.lse, 1e-12, "lse");
  }
}

TEST(AttentionMonolithic, Fp32IsCloseToNaive) {
  const MlaInputs in = SmallInputs({{50, 3, 200}, 2}, 7);
  auto got = RunMonolithic(in);
  ASSERT_TRUE(got.ok());
  const AttentionOutput want = NaiveAttention(in);
  ExpectClose(got->o, want.o, 1e-5, "o");
  ExpectClose(got->lse, want.lse, 1e-5, "lse");
}

TEST(AttentionMonolithic, EmptyAndFullyMaskedRowsAreZeroWithNegInfLse) {
  // Request 0 has no KV; request 1 has 1 key for 3 q rows (causal: rows 0 and 1 see nothing).
  const MlaInputs in = SmallInputs({{0, 1}, 3}, 3);
  auto got = RunMonolithic(in);
  ASSERT_TRUE(got.ok());
  const int32_t h = in.num_heads, dv = in.head_dim_v;
  for (int32_t t : {0, 1, 2, 3, 4}) {
    for (int32_t x = 0; x < h * dv; ++x) EXPECT_EQ(got->o[t * h * dv + x], 0.0) << t;
    for (int32_t k = 0; k < h; ++k) EXPECT_EQ(got->lse[t * h + k], kNegInf) << t;
  }
  for (int32_t k = 0; k < h; ++k) EXPECT_TRUE(std::isfinite(got->lse[5 * h + k]));
  for (double v : got->o) EXPECT_FALSE(std::isnan(v));
}

TEST(AttentionMonolithic, SparseInvalidEntriesAreMaskedNeverRead) {
  MlaInputs in = SmallInputs({{6}, 1, 4, 1, 4}, 5);
  // Every entry invalid: -1, INT_MAX, INT_MIN, past the end -> an empty row.
  in.topk_indices = {-1, INT_MAX, INT_MIN, in.num_pages};
  auto got = RunMonolithic(in);
  ASSERT_TRUE(got.ok());
  for (double v : got->o) EXPECT_EQ(v, 0.0);
  for (double v : got->lse) EXPECT_EQ(v, kNegInf);
  // One valid entry: the row is that key's V exactly (softmax over one key).
  in.topk_indices = {-1, in.kv_indices[2], INT_MAX, -7};
  got = RunMonolithic(in);
  ASSERT_TRUE(got.ok());
  const int64_t row = in.kv_indices[2];
  for (int32_t x = 0; x < in.head_dim_v; ++x)
    EXPECT_FLOAT_EQ(got->o[x], in.kv_cache[row * in.head_dim_qk + x] * in.kv_scale);
}

TEST(AttentionMonolithic, RejectsBadInputsNamingTheField) {
  const MlaInputs good = SmallInputs({{5, 9}, 2}, 1);
  auto field = [](MlaInputs in) { return RunMonolithic(in).status().field(); };
  MlaInputs in = good;
  // A page id outside the cache in a used slot is not bad input but an invalid index the
  // engine wrote: its keys are masked (docs/numerics.md "Contract semantics on engine steps").
  in.kv_indices[3] = in.num_pages;
  EXPECT_TRUE(RunMonolithic(in).ok());
  in = good;
  in.q.pop_back();
  EXPECT_EQ(field(in), "q");
  in = good;
  in.head_dim_v = in.head_dim_qk + 1;
  EXPECT_EQ(field(in), "head_dim_v");
  in = good;
  in.kv_last_page_lens[1] = 2;  // page size 1
  EXPECT_EQ(field(in), "kv_last_page_lens[1]");
  in = good;
  in.kv_indptr = {0, 9, 5};
  EXPECT_EQ(field(in), "kv_indptr[2]");
  in = good;
  in.kv_scale = 0;
  EXPECT_EQ(field(in), "kv_scale");
  in = good;
  in.topk = 4;
  EXPECT_EQ(field(in), "topk_indices");
  in.page_size = 2;
  EXPECT_EQ(field(in), "kv_cache");  // shapes first: the cache no longer matches page_size
  EXPECT_EQ(RunMonolithic(good).status().ok(), true);
}

TEST(AttentionPlanDriven, MatchesNaiveInFp64OnSplitPlans) {
  // §6.1 (8 clusters split requests 0 and 2) and its MTP / page 4 variants.
  AttentionPrecision fp64;
  fp64.accumulate = Accumulate::kFp64;
  PlanExecOptions exec;
  exec.precision = fp64;
  struct Case {
    std::vector<int32_t> kv;
    int32_t qlen, page, heads;
  };
  for (const Case& c : {Case{{300, 40, 700}, 1, 1, 16}, Case{{300, 40, 700}, 2, 1, 16},
                        Case{{300, 0, 700}, 3, 4, 16}, Case{{300, 40, 700}, 2, 1, 64}}) {
    PlanRequest r = test::DenseRequest(Arch::kGfx942, c.heads, c.qlen, c.kv, 8, c.page);
    auto plan = PlanMlaMetadata(r);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    NumericsOptions opt;
    opt.head_dim_qk = 24;
    opt.head_dim_v = 16;
    auto in = BuildMlaInputs(r, opt);
    ASSERT_TRUE(in.ok());
    auto got = RunPlanDriven(*in, r, *plan, exec);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_TRUE(got->poison.empty()) << got->poison[0].ToString();
    EXPECT_GT(got->tiles_reduced, 0);
    const AttentionOutput want = NaiveAttention(*in);
    ExpectClose(got->out.o, want.o, 1e-12, "o");
    ExpectClose(got->out.lse, want.lse, 1e-12, "lse");
  }
}

TEST(AttentionPlanDriven, RealMlaDims576And512) {
  // 16 heads, qlen 2, ~1k-token contexts split over 8 clusters, bf16 inputs, fp32 accumulate.
  const PlanRequest r = test::DenseRequest(Arch::kGfx942, 16, 2, {1000, 333, 1500}, 8);
  auto plan = PlanMlaMetadata(r);
  ASSERT_TRUE(plan.ok());
  NumericsOptions opt;  // head dims 576 / 512
  auto rep = RunPlanNumerics(r, *plan, opt);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_TRUE(rep->ok);
  EXPECT_TRUE(rep->poison.empty());
  EXPECT_EQ(rep->q_format, NumFormat::kBf16);
  EXPECT_GT(rep->tiles_reduced, 0);
  EXPECT_LT(rep->o.max_abs, 1e-5);
  EXPECT_LT(rep->o.cos_diff, 1e-10);
  // And the fp32 result is within fp32 rounding of the naive fp64 definition.
  auto in = BuildMlaInputs(r, opt);
  ASSERT_TRUE(in.ok());
  auto mono = RunMonolithic(*in);
  ASSERT_TRUE(mono.ok());
  const AttentionOutput want = NaiveAttention(*in);
  ExpectClose(mono->o, want.o, 2e-5, "o");
  ExpectClose(mono->lse, want.lse, 2e-5, "lse");
}

}  // namespace
}  // namespace mlasim::ref
