// FlashInfer MLAPlan: the reference (ref/flashinfer/) against FlashInfer's own MLAPlan compiled
// from -DMLASIM_FLASHINFER_DIR through the host shim, in one process on the same inputs; the
// outputs (plan_info and the int-workspace bytes the device receives) are checked equal before
// timing. Without the option only the reference runs. Results and command: docs/performance.md.
#include <benchmark/benchmark.h>

#include "ref/flashinfer/mla_plan.h"
#include "ref/numerics.h"
#ifdef MLASIM_HAVE_FLASHINFER
#include <cstring>

#include "tests/third_party/flashinfer_shim.h"
#endif

namespace mlasim::ref::flashinfer {
namespace {

// B requests of qo_len tokens, KV uniform in [1, 8192] tokens (seeded), pages of 64, H200.
MLAPlanInput BenchInput(const benchmark::State& state) {
  const int32_t batch = static_cast<int32_t>(state.range(0));
  const int32_t qo_len = static_cast<int32_t>(state.range(1));
  MLAPlanInput in;
  in.num_heads = static_cast<int32_t>(state.range(2));
  in.causal = state.range(3) != 0;
  in.num_sm = 132;
  in.head_dim_o = 512;
  SplitMix64 r(20261201);
  in.qo_indptr = {0};
  in.kv_indptr = {0};
  for (int32_t i = 0; i < batch; ++i) {
    in.kv_len.push_back(1 + static_cast<int32_t>(r.Below(8192)));
    in.qo_indptr.push_back(in.qo_indptr.back() + qo_len);
    in.kv_indptr.push_back(in.kv_indptr.back() + (in.kv_len.back() + 63) / 64);
  }
  const auto sizes = MLAPlanWorkspaceSize(in.num_sm, 1, in.head_dim_o);
  in.int_workspace_bytes = sizes->int_bytes;
  in.float_workspace_bytes = sizes->float_bytes;
  return in;
}

void Args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"B", "qo", "heads", "causal"});
  b->Args({16, 1, 16, 0})->Args({128, 1, 16, 0})->Args({512, 1, 16, 0});
  b->Args({128, 4, 16, 1})->Args({128, 1, 128, 0})->Args({128, 4, 128, 1});
}

void BM_FlashInferPlanReference(benchmark::State& state) {
  const MLAPlanInput in = BenchInput(state);
  for (auto _ : state) {
    auto plan = MLAPlan(in);
    benchmark::DoNotOptimize(plan);
  }
  state.counters["works"] = MLAPlan(in)->total_num_works();
}
BENCHMARK(BM_FlashInferPlanReference)->Apply(Args);

#ifdef MLASIM_HAVE_FLASHINFER
void BM_FlashInferPlanOriginal(benchmark::State& state) {
  const MLAPlanInput in = BenchInput(state);
  third_party::FlashInferPlanner planner(in.int_workspace_bytes);
  std::vector<int64_t> info;
  std::string error;
  // Same outputs before timing: plan_info and the int-workspace bytes the device receives.
  const auto ours = MLAPlan(in);
  if (!planner.Plan(in, &info, &error) || !ours.ok() || info != ToVector(ours->info) ||
      std::memcmp(planner.page_locked(),
                  RenderIntWorkspace(*ours, ours->int_allocated_bytes).bytes.data(),
                  ours->int_allocated_bytes) != 0) {
    state.SkipWithError("FlashInfer's MLAPlan and the reference differ");
    return;
  }
  for (auto _ : state) {
    planner.Plan(in, &info, &error);
    benchmark::DoNotOptimize(info);
  }
  state.counters["works"] = ours->total_num_works();
}
BENCHMARK(BM_FlashInferPlanOriginal)->Apply(Args);
#endif

}  // namespace
}  // namespace mlasim::ref::flashinfer
