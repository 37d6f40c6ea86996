// Simulator speed: the built-in founding case end to end (target: under 10 ms) and small
// scenarios (B <= 64) per second on one core (the fuzzing issue needs thousands per second).
#include <benchmark/benchmark.h>

#include "sim/replay.h"

namespace mlasim::sim {
namespace {

void BM_ReplaySeed(benchmark::State& state) {
  const Scenario s = *BuiltinScenario("seed");
  for (auto _ : state) {
    auto r = Replay(s);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_ReplaySeed)->Unit(benchmark::kMillisecond);

// A small padded sparse MTP step: B requests, K = 3, contexts around 1-3k.
Scenario Small(int32_t batch, bool sparse) {
  Scenario s = *BuiltinScenario("seed");
  s.model.sparse = sparse;
  s.requests.resize(static_cast<size_t>(batch));
  s.cu_count = 64;
  return s;
}

void BM_ReplaySmall(benchmark::State& state) {
  const Scenario s = Small(static_cast<int32_t>(state.range(0)), state.range(1) != 0);
  for (auto _ : state) {
    auto r = Replay(s);
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ReplaySmall)
    ->ArgNames({"B", "sparse"})
    ->Args({4, 1})
    ->Args({16, 1})
    ->Args({64, 1})
    ->Args({4, 0})
    ->Args({64, 0})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace mlasim::sim
