// Numerics reference speed on one core: the issue-4 shape (16 heads, qlen 4, 4k context, B = 8,
// D = 576, Dv = 512, fp32 accumulate), monolithic and plan-driven, against a measured fp32 peak
// of this core with this build's flags. Results: docs/performance.md, "CPU numerics".
//
//   ./build/bin/mlasim_bench --benchmark_filter='Peak|Attention|Numerics' --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include "ref/attention.h"
#include "ref/numerics.h"
#include "ref/planner.h"
#include "tests/ref/plan_builders.h"

namespace mlasim::ref {
namespace {

// fp32 multiply-add throughput: 128 independent accumulators updated acc = acc * m + a, which
// -O3 vectorises with the build's instruction set (x86-64 baseline: SSE2 mulps + addps; with
// FMA-capable flags it would contract to FMAs). 2 flops per element per step.
template <int kAccumulators>
__attribute__((noipa)) float MulAddLoop(int64_t steps, float m, float a) {
  float acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = 0.001f * static_cast<float>(i);
  for (int64_t s = 0; s < steps; ++s) {
#pragma GCC unroll 128
    for (int i = 0; i < kAccumulators; ++i) acc[i] = acc[i] * m + a;
  }
  float sum = 0;
  for (int i = 0; i < kAccumulators; ++i) sum += acc[i];
  return sum;
}

void BM_PeakFp32MulAdd(benchmark::State& state) {
  constexpr int kAcc = 128;
  constexpr int64_t kSteps = 1 << 20;
  for (auto _ : state) benchmark::DoNotOptimize(MulAddLoop<kAcc>(kSteps, 0.999999f, 1e-7f));
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * kAcc * kSteps / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_PeakFp32MulAdd)->Unit(benchmark::kMillisecond);

// The issue-4 shape: B requests of qlen 4 and 4096 tokens, 16 heads, bf16 inputs.
PlanRequest DecodeShape(int32_t batch) {
  return test::DenseRequest(Arch::kGfx942, 16, 4, std::vector<int32_t>(batch, 4096), 0);
}

// Useful flops: q x K^T and P x V over every (q row, head, key), causal masking ignored.
double DecodeGflop(const MlaInputs& in) {
  double flops = 0;
  for (int32_t b = 0; b < in.num_requests(); ++b) {
    const double rows = static_cast<double>(in.qo_indptr[b + 1] - in.qo_indptr[b]) * in.num_heads;
    const double keys = static_cast<double>(in.kv_indptr[b + 1] - in.kv_indptr[b]);  // page size 1
    flops += 2.0 * rows * keys * (in.head_dim_qk + in.head_dim_v);
  }
  return flops / 1e9;
}

void BM_AttentionMonolithic(benchmark::State& state) {
  const PlanRequest r = DecodeShape(static_cast<int32_t>(state.range(0)));
  NumericsOptions opt;
  const MlaInputs in = *BuildMlaInputs(r, opt);
  AttentionPrecision prec;
  prec.accumulate = state.range(1) ? Accumulate::kFp64 : Accumulate::kFp32;
  for (auto _ : state) {
    auto out = RunMonolithic(in, prec);
    benchmark::DoNotOptimize(out);
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(DecodeGflop(in), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AttentionMonolithic)
    ->ArgNames({"B", "fp64"})
    ->Args({8, 0})
    ->Args({8, 1})
    ->Unit(benchmark::kMillisecond);

void BM_AttentionPlanDriven(benchmark::State& state) {
  PlanRequest r = DecodeShape(static_cast<int32_t>(state.range(0)));
  r.cu_count = static_cast<int32_t>(state.range(1));  // clusters: 304 = MI300X, 80 = MI308X
  const Plan plan = *PlanMlaMetadata(r);
  NumericsOptions opt;
  const MlaInputs in = *BuildMlaInputs(r, opt);
  for (auto _ : state) {
    auto out = RunPlanDriven(in, r, plan);
    benchmark::DoNotOptimize(out);
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(DecodeGflop(in), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["works"] = plan.derived.num_works;
}
BENCHMARK(BM_AttentionPlanDriven)
    ->ArgNames({"B", "clusters"})
    ->Args({8, 80})
    ->Args({8, 304})
    ->Unit(benchmark::kMillisecond);

void BM_NumericsFuzzCase(benchmark::State& state) {
  // A fuzzing-sized step: dims 80/64, 4 requests of ~500 tokens, qlen 2, 8 clusters: inputs,
  // monolithic, plan-driven and the comparison.
  const PlanRequest r = test::DenseRequest(Arch::kGfx942, 16, 2, {500, 37, 900, 260}, 8);
  const Plan plan = *PlanMlaMetadata(r);
  NumericsOptions opt;
  opt.head_dim_qk = 80;
  opt.head_dim_v = 64;
  for (auto _ : state) {
    auto rep = RunPlanNumerics(r, plan, opt);
    benchmark::DoNotOptimize(rep);
  }
}
BENCHMARK(BM_NumericsFuzzCase)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace mlasim::ref
