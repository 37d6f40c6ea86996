// File: tests/bench/aiter/planner_vs_aiter_bench.cpp — issue 15 goal 1: the reference planner
// against aiter's own v1.2 planner code (aiter_v12.h), compiled as host C++ with the same Release
// flags, in one process, on the same inputs, interleaved (each benchmark pairs aiter with one
// mlasim variant and every iteration times one batch of each, alternating which goes first;
// repetitions run in random order), over 48 cases: B in {4, 64, 256} x qlen {1, 4} x heads {16, 128} x {bf16, fp8}
// x max_split_per_batch {16, -1}, gfx942 with 304 CUs, page size 1, granularity 16, contexts of
// 1024..3071 tokens (a fixed LCG). Before timing, every case's buffers are compared byte for byte
// (aiter's buffers pre-filled with mlasim's poison 0xA5A5A5A5, so unwritten cells compare too);
// a mismatch exits 1. Times are this thread's CPU time (the machine is shared). After timing, a
// table of the median times and ratios per case and the geomean of the ratios is printed.
//
//   build/bin/mlasim_aiter_bench [--benchmark_repetitions=N] [--benchmark_min_time=S] ...
//
// Timed variants per case (all plan into buffers allocated once per case, as aiter's caller
// allocates them once and a CUDA graph reuses them):
//   aiter    get_mla_metadata_v1_2_device + its kernel, one lane
//   fast     ref::PlanMlaMetadataInto(request, sizes, {tracking = kFast}, &plan), plan reused
//   checked  the same with CellTracking::kChecked (per-cell write state kept)
//   alloc    ref::PlanMlaMetadata(request): a fresh, fully poisoned, checked Plan per call
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ref/planner.h"
#include "ref/sizing.h"
#include "tests/bench/aiter/aiter_v12.h"

namespace mlasim::bench {
namespace {

using ref::CellTracking;
using ref::DType;
using ref::Plan;
using ref::PlanRequest;

ref::PlannerOptions Options(CellTracking tracking) {
  ref::PlannerOptions o;
  o.tracking = tracking;
  return o;
}

// Deterministic context lengths in [mean/2, 3*mean/2) (a fixed LCG, as tests/bench/planner_bench).
std::vector<int32_t> Contexts(int32_t batch, int32_t mean) {
  std::vector<int32_t> kv;
  uint32_t x = 12345;
  for (int32_t i = 0; i < batch; ++i) {
    x = x * 1664525u + 1013904223u;
    kv.push_back(mean / 2 + static_cast<int32_t>(x % static_cast<uint32_t>(mean)));
  }
  return kv;
}

struct Shape {
  int32_t batch, qlen, heads;
  DType dtype;
  int32_t max_split_per_batch;
};

std::string CaseName(const Shape& s) {
  return "B" + std::to_string(s.batch) + "/q" + std::to_string(s.qlen) + "/h" +
         std::to_string(s.heads) + "/" + ref::DTypeName(s.dtype) + "/msb" +
         std::to_string(s.max_split_per_batch);
}

PlanRequest MakeRequest(const Shape& s) {
  PlanRequest r;
  r.target = ref::Arch::kGfx942;
  r.cu_count = 304;
  r.heads_per_head_k = s.heads;
  r.q_dtype = r.kv_dtype = s.dtype;
  r.qlen = r.max_seqlen_qo = r.uni_seqlen_qo = s.qlen;
  r.max_split_per_batch = s.max_split_per_batch;
  r.qo_indptr = {0};
  r.kv_indptr = {0};
  for (int32_t tokens : Contexts(s.batch, 2048)) {
    r.qo_indptr.push_back(r.qo_indptr.back() + s.qlen);
    r.kv_indptr.push_back(r.kv_indptr.back() + tokens);
    r.kv_last_page_lens.push_back(1);
  }
  return r;
}

AiterDType ToAiter(DType d) {
  return d == DType::kFp8    ? AiterDType::kFp8
         : d == DType::kFp16 ? AiterDType::kFp16
                             : AiterDType::kBf16;
}

// One case: the request, aiter's buffers and mlasim's reusable plans.
struct Case {
  std::string name;
  PlanRequest request;
  ref::MetadataSizes sizes;
  std::vector<uint64_t> ptrs;
  std::vector<int32_t> work_indptr, work_info, reduce_indptr, final_map, partial_map;
  AiterV12Call call;
  Plan fast, checked;

  explicit Case(const Shape& s) : name(CaseName(s)), request(MakeRequest(s)) {
    sizes = *ref::GetMlaMetadataInfoV1(request, s.batch);
    ptrs.assign(2, 0);
    work_indptr.assign(sizes.work_indptr, Plan::kPoison);
    work_info.assign(int64_t{sizes.work_info_rows} * 8, Plan::kPoison);
    reduce_indptr.assign(sizes.reduce_indptr, Plan::kPoison);
    final_map.assign(int64_t{sizes.reduce_final_map_rows} * 2, Plan::kPoison);
    partial_map.assign(sizes.reduce_partial_map, Plan::kPoison);
    AiterV12Call& c = call;
    c.batch = s.batch;
    c.qo_indptr = request.qo_indptr.data();
    c.kv_indptr = request.kv_indptr.data();
    c.kv_last_page_lens = request.kv_last_page_lens.data();
    c.heads_per_head_k = request.heads_per_head_k;
    c.num_heads_k = request.num_heads_k;
    c.is_causal = request.is_causal;
    c.page_size = request.page_size;
    c.kv_granularity = request.kv_granularity;
    c.max_seqlen_qo = request.max_seqlen_qo;
    c.uni_seqlen_qo = request.uni_seqlen_qo;
    c.topk = request.topk;
    c.max_split_per_batch = request.max_split_per_batch;
    c.q_dtype = ToAiter(request.q_dtype);
    c.kv_dtype = ToAiter(request.kv_dtype);
    c.work_metadata_ptrs = ptrs.data();
    c.work_indptr = work_indptr.data();
    c.work_indptr_size = sizes.work_indptr;
    c.work_info = work_info.data();
    c.work_info_rows = sizes.work_info_rows;
    c.reduce_indptr = reduce_indptr.data();
    c.reduce_indptr_size = sizes.reduce_indptr;
    c.reduce_final_map = final_map.data();
    c.reduce_final_map_rows = sizes.reduce_final_map_rows;
    c.reduce_partial_map = partial_map.data();
    c.reduce_partial_map_size = sizes.reduce_partial_map;
  }
};

std::vector<std::unique_ptr<Case>>& Cases() {
  static std::vector<std::unique_ptr<Case>> cases;
  return cases;
}

void BuildCases() {
  for (int32_t batch : {4, 64, 256})
    for (int32_t qlen : {1, 4})
      for (int32_t heads : {16, 128})
        for (DType dtype : {DType::kBf16, DType::kFp8})
          for (int32_t msb : {16, -1})
            Cases().push_back(std::make_unique<Case>(Shape{batch, qlen, heads, dtype, msb}));
}

// First differing element of two int32 arrays, or -1.
int64_t FirstDiff(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  if (a.size() != b.size()) return static_cast<int64_t>(std::min(a.size(), b.size()));
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return static_cast<int64_t>(i);
  return -1;
}

// Plans every case with aiter and with each mlasim variant and compares all five int32 buffers
// over their full sizes. Returns the number of mismatching cases.
int VerifyCases() {
  int bad = 0;
  for (const auto& cp : Cases()) {
    Case& c = *cp;
    const std::string refused = RunAiterV12(c.call);
    if (!refused.empty()) {
      std::fprintf(stderr, "%s: aiter refused: %s\n", c.name.c_str(), refused.c_str());
      ++bad;
      continue;
    }
    const Plan fresh = *ref::PlanMlaMetadata(c.request);
    Status fs = ref::PlanMlaMetadataInto(c.request, c.sizes, Options(CellTracking::kFast), &c.fast);
    Status cs = ref::PlanMlaMetadataInto(c.request, c.sizes, {}, &c.checked);
    if (!fs.ok() || !cs.ok()) {
      std::fprintf(stderr, "%s: mlasim refused\n", c.name.c_str());
      ++bad;
      continue;
    }
    const std::pair<const char*, const std::vector<int32_t>*> aiter[] = {
        {"work_indptr", &c.work_indptr},
        {"work_info", &c.work_info},
        {"reduce_indptr", &c.reduce_indptr},
        {"reduce_final_map", &c.final_map},
        {"reduce_partial_map", &c.partial_map}};
    for (const Plan* p :
         {&fresh, static_cast<const Plan*>(&c.fast), static_cast<const Plan*>(&c.checked)}) {
      const std::vector<int32_t>* mine[] = {&p->work_indptr.data, &p->work_info.data,
                                            &p->reduce_indptr.data, &p->reduce_final_map.data,
                                            &p->reduce_partial_map.data};
      for (int i = 0; i < 5; ++i) {
        const int64_t d = FirstDiff(*aiter[i].second, *mine[i]);
        if (d < 0) continue;
        std::fprintf(stderr, "%s: %s differs at element %lld\n", c.name.c_str(), aiter[i].first,
                     static_cast<long long>(d));
        ++bad;
      }
    }
  }
  return bad;
}

// The four timed variants of one case, each run `calls` times back to back.
enum Variant { kAiter, kFast, kChecked, kAlloc, kVariantCount };
constexpr const char* kVariantNames[kVariantCount] = {"aiter", "fast", "checked", "alloc"};

void RunVariant(Case& c, Variant v, int32_t calls) {
  static const ref::PlannerOptions fast = Options(CellTracking::kFast);
  for (int32_t i = 0; i < calls; ++i) {
    switch (v) {
      case kAiter: benchmark::DoNotOptimize(RunAiterV12(c.call)); break;
      case kFast:
        benchmark::DoNotOptimize(ref::PlanMlaMetadataInto(c.request, c.sizes, fast, &c.fast));
        break;
      case kChecked:
        benchmark::DoNotOptimize(ref::PlanMlaMetadataInto(c.request, c.sizes, {}, &c.checked));
        break;
      case kAlloc: benchmark::DoNotOptimize(ref::PlanMlaMetadata(c.request)); break;
      case kVariantCount: break;
    }
    benchmark::ClobberMemory();
  }
}

// CPU time of this thread in microseconds (preemption by other processes does not count).
double ThreadCpuUs() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

// Calls per timed batch so that one batch of the slower of the two variants takes ~50 us (the
// clock read then costs < 1 %).
int32_t BatchCalls(Case& c, Variant v) {
  double slowest = 0;
  for (Variant x : {kAiter, v}) {
    const double t0 = ThreadCpuUs();
    RunVariant(c, x, 20);
    slowest = std::max(slowest, (ThreadCpuUs() - t0) / 20);
  }
  return std::max<int32_t>(1, static_cast<int32_t>(50.0 / std::max(slowest, 1e-3)));
}

// One variant against aiter: every iteration times one batch of each, the order alternating from
// one iteration to the next, so that both see the same machine state (load, frequency, caches).
// Reported per call: aiter_us, <variant>_us and <variant>/aiter (the ratio of the sums).
void BM_Pair(benchmark::State& state, Case* c, Variant v) {
  const int32_t calls = BatchCalls(*c, v);
  double total[2] = {0, 0};  // aiter, v
  int64_t rounds = 0;
  for (auto _ : state) {
    for (int k = 0; k < 2; ++k) {
      const int side = (k + rounds) % 2;
      const double t0 = ThreadCpuUs();
      RunVariant(*c, side == 0 ? kAiter : v, calls);
      total[side] += ThreadCpuUs() - t0;
    }
    ++rounds;
  }
  const double per_call = 1.0 / (static_cast<double>(rounds) * calls);
  state.counters["aiter_us"] = total[0] * per_call;
  state.counters[std::string(kVariantNames[v]) + "_us"] = total[1] * per_call;
  state.counters["ratio"] = total[1] / total[0];
}

// Collects the median counters of every case while printing as usual.
class MedianCollector : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.run_type != Run::RT_Aggregate || r.aggregate_name != "median") continue;
      for (const auto& [name, counter] : r.counters)
        medians_[r.run_name.function_name][name] = counter.value;
    }
    ConsoleReporter::ReportRuns(runs);
  }
  // Median of counter `counter` of case `name`; NaN if it did not run.
  double Median(const std::string& name, const std::string& counter) const {
    auto it = medians_.find(name);
    if (it == medians_.end()) return NAN;
    auto jt = it->second.find(counter);
    return jt == it->second.end() ? NAN : jt->second;
  }

 private:
  std::map<std::string, std::map<std::string, double>> medians_;
};

void PrintSummary(const MedianCollector& m) {
  std::printf("\n%-26s %9s %9s %9s %9s %7s %7s %7s\n", "case (gfx942, 304 CUs)", "aiter us",
              "fast us", "checked", "alloc", "fast/a", "chk/a", "alloc/a");
  double log_sum[3] = {0, 0, 0};
  int counted = 0;
  for (const auto& cp : Cases()) {
    double t[kVariantCount], r[3];
    bool ran = true;
    for (int v = kFast; v < kVariantCount; ++v) {
      const std::string name = cp->name + "/" + kVariantNames[v];
      t[v] = m.Median(name, std::string(kVariantNames[v]) + "_us");
      r[v - 1] = m.Median(name, "ratio");
      ran = ran && !std::isnan(t[v]);
    }
    t[kAiter] = m.Median(cp->name + "/fast", "aiter_us");
    if (!ran) continue;
    std::printf("%-26s %9.3f %9.3f %9.3f %9.3f %7.3f %7.3f %7.3f\n", cp->name.c_str(), t[0], t[1],
                t[2], t[3], r[0], r[1], r[2]);
    for (int v = 0; v < 3; ++v) log_sum[v] += std::log(r[v]);
    ++counted;
  }
  if (counted == 0) return;
  std::printf(
      "geomean of the median ratios over %d cases: fast/aiter %.3f  checked/aiter %.3f  "
      "alloc/aiter %.3f\n",
      counted, std::exp(log_sum[0] / counted), std::exp(log_sum[1] / counted),
      std::exp(log_sum[2] / counted));
}

}  // namespace
}  // namespace mlasim::bench

int main(int argc, char** argv) {
  using namespace mlasim::bench;
  SetAiterDevice(AiterDevice{"gfx942", 304, 64 * 1024, 64});
  BuildCases();
  const int bad = VerifyCases();
  if (bad > 0) {
    std::fprintf(stderr, "%d buffer mismatch(es) between aiter and mlasim: not timing\n", bad);
    return 1;
  }
  std::printf("outputs equal in %zu/%zu cases (5 buffers, full sizes, fast, checked and alloc)\n",
              Cases().size(), Cases().size());
  for (const auto& cp : Cases())
    for (Variant v : {kFast, kChecked, kAlloc})
      benchmark::RegisterBenchmark((cp->name + "/" + kVariantNames[v]).c_str(), BM_Pair, cp.get(),
                                   v)
          ->Unit(benchmark::kMicrosecond);
  // Defaults (overridable on the command line): 5 interleaved repetitions, medians only.
  std::vector<char*> args(argv, argv + argc);
  std::string defaults[] = {"--benchmark_repetitions=5",
                            "--benchmark_enable_random_interleaving=true",
                            "--benchmark_report_aggregates_only=true", "--benchmark_min_time=0.2"};
  for (std::string& d : defaults) {
    const std::string key = d.substr(0, d.find('='));
    bool given = false;
    for (int i = 1; i < argc; ++i)
      given = given || std::strncmp(argv[i], key.c_str(), key.size()) == 0;
    if (!given) args.insert(args.begin() + 1, d.data());
  }
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 2;
  MedianCollector collector;
  benchmark::RunSpecifiedBenchmarks(&collector);
  PrintSummary(collector);
  benchmark::Shutdown();
  return 0;
}
