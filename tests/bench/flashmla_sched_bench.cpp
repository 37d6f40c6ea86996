// FlashMLA's decode scheduler: the reference model (ref/flashmla/sched.h, the CPU) at the shapes
// tests/gpu/flashmla_bench.cu times FlashMLA's own scheduler kernel on the H200 (B requests of
// 8k tokens, 16 heads, qlen 1, one part per SM: 132 parts, block 64, fixed overhead 5), both
// revisions. The device comparison in one process is mlasim_flashmla_bench --shapes planner;
// results and commands: docs/performance.md.
#include <benchmark/benchmark.h>

#include "ref/flashmla/sched.h"

namespace mlasim::ref::flashmla {
namespace {

SchedInput UniformInput(int32_t batch, Revision revision) {
  SchedInput in;
  in.revision = revision;
  in.batch_size = batch;
  in.num_sm_parts = 132;  // H200: 132 SMs / ceil(qlen * 16 heads / 64) = 132 parts
  in.seqlens_k.assign(static_cast<size_t>(batch), 8192);
  return in;
}

void BM_FlashMlaSchedReference(benchmark::State& state) {
  const SchedInput in = UniformInput(static_cast<int32_t>(state.range(0)),
                                     state.range(1) == 0 ? Revision::k9241ae3 : Revision::k414a2f3);
  for (auto _ : state) {
    auto meta = GetDecodingSchedMeta(in);
    if (!meta.ok()) {
      state.SkipWithError(meta.status().ToString().c_str());
      return;
    }
    benchmark::DoNotOptimize(meta->rows.data());
  }
  state.SetLabel(state.range(1) == 0 ? "9241ae3" : "414a2f3");
}
BENCHMARK(BM_FlashMlaSchedReference)
    ->ArgNames({"B", "rev414"})
    ->ArgsProduct({{4, 64, 128, 256}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace mlasim::ref::flashmla
