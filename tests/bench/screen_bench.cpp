// The GPU reference's screen (fuzz/kut_screen.cpp): host time per decode call over the decode
// calls of generated --small steps (the campaign's generator: B <= 64, kernel inputs, sizes
// 10..100), as `fuzz --gpu` screens them. Before: the plan checker, then the two head-dim-16 CPU
// runs for every plan it does not reject. After: the plan checker, then the structure walk for a
// clean plan and the head-dim-16 runs for the others. And each part alone over the clean plans.
// docs/performance.md "GPU campaigns".
#include <benchmark/benchmark.h>

#include <time.h>

#include <vector>

#include "fuzz/kut_check_internal.h"
#include "fuzz/scenario_gen.h"
#include "sim/kernel_request.h"
#include "sim/replay.h"

namespace mlasim::fuzz::kut_internal {
namespace {

struct ScreenCall {
  ref::PlanRequest checked;  // the plan's request (what the plan checker takes)
  ref::PlanRequest kernel;   // the kernel's view (what the screen takes)
  const ref::Plan* plan;
  PlanCheckVerdict verdict;
};

// The decode calls of steps 0..199 a campaign with --small would screen (aiter plans, unfolded).
struct Calls {
  std::vector<sim::ReplayReport> reports;
  std::vector<ScreenCall> calls;
  Calls() {
    GenConfig config;
    config.small = true;
    config.max_batch = 64;
    config.kernel_inputs = true;
    for (uint64_t i = 0; i < 200; ++i) {
      auto r =
          sim::Replay(ScenarioFromSeed(config, 1000 + i, static_cast<int>(10 + i % 91)).value());
      if (r.ok()) reports.push_back(std::move(*r));
    }
    for (const sim::ReplayReport& r : reports)
      for (const sim::Call& c : r.trace.calls) {
        if (c.kind != sim::CallKind::kDecode || c.plan < 0) continue;
        const sim::PlanSnapshot& s = r.trace.plans[c.plan];
        if (s.dialect || s.plan.derived.fold_ratio != 1) continue;
        calls.push_back({s.request, sim::KernelRequest(s.request), &s.plan,
                         CheckPlanForScreen(s.request, s.plan)});
      }
  }
};
const Calls& GeneratedCalls() {
  static const Calls c;
  return c;
}

// This thread's CPU seconds (the machine may be shared: wall time counts the neighbours).
double ThreadSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Per decode call: the calls screened each iteration and the thread's CPU ms per call.
void PerCall(benchmark::State& state, int64_t calls, double cpu_seconds) {
  state.counters["calls"] = static_cast<double>(calls);
  state.counters["cpu_ms_per_call"] =
      calls > 0 ? 1e3 * cpu_seconds / static_cast<double>(state.iterations()) / calls : 0;
}

// mode 0: before (checker + head dims 16); 1: after (checker + the method the verdict picks).
void BM_ScreenPerDecodeCall(benchmark::State& state) {
  const Calls& g = GeneratedCalls();
  std::vector<uint8_t> mask;
  int64_t n = 0, clean = 0;
  const double t0 = ThreadSeconds();
  for (auto _ : state) {
    n = clean = 0;
    for (const ScreenCall& c : g.calls) {
      const PlanCheckVerdict v = CheckPlanForScreen(c.checked, *c.plan);
      if (v == PlanCheckVerdict::kRejected) continue;  // the CPU reference runs instead
      const ScreenMethod m = state.range(0) == 0 ? ScreenMethod::kHeadDim16 : ScreenMethodFor(v);
      benchmark::DoNotOptimize(ScreenPlanPairs(c.kernel, *c.plan, 1, m, &mask));
      ++n;
      clean += v == PlanCheckVerdict::kClean;
    }
  }
  PerCall(state, n, ThreadSeconds() - t0);
  state.counters["clean"] = static_cast<double>(clean);
}
BENCHMARK(BM_ScreenPerDecodeCall)->ArgName("after")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// Over the clean plans only: 0 the plan checker, 1 the head-dim-16 runs, 2 the structure walk.
void BM_ScreenPartOnCleanPlans(benchmark::State& state) {
  const Calls& g = GeneratedCalls();
  std::vector<uint8_t> mask;
  int64_t n = 0;
  const double t0 = ThreadSeconds();
  for (auto _ : state) {
    n = 0;
    for (const ScreenCall& c : g.calls) {
      if (c.verdict != PlanCheckVerdict::kClean) continue;
      ++n;
      if (state.range(0) == 0) {
        benchmark::DoNotOptimize(CheckPlanForScreen(c.checked, *c.plan));
      } else {
        const ScreenMethod m =
            state.range(0) == 1 ? ScreenMethod::kHeadDim16 : ScreenMethod::kStructure;
        benchmark::DoNotOptimize(ScreenPlanPairs(c.kernel, *c.plan, 1, m, &mask));
      }
    }
  }
  PerCall(state, n, ThreadSeconds() - t0);
}
BENCHMARK(BM_ScreenPartOnCleanPlans)
    ->ArgName("part")
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace mlasim::fuzz::kut_internal
