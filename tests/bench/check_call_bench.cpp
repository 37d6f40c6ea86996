// sim::CheckCall (sim/call_check.h), the entry point of mlasim.check_call and `mlasim check`'s
// contract section: one decode call's asm contract over a B-request plan (qlen 1, 16 heads,
// 80 CUs, KV lengths 500..3500), against the plan checker on the same plan as a peer measured in
// the same run (ref::CheckPlan: what mlasim.check_plan costs). docs/performance.md.
#include <benchmark/benchmark.h>

#include "ref/plan_check.h"
#include "ref/planner.h"
#include "sim/call_check.h"

namespace mlasim::sim {
namespace {

ref::PlanRequest Batch(int32_t b) {
  ref::PlanRequest r;
  r.cu_count = 80;
  r.kv_indptr = {0};
  r.qo_indptr = {0};
  for (int32_t i = 0; i < b; ++i) {
    r.kv_indptr.push_back(r.kv_indptr.back() + 500 + (37 * i) % 3000);
    r.qo_indptr.push_back(i + 1);
    r.kv_last_page_lens.push_back(1);
  }
  return r;
}

CallCheckInput Input(const ref::PlanRequest& r, const ref::Plan& p) {
  CallCheckInput in;
  in.call = "mla_decode_fwd";
  in.contract = *BuiltinContract(CallKind::kDecode, "asm", "contract");
  in.work_indptr.assign(p.work_indptr.data.begin(), p.work_indptr.data.end());
  in.work_info.assign(p.work_info.data.begin(), p.work_info.data.end());
  in.reduce_indptr.assign(p.reduce_indptr.data.begin(), p.reduce_indptr.data.end());
  in.reduce_final_map.assign(p.reduce_final_map.data.begin(), p.reduce_final_map.data.end());
  in.reduce_partial_map.assign(p.reduce_partial_map.data.begin(), p.reduce_partial_map.data.end());
  in.qo_indptr = r.qo_indptr;
  in.kv_indptr = r.kv_indptr;
  in.kv_last_page_lens = r.kv_last_page_lens;
  const int64_t b = static_cast<int64_t>(r.kv_last_page_lens.size());
  in.tensors = {{"q", b, 16, 576, 2}, {"o", b, 16, 512, 2}};
  return in;
}

void BM_CheckCallAsmDecode(benchmark::State& state) {
  const ref::PlanRequest r = Batch(static_cast<int32_t>(state.range(0)));
  const ref::Plan p = *ref::PlanMlaMetadata(r, {});
  const CallCheckInput in = Input(r, p);
  for (auto _ : state) {
    auto v = CheckCall(in);
    benchmark::DoNotOptimize(v);
  }
  state.counters["works"] = p.derived.num_works;
}
BENCHMARK(BM_CheckCallAsmDecode)
    ->ArgName("B")
    ->Arg(1)
    ->Arg(64)
    ->Arg(256)
    ->Unit(benchmark::kMicrosecond);

void BM_CheckPlanPeer(benchmark::State& state) {
  const ref::PlanRequest r = Batch(static_cast<int32_t>(state.range(0)));
  const ref::Plan p = *ref::PlanMlaMetadata(r, {});
  for (auto _ : state) {
    auto rep = ref::CheckPlan(r, p);
    benchmark::DoNotOptimize(rep);
  }
}
BENCHMARK(BM_CheckPlanPeer)->ArgName("B")->Arg(64)->Arg(256)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace mlasim::sim
