// The C++ entry behind mlasim.check_plan (python/src/bindings.cpp): io::PlanFromBuffers (the
// caller's five int32 buffers -> ref::Plan) + ref::CheckPlan, at B = 256, against ref::CheckPlan
// alone on the planner's own Plan (the peer measured in the same run). Shape: aiter's planner
// benchmark (gfx950, 16 heads, fp8, qlen 4, max_split_per_batch 16, contexts around 2k), as
// tests/python/test_plan.py times it. Results: docs/performance.md.
#include <benchmark/benchmark.h>

#include "ref/plan_check.h"
#include "ref/planner.h"
#include "tests/ref/plan_builders.h"
#include "tools/io/plan_buffers.h"

namespace mlasim::io {
namespace {

ref::PlanRequest Shape(int32_t batch, int32_t qlen) {
  std::vector<int32_t> kv;
  uint32_t x = 12345;  // a fixed LCG: the contexts of tests/bench/planner_bench.cpp
  for (int32_t i = 0; i < batch; ++i) {
    x = x * 1664525u + 1013904223u;
    kv.push_back(1024 + static_cast<int32_t>(x % 2048u));
  }
  ref::PlanRequest r = ref::test::DenseRequest(ref::Arch::kGfx950, 16, qlen, kv, 0);
  r.q_dtype = r.kv_dtype = ref::DType::kFp8;
  r.max_split_per_batch = 16;
  return r;
}

PlanBufferViews Views(const ref::Plan& p) {
  const auto v = [](const ref::Int32Buffer& b) { return Int32View{b.data.data(), b.size()}; };
  return {v(p.work_indptr), v(p.work_info), v(p.reduce_indptr), v(p.reduce_final_map),
          v(p.reduce_partial_map)};
}

void BM_CheckPlanBuffers(benchmark::State& state) {
  const ref::PlanRequest r = Shape(static_cast<int32_t>(state.range(0)), 4);
  const ref::Plan plan = *ref::PlanMlaMetadata(r);
  const PlanBufferViews views = Views(plan);
  for (auto _ : state) {
    auto p = PlanFromBuffers(r, views, kDefaultUnwrittenValue);
    auto report = ref::CheckPlan(r, *p);
    benchmark::DoNotOptimize(report);
  }
  state.counters["works"] = plan.derived.num_works;
}
BENCHMARK(BM_CheckPlanBuffers)->ArgName("B")->Arg(256)->Unit(benchmark::kMicrosecond);

void BM_PlanFromBuffersOnly(benchmark::State& state) {
  const ref::PlanRequest r = Shape(static_cast<int32_t>(state.range(0)), 4);
  const ref::Plan plan = *ref::PlanMlaMetadata(r);
  const PlanBufferViews views = Views(plan);
  for (auto _ : state) {
    auto p = PlanFromBuffers(r, views, kDefaultUnwrittenValue);
    benchmark::DoNotOptimize(p);
  }
}
BENCHMARK(BM_PlanFromBuffersOnly)->ArgName("B")->Arg(256)->Unit(benchmark::kMicrosecond);

void BM_CheckPlanOwnPlan(benchmark::State& state) {
  const ref::PlanRequest r = Shape(static_cast<int32_t>(state.range(0)), 4);
  const ref::Plan plan = *ref::PlanMlaMetadata(r);
  for (auto _ : state) {
    auto report = ref::CheckPlan(r, plan);
    benchmark::DoNotOptimize(report);
  }
}
BENCHMARK(BM_CheckPlanOwnPlan)->ArgName("B")->Arg(256)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace mlasim::io
