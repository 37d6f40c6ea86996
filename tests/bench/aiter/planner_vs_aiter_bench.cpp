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
//   build/bin/mlasim_aiter_bench [--verify-only] [--benchmark_repetitions=N] ...
//
// It also compares 3000 random batches with non-uniform q lengths (uni_seqlen_qo <= 0: q lengths
// 0..max_seqlen_qo, few clusters, pages 1/4/16, serial and parallel dispatch) before timing;
// --verify-only stops after the comparisons; --print-ragged also prints aiter's buffers for the
// batches of tests/ref/ragged_planner_test.cpp (the first three compared).
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
int64_t FirstDiff(const std::vector<int32_t>& a, const mlasim::ref::Int32Buffer::Ints& b) {
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
      const mlasim::ref::Int32Buffer::Ints* mine[] = {&p->work_indptr.data, &p->work_info.data,
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

// ---- non-uniform q lengths (uni_seqlen_qo <= 0), equality only ------------------------------

// A small random ragged batch: q lengths 0..max_seqlen_qo (0 and the maximum both drawn), few
// clusters (splits), page sizes 1, 4, 16, causal or not, serial and parallel dispatch (qlen 1),
// shapes without q-tile splits and without folding (what ref/ models on this path).
PlanRequest RaggedRequest(uint32_t seed, AiterDevice* device) {
  uint32_t x = seed * 2654435761u + 17;
  auto below = [&x](uint32_t n) {
    x = x * 1664525u + 1013904223u;
    return static_cast<int32_t>((x >> 8) % n);
  };
  PlanRequest r;
  const int32_t shape = below(4);  // gfx942 h16 bf16, gfx942 h16 fp8, gfx942 h128 fp8, gfx950 h16
  r.target = shape == 3 ? ref::Arch::kGfx950 : ref::Arch::kGfx942;
  r.heads_per_head_k = shape == 2 ? 128 : 16;
  r.q_dtype = r.kv_dtype = shape == 1 || shape == 2 ? DType::kFp8 : DType::kBf16;
  r.max_seqlen_qo = shape == 2 || below(3) == 0 ? 1 : 1 + below(4);
  r.qlen = r.max_seqlen_qo;
  r.uni_seqlen_qo = below(2) == 0 ? 0 : -1;
  r.cu_count = 2 + below(40);
  r.max_split_per_batch = below(3) == 0 ? 16 : below(2) == 0 ? 2 : -1;
  r.is_causal = below(4) != 0;
  const int32_t pages[] = {1, 1, 4, 16};
  r.page_size = pages[below(4)];
  r.kv_granularity = r.page_size == 1 ? 16 : (below(2) == 0 ? 1 : 4);
  r.is_cp_round_robin = r.page_size == 1 && below(8) == 0;
  const int32_t batch = 1 + below(40);
  r.qo_indptr = {below(4) == 0 ? below(5) : 0};
  r.kv_indptr = {below(4) == 0 ? below(5) : 0};
  for (int32_t b = 0; b < batch; ++b) {
    const int32_t kind = below(6);
    const int32_t q = kind == 0 ? 0 : kind == 1 ? r.max_seqlen_qo : below(r.max_seqlen_qo + 1);
    const int32_t tokens = below(5) == 0 ? below(4) : below(700);
    const int32_t n_pages = (tokens + r.page_size - 1) / r.page_size;
    r.qo_indptr.push_back(r.qo_indptr.back() + q);
    r.kv_indptr.push_back(r.kv_indptr.back() + n_pages);
    r.kv_last_page_lens.push_back(tokens == 0 ? r.page_size : tokens - (n_pages - 1) * r.page_size);
  }
  *device = AiterDevice{r.target == ref::Arch::kGfx950 ? "gfx950" : "gfx942", r.cu_count,
                        r.target == ref::Arch::kGfx950 ? 160 * 1024 : 64 * 1024, 64};
  return r;
}

// The ragged batches of tests/ref/ragged_planner_test.cpp (its exact plans are aiter's): q
// lengths, KV tokens, max_seqlen_qo, clusters, page size.
struct GoldenRagged {
  std::vector<int32_t> q, kv;
  int32_t max_q, cu, page;
};
const GoldenRagged kGoldenRagged[] = {
    {{4, 0, 2, 1, 3}, {1200, 17, 0, 90, 40}, 4, 3, 1},
    {{1, 0, 1, 1}, {70, 0, 33, 900}, 1, 2, 1},
    {{2, 0, 2}, {300, 30, 7}, 2, 2, 16},
};

PlanRequest GoldenRequest(const GoldenRagged& g, AiterDevice* device) {
  PlanRequest r;
  r.target = ref::Arch::kGfx942;
  r.cu_count = g.cu;
  r.heads_per_head_k = 16;
  r.qlen = r.max_seqlen_qo = g.max_q;
  r.uni_seqlen_qo = -1;
  r.page_size = g.page;
  r.kv_granularity = g.page == 1 ? 16 : 1;
  r.qo_indptr = {0};
  r.kv_indptr = {0};
  for (size_t b = 0; b < g.q.size(); ++b) {
    const int32_t pages = (g.kv[b] + g.page - 1) / g.page;
    r.qo_indptr.push_back(r.qo_indptr.back() + g.q[b]);
    r.kv_indptr.push_back(r.kv_indptr.back() + pages);
    r.kv_last_page_lens.push_back(g.kv[b] == 0 ? g.page : g.kv[b] - (pages - 1) * g.page);
  }
  *device = AiterDevice{"gfx942", g.cu, 64 * 1024, 64};
  return r;
}

// Plans `cases` random ragged batches with aiter and with mlasim (fresh checked, fast into the
// sizes) and compares the five buffers over their full sizes. Returns the mismatching cases.
int VerifyRaggedCases(int32_t cases, int32_t* parallel_cases, bool print) {
  int bad = 0;
  for (int32_t i = 0; i < cases; ++i) {
    AiterDevice device;
    const int32_t golden = static_cast<int32_t>(std::size(kGoldenRagged));
    const PlanRequest r = i < golden ? GoldenRequest(kGoldenRagged[i], &device)
                                     : RaggedRequest(static_cast<uint32_t>(i), &device);
    SetAiterDevice(device);
    const int32_t batch = static_cast<int32_t>(r.kv_indptr.size()) - 1;
    auto fresh = ref::PlanMlaMetadata(r);
    if (!fresh.ok()) {
      std::fprintf(stderr, "ragged %d: mlasim refused: %s\n", i, fresh.status().ToString().c_str());
      ++bad;
      continue;
    }
    *parallel_cases += fresh->derived.parallel_planner_used ? 1 : 0;
    const ref::MetadataSizes sizes = *ref::GetMlaMetadataInfoV1(r, batch);
    Plan fast;
    if (!ref::PlanMlaMetadataInto(r, sizes, Options(CellTracking::kFast), &fast).ok()) ++bad;
    std::vector<uint64_t> ptrs(2, 0);
    std::vector<int32_t> wi(sizes.work_indptr, Plan::kPoison),
        info(int64_t{sizes.work_info_rows} * 8, Plan::kPoison),
        ri(sizes.reduce_indptr, Plan::kPoison),
        fm(int64_t{sizes.reduce_final_map_rows} * 2, Plan::kPoison),
        pm(sizes.reduce_partial_map, Plan::kPoison);
    AiterV12Call c;
    c.batch = batch;
    c.qo_indptr = r.qo_indptr.data();
    c.kv_indptr = r.kv_indptr.data();
    c.kv_last_page_lens = r.kv_last_page_lens.data();
    c.heads_per_head_k = r.heads_per_head_k;
    c.num_heads_k = r.num_heads_k;
    c.is_causal = r.is_causal;
    c.page_size = r.page_size;
    c.kv_granularity = r.kv_granularity;
    c.max_seqlen_qo = r.max_seqlen_qo;
    c.uni_seqlen_qo = r.uni_seqlen_qo;
    c.topk = r.topk;
    c.max_split_per_batch = r.max_split_per_batch;
    c.q_dtype = ToAiter(r.q_dtype);
    c.kv_dtype = ToAiter(r.kv_dtype);
    c.is_cp_round_robin = r.is_cp_round_robin;
    c.work_metadata_ptrs = ptrs.data();
    c.work_indptr = wi.data();
    c.work_indptr_size = sizes.work_indptr;
    c.work_info = info.data();
    c.work_info_rows = sizes.work_info_rows;
    c.reduce_indptr = ri.data();
    c.reduce_indptr_size = sizes.reduce_indptr;
    c.reduce_final_map = fm.data();
    c.reduce_final_map_rows = sizes.reduce_final_map_rows;
    c.reduce_partial_map = pm.data();
    c.reduce_partial_map_size = sizes.reduce_partial_map;
    const std::string refused = RunAiterV12(c);
    if (!refused.empty()) {
      std::fprintf(stderr, "ragged %d: aiter refused: %s\n", i, refused.c_str());
      ++bad;
      continue;
    }
    if (print && i < golden) {  // aiter's buffers, for the test's expectations
      std::printf("golden %d: %d works\n", i, wi[device.cu_count]);
      for (const auto& [name, v] :
           {std::pair<const char*, const std::vector<int32_t>*>{"work_indptr", &wi},
            {"work_info", &info},
            {"reduce_indptr", &ri},
            {"reduce_final_map", &fm},
            {"reduce_partial_map", &pm}}) {
        std::printf("  %s:", name);
        for (int32_t x : *v) std::printf(" %d", x);
        std::printf("\n");
      }
    }
    const std::vector<int32_t>* theirs[] = {&wi, &info, &ri, &fm, &pm};
    const char* names[] = {"work_indptr", "work_info", "reduce_indptr", "reduce_final_map",
                           "reduce_partial_map"};
    for (const Plan* p : {static_cast<const Plan*>(&*fresh), static_cast<const Plan*>(&fast)}) {
      const mlasim::ref::Int32Buffer::Ints* mine[] = {&p->work_indptr.data, &p->work_info.data,
                                            &p->reduce_indptr.data, &p->reduce_final_map.data,
                                            &p->reduce_partial_map.data};
      for (int k = 0; k < 5; ++k) {
        const int64_t d = FirstDiff(*theirs[k], *mine[k]);
        if (d < 0) continue;
        std::fprintf(stderr, "ragged %d: %s differs at element %lld (aiter %d, mlasim %d)\n", i,
                     names[k], static_cast<long long>(d),
                     d < static_cast<int64_t>(theirs[k]->size()) ? (*theirs[k])[d] : 0,
                     d < static_cast<int64_t>(mine[k]->size()) ? (*mine[k])[d] : 0);
        ++bad;
        break;
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
  constexpr int32_t kRaggedCases = 3000;
  int32_t parallel_cases = 0;
  bool print = false;
  for (int i = 1; i < argc; ++i) print = print || std::strcmp(argv[i], "--print-ragged") == 0;
  const int ragged_bad = VerifyRaggedCases(kRaggedCases, &parallel_cases, print);
  if (ragged_bad > 0) {
    std::fprintf(stderr, "%d mismatch(es) on non-uniform q lengths: not timing\n", ragged_bad);
    return 1;
  }
  std::printf(
      "non-uniform q lengths (uni_seqlen_qo <= 0): outputs equal in %d/%d random batches "
      "(%d on the parallel planner)\n",
      kRaggedCases, kRaggedCases, parallel_cases);
  SetAiterDevice(AiterDevice{"gfx942", 304, 64 * 1024, 64});
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--verify-only") == 0 || std::strcmp(argv[i], "--print-ragged") == 0)
      return 0;
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
