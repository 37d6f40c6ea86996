// Planner speed: one core, the shapes of issue 2 (B = 4 with 2k KV, 64, 256 requests, qlen 1
// and 4; sparse per-token with 1024 tokens). Anchor: aiter's GPU planner takes 3.6 us
// (parallel) to 37 us (serial) for B = 4 on MI355X. Results: docs/performance.md.
#include <benchmark/benchmark.h>

#include "ref/plan_check.h"
#include "ref/planner.h"
#include "ref/sizing.h"
#include "tests/ref/plan_builders.h"

namespace mlasim::ref {
namespace {

// Deterministic context lengths around `mean` (a fixed LCG, no std distributions).
std::vector<int32_t> Contexts(int32_t batch, int32_t mean) {
  std::vector<int32_t> kv;
  uint32_t x = 12345;
  for (int32_t i = 0; i < batch; ++i) {
    x = x * 1664525u + 1013904223u;
    kv.push_back(mean / 2 + static_cast<int32_t>(x % static_cast<uint32_t>(mean)));
  }
  return kv;
}

void BM_PlanDense(benchmark::State& state) {
  const int32_t batch = static_cast<int32_t>(state.range(0));
  const int32_t qlen = static_cast<int32_t>(state.range(1));
  // aiter's own planner benchmark shape (op_tests/test_metadata.py): 16 heads, fp8, page 1,
  // max_split_per_batch 16, contexts around 2k.
  PlanRequest r = test::DenseRequest(Arch::kGfx950, 16, qlen, Contexts(batch, 2048), 0);
  r.q_dtype = r.kv_dtype = DType::kFp8;
  r.max_split_per_batch = 16;
  for (auto _ : state) {
    auto plan = PlanMlaMetadata(r);
    benchmark::DoNotOptimize(plan);
  }
  state.counters["works"] = PlanMlaMetadata(r)->derived.num_works;
  state.counters["parallel"] = PlanMlaMetadata(r)->derived.parallel_planner_used;
}
BENCHMARK(BM_PlanDense)
    ->ArgNames({"B", "qlen"})
    ->Args({4, 1})
    ->Args({4, 4})
    ->Args({64, 1})
    ->Args({64, 4})
    ->Args({256, 1})
    ->Args({256, 4})
    ->Unit(benchmark::kMicrosecond);

// The same shapes replanned in place (PlanMlaMetadataInto with a Plan*, as a caller that plans
// every step reuses its buffers), with and without the per-element write state.
void BM_PlanDenseInPlace(benchmark::State& state) {
  const int32_t batch = static_cast<int32_t>(state.range(0));
  const int32_t qlen = static_cast<int32_t>(state.range(1));
  PlanRequest r = test::DenseRequest(Arch::kGfx950, 16, qlen, Contexts(batch, 2048), 0);
  r.q_dtype = r.kv_dtype = DType::kFp8;
  r.max_split_per_batch = 16;
  const MetadataSizes sizes = *GetMlaMetadataInfoV1(r, batch);
  PlannerOptions options;
  options.tracking = state.range(2) ? CellTracking::kChecked : CellTracking::kFast;
  Plan plan;
  for (auto _ : state) {
    Status st = PlanMlaMetadataInto(r, sizes, options, &plan);
    benchmark::DoNotOptimize(st);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_PlanDenseInPlace)
    ->ArgNames({"B", "qlen", "checked"})
    ->ArgsProduct({{4, 64, 256}, {1, 4}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

void BM_PlanSparsePerToken(benchmark::State& state) {
  // aiter-native sparse: 256 requests x 4 tokens = 1024 per-token virtual batches, top-k 2048.
  const PlanRequest r = test::SparseRequest(Arch::kGfx950, 16, 4, Contexts(256, 8192), 2048, 0);
  for (auto _ : state) {
    auto plan = PlanMlaMetadata(r);
    benchmark::DoNotOptimize(plan);
  }
}
BENCHMARK(BM_PlanSparsePerToken)->Unit(benchmark::kMicrosecond);

void BM_PlanAtomSparseMtp(benchmark::State& state) {
  // ATOM's per-token layout (§8.2): 1024 one-token dense batches, qlen 1, msb 16.
  std::vector<int32_t> kv = Contexts(1024, 2048);
  for (int32_t& k : kv) k = std::min(k, 2048);
  PlanRequest r = test::DenseRequest(Arch::kGfx950, 16, 1, kv, 0);
  r.max_split_per_batch = 16;
  for (auto _ : state) {
    auto plan = PlanMlaMetadata(r);
    benchmark::DoNotOptimize(plan);
  }
}
BENCHMARK(BM_PlanAtomSparseMtp)->Unit(benchmark::kMicrosecond);

void BM_CheckPlan(benchmark::State& state) {
  const PlanRequest r = test::DenseRequest(Arch::kGfx950, 16, 4, Contexts(256, 2048), 0);
  const Plan plan = *PlanMlaMetadata(r);
  for (auto _ : state) {
    auto report = CheckPlan(r, plan);
    benchmark::DoNotOptimize(report);
  }
}
BENCHMARK(BM_CheckPlan)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace mlasim::ref
