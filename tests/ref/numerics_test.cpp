// ref/numerics.h and the poison side of ref/attention.h: the PRNG, the comparison helper, the
// tolerances, determinism, and every way a plan can make an output depend on poison (each
// reported with the buffer and rows it came from, never a crash).
#include "ref/numerics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ref/plan_check.h"
#include "ref/planner.h"
#include "tests/ref/plan_builders.h"

namespace mlasim::ref {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

NumericsOptions SmallDims(uint64_t seed = 1) {
  NumericsOptions o;
  o.seed = seed;
  o.head_dim_qk = 40;
  o.head_dim_v = 32;
  return o;
}

bool SameBytes(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

TEST(NumericsPrng, SplitMix64ReferenceStreamAndRanges) {
  SplitMix64 rng(0);
  EXPECT_EQ(rng.Next(), 0xe220a8397b1dcdafull);  // the published SplitMix64 outputs for seed 0
  EXPECT_EQ(rng.Next(), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(rng.Next(), 0x06c45d188009454full);
  SplitMix64 r(42);
  for (int i = 0; i < 10000; ++i) {
    EXPECT_LT(r.Below(7), 7u);
    const double u = r.Unit();
    EXPECT_TRUE(u >= 0.0 && u < 1.0);
  }
  EXPECT_EQ(r.Below(1), 0u);
  EXPECT_NE(SplitMix64::Stream(5, 1).Next(), SplitMix64::Stream(5, 2).Next());
  EXPECT_EQ(SplitMix64::Stream(5, 1).Next(), SplitMix64::Stream(5, 1).Next());
}

TEST(NumericsCompare, AnomalyPositionsFirst) {
  const std::vector<double> want = {1.0, kNaN, kInf, -kInf, 2.0};
  std::vector<double> got = want;
  Tolerance tol{1e-9, 0, 1e-9};
  CompareResult r = CompareTensors(got.data(), want.data(), 5, tol);
  EXPECT_TRUE(r.passed);
  EXPECT_EQ(r.elements, 5);
  got[1] = 0.0;    // NaN expected, value got
  got[2] = -kInf;  // +inf expected, -inf got
  got[4] = kNaN;   // value expected, NaN got
  r = CompareTensors(got.data(), want.data(), 5, tol);
  EXPECT_FALSE(r.passed);
  EXPECT_EQ(r.nan_mismatches, 2);
  EXPECT_EQ(r.inf_mismatches, 1);
  EXPECT_EQ(r.first_anomaly_mismatch, 1);
  const uint8_t skip[5] = {0, 1, 1, 0, 1};
  r = CompareTensors(got.data(), want.data(), 5, tol, skip);
  EXPECT_TRUE(r.passed);
  EXPECT_EQ(r.elements, 2);
}

TEST(NumericsCompare, ErrorsAndCosineDifferenceAsAiterCalDiff) {
  SplitMix64 rng(3);
  std::vector<double> x(1000), y(1000);
  for (size_t i = 0; i < x.size(); ++i) {
    y[i] = rng.Symmetric();
    x[i] = y[i] + 1e-3 * rng.Symmetric();
  }
  x[17] = y[17] + 0.01;
  const CompareResult r = CompareTensors(x.data(), y.data(), 1000, {0.02, 0, 1});
  EXPECT_EQ(r.max_abs_index, 17);
  EXPECT_NEAR(r.max_abs, 0.01, 1e-15);
  long double sxy = 0, sxx = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += static_cast<long double>(x[i]) * y[i];
    sxx += static_cast<long double>(x[i]) * x[i] + static_cast<long double>(y[i]) * y[i];
  }
  const double cal_diff = static_cast<double>(1.0L - 2.0L * sxy / sxx);
  EXPECT_NEAR(r.cos_diff, cal_diff, 1e-15);
  EXPECT_GT(r.max_rel, 0);
  EXPECT_TRUE(r.passed);
  const CompareResult tight = CompareTensors(x.data(), y.data(), 1000, {0.005, 0, 1});
  EXPECT_FALSE(tight.passed);
  EXPECT_EQ(tight.tolerance_violations, 1);
  EXPECT_EQ(tight.first_violation, 17);
  const std::vector<double> zeros(4, 0.0);
  EXPECT_EQ(CompareTensors(zeros.data(), zeros.data(), 4, {}).cos_diff, 0.0);
}

// Every field of two comparisons, doubles bit for bit.
void ExpectSameComparison(const CompareResult& a, const CompareResult& b, const std::string& at) {
  SCOPED_TRACE(at);
  EXPECT_EQ(a.elements, b.elements);
  EXPECT_EQ(a.nan_mismatches, b.nan_mismatches);
  EXPECT_EQ(a.inf_mismatches, b.inf_mismatches);
  EXPECT_EQ(a.first_anomaly_mismatch, b.first_anomaly_mismatch);
  EXPECT_EQ(std::memcmp(&a.max_abs, &b.max_abs, sizeof(double)), 0) << a.max_abs << " " << b.max_abs;
  EXPECT_EQ(a.max_abs_index, b.max_abs_index);
  EXPECT_EQ(std::memcmp(&a.max_rel, &b.max_rel, sizeof(double)), 0) << a.max_rel << " " << b.max_rel;
  EXPECT_EQ(a.max_rel_index, b.max_rel_index);
  EXPECT_EQ(std::memcmp(&a.cos_diff, &b.cos_diff, sizeof(double)), 0)
      << a.cos_diff << " " << b.cos_diff;
  EXPECT_EQ(a.tolerance_violations, b.tolerance_violations);
  EXPECT_EQ(a.first_violation, b.first_violation);
  EXPECT_EQ(a.passed, b.passed);
}

// CompareTensorsTwice against two CompareTensors calls with its run flags spread over their
// elements: n from 0 up, runs of 1 to past n (and width 0, taken as 1), the last run short,
// both masks alike (one pass serves both) and apart, values with NaN, infinities, zeros and
// errors on both sides of the tolerance.
TEST(NumericsCompare, TwiceIsTwoComparisonsBitForBit) {
  SplitMix64 rng = SplitMix64::Stream(11, 2);
  const double specials[] = {kNaN, kInf, -kInf, 0.0, -0.0};
  int alike = 0, apart = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const int64_t n = static_cast<int64_t>(rng.Below(trial < 10 ? 3 : 200));
    const int64_t width = static_cast<int64_t>(rng.Below(9));  // 0 counts as 1
    const int64_t w = std::max<int64_t>(width, 1);
    std::vector<double> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      y[i] = rng.Below(8) == 0 ? specials[rng.Below(5)] : rng.Symmetric();
      x[i] = rng.Below(8) == 0 ? specials[rng.Below(5)] : y[i] + 1e-2 * rng.Symmetric();
    }
    const int64_t runs = n > 0 ? (n - 1) / w + 1 : 0;
    std::vector<uint8_t> first(static_cast<size_t>(runs)), second(static_cast<size_t>(runs));
    // alike; the second skipping more (CompareWithTruth's poisoned pairs); or apart both ways
    const uint64_t relation = rng.Below(3);
    for (int64_t r = 0; r < runs; ++r) {
      first[r] = rng.Below(4) == 0;
      second[r] = relation == 0   ? first[r]
                  : relation == 1 ? first[r] | (rng.Below(3) == 0)
                                  : rng.Below(4) == 0;
    }
    (first == second ? alike : apart)++;
    std::vector<uint8_t> first_each(static_cast<size_t>(n)), second_each(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) first_each[i] = first[i / w], second_each[i] = second[i / w];
    const Tolerance tol{5e-3, 1e-3, 1e-5};
    const auto [a, b] =
        CompareTensorsTwice(x.data(), y.data(), n, tol, first.data(), second.data(), width);
    const std::string at = "trial " + std::to_string(trial) + ", n " + std::to_string(n) +
                           ", width " + std::to_string(width);
    ExpectSameComparison(a, CompareTensors(x.data(), y.data(), n, tol, first_each.data()), at);
    ExpectSameComparison(b, CompareTensors(x.data(), y.data(), n, tol, second_each.data()), at);
    if (HasFailure()) return;
  }
  EXPECT_GT(alike, 100);
  EXPECT_GT(apart, 100);
}

// The largest relative error and its index, found by dividing every element (what CompareTensors
// computed before it skipped the divisions that cannot raise the maximum), against
// CompareTensors on differences that tie the maximum within a unit, quotients near overflow and
// underflow, subnormal and huge expected values, and exact zeros.
TEST(NumericsCompare, LargestRelativeErrorIsTheOneEveryDivisionFinds) {
  SplitMix64 rng = SplitMix64::Stream(7, 1);
  for (int trial = 0; trial < 400; ++trial) {
    const int64_t n = 1 + static_cast<int64_t>(rng.Below(300));
    std::vector<double> x(n), y(n);
    for (int64_t i = 0; i < n; ++i) {
      const double scale = std::ldexp(1.0, static_cast<int>(rng.Below(2098)) - 1074);
      y[i] = (rng.Unit() - 0.5) * scale;
      switch (rng.Below(5)) {
        case 0: x[i] = y[i]; break;                                  // no error
        case 1: x[i] = y[i] * (1 + std::ldexp(1.0, -static_cast<int>(rng.Below(60)))); break;
        case 2: x[i] = i > 0 ? y[i] + (x[i - 1] - y[i - 1]) * (y[i] / (y[i - 1] != 0 ? y[i - 1] : 1))
                             : y[i];  // about the last element's relative error: near ties
          break;
        case 3: x[i] = std::nextafter(y[i], rng.Unit() < 0.5 ? 0.0 : 1e308); break;
        default: x[i] = (rng.Unit() - 0.5) * std::ldexp(1.0, static_cast<int>(rng.Below(2000)) - 1000);
      }
      if (!std::isfinite(x[i])) x[i] = y[i];
    }
    double max_rel = 0;
    int64_t max_rel_index = -1;
    for (int64_t i = 0; i < n; ++i) {
      const double d = std::fabs(x[i] - y[i]);
      if (y[i] != 0 && d / std::fabs(y[i]) > max_rel)
        max_rel = d / std::fabs(y[i]), max_rel_index = i;
    }
    const CompareResult r = CompareTensors(x.data(), y.data(), n, {1, 1, 1});
    ASSERT_EQ(r.max_rel_index, max_rel_index) << "trial " << trial;
    ASSERT_EQ(std::memcmp(&r.max_rel, &max_rel, sizeof max_rel), 0) << "trial " << trial;
  }
}

// Pairs where the rounded product m * |y| is at or above the difference although the quotient
// exceeds m (the product rounded up): a scan that compared against m * |y| alone would miss the
// new maximum. Element 0 sets m = j * 2^-52 exactly (y = 1, x = 1 + m); element 1 has y = k / j
// rounded (k > j) and x = y + k * 2^-52, so its difference is k * 2^-52 exactly, its quotient
// just above or below m, and the pairs kept are those where the product rounds up past k.
// At y of 2^-1000 the product m * |y| is subnormal, its rounding coarse: there the quotient decides.
TEST(NumericsCompare, ANewMaximumWithinARoundingOfTheOldIsFound) {
  for (const double scale : {1.0, 0x1p-1000}) {
    SplitMix64 rng = SplitMix64::Stream(8, 2);
    int found = 0;
    for (int i = 0; i < 200000 && found < 50; ++i) {
      const uint64_t j = 2 + rng.Below(1 << 20), k = j + 1 + rng.Below(j / 2);
      const double m = static_cast<double>(j) * 0x1p-52;
      const double y = static_cast<double>(k) / static_cast<double>(j) * scale;
      const double x = y + static_cast<double>(k) * 0x1p-52 * scale;
      const double d = std::fabs(x - y);
      if (!(d <= m * y && d / y > m)) continue;  // not such a pair
      ++found;
      const double xs[] = {1.0 + m, x}, ys[] = {1.0, y};
      const CompareResult r = CompareTensors(xs, ys, 2, {1, 1, 1});
      ASSERT_EQ(r.max_rel_index, 1) << std::hexfloat << "m " << m << " y " << y << " x " << x;
      ASSERT_EQ(r.max_rel, d / y);
    }
    EXPECT_GE(found, 50) << "scale " << scale;
  }
}

TEST(NumericsTolerance, GrowWithRoundingSteps) {
  AttentionPrecision fp32, fp64, bf16p, bf16o, fp8p;
  fp64.accumulate = Accumulate::kFp64;
  bf16p.p_format = NumFormat::kBf16;
  bf16o.out_format = NumFormat::kBf16;
  fp8p.p_format = NumFormat::kFp8E4m3fn;
  const auto t32 = DeriveTolerances(fp32, 4096, 1.0, 5.0);
  const auto t64 = DeriveTolerances(fp64, 4096, 1.0, 5.0);
  EXPECT_LT(t64.o.atol, 1e-12);
  EXPECT_LT(t32.o.atol, 1e-4);
  EXPECT_GT(t32.o.atol, 1e-6);
  EXPECT_LT(t32.o.atol, DeriveTolerances(fp32, 1 << 16, 1.0, 5.0).o.atol);
  EXPECT_NEAR(DeriveTolerances(bf16p, 4096, 1.0, 5.0).o.atol - t32.o.atol, 2 * 0x1p-8, 1e-12);
  EXPECT_NEAR(DeriveTolerances(bf16o, 4096, 1.0, 5.0).o.rtol - t32.o.rtol, 2 * 0x1p-8, 1e-12);
  EXPECT_NEAR(DeriveTolerances(fp8p, 4096, 1.0, 5.0).o.atol - t32.o.atol, 2 * 0x1p-4, 1e-12);
  EXPECT_EQ(DeriveTolerances(fp32, 4096, 2.0, 5.0).o.atol, 2 * t32.o.atol);  // scales with |V|
}

TEST(NumericsTolerance, TolerancesForACallUseItsLongestRequestAndVColumns) {
  // Requests of 37, 0 and 20 tokens (page 16): 37 keys at most. v_max over the V columns only,
  // times kv_scale; lse_max from the truth's finite LSE.
  PlanRequest r = test::DenseRequest(Arch::kGfx942, 16, 2, {37, 0, 20}, 4, 16);
  NumericsOptions o = SmallDims();
  o.kv_scale = 0.5;
  auto in = BuildMlaInputs(r, o);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  in->kv_cache[o.head_dim_v] = 100.f;  // a rope column of row 0: K only, not V
  AttentionPrecision prec;
  auto truth = RunMonolithic(*in, prec);
  ASSERT_TRUE(truth.ok());
  double v_max = 0, lse_max = 0;
  for (int64_t row = 0; row < int64_t{in->num_pages} * in->page_size; ++row)
    for (int32_t c = 0; c < o.head_dim_v; ++c) {
      const float v = in->kv_cache[row * o.head_dim_qk + c];
      if (std::isfinite(v)) v_max = std::max(v_max, std::fabs(double{v}));
    }
  for (double l : truth->lse)
    if (std::isfinite(l)) lse_max = std::max(lse_max, std::fabs(l));
  const OutputTolerances want = DeriveTolerances(prec, 37, v_max * 0.5, lse_max);
  const OutputTolerances got = TolerancesFor(*in, *truth, prec);
  EXPECT_EQ(got.o.atol, want.o.atol);
  EXPECT_EQ(got.o.rtol, want.o.rtol);
  EXPECT_EQ(got.lse.atol, want.lse.atol);
  EXPECT_LT(v_max, 100.0);
}

TEST(NumericsInputs, RoundedToTheTargetsFormatsWithNaNInUnusedSlots) {
  PlanRequest r = test::DenseRequest(Arch::kGfx942, 16, 2, {37, 0, 20}, 4, 16);
  r.q_dtype = r.kv_dtype = DType::kFp8;
  NumericsOptions o = SmallDims();
  o.kv_scale = 0.25;
  auto in = BuildMlaInputs(r, o);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  for (float v : in->q) ASSERT_EQ(RoundTo(NumFormat::kFp8E4m3fnuz, v), v);  // gfx942 fp8
  int64_t nan = 0, finite = 0;
  for (float v : in->kv_cache) {
    if (std::isnan(v)) {
      ++nan;
      continue;
    }
    ++finite;
    ASSERT_EQ(RoundTo(NumFormat::kFp8E4m3fnuz, v), v);
    ASSERT_LE(std::fabs(v) * 0.25, 1.0);  // stored = value / scale
  }
  EXPECT_EQ(finite, int64_t{57} * o.head_dim_qk);  // exactly the 57 real tokens
  EXPECT_EQ(nan, (int64_t{in->num_pages} * 16 - 57) * o.head_dim_qk);
  r.target = Arch::kGfx950;
  EXPECT_EQ(RunPlanNumerics(r, *PlanMlaMetadata(r), o)->q_format, NumFormat::kFp8E4m3fn);
}

TEST(NumericsInputs, RejectsWhatItCannotModel) {
  PlanRequest r = test::DenseRequest(Arch::kGfx942, 16, 1, {10}, 4);
  NumericsOptions o = SmallDims();
  PlanRequest bad = r;
  bad.num_heads_k = 2;
  EXPECT_EQ(BuildMlaInputs(bad, o).status().field(), "num_heads_k");
  o.head_dim_v = o.head_dim_qk + 1;
  EXPECT_EQ(BuildMlaInputs(r, o).status().field(), "head_dim_v");
  o = SmallDims();
  bad = test::SparseRequest(Arch::kGfx942, 16, 2, {10}, 8, 4);
  bad.page_size = 16;
  EXPECT_EQ(BuildMlaInputs(bad, o).status().field(), "page_size");
  bad = r;
  bad.qo_indptr = {0, 3};
  EXPECT_EQ(BuildMlaInputs(bad, o).status().field(), "qo_indptr");
  bad = test::DenseRequest(Arch::kGfx942, 16, 1, {2000000000}, 4);  // 2e9 tokens: refused, not OOM
  EXPECT_EQ(BuildMlaInputs(bad, o).status().field(), "kv_indptr");
  // A plan for another head count than the inputs'.
  const PlanRequest r64 = test::DenseRequest(Arch::kGfx942, 64, 1, {10}, 4);
  auto in = BuildMlaInputs(r, o);
  ASSERT_TRUE(in.ok());
  EXPECT_EQ(RunPlanDriven(*in, r64, *PlanMlaMetadata(r64)).status().field(),
            "request.heads_per_head_k");
  EXPECT_EQ(RunPlanDriven(*in, r, *PlanMlaMetadata(r64)).status().field(),
            "plan.derived.planner_heads");
  bad = r;
  bad.kv_indptr = {0, 11};
  EXPECT_EQ(RunPlanDriven(*in, bad, *PlanMlaMetadata(r)).status().field(), "request.kv_indptr");
}

TEST(NumericsDeterminism, SameSeedSameBytes) {
  const PlanRequest r = test::DenseRequest(Arch::kGfx942, 64, 3, {300, 7, 900}, 6);
  const Plan plan = *PlanMlaMetadata(r);
  auto run = [&](uint64_t seed) {
    const MlaInputs in = *BuildMlaInputs(r, SmallDims(seed));
    return std::make_pair(*RunMonolithic(in), *RunPlanDriven(in, r, plan));
  };
  const auto a = run(9), b = run(9), c = run(10);
  EXPECT_TRUE(SameBytes(a.first.o, b.first.o));
  EXPECT_TRUE(SameBytes(a.first.lse, b.first.lse));
  EXPECT_TRUE(SameBytes(a.second.out.o, b.second.out.o));
  EXPECT_TRUE(SameBytes(a.second.out.lse, b.second.out.lse));
  EXPECT_FALSE(SameBytes(a.first.o, c.first.o));
  EXPECT_EQ(a.second.fold_ratio, 4);
}

TEST(NumericsPoison, ParallelPlannerLeavesZeroKvRequestUnwritten) {
  // The parallel planner gives request 1 (zero KV) no work item (golden README): its o rows
  // are never written and stay poison; the monolithic answer is o = 0, lse = -inf.
  const PlanRequest r = test::DenseRequest(Arch::kGfx942, 16, 1, {10, 0, 300}, 5);
  const Plan plan = *PlanMlaMetadata(r);
  ASSERT_TRUE(plan.derived.parallel_planner_used);
  ASSERT_EQ(CheckPlan(r, plan).count(PlanDiag::kTileWithoutWork), 1);
  auto rep = RunPlanNumerics(r, plan, SmallDims());
  ASSERT_TRUE(rep.ok());
  ASSERT_EQ(rep->poison.size(), 1u);
  const PoisonFinding& f = rep->poison[0];
  EXPECT_EQ(f.kind, PoisonKind::kNeverWritten);
  EXPECT_EQ(f.output, NumericsBuffer::kO);
  EXPECT_EQ(f.row_begin, 1);
  EXPECT_EQ(f.row_end, 2);
  EXPECT_EQ(f.head_begin, 0);
  EXPECT_EQ(f.head_end, 16);
  EXPECT_EQ(rep->poisoned_rows, 16);
  EXPECT_EQ(rep->o.nan_mismatches, 16 * 32);  // NaN where the truth is 0
  EXPECT_EQ(rep->lse.nan_mismatches, 16);
  EXPECT_EQ(rep->unexplained_nan, 0);
  EXPECT_TRUE(rep->ok);  // everything else agrees; the poison is reported, not hidden
  // The serial planner gives the request an empty work item, which writes o = 0, lse = -inf.
  PlanRequest serial = r;
  const Plan splan = *PlanMlaMetadata(serial, {PlannerChoice::kSerial});
  rep = RunPlanNumerics(serial, splan, SmallDims());
  ASSERT_TRUE(rep.ok());
  EXPECT_TRUE(rep->poison.empty());
  EXPECT_TRUE(rep->o.passed && rep->lse.passed);
}

TEST(NumericsPoison, SkippingKernelLeavesEmptyRowsUnwritten) {
  // EmptyRowPolicy::kSkip models OPUS/HK (§11.5): zero-length works write nothing.
  const PlanRequest r = test::DenseRequest(Arch::kGfx942, 16, 2, {0, 50}, 4);
  NumericsOptions o = SmallDims();
  o.empty_rows = EmptyRowPolicy::kSkip;
  auto rep = RunPlanNumerics(r, *PlanMlaMetadata(r), o);
  ASSERT_TRUE(rep.ok());
  ASSERT_EQ(rep->poison.size(), 1u);
  EXPECT_EQ(rep->poison[0].kind, PoisonKind::kNeverWritten);
  EXPECT_EQ(rep->poison[0].row_begin, 0);
  EXPECT_EQ(rep->poison[0].row_end, 2);
}

// A plan built by hand: one request, `works` work_info rows on one cluster.
Plan HandPlan(int32_t heads, const std::vector<std::vector<int32_t>>& works,
              const std::vector<int32_t>& reduce_indptr, const std::vector<int32_t>& final_map,
              const std::vector<int32_t>& partial_map) {
  Plan p;
  p.derived.fold_ratio = 1;
  p.derived.planner_heads = heads;
  p.derived.num_clusters = 1;
  p.derived.num_works = static_cast<int32_t>(works.size());
  p.work_indptr.Reset(2, 1);
  p.work_indptr.Store(0, 0);
  p.work_indptr.Store(1, static_cast<int32_t>(works.size()));
  p.work_info.Reset(static_cast<int32_t>(works.size()) * kWorkInfoWidth, kWorkInfoWidth);
  for (size_t w = 0; w < works.size(); ++w)
    for (int f = 0; f < kWorkInfoWidth; ++f)
      p.work_info.Store(static_cast<int64_t>(w) * kWorkInfoWidth + f, works[w][f]);
  auto fill = [](Int32Buffer& b, const std::vector<int32_t>& v, int32_t width) {
    b.Reset(static_cast<int32_t>(v.size()), width);
    for (size_t i = 0; i < v.size(); ++i) b.Store(static_cast<int64_t>(i), v[i]);
  };
  fill(p.reduce_indptr, reduce_indptr, 1);
  fill(p.reduce_final_map, final_map, 2);
  fill(p.reduce_partial_map, partial_map, 1);
  return p;
}

TEST(NumericsReduce, RowWithoutKeyInAnyPieceFollowsAiterFormula) {
  // 2 keys, 4 causal q rows: rows 0 and 1 see no key at all, row 2 sees key 0 only. The tile
  // is split into pieces [0,1) and [1,2). §12: a row whose every piece has lse -inf gets
  // S = NaN -> L = +inf and O = 0, where the monolithic answer has lse -inf.
  const PlanRequest r = test::DenseRequest(Arch::kGfx942, 16, 4, {2}, 1);
  const Plan plan =
      HandPlan(16, {{0, 0, 0, 4, 0, 1, 1, 0}, {0, 4, 0, 4, 1, 2, 0, 0}}, {0, 2}, {0, 4}, {0, 4});
  NumericsOptions o = SmallDims();
  o.precision.accumulate = Accumulate::kFp64;
  auto in = BuildMlaInputs(r, o);
  ASSERT_TRUE(in.ok());
  auto got = RunPlanDriven(*in, r, plan, {o.precision});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got->poison.empty());
  EXPECT_EQ(got->partial_rows_without_key, 5);  // rows 0, 1 in both pieces, row 2 in piece 1
  auto mono = RunMonolithic(*in, o.precision);
  for (int32_t h = 0; h < 16; ++h) {
    EXPECT_EQ(got->out.lse[0 * 16 + h], kInf);
    EXPECT_EQ(got->out.lse[1 * 16 + h], kInf);
    EXPECT_EQ(mono->lse[0 * 16 + h], -kInf);
    EXPECT_NEAR(got->out.lse[2 * 16 + h], mono->lse[2 * 16 + h], 1e-12);
  }
  for (int64_t x = 0; x < 3 * 16 * 32; ++x) {
    if (x < 2 * 16 * 32) {
      EXPECT_EQ(got->out.o[x], 0.0);
    }
    EXPECT_NEAR(got->out.o[x], mono->o[x], 1e-12);
  }
  // aiter #4711: a piece row without key whose partial o is 0/0 (the contract's empty_rows =
  // nan) poisons the merge (0 x NaN), and the findings say which semantics let it through.
  PlanExecOptions garbage{o.precision, EmptyRowPolicy::kNan};
  got = RunPlanDriven(*in, r, plan, garbage);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(std::isnan(got->out.o[2 * 16 * 32]));
  EXPECT_TRUE(std::isnan(got->out.o[0]));
  ASSERT_FALSE(got->poison.empty());
  EXPECT_EQ(got->poison[0].kind, PoisonKind::kEmptyRowNaN);
  EXPECT_EQ(got->poison[0].output, NumericsBuffer::kPartialO);
  EXPECT_EQ(got->poison[0].via, "empty_rows = nan");
}

// zero_kv and empty_rows are two contract fields with two knobs (docs/numerics.md "The contract
// modelled"): a zero-KV work item follows zero_kv, a row without a visible key in an item that
// runs follows empty_rows. Request 0: 2 keys, 4 causal q rows, split into pieces [0,1) and [1,2)
// (rows 0 and 1 see no key in either piece, row 2 none in piece 1); request 1: no KV, one
// zero-KV item over q rows [4,8). OPUS (zero_kv skips, empty_rows zero) is the case where one
// policy for both fields cannot be right either way.
TEST(NumericsPoison, ZeroKvAndEmptyRowsAreTwoPolicies) {
  const PlanRequest r = test::DenseRequest(Arch::kGfx942, 16, 4, {2, 0}, 1);
  const Plan plan =
      HandPlan(16, {{0, 0, 0, 4, 0, 1, 1, 0}, {0, 4, 0, 4, 1, 2, 0, 0}, {1, -1, 4, 8, 2, 2, 0, 0}},
               {0, 2}, {0, 4}, {0, 4});
  NumericsOptions o = SmallDims();
  o.precision.accumulate = Accumulate::kFp64;
  auto in = BuildMlaInputs(r, o);
  ASSERT_TRUE(in.ok());
  const AttentionOutput mono = *RunMonolithic(*in, o.precision);
  using Z = ZeroKvPolicy;
  using E = EmptyRowPolicy;
  // The findings of the three empty-row policies on request 0, and of the zero-KV item.
  const std::vector<std::string> nan_rows = {
      "empty_row_nan: partial_o rows [0,2) heads [0,16) from o work 0 (empty_rows = nan)",
      "empty_row_nan: partial_o rows [4,7) heads [0,16) from o work 1 (empty_rows = nan)",
      "tainted_read: o rows [0,2) heads [0,16) from partial_o[0] tile 0",
      "tainted_read: o rows [2,3) heads [0,16) from partial_o[6] tile 0"};  // piece 1's row 2
  const std::vector<std::string> skipped_rows = {
      "unwritten_read: o rows [0,2) heads [0,16) from partial_o[0] tile 0",
      "unwritten_read: o rows [2,3) heads [0,16) from partial_o[6] tile 0"};
  const std::string zero_kv_nan =
      "empty_row_nan: o rows [4,8) heads [0,16) from o work 2 (empty_rows = nan)";
  const std::string zero_kv_unwritten = "never_written: o rows [4,8) heads [0,16) from o[4]";
  struct Want {
    Z zero_kv;
    E empty_rows;
    std::vector<std::string> findings;
    double o_zero_kv_row;    // o[4][0][0]: the zero-KV request's first value
    double lse_zero_kv_row;  // lse[4][0]
    bool request0_clean;     // rows 0..3 of request 0 as aiter's reduce gives them
  };
  std::vector<Want> wants = {
      {Z::kRun, E::kWriteZero, {}, 0.0, -kInf, true},
      {Z::kRun, E::kNan, nan_rows, kNaN, -kInf, false},
      {Z::kRun, E::kSkip, skipped_rows, kNaN, kNaN, false},
      {Z::kSkip, E::kWriteZero, {}, kNaN, kNaN, true},
      {Z::kSkip, E::kNan, nan_rows, kNaN, kNaN, false},
      {Z::kSkip, E::kSkip, skipped_rows, kNaN, kNaN, false},
      // FlashMLA's keyless rows: o = 0, lse = +inf where o is written; the split pieces' partial
      // rows keep lse = -inf, so request 0's keyed rows 2..3 reduce as with kWriteZero.
      {Z::kRun, E::kWriteZeroPosInfLse, {}, 0.0, kInf, true},
      {Z::kSkip, E::kWriteZeroPosInfLse, {}, kNaN, kNaN, true},
  };
  wants[1].findings.insert(wants[1].findings.begin() + 2, zero_kv_nan);
  wants[2].findings.push_back(zero_kv_unwritten);
  for (int i = 3; i < 6; ++i) wants[i].findings.push_back(zero_kv_unwritten);
  wants[7].findings.push_back(zero_kv_unwritten);
  for (const Want& w : wants) {
    PlanExecOptions exec{o.precision, w.empty_rows};
    exec.zero_kv = w.zero_kv;
    const std::string label = std::string("zero_kv ") + (w.zero_kv == Z::kRun ? "run" : "skip") +
                              ", empty_rows " + std::to_string(static_cast<int>(w.empty_rows));
    auto got = RunPlanDriven(*in, r, plan, exec);
    ASSERT_TRUE(got.ok()) << label;
    std::vector<std::string> findings;
    for (const PoisonFinding& f : got->poison) findings.push_back(f.ToString());
    EXPECT_EQ(findings, w.findings) << label;
    const double o4 = got->out.o[4 * 16 * 32], lse4 = got->out.lse[4 * 16];
    EXPECT_TRUE(std::isnan(w.o_zero_kv_row) ? std::isnan(o4) : o4 == w.o_zero_kv_row)
        << label << ": " << o4;
    EXPECT_TRUE(std::isnan(w.lse_zero_kv_row) ? std::isnan(lse4) : lse4 == w.lse_zero_kv_row)
        << label << ": " << lse4;
    if (w.request0_clean) {
      EXPECT_EQ(got->out.lse[0], kInf) << label;  // no key in any piece: aiter's L = +inf
      EXPECT_EQ(got->out.o[0], 0.0) << label;
      for (int64_t x = 2 * 16 * 32; x < 4 * 16 * 32; ++x)
        ASSERT_NEAR(got->out.o[x], mono.o[x], 1e-12) << label << " element " << x;
    } else {
      EXPECT_TRUE(std::isnan(got->out.o[0])) << label;
      EXPECT_TRUE(std::isnan(got->out.o[2 * 16 * 32])) << label;  // row 2: piece 1 had no key
      EXPECT_NEAR(got->out.o[3 * 16 * 32], mono.o[3 * 16 * 32], 1e-12) << label;
    }
  }
}

// zero_and_pos_inf_lse: a real row without a key holds lse = +inf, and so does the truth it is held
// to (ApplyEmptyRowLse), so the step passes; every other value, NaN and +inf of the truth stay.
TEST(NumericsPoison, PosInfLseOfKeylessRowsIsTheTruthUnderItsPolicy) {
  AttentionOutput t;
  t.lse = {-kInf, 1.5, kInf, kNaN, -2.0};
  ApplyEmptyRowLse(EmptyRowPolicy::kWriteZero, t);
  EXPECT_EQ(t.lse[0], -kInf);
  ApplyEmptyRowLse(EmptyRowPolicy::kNan, t);
  ApplyEmptyRowLse(EmptyRowPolicy::kSkip, t);
  EXPECT_EQ(t.lse[0], -kInf);
  ApplyEmptyRowLse(EmptyRowPolicy::kWriteZeroPosInfLse, t);
  EXPECT_EQ(t.lse[0], kInf);
  EXPECT_EQ(t.lse[1], 1.5);
  EXPECT_EQ(t.lse[2], kInf);
  EXPECT_TRUE(std::isnan(t.lse[3]));
  EXPECT_EQ(t.lse[4], -2.0);

  const PlanRequest r = test::DenseRequest(Arch::kGfx942, 16, 1, {300, 0}, 1);  // request 1: no key
  const Plan plan = *PlanMlaMetadata(r, {PlannerChoice::kSerial});
  for (EmptyRowPolicy e : {EmptyRowPolicy::kWriteZero, EmptyRowPolicy::kWriteZeroPosInfLse}) {
    NumericsOptions o = SmallDims();
    o.empty_rows = e;
    auto rep = RunPlanNumerics(r, plan, o);
    ASSERT_TRUE(rep.ok()) << rep.status().ToString();
    EXPECT_TRUE(rep->ok) << static_cast<int>(e);
    EXPECT_EQ(rep->lse_unpoisoned.inf_mismatches, 0) << static_cast<int>(e);
    EXPECT_GE(rep->lse_unpoisoned.elements, 32);  // both requests' 16 heads compared
  }
}

TEST(NumericsPoison, GarbagePlansBecomeFindingsNotCrashes) {
  const PlanRequest r = test::DenseRequest(Arch::kGfx942, 16, 1, {300, 40, 700}, 8);
  const Plan good = *PlanMlaMetadata(r, {PlannerChoice::kSerial});
  const MlaInputs in = *BuildMlaInputs(r, SmallDims());
  auto run = [&](const Plan& p) {
    auto res = RunPlanDriven(in, r, p);
    EXPECT_TRUE(res.ok());
    return *res;
  };
  auto has = [](const PlanDrivenResult& res, PoisonKind kind, NumericsBuffer src) {
    for (const PoisonFinding& f : res.poison)
      if (f.kind == kind && f.source == src) return true;
    return false;
  };
  EXPECT_TRUE(run(good).poison.empty());

  // An unwritten reduce_partial_map entry: the reduce reads poison for tile 0 (request 0).
  Plan p = good;
  p.reduce_partial_map.cells[1] = Cell::kUnwritten;
  PlanDrivenResult res = run(p);
  ASSERT_TRUE(has(res, PoisonKind::kUnwrittenRead, NumericsBuffer::kReducePartialMap));
  EXPECT_EQ(res.poison[0].output, NumericsBuffer::kO);
  EXPECT_EQ(res.poison[0].row_begin, 0);
  EXPECT_EQ(res.poison[0].source_index, 1);
  EXPECT_EQ(res.poison[0].tile, 0);
  EXPECT_TRUE(std::isnan(res.out.o[0]));

  // A piece writing past the partial buffer: the store is reported and not done, and the
  // reduce then reads a partial row nobody wrote.
  p = good;
  p.work_info.data[1 * kWorkInfoWidth + kPartialQoLoc] = 1 << 20;
  res = run(p);
  EXPECT_TRUE(has(res, PoisonKind::kOutOfRangeWrite, NumericsBuffer::kWorkInfo));
  EXPECT_TRUE(has(res, PoisonKind::kUnwrittenRead, NumericsBuffer::kPartialO));

  // A KV range past the page table: the keys are poison and the rows that read them say so.
  p = good;
  p.work_info.data[2 * kWorkInfoWidth + kKvEnd] = 5000;
  res = run(p);
  EXPECT_TRUE(has(res, PoisonKind::kOutOfRangeRead, NumericsBuffer::kKvIndices));
  EXPECT_TRUE(std::isnan(res.out.o[1 * 16 * 32]));

  // A batch index outside the batch, an unwritten work_indptr entry, a work row nobody wrote.
  p = good;
  p.work_info.data[2 * kWorkInfoWidth + kBatchIdx] = 99;
  EXPECT_TRUE(has(run(p), PoisonKind::kOutOfRangeRead, NumericsBuffer::kKvIndptr));
  p = good;
  p.work_indptr.cells[3] = Cell::kUnwritten;
  EXPECT_TRUE(has(run(p), PoisonKind::kUnwrittenRead, NumericsBuffer::kWorkIndptr));
  p = good;
  p.work_info.cells[0 * kWorkInfoWidth + kKvStart] = Cell::kUnwritten;
  res = run(p);
  EXPECT_TRUE(has(res, PoisonKind::kUnwrittenRead, NumericsBuffer::kWorkInfo));
  // ... whose piece is then missing from tile 0's reduce.
  EXPECT_TRUE(has(res, PoisonKind::kUnwrittenRead, NumericsBuffer::kPartialO));
  // Huge values never allocate or loop unbounded.
  p = good;
  p.work_info.data[0 * kWorkInfoWidth + kKvEnd] = INT32_MAX;
  p.reduce_indptr.data[1] = INT32_MAX;
  res = run(p);
  EXPECT_FALSE(res.poison.empty());
}

TEST(NumericsPoison, PlannerMutantsShowUpAsPoison) {
  const PlanRequest r = test::DenseRequest(Arch::kGfx942, 16, 2, {300, 40, 700}, 8);
  // A split tile that lost its final piece: the reduce reads the partial row it never wrote.
  auto rep = RunPlanNumerics(
      r, *PlanMlaMetadata(r, {PlannerChoice::kSerial, PlannerMutant::kDropLastPiece}), SmallDims());
  ASSERT_TRUE(rep.ok());
  bool unwritten_partial = false;
  for (const PoisonFinding& f : rep->poison)
    unwritten_partial |=
        f.kind == PoisonKind::kUnwrittenRead && f.source == NumericsBuffer::kPartialO;
  EXPECT_TRUE(unwritten_partial);
  // reduce_partial_map shifted by one tile: wrong or unwritten rows merged.
  rep = RunPlanNumerics(
      r, *PlanMlaMetadata(r, {PlannerChoice::kSerial, PlannerMutant::kPartialMapOffByOne}),
      SmallDims());
  ASSERT_TRUE(rep.ok());
  EXPECT_FALSE(rep->poison.empty() && rep->o.passed);
}

TEST(NumericsPoison, FoldedPagedPlanReadsLastPageLensPastTheEnd) {
  // 64 heads on gfx942 bf16 fold by 4; with pages > 1 the planner reads kv_last_page_lens at the
  // virtual batch index (§4.5): for request 1 that is past the array, so a kv_offset is
  // unknowable and the work that depends on it is reported as poison.
  const PlanRequest r = test::DenseRequest(Arch::kGfx942, 64, 1, {20, 2000}, 8, 16, 16);
  const Plan plan = *PlanMlaMetadata(r);
  ASSERT_EQ(plan.derived.fold_ratio, 4);
  ASSERT_FALSE(plan.input_violations.empty());
  auto rep = RunPlanNumerics(r, plan, SmallDims());
  ASSERT_TRUE(rep.ok());
  ASSERT_FALSE(rep->poison.empty());
  const PoisonFinding& f = rep->poison[0];
  EXPECT_EQ(f.kind, PoisonKind::kOutOfRangeRead);
  EXPECT_EQ(f.source, NumericsBuffer::kWorkInfo);
  EXPECT_EQ(f.source_index % kWorkInfoWidth, kKvOffset);
  EXPECT_EQ(f.source_index / kWorkInfoWidth, plan.input_violations[0].work_row);
  // Everything not downstream of it still agrees.
  EXPECT_TRUE(rep->o_unpoisoned.passed);
  EXPECT_EQ(rep->unexplained_nan, 0);
}

TEST(NumericsPoison, TopkMinusOneDereferencedUnderInvalidIndexFault) {
  const PlanRequest r = test::SparseRequest(Arch::kGfx942, 16, 2, {40, 9}, 16, 4);
  const Plan plan = *PlanMlaMetadata(r);
  MlaInputs in = *BuildMlaInputs(r, SmallDims());
  in.topk_indices[3] = -1;
  auto clean = RunPlanDriven(in, r, plan);
  ASSERT_TRUE(clean.ok());
  EXPECT_TRUE(clean->poison.empty());
  // A kernel whose contract says invalid_index = fault dereferences the -1: the finding names
  // the index slot, its value and the contract field.
  auto bad = RunPlanDriven(
      in, r, plan,
      {{}, EmptyRowPolicy::kWriteZero, NumericsMutant::kNone, InvalidIndexUse::kFault});
  ASSERT_TRUE(bad.ok());
  ASSERT_FALSE(bad->poison.empty());
  EXPECT_EQ(bad->poison[0].kind, PoisonKind::kOutOfRangeRead);
  EXPECT_EQ(bad->poison[0].source, NumericsBuffer::kTopkIndices);
  EXPECT_EQ(bad->poison[0].source_index, 3);
  EXPECT_TRUE(bad->poison[0].has_value);
  EXPECT_EQ(bad->poison[0].source_value, -1);
  EXPECT_EQ(bad->poison[0].via, "invalid_index = fault");
  EXPECT_EQ(bad->poison[0].row_begin, 0);  // token 0 owns row 0 of the index matrix
}

// Two writers of one row in one launch (aiter-mla-metadata.md §9.3: decode_update's plans give
// one tile two unsplit pieces): which value lands depends on the hardware's order, so the row
// is undefined (racing_write) whatever this sequential run leaves in it. One writer, or a decode
// row the reduce overwrites later (two launches, ordered), is not a race.
std::vector<std::string> PoisonText(const PlanDrivenResult& res) {
  std::vector<std::string> out;
  for (const PoisonFinding& f : res.poison) out.push_back(f.ToString());
  return out;
}

TEST(NumericsPoison, RowsTwoWritersOfOneLaunchWriteAreUndefined) {
  const PlanRequest r = test::DenseRequest(Arch::kGfx942, 16, 1, {8}, 1);
  const MlaInputs in = *BuildMlaInputs(r, SmallDims());
  auto run = [&](const Plan& p) {
    auto res = RunPlanDriven(in, r, p);
    EXPECT_TRUE(res.ok()) << res.status().ToString();
    return *res;
  };
  // One unsplit work: no finding (the boundary: one writer).
  EXPECT_EQ(PoisonText(run(HandPlan(16, {{0, -1, 0, 1, 0, 8, 0, 0}}, {0, 1}, {0, 1}, {0}))),
            std::vector<std::string>{});
  // Two unsplit works over row 0 (the second reads more keys): the later names itself.
  PlanDrivenResult res = run(
      HandPlan(16, {{0, -1, 0, 1, 0, 4, 0, 0}, {0, -1, 0, 1, 0, 8, 0, 0}}, {0, 1}, {0, 1}, {0}));
  EXPECT_EQ(
      PoisonText(res),
      std::vector<std::string>{"racing_write: o rows [0,1) heads [0,16) from work_info[8] work 1"});
  EXPECT_EQ(PoisonPairMask(res.poison, 1, 16), std::vector<uint8_t>(16, 1));
  // Two split works storing the same partial row: the partial row races, and the reduce that
  // merges it reads a tainted row.
  res = run(
      HandPlan(16, {{0, 0, 0, 1, 0, 4, 0, 0}, {0, 0, 0, 1, 4, 8, 0, 0}}, {0, 2}, {0, 1}, {0, 0}));
  EXPECT_EQ(PoisonText(res),
            (std::vector<std::string>{
                "racing_write: partial_o rows [0,1) heads [0,16) from work_info[8] work 1",
                "tainted_read: o rows [0,1) heads [0,16) from partial_o[0] tile 0"}));
  // Two reduce tiles of one launch both storing row 0.
  res = run(HandPlan(16,
                     {{0, 0, 0, 1, 0, 2, 0, 0},
                      {0, 1, 0, 1, 2, 4, 0, 0},
                      {0, 2, 0, 1, 4, 6, 0, 0},
                      {0, 3, 0, 1, 6, 8, 0, 0}},
                     {0, 2, 4}, {0, 1, 0, 1}, {0, 1, 2, 3}));
  EXPECT_EQ(PoisonText(res),
            std::vector<std::string>{
                "racing_write: o rows [0,1) heads [0,16) from reduce_final_map[2] tile 1"});
  // A decode's direct store of row 0, then a reduce tile's: two launches, ordered, no race.
  res = run(
      HandPlan(16, {{0, -1, 0, 1, 0, 4, 0, 0}, {0, 0, 0, 1, 4, 6, 0, 0}, {0, 1, 0, 1, 6, 8, 0, 0}},
               {0, 2}, {0, 1}, {0, 1}));
  EXPECT_EQ(PoisonText(res), std::vector<std::string>{});
}

}  // namespace
}  // namespace mlasim::ref
