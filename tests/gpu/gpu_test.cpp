// GPU tests: the planner and decode_update kernels bit-exact against the reference, the decode +
// reduce kernels against the CPU numerics, and the founding case on hardware (sentinel tails and
// the access log against the simulator's violations). Every test skips without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/gpu_api.h"
#include "kernels/kut_client.h"
#include "kernels/semantics.h"
#include "ref/limits.h"
#include "ref/numerics.h"
#include "ref/planner.h"
#include "sim/replay.h"

namespace mlasim {
namespace {

using ref::Cell;
using ref::PlanRequest;
using ref::SplitMix64;

#define SKIP_WITHOUT_GPU() \
  if (!gpu::available()) GTEST_SKIP() << "no GPU device (GPU_BACKEND=NONE or none visible)"

// Whether the kernel library holds the warpgroup-mma kernels (tilings 8, 9, 10: NVIDIA builds for
// sm_90a; elsewhere the library refuses them and names no kernel for them).
bool HasWgmmaKernels() {
  return !gpu::KutClient::Get().KernelName("tiling=8", 16, 576, 512, 0, 0).empty();
}

// MLASIM_TEST_TILINGS (comma list of DecodeOptions::tiling, e.g. "8,9"): the decode tests run
// only these of their kernels, e.g. one kernel under compute-sanitizer racecheck; unset or empty:
// every kernel. An entry that is not a tiling 0..10 fails the test (a typo must not let the decode
// tests pass having run nothing); the tests print how many kernels each case ran.
std::vector<int> Selected(std::vector<int> tilings) {
  const char* env = std::getenv("MLASIM_TEST_TILINGS");
  if (env == nullptr || *env == 0) return tilings;
  std::vector<int> want;
  std::stringstream list(env);
  for (std::string item; std::getline(list, item, ',');) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != 0 || v < 0 || v > 10)
      ADD_FAILURE() << "MLASIM_TEST_TILINGS=" << env << ": '" << item << "' is not a tiling 0..10";
    else
      want.push_back(static_cast<int>(v));
  }
  std::vector<int> out;
  for (int t : tilings)
    if (std::find(want.begin(), want.end(), t) != want.end()) out.push_back(t);
  return out;
}

// Random valid planner requests: dense page 1 / 64, sparse top-k, MTP, zero-KV requests.
PlanRequest RandomRequest(SplitMix64& rng) {
  PlanRequest r;
  r.revision = rng.Below(2) ? ref::Revision::k2026_08 : ref::Revision::k2026_03;
  static const int32_t kHeads[] = {16, 16, 32, 64, 128};
  r.heads_per_head_k = kHeads[rng.Below(5)];
  r.cu_count = rng.Below(2) ? 0 : static_cast<int32_t>(1 + rng.Below(160));
  const bool sparse = rng.Below(4) == 0;
  r.page_size = sparse ? 1 : (rng.Below(3) == 0 ? 64 : 1);
  r.kv_granularity = r.page_size == 1 ? 16 : 1;
  const int32_t q = static_cast<int32_t>(1 + rng.Below(4));
  r.qlen = r.max_seqlen_qo = r.uni_seqlen_qo = q;
  r.is_causal = rng.Below(5) != 0;
  if (sparse) r.topk = rng.Below(2) ? 2048 : static_cast<int32_t>(16 + rng.Below(600));
  const int32_t b = static_cast<int32_t>(1 + rng.Below(rng.Below(4) == 0 ? 300 : 40));
  r.qo_indptr = {0};
  r.kv_indptr = {0};
  for (int32_t i = 0; i < b; ++i) {
    const int32_t tokens =
        rng.Below(6) == 0 ? 0 : static_cast<int32_t>(rng.Below(rng.Below(2) ? 9000 : 300));
    const int32_t pages = (tokens + r.page_size - 1) / r.page_size;
    r.kv_indptr.push_back(r.kv_indptr.back() + pages);
    r.kv_last_page_lens.push_back(pages == 0 ? 0 : tokens - (pages - 1) * r.page_size);
    r.qo_indptr.push_back(r.qo_indptr.back() + q);
  }
  return r;
}

// Requests aiter's dispatch gives the parallel planner (dense, page 1, qlen 1, 16 heads) with
// 1,600..3,199 batches, zero-KV requests included.
PlanRequest LargeParallelRequest(SplitMix64& rng) {
  PlanRequest r;
  r.revision = rng.Below(2) ? ref::Revision::k2026_08 : ref::Revision::k2026_03;
  r.heads_per_head_k = 16;
  r.cu_count = rng.Below(2) ? 0 : static_cast<int32_t>(1 + rng.Below(304));
  r.page_size = 1;
  r.kv_granularity = 16;
  r.qlen = r.max_seqlen_qo = r.uni_seqlen_qo = 1;
  r.is_causal = rng.Below(5) != 0;
  const int32_t b = static_cast<int32_t>(1600 + rng.Below(1600));
  r.qo_indptr = {0};
  r.kv_indptr = {0};
  for (int32_t i = 0; i < b; ++i) {
    const int32_t tokens = rng.Below(6) == 0 ? 0 : static_cast<int32_t>(rng.Below(9000));
    r.kv_indptr.push_back(r.kv_indptr.back() + tokens);
    r.kv_last_page_lens.push_back(tokens == 0 ? 0 : 1);
    r.qo_indptr.push_back(r.qo_indptr.back() + 1);
  }
  return r;
}

// Number of cells where the GPU differs from the reference (undefined cells skipped).
template <class Ints>
int64_t Mismatches(const Ints& gpu, const ref::Int32Buffer& want, std::string* where) {
  if (static_cast<int64_t>(gpu.size()) != want.size()) {
    *where = "size " + std::to_string(gpu.size()) + " vs " + std::to_string(want.size());
    return 1 + std::max<int64_t>(gpu.size(), want.size());
  }
  int64_t bad = 0;
  for (int64_t i = 0; i < want.size(); ++i) {
    if (want.cells[i] == Cell::kUndefined) continue;
    if (gpu[i] != want.data[i]) {
      if (bad == 0)
        *where = "element " + std::to_string(i) + ": gpu " + std::to_string(gpu[i]) + " ref " +
                 std::to_string(want.data[i]);
      ++bad;
    }
  }
  return bad;
}

void ExpectSamePlan(const gpu::GpuPlan& g, const ref::Plan& want, const std::string& what) {
  const std::pair<const std::vector<int32_t>*, const ref::Int32Buffer*> bufs[] = {
      {&g.work_indptr, &want.work_indptr},
      {&g.work_info, &want.work_info},
      {&g.reduce_indptr, &want.reduce_indptr},
      {&g.reduce_final_map, &want.reduce_final_map},
      {&g.reduce_partial_map, &want.reduce_partial_map}};
  const char* names[] = {"work_indptr", "work_info", "reduce_indptr", "reduce_final_map",
                         "reduce_partial_map"};
  for (int i = 0; i < 5; ++i) {
    std::string where;
    EXPECT_EQ(Mismatches(*bufs[i].first, *bufs[i].second, &where), 0)
        << what << " " << names[i] << " " << where;
  }
  EXPECT_EQ(g.num_tiles, want.derived.num_tiles) << what;
  EXPECT_EQ(g.payload, want.derived.payload) << what;
  EXPECT_EQ(g.oob_stores, 0) << what;
  EXPECT_FALSE(g.walk_failed) << what;
}

// Plans `cases` requests drawn by `draw` on the GPU and with the reference; returns how many of
// them the parallel planner made.
int PlannerBitExact(ref::PlannerChoice choice, int cases,
                    PlanRequest (*draw)(SplitMix64&) = RandomRequest) {
  SplitMix64 rng(20261130 + static_cast<int>(choice));
  int run = 0, parallel = 0;
  for (int i = 0; i < cases; ++i) {
    const PlanRequest r = draw(rng);
    auto want = ref::PlanMlaMetadata(r, {choice, ref::PlannerMutant::kNone});
    if (!want.ok()) continue;  // a request aiter refuses
    const gpu::GpuPlan g = gpu::plan_mla_metadata(r, choice);
    EXPECT_EQ(g.parallel, want->derived.parallel_planner_used);
    ExpectSamePlan(g, *want, "case " + std::to_string(i));
    if (::testing::Test::HasFailure()) return parallel;
    ++run;
    parallel += g.parallel;
  }
  std::printf("[gpu] planner (%s): %d plans bit-identical (%d by the parallel planner)\n",
              choice == ref::PlannerChoice::kSerial ? "serial" : "aiter dispatch", run, parallel);
  EXPECT_GT(run, cases / 2);
  return parallel;
}

TEST(GpuPlanner, SerialBitIdenticalOnRandomRequests) {
  SKIP_WITHOUT_GPU();
  PlannerBitExact(ref::PlannerChoice::kSerial, 600);
}

TEST(GpuPlanner, AiterDispatchBitIdenticalOnRandomRequests) {
  SKIP_WITHOUT_GPU();
  PlannerBitExact(ref::PlannerChoice::kAiterDispatch, 600);
}

// 1,600..3,199 requests: the parallel kernel's state no longer fits its shared memory
// (kernels/planner.hip ParallelScratchInts) and lives in global scratch.
TEST(GpuPlanner, AiterDispatchBitIdenticalOnLargeBatches) {
  SKIP_WITHOUT_GPU();
  EXPECT_GT(PlannerBitExact(ref::PlannerChoice::kAiterDispatch, 40, LargeParallelRequest), 10);
}

TEST(GpuDecodeUpdate, BitIdenticalOnRandomPlans) {
  SKIP_WITHOUT_GPU();
  SplitMix64 rng(77);
  int run = 0;
  for (int i = 0; i < 400; ++i) {
    PlanRequest r = RandomRequest(rng);
    r.topk = -1;
    r.page_size = 1;
    r.kv_granularity = 16;
    r.kv_last_page_lens.assign(r.kv_last_page_lens.size(), 1);
    auto plan = ref::PlanMlaMetadata(r);
    if (!plan.ok()) continue;
    ref::DecodeUpdateRequest u;
    u.revision = r.revision;
    u.heads_per_head_k = r.heads_per_head_k;
    u.max_seqlen_qo = rng.Below(2) ? r.max_seqlen_qo : 1;
    u.qo_indptr = r.qo_indptr;
    u.has_num_reject_tokens = rng.Below(3) != 0;
    u.kv_indptr = {0};
    for (size_t b = 0; b + 1 < r.kv_indptr.size(); ++b) {
      const int32_t rej = static_cast<int32_t>(rng.Below(r.max_seqlen_qo + 1));
      u.num_reject_tokens.push_back(rej);
      const int32_t len = r.kv_indptr[b + 1] - r.kv_indptr[b];
      u.kv_indptr.push_back(u.kv_indptr.back() + len + (u.has_num_reject_tokens ? 1 - rej : 1));
    }
    ref::Plan want = *plan;
    if (!ref::DecodeUpdateMlaMetadataV1(u, want).ok()) continue;
    if (want.input_violations.size() != plan->input_violations.size())
      continue;  // reads past inputs
    ref::Plan got = *plan;
    gpu::decode_update_mla_metadata(u, got);
    std::string where;
    EXPECT_EQ(Mismatches(got.work_info.data, want.work_info, &where), 0)
        << "case " << i << " work_info " << where;
    EXPECT_EQ(Mismatches(got.reduce_final_map.data, want.reduce_final_map, &where), 0)
        << "case " << i << " " << where;
    EXPECT_EQ(Mismatches(got.reduce_partial_map.data, want.reduce_partial_map, &where), 0)
        << "case " << i << " " << where;
    if (HasFailure()) return;
    ++run;
  }
  std::printf("[gpu] decode_update: %d updates bit-identical\n", run);
  EXPECT_GT(run, 50);
}

ref::AttentionPrecision KernelPrecision() {
  ref::AttentionPrecision p;
  p.accumulate = ref::Accumulate::kFp32;
  p.p_format = ref::NumFormat::kBf16;
  p.out_format = ref::NumFormat::kBf16;
  return p;
}

// One random decode step on the GPU against the CPU (plan-driven run, tolerances from the truth).
// kv_format fp8_e4m3fn: the inputs' KV values are e4m3fn values and the kernel reads 1 byte each.
// q_format fp8_e4m3fn: q too, with per-tensor scales q 0.125 and KV 0.25, on the kernels that
// take fp8 q (fp8 KV: tilings 0-2, S on e4m3 mma, and 5, the portable kernel; bf16 KV: 0 and 5,
// both the portable kernel).
void CheckDecode(const PlanRequest& r, uint64_t seed, gpu::ZeroKvVariant variant,
                 const std::string& what, ref::NumFormat kv_format = ref::NumFormat::kBf16,
                 ref::NumFormat q_format = ref::NumFormat::kBf16) {
  auto plan = ref::PlanMlaMetadata(r);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ref::NumericsOptions no;
  no.seed = seed;
  no.precision = KernelPrecision();
  if (kv_format != ref::NumFormat::kBf16) no.kv_format = kv_format;
  const bool q8 = q_format == ref::NumFormat::kFp8E4m3fn;
  if (q8) no.q_format = q_format, no.q_scale = 0.125, no.kv_scale = 0.25;
  auto in = ref::BuildMlaInputs(r, no);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  auto mono = ref::RunMonolithic(*in, no.precision);
  ASSERT_TRUE(mono.ok()) << mono.status().ToString();
  // The reference is the plan-driven CPU run of the same plan (checked against the monolithic
  // truth by the numerics tests): rows the plan never writes (the parallel planner's zero-KV
  // requests without a work item) are NaN there and must be NaN (poison) on the GPU too.
  ref::PlanExecOptions exec;
  exec.precision = no.precision;
  auto driven = ref::RunPlanDriven(*in, r, *plan, exec);
  ASSERT_TRUE(driven.ok()) << driven.status().ToString();
  const ref::AttentionOutput& want = driven->out;
  const auto tol = ref::TolerancesFor(*in, *mono, no.precision);
  // every NVIDIA kernel and the portable one (DecodeOptions::tiling; the AMD build has one kernel):
  // the warp-specialised kernel (6), the lock-step tilings (1-4; for fp8 KV 1-2 read the fp8
  // bytes as mma operands, 3-4 widen each chunk first), the portable kernel (5) and, for heads a
  // multiple of 32 and bf16 KV, the lock-step kernel with 32 rows per pass (7); the warpgroup-mma
  // kernel (8; 9 with 32 rows per pass, heads a multiple of 32; 10 with 64 heads as the mma's M,
  // heads a multiple of 64 and bf16 KV)
  const bool fp8 = kv_format == ref::NumFormat::kFp8E4m3fn;
  std::vector<int> tilings{6, 1, 2, 3, 4, 5};
  if (!fp8 && in->num_heads % 32 == 0) tilings.push_back(7);
  if (HasWgmmaKernels()) tilings.push_back(8);
  if (HasWgmmaKernels() && in->num_heads % 32 == 0) tilings.push_back(9);
  if (HasWgmmaKernels() && !fp8 && in->num_heads % 64 == 0) tilings.push_back(10);
  if (q8) tilings = fp8 ? std::vector<int>{0, 1, 2, 5} : std::vector<int>{0, 5};
  tilings = Selected(tilings);
  for (int tiling : tilings) {
    gpu::DecodeOptions opt;
    opt.variant = variant;
    opt.tiling = tiling;
    opt.kv_format = kv_format;
    opt.q_format = q_format;
    const gpu::DecodeResult g = gpu::run_mla_decode(*in, *plan, opt);
    EXPECT_TRUE(g.tails.empty()) << what
                                 << ": a sentinel tail was overwritten: " << g.tails[0].buffer;
    ASSERT_EQ(g.o.size(), want.o.size());
    const auto co =
        ref::CompareTensors(g.o.data(), want.o.data(), static_cast<int64_t>(g.o.size()), tol.o);
    const auto cl = ref::CompareTensors(g.lse.data(), want.lse.data(),
                                        static_cast<int64_t>(g.lse.size()), tol.lse);
    std::printf(
        "[gpu] decode %s (%s): o max_abs %.3g (atol %.3g rtol %.3g) cos_diff %.3g nan_mismatch "
        "%lld; "
        "lse max_abs %.3g\n",
        what.c_str(), g.kernel.c_str(), co.max_abs, tol.o.atol, tol.o.rtol, co.cos_diff,
        static_cast<long long>(co.nan_mismatches), cl.max_abs);
    EXPECT_TRUE(co.passed) << what << " " << g.kernel << " o: violations "
                           << co.tolerance_violations << " first " << co.first_violation << " nan "
                           << co.nan_mismatches << " inf " << co.inf_mismatches;
    EXPECT_TRUE(cl.passed) << what << " " << g.kernel << " lse: violations "
                           << cl.tolerance_violations << " first " << cl.first_violation << " nan "
                           << cl.nan_mismatches << " inf " << cl.inf_mismatches;
  }
}

PlanRequest SmallRequest(SplitMix64& rng, bool sparse, int32_t page, int32_t qlen, int32_t cu) {
  PlanRequest r;
  r.cu_count = cu;
  r.page_size = page;
  r.kv_granularity = page == 1 ? 16 : 1;
  r.qlen = r.max_seqlen_qo = r.uni_seqlen_qo = qlen;
  if (sparse) {
    r.topk = static_cast<int32_t>(64 + rng.Below(200));
    r.uni_seqlen_qo = r.max_seqlen_qo = 1;  // sparse plans are per token (ori from qo_indptr)
  }
  const int32_t b = static_cast<int32_t>(1 + rng.Below(6));
  r.qo_indptr = {0};
  r.kv_indptr = {0};
  for (int32_t i = 0; i < b; ++i) {
    const int32_t tokens = rng.Below(5) == 0 ? 0 : static_cast<int32_t>(qlen + rng.Below(700));
    const int32_t pages = (tokens + page - 1) / page;
    r.kv_indptr.push_back(r.kv_indptr.back() + pages);
    r.kv_last_page_lens.push_back(pages == 0 ? 0 : tokens - (pages - 1) * page);
    r.qo_indptr.push_back(r.qo_indptr.back() + qlen);
  }
  return r;
}

// The shapes of the many-heads tests, in this order: for each head count, dense pages of 1 and
// 64 and sparse top-k, each at q lengths 1 (32 clusters) and 4 (4 clusters), gfx950's rules (any
// head count unfolded: run_mla_decode's need); fn(request, "H heads dense|sparse page P qlen
// L"). Stops at the first fatal failure.
template <class Fn>
void ForEachHeadsShape(SplitMix64& rng, std::initializer_list<int32_t> heads_list, Fn&& fn) {
  for (int32_t heads : heads_list)
    for (bool sparse : {false, true})
      for (int32_t page : {1, 64}) {
        if (sparse && page != 1) continue;
        for (int32_t qlen : {1, 4}) {
          PlanRequest r = SmallRequest(rng, sparse, page, qlen, qlen == 1 ? 32 : 4);
          r.heads_per_head_k = heads;
          r.target = ref::Arch::kGfx950;
          fn(r, std::to_string(heads) + " heads " + (sparse ? "sparse" : "dense") + " page " +
                    std::to_string(page) + " qlen " + std::to_string(qlen));
          if (::testing::Test::HasFatalFailure()) return;
        }
      }
}

TEST(GpuDecode, MatchesCpuNumericsOnRandomBatches) {
  SKIP_WITHOUT_GPU();
  SplitMix64 rng(4242);
  int i = 0;
  for (bool sparse : {false, true}) {
    for (int32_t page : {1, 64}) {
      if (sparse && page != 1) continue;
      for (int32_t qlen : {1, 2, 4}) {
        for (int32_t cu : {4, 32}) {  // few clusters: long splits; many: short pieces and reduce
          const PlanRequest r = SmallRequest(rng, sparse, page, qlen, cu);
          CheckDecode(r, 1000 + i++, gpu::ZeroKvVariant::kAsm,
                      std::string(sparse ? "sparse" : "dense") + " page " + std::to_string(page) +
                          " qlen " + std::to_string(qlen) + " cu " + std::to_string(cu));
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

// Heads 32, 64 and 128 (every kernel, and tiling 7: two m16 tiles of one token per pass, q in
// shared memory): dense pages of 1 and 64, sparse top-k, q lengths 1 and 4 (several tokens per
// work item, so a pass's two tiles must stay within one token), few and many clusters; bf16 KV
// and fp8 KV (the fp8 kernels' later head groups of a token: q rows first + 16 g).
TEST(GpuDecode, ManyHeadsMatchCpuNumericsOnEveryKernel) {
  SKIP_WITHOUT_GPU();
  SplitMix64 rng(9090);
  int i = 0;
  for (ref::NumFormat kv : {ref::NumFormat::kBf16, ref::NumFormat::kFp8E4m3fn}) {
    const std::string fmt = kv == ref::NumFormat::kBf16 ? "" : "fp8 ";
    ForEachHeadsShape(rng, {32, 64, 128}, [&](const PlanRequest& r, const std::string& shape) {
      CheckDecode(r, 3000 + i++, gpu::ZeroKvVariant::kAsm, fmt + shape, kv);
    });
    if (HasFatalFailure()) return;
  }
}

// fp8 q with fp8 KV (S on e4m3 mma; sm_90a builds): heads 16, 32 and 128, dense pages of 1 and
// 64, sparse top-k, q lengths 1 and 4, few and many clusters (the zero-KV variants:
// ZeroKvVariantsOnEveryKernel); fp8 q with bf16 KV (the portable kernel): 16 heads, dense and
// sparse.
TEST(GpuDecode, Fp8QMatchesCpuNumerics) {
  SKIP_WITHOUT_GPU();
  if (!HasWgmmaKernels()) GTEST_SKIP() << "the kernel library is not built for sm_90a";
  SplitMix64 rng(7171);
  int i = 0;
  ForEachHeadsShape(rng, {16, 32, 128}, [&](const PlanRequest& r, const std::string& shape) {
    CheckDecode(r, 6000 + i++, gpu::ZeroKvVariant::kAsm, "fp8 q " + shape,
                ref::NumFormat::kFp8E4m3fn, ref::NumFormat::kFp8E4m3fn);
  });
  if (HasFatalFailure()) return;
  for (bool sparse : {false, true}) {
    const PlanRequest r = SmallRequest(rng, sparse, 1, sparse ? 1 : 4, 8);
    CheckDecode(r, 6100 + sparse, gpu::ZeroKvVariant::kAsm,
                std::string("fp8 q, bf16 KV, 16 heads ") + (sparse ? "sparse" : "dense"),
                ref::NumFormat::kBf16, ref::NumFormat::kFp8E4m3fn);
    if (HasFatalFailure()) return;
  }
}

// fp8 q runs on the e4m3 kernel with fp8 KV and tilings 0-2 (sm_90a builds), on the portable
// kernel with tiling 5 and with tiling 0 where the e4m3 kernel does not apply; the other tilings
// refuse it as unsupported (std::invalid_argument naming the reason).
TEST(GpuDecode, Fp8QRefusedWhereNoKernelTakesIt) {
  SKIP_WITHOUT_GPU();
  SplitMix64 rng(7272);
  PlanRequest r = SmallRequest(rng, false, 1, 1, 8);
  auto plan = ref::PlanMlaMetadata(r);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  for (bool kv8 : {false, true}) {
    ref::NumericsOptions no;
    no.seed = 9;
    no.q_format = ref::NumFormat::kFp8E4m3fn;
    if (kv8) no.kv_format = ref::NumFormat::kFp8E4m3fn;
    auto in = ref::BuildMlaInputs(r, no);
    ASSERT_TRUE(in.ok()) << in.status().ToString();
    for (int tiling : {0, 1, 2, 3, 5, 6, 8}) {
      gpu::DecodeOptions opt;
      opt.tiling = tiling;
      opt.q_format = ref::NumFormat::kFp8E4m3fn;
      if (kv8) opt.kv_format = ref::NumFormat::kFp8E4m3fn;
      const bool e4m3 = kv8 && HasWgmmaKernels();  // the e4m3 kernel applies
      const std::string want =
          tiling == 0 || tiling == 5 ? ""
          : tiling == 8 && !HasWgmmaKernels()
              ? "tiling=8 needs the kernel library built for sm_90a"
          : tiling > 2 ? "takes bf16 q only (fp8_e4m3fn q runs on tilings 0, 1, 2 and 5)"
          : !kv8       ? "takes fp8_e4m3fn q only with fp8_e4m3fn KV"
          : !e4m3      ? "takes fp8_e4m3fn q only in a kernel library built for sm_90a"
                       : "";
      std::string got;
      try {
        const gpu::DecodeResult g = gpu::run_mla_decode(*in, *plan, opt);
        EXPECT_EQ(g.kernel, tiling == 5 || !e4m3
                                ? "portable"
                            : tiling == 2 ? "lockstep fp8 q e4m3 mma, direct 64 keys x 5 stages"
                                          : "lockstep fp8 q e4m3 mma, direct 64 keys x 4 stages")
            << "kv8 " << kv8 << " tiling " << tiling;
      } catch (const std::invalid_argument& e) {
        got = e.what();
      }
      if (want.empty())
        EXPECT_EQ(got, "") << "tiling " << tiling;
      else
        EXPECT_NE(got.find(want), std::string::npos) << "kv8 " << kv8 << " tiling " << tiling
                                                     << ": " << got;
    }
  }
  // q values that are not e4m3fn values are named before anything runs
  ref::NumericsOptions no;
  no.seed = 9;
  no.kv_format = ref::NumFormat::kFp8E4m3fn;
  auto in = ref::BuildMlaInputs(r, no);  // bf16 q values
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  gpu::DecodeOptions opt;
  opt.q_format = opt.kv_format = ref::NumFormat::kFp8E4m3fn;
  try {
    gpu::run_mla_decode(*in, *plan, opt);
    ADD_FAILURE() << "bf16 q values ran as fp8";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("is not an fp8_e4m3fn value (build the inputs with "
                                         "q_format fp8_e4m3fn)"),
              std::string::npos)
        << e.what();
  }
}

// tiling 10 at 192 and 256 heads (3 and 4 workgroups per cluster, DecodeParams::parts; with every
// other kernel, CheckDecode): dense pages of 1 and 64, sparse top-k, q lengths 1 and 4. (tiling 0's
// pick there: GpuKernelConfig.DefaultKernelPerHeadCount.)
TEST(GpuDecode, HeadsAsMWithThreeAndFourWorkgroupsPerCluster) {
  SKIP_WITHOUT_GPU();
  if (!HasWgmmaKernels()) GTEST_SKIP() << "the kernel library is not built for sm_90a";
  SplitMix64 rng(8181);
  int i = 0;
  for (int32_t heads : {192, 256}) {
    for (bool sparse : {false, true}) {
      for (int32_t page : {1, 64}) {
        if (sparse && page != 1) continue;
        const int32_t qlen = page == 64 ? 4 : 1;
        PlanRequest r = SmallRequest(rng, sparse, page, qlen, qlen == 1 ? 32 : 4);
        r.heads_per_head_k = heads;
        r.target = ref::Arch::kGfx950;
        CheckDecode(r, 8000 + i++, gpu::ZeroKvVariant::kAsm,
                    std::to_string(heads) + " heads " + (sparse ? "sparse" : "dense") + " page " +
                        std::to_string(page) + " qlen " + std::to_string(qlen));
        if (HasFatalFailure()) return;
      }
    }
  }
}

// tiling 7 runs 32 heads of one token per pass: 16 or 48 heads, or fp8 KV, are refused as
// unsupported (std::invalid_argument naming the reason), never run half a pass.
TEST(GpuDecode, TwoTileKernelRefusesHeadsNotAMultipleOf32AndFp8Kv) {
  SKIP_WITHOUT_GPU();
  SplitMix64 rng(4343);
  for (int32_t heads : {16, 48, 32}) {
    for (bool fp8 : {false, true}) {
      PlanRequest r = SmallRequest(rng, false, 1, 1, 8);
      r.heads_per_head_k = heads;
      r.target = ref::Arch::kGfx950;
      auto plan = ref::PlanMlaMetadata(r);
      ASSERT_TRUE(plan.ok()) << plan.status().ToString();
      ref::NumericsOptions no;
      no.seed = 5;
      if (fp8) no.kv_format = ref::NumFormat::kFp8E4m3fn;
      auto in = ref::BuildMlaInputs(r, no);
      ASSERT_TRUE(in.ok()) << in.status().ToString();
      gpu::DecodeOptions opt;
      opt.tiling = 7;
      if (fp8) opt.kv_format = ref::NumFormat::kFp8E4m3fn;
      const std::string want = heads % 32 != 0 ? "tiling=7 needs heads % 32 == 0"
                               : fp8           ? "tiling=7 needs bf16 KV"
                                               : "";
      std::string got;
      try {
        const gpu::DecodeResult g = gpu::run_mla_decode(*in, *plan, opt);
        EXPECT_EQ(g.kernel, "lockstep 64 keys x 2 stages, 32 rows per pass");
      } catch (const std::invalid_argument& e) {
        got = e.what();
      }
      if (want.empty())
        EXPECT_EQ(got, "") << heads << " heads";
      else
        EXPECT_NE(got.find(want), std::string::npos)
            << heads << " heads fp8 " << fp8 << ": " << got;
    }
  }
}

// The warpgroup-mma kernels (tilings 8, 9 and 10): where the library holds them, tiling 9 refuses
// heads that are not a multiple of 32 (16, 48) and runs 32 and 64 (bf16 and fp8 KV), tiling 10
// refuses heads that are not a multiple of 64 (16, 48, 32) and fp8 KV and runs 64 bf16, tiling 8
// runs all; where the library does not hold them (not an sm_90a build), all three are refused
// naming the build they need.
TEST(GpuDecode, WgmmaKernelRefusesWhatItCannotRun) {
  SKIP_WITHOUT_GPU();
  SplitMix64 rng(4545);
  const bool built = HasWgmmaKernels();
  for (int tiling : {8, 9, 10}) {
    for (int32_t heads : {16, 48, 32, 64}) {
      for (bool fp8 : {false, true}) {
        PlanRequest r = SmallRequest(rng, false, 1, 1, 8);
        r.heads_per_head_k = heads;
        r.target = ref::Arch::kGfx950;
        auto plan = ref::PlanMlaMetadata(r);
        ASSERT_TRUE(plan.ok()) << plan.status().ToString();
        ref::NumericsOptions no;
        no.seed = 6;
        if (fp8) no.kv_format = ref::NumFormat::kFp8E4m3fn;
        auto in = ref::BuildMlaInputs(r, no);
        ASSERT_TRUE(in.ok()) << in.status().ToString();
        gpu::DecodeOptions opt;
        opt.tiling = tiling;
        if (fp8) opt.kv_format = ref::NumFormat::kFp8E4m3fn;
        const std::string want =
            !built ? "tiling=" + std::to_string(tiling) + " needs the kernel library built for sm_90a"
            : tiling == 9 && heads % 32 != 0  ? "tiling=9 needs heads % 32 == 0"
            : tiling == 10 && heads % 64 != 0 ? "tiling=10 needs heads % 64 == 0"
            : tiling == 10 && fp8             ? "tiling=10 needs bf16 KV"
                                              : "";
        std::string got;
        try {
          const gpu::DecodeResult g = gpu::run_mla_decode(*in, *plan, opt);
          EXPECT_EQ(g.kernel.rfind("wgmma ", 0), 0u) << g.kernel;
          EXPECT_NE(g.kernel.find(tiling == 10  ? "64 rows per pass"
                                  : tiling == 9 ? "32 rows per pass"
                                                : "16 rows per pass"),
                    std::string::npos)
              << g.kernel;
        } catch (const std::invalid_argument& e) {
          got = e.what();
        }
        if (want.empty())
          EXPECT_EQ(got, "") << "tiling " << tiling << ", " << heads << " heads";
        else
          EXPECT_NE(got.find(want), std::string::npos)
              << "tiling " << tiling << ", " << heads << " heads, fp8 " << fp8 << ": " << got;
      }
    }
  }
}

// tiling 0 picks per head count and KV format (gpu_kut.hip PickDecodeKernel, measured on the H200:
// docs/performance.md "Session 19"): bf16 KV, the heads-as-M kernel at 64 and 128 heads, 32 rows
// per pass at 32 and 96, 16 at 16 and 48; fp8 KV, 32 rows per pass at 128 and the lock-step direct
// kernel at 16. Where the library has no warpgroup-mma kernels (not sm_90a) there is nothing to
// pick between here.
TEST(GpuKernelConfig, DefaultKernelPerHeadCount) {
  SKIP_WITHOUT_GPU();
  if (!HasWgmmaKernels()) GTEST_SKIP() << "kernel library without the warpgroup-mma kernels";
  const auto name = [](int heads, int fp8) {
    return gpu::KutClient::Get().KernelName("", heads, 576, 512, fp8, 0);
  };
  const std::string hm = "wgmma heads as M, 64 rows per pass, a workgroup per 64 heads";
  EXPECT_EQ(name(128, 0), hm);
  EXPECT_EQ(name(64, 0), hm);
  EXPECT_EQ(name(96, 0), "wgmma 64 keys x 18 blocks, 32 rows per pass");
  EXPECT_EQ(name(32, 0), "wgmma 64 keys x 18 blocks, 32 rows per pass");
  EXPECT_EQ(name(48, 0), "wgmma 64 keys x 18 blocks, 16 rows per pass");
  EXPECT_EQ(name(16, 0), "wgmma 64 keys x 18 blocks, 16 rows per pass");
  EXPECT_EQ(name(192, 0), hm);
  EXPECT_EQ(name(256, 0), hm);
  EXPECT_EQ(name(128, 1), "wgmma fp8 64 keys x 2 widened chunks, 32 rows per pass");
  EXPECT_EQ(name(16, 1), "lockstep fp8 direct 64 keys x 4 stages");
  // fp8 q: the e4m3 kernel with fp8 KV whatever the heads, the portable one with bf16 KV
  const auto name_q8 = [](int heads, int fp8) {
    return gpu::KutClient::Get().KernelName("", heads, 576, 512, fp8, 1);
  };
  EXPECT_EQ(name_q8(16, 1), "lockstep fp8 q e4m3 mma, direct 64 keys x 4 stages");
  EXPECT_EQ(name_q8(128, 1), "lockstep fp8 q e4m3 mma, direct 64 keys x 4 stages");
  EXPECT_EQ(name_q8(16, 0), "portable");
  EXPECT_EQ(name_q8(128, 0), "portable");
}

// A q or KV base that is not 16-byte aligned is refused (UNSUPPORTED, naming the tensor and its
// offset) by every kernel (all read 16-byte pieces, the portable one too), before the library
// touches the device: the pointers below are never dereferenced. bf16 and fp8 KV, fp8 q where a
// tiling takes it. Needs the kernel library (a CUDA build), not a device.
TEST(GpuKut, MisalignedQOrKvIsRefusedBeforeTheDevice) {
  try {
    gpu::KutClient::Get();
  } catch (const std::exception& e) {
    GTEST_SKIP() << e.what();
  }
  auto tensor = [](uintptr_t addr, int64_t rows, int32_t heads, int32_t cols, int32_t dtype,
                   int elem) {
    mlasim_kut_tensor t{};
    t.data = reinterpret_cast<void*>(addr);
    t.rows = rows, t.heads = heads, t.cols = cols, t.dtype = dtype;
    t.row_stride = int64_t{heads} * cols * elem;
    t.head_stride = heads > 1 ? int64_t{cols} * elem : 0;
    t.bytes = static_cast<uint64_t>(rows * t.row_stride);
    return t;
  };
  std::vector<int> tilings{0, 1, 2, 3, 4, 5, 6};
  if (HasWgmmaKernels()) tilings.push_back(8);
  int refused = 0, calls = 0;
  for (int tiling : tilings) {
    for (int format : {0, 1, 2}) {  // bf16 q and KV; fp8 KV; fp8 q and KV (tilings 0-2 and 5)
      const bool fp8 = format >= 1, q8 = format == 2;
      if (q8 && tiling > 2 && tiling != 5) continue;
      if (q8 && (tiling == 1 || tiling == 2) && !HasWgmmaKernels()) continue;  // refused first
      for (const char* which : {"q", "kv_cache"}) {
        for (uintptr_t offset : {uintptr_t{1}, uintptr_t{8}, uintptr_t{15}}) {
          const bool q_off = std::string(which) == "q";
          const std::string config = "tiling=" + std::to_string(tiling);
          mlasim_kut_call c{};
          c.abi_version = MLASIM_KUT_ABI_VERSION;
          c.struct_bytes = sizeof(c);
          c.op = MLASIM_KUT_OP_DECODE;
          c.config = config.c_str();
          c.batch = 1, c.num_heads = 16, c.num_kv_heads = 1, c.head_dim_qk = 576;
          c.head_dim_v = 512, c.page_size = 1, c.num_pages = 64, c.max_seqlen_q = 1, c.topk = -1;
          c.q = tensor(0x10000 + (q_off ? offset : 0), 1, 16, 576,
                       q8 ? MLASIM_KUT_FP8_E4M3FN : MLASIM_KUT_BF16, q8 ? 1 : 2);
          c.kv_cache = tensor(0x40000 + (q_off ? 0 : offset), 64, 1, 576,
                              fp8 ? MLASIM_KUT_FP8_E4M3FN : MLASIM_KUT_BF16, fp8 ? 1 : 2);
          c.o = tensor(0x80000, 1, 16, 512, MLASIM_KUT_BF16, 2);
          const std::string want =
              std::string(which) + " data is " + std::to_string(offset) + " bytes past";
          ++calls;
          try {
            gpu::KutClient::Get().Run(c);
            ADD_FAILURE() << config << " ran a call with " << which << " misaligned by " << offset;
          } catch (const std::invalid_argument& e) {
            EXPECT_NE(std::string(e.what()).find("16-byte aligned"), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
            ++refused;
          } catch (const std::exception& e) {
            ADD_FAILURE() << config << ", " << which << " + " << offset
                          << ": not refused as unsupported: " << e.what();
          }
        }
      }
    }
  }
  EXPECT_EQ(refused, calls);
  EXPECT_EQ(calls, (static_cast<int>(tilings.size()) * 2 + (HasWgmmaKernels() ? 4 : 2)) * 2 * 3);
}

// fp8 e4m3fn KV (every fp8 kernel: lock-step read directly and widened, warp-specialised,
// portable): the same random batches with KV values quantised to e4m3fn (NaN pages included),
// against the CPU numerics on the same values.
TEST(GpuDecode, Fp8KvMatchesCpuNumerics) {
  SKIP_WITHOUT_GPU();
  SplitMix64 rng(777);
  int i = 0;
  for (bool sparse : {false, true}) {
    for (int32_t qlen : {1, 4}) {
      for (int32_t cu : {4, 32}) {
        const PlanRequest r = SmallRequest(rng, sparse, 1, qlen, cu);
        CheckDecode(r, 2000 + i++, gpu::ZeroKvVariant::kAsm,
                    std::string("fp8 ") + (sparse ? "sparse" : "dense") + " qlen " +
                        std::to_string(qlen) + " cu " + std::to_string(cu),
                    ref::NumFormat::kFp8E4m3fn);
        if (HasFatalFailure()) return;
      }
    }
  }
}

TEST(GpuDecode, Fp8KvRefusesValuesThatAreNotE4m3fn) {
  SKIP_WITHOUT_GPU();
  SplitMix64 rng(5);
  const PlanRequest r = SmallRequest(rng, false, 1, 1, 4);
  auto plan = ref::PlanMlaMetadata(r);
  ASSERT_TRUE(plan.ok());
  ref::NumericsOptions no;
  no.kv_format = ref::NumFormat::kFp8E4m3fn;
  auto in = ref::BuildMlaInputs(r, no);
  ASSERT_TRUE(in.ok());
  in->kv_cache[3] = 0.3f;  // between e4m3fn values 0.28125 and 0.3125
  gpu::DecodeOptions opt;
  opt.kv_format = ref::NumFormat::kFp8E4m3fn;
  try {
    gpu::run_mla_decode(*in, *plan, opt);
    FAIL() << "accepted a KV value that is not an e4m3fn value";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("kv_cache[3]"), std::string::npos) << e.what();
  }
}

// The zero-KV variants (§11) on every kernel: asm writes o = 0 / lse = -inf for a work item
// without keys, hk reads its q rows and writes nothing, opus skips it. Rows with keys are the
// same bits under all three (same kernel, same plan); rows of zero-KV requests are NaN (never
// written) under hk and opus. A kernel whose roles disagreed on a skipped item would hang here.
// 16 heads: the warp-specialised, lock-step and portable kernels; 128 heads: tiling 10 (9 for fp8
// KV); 64 heads (gfx950, unfolded)
// adds the lock-step kernel with 32 rows per pass (tiling 7) and the warpgroup-mma kernel with 32
// rows per pass (9) and, bf16 KV, the one with 64 heads as the mma's M (10); fp8 KV: its direct
// (1, 2) and widened (3, 4) lock-step kernels too; the warpgroup-mma kernel (8) always; fp8 q
// with fp8 KV (sm_90a builds): the e4m3 kernels (0-2).
TEST(GpuDecode, ZeroKvVariantsOnEveryKernel) {
  SKIP_WITHOUT_GPU();
  for (const int format : {0, 1, 2}) {  // bf16 q and KV; fp8 KV; fp8 q and KV
    const bool fp8 = format >= 1, q8 = format == 2;
    if (q8 && !HasWgmmaKernels()) continue;
    for (int32_t heads : {16, 64, 128}) {
      SplitMix64 rng(99 + heads);
      int checked = 0;
      std::vector<int> tilings =
          fp8 ? std::vector<int>{6, 1, 2, 3, 4, 5} : std::vector<int>{6, 1, 4, 5};
      if (!fp8 && heads % 32 == 0) tilings.push_back(7);
      if (HasWgmmaKernels()) tilings.push_back(8);
      if (HasWgmmaKernels() && heads % 32 == 0) tilings.push_back(9);
      if (HasWgmmaKernels() && !fp8 && heads % 64 == 0) tilings.push_back(10);
      // 128 heads: the kernels that split a token's heads (10: two workgroups of a cluster) or
      // pass over them in 32-row groups (9)
      if (heads == 128) tilings = HasWgmmaKernels() ? std::vector<int>{fp8 ? 9 : 10} : tilings;
      if (q8) tilings = {0, 1, 2, 5};
      tilings = Selected(tilings);
      for (int attempt = 0; attempt < 40 && checked < 6; ++attempt) {
        const bool sparse = attempt % 2 == 1;
        PlanRequest r = SmallRequest(rng, sparse, 1, sparse ? 1 : 2, 8);
        r.heads_per_head_k = heads;
        if (heads != 16) r.target = ref::Arch::kGfx950;
        std::vector<bool> empty_row;  // per q row: its request has no keys
        for (size_t b = 0; b + 1 < r.qo_indptr.size(); ++b)
          for (int32_t q = r.qo_indptr[b]; q < r.qo_indptr[b + 1]; ++q)
            empty_row.push_back(r.kv_indptr[b + 1] == r.kv_indptr[b]);
        if (std::find(empty_row.begin(), empty_row.end(), true) == empty_row.end()) continue;
        auto plan =
            ref::PlanMlaMetadata(r, {ref::PlannerChoice::kSerial, ref::PlannerMutant::kNone});
        ASSERT_TRUE(plan.ok()) << plan.status().ToString();
        // rows a zero-KV work item covers (a variant may change them, through the reduce too)
        std::vector<bool> zero_kv_row(empty_row.size(), false);
        const auto& wip = plan->work_indptr.data;
        const auto& info = plan->work_info.data;
        for (size_t c = 0; c + 1 < wip.size(); ++c)
          for (int32_t w = wip[c]; w < wip[c + 1]; ++w)
            if (info[8 * w + 5] <= info[8 * w + 4])
              for (int32_t q = info[8 * w + 2]; q < info[8 * w + 3]; ++q) zero_kv_row.at(q) = true;
        ref::NumericsOptions no;
        no.seed = 3000 + attempt;
        if (fp8) no.kv_format = ref::NumFormat::kFp8E4m3fn;
        if (q8) no.q_format = ref::NumFormat::kFp8E4m3fn;
        auto in = ref::BuildMlaInputs(r, no);
        ASSERT_TRUE(in.ok()) << in.status().ToString();
        const int64_t per_row = int64_t{in->num_heads} * in->head_dim_v;
        for (int tiling : tilings) {
          gpu::DecodeOptions opt;
          opt.tiling = tiling;
          if (fp8) opt.kv_format = ref::NumFormat::kFp8E4m3fn;
          if (q8) opt.q_format = ref::NumFormat::kFp8E4m3fn;
          const gpu::DecodeResult a = gpu::run_mla_decode(*in, *plan, opt);
          for (auto v : {gpu::ZeroKvVariant::kHk, gpu::ZeroKvVariant::kOpus}) {
            opt.variant = v;
            const gpu::DecodeResult g = gpu::run_mla_decode(*in, *plan, opt);
            ASSERT_EQ(g.o.size(), a.o.size());
            int64_t differ = 0, written_empty = 0;
            for (size_t i = 0; i < g.o.size(); ++i) {
              if (empty_row[i / per_row]) written_empty += !std::isnan(g.o[i]);
              if (!zero_kv_row[i / per_row])
                differ += !(g.o[i] == a.o[i] || (std::isnan(g.o[i]) && std::isnan(a.o[i])));
            }
            EXPECT_EQ(differ, 0) << "tiling " << tiling << " variant " << static_cast<int>(v);
            EXPECT_EQ(written_empty, 0)
                << "tiling " << tiling << " variant " << static_cast<int>(v);
            EXPECT_TRUE(g.tails.empty());
          }
          for (size_t i = 0; i < a.o.size(); ++i) {
            if (empty_row[i / per_row] && !std::isnan(a.o[i])) {
              EXPECT_EQ(a.o[i], 0.0) << i;
            }
          }
        }
        ++checked;
      }
      std::printf(
          "[gpu] zero-KV variants, %s, %d heads: %d batches with empty requests, %zu kernels "
          "each\n",
          q8 ? "fp8 q and KV" : fp8 ? "fp8 KV" : "bf16 KV", heads, checked, tilings.size());
      EXPECT_GE(checked, 3);
    }
  }
}

// ---- the founding case -------------------------------------------------------------------
struct FoundingObservation {
  int32_t q_rows = 0, plan_rows = 0;
  gpu::DecodeResult gpu;
  std::vector<sim::Violation> predicted;
};

// The founding case at its full size (178 M KV values) is above the numerics' default tensor
// limit (ref/limits.h); these tests raise it for their own run.
struct FullSizeTensors {
  FullSizeTensors() { EXPECT_TRUE(ref::SetLimits("tensor_values=268435456").ok()); }
  ~FullSizeTensors() { ref::ResetLimits(); }
};

FoundingObservation RunFounding(const std::string& profile) {
  FullSizeTensors full_size;
  FoundingObservation obs;
  auto s = sim::BuiltinScenario("seed");
  EXPECT_TRUE(s.ok());
  s->engine = *sim::GetEngineProfile(profile, "engine");
  auto rep = sim::Replay(*s);
  EXPECT_TRUE(rep.ok());
  const sim::Call* call = nullptr;
  for (const sim::Call& c : rep->trace.calls)
    if (c.step == "draft_step_0" && c.kind == sim::CallKind::kDecode) call = &c;
  EXPECT_NE(call, nullptr);
  if (call == nullptr) return obs;
  const sim::PlanSnapshot& snap = rep->trace.plans.at(call->plan);
  obs.q_rows = call->q_rows;
  obs.plan_rows = snap.q_rows_covered;
  for (const sim::Violation& v : rep->result.violations) obs.predicted.push_back(v);
  ref::NumericsOptions no;
  no.seed = 7;
  auto in = ref::BuildMlaInputs(snap.request, no);
  EXPECT_TRUE(in.ok()) << in.status().ToString();
  gpu::DecodeOptions opt;
  opt.variant = gpu::ZeroKvVariantOf(call->contract->semantics);
  opt.q_alloc_rows = call->q_rows;  // q and o as the engine allocated them
  opt.o_alloc_rows = call->q_rows;
  opt.tail_rows = 16;
  obs.gpu = gpu::run_mla_decode(*in, snap.plan, opt);
  std::printf(
      "[gpu] founding %s: q/o rows %d, plan rows %d, q rows read %lld..%lld, o rows written "
      "%lld..%lld\n",
      profile.c_str(), obs.q_rows, obs.plan_rows, (long long)obs.gpu.q_rows_read_min,
      (long long)obs.gpu.q_rows_read_max, (long long)obs.gpu.o_rows_written_min,
      (long long)obs.gpu.o_rows_written_max);
  for (const auto& t : obs.gpu.tails)
    std::printf("[gpu]   sentinel tail of %s (rows %lld): rows %lld..%lld damaged, %lld bytes\n",
                t.buffer.c_str(), (long long)t.rows, (long long)t.first_row, (long long)t.last_row,
                (long long)t.bad_bytes);
  for (const auto& v : obs.predicted)
    std::printf("[gpu]   simulator: %s %s rows %lld..%lld (%s)\n", v.buffer.c_str(),
                sim::AccessName(v.access), (long long)v.first_row, (long long)v.last_row,
                v.call.c_str());
  return obs;
}

TEST(GpuFoundingCase, Atom202608AsmOverrunMatchesTheSimulator) {
  SKIP_WITHOUT_GPU();
  const FoundingObservation f = RunFounding("atom-2026-08");
  ASSERT_FALSE(HasFailure());
  int matched = 0;
  for (const sim::Violation& v : f.predicted) {
    if (v.call != "sparse_decode") continue;
    if (v.buffer == "o" && v.access == sim::Access::kWrite) {
      // o and its lse companion (the simulator's o write covers both): rows past the end only.
      ASSERT_EQ(f.gpu.tails.size(), 2u);
      for (const gpu::TailDamage& t : f.gpu.tails) {
        EXPECT_TRUE(t.buffer == "o" || t.buffer == "lse") << t.buffer;
        EXPECT_EQ(t.first_row, v.first_row) << t.buffer;
        EXPECT_EQ(t.last_row, v.last_row) << t.buffer;
      }
      EXPECT_EQ(f.gpu.o_rows_written_max, v.last_row);
      ++matched;
    }
    if (v.buffer == "q" && v.access == sim::Access::kRead) {
      EXPECT_EQ(f.gpu.q_rows_read_max, v.last_row);
      EXPECT_GE(f.gpu.q_rows_read_max, f.q_rows);
      ++matched;
    }
  }
  EXPECT_EQ(matched, 2);
}

TEST(GpuFoundingCase, Atom202611IsClean) {
  SKIP_WITHOUT_GPU();
  const FoundingObservation f = RunFounding("atom-2026-11");
  ASSERT_FALSE(HasFailure());
  EXPECT_TRUE(f.predicted.empty());
  EXPECT_TRUE(f.gpu.tails.empty());
  EXPECT_LT(f.gpu.q_rows_read_max, f.q_rows);
  EXPECT_LT(f.gpu.o_rows_written_max, f.q_rows);
}

// ---- sentinel regions, batched; the block cache ---------------------------------------------
// scan_sentinels gives each region what scan_sentinel gives it: intact, one byte changed at the
// first, last and a middle offset, a run, a region of 1 byte and one of 0 bytes.
TEST(GpuSentinel, BatchedScanIsTheSingleScanOfEveryRegion) {
  SKIP_WITHOUT_GPU();
  const std::vector<std::size_t> sizes = {4096, 4096, 4096, 1, 0, 70000, 513};
  std::vector<void*> p;
  std::vector<gpu::SentinelRegion> regions;
  for (std::size_t n : sizes) {
    p.push_back(gpu::device_acquire(std::max<std::size_t>(n, 1)));
    regions.push_back({p.back(), n});
    gpu::fill_sentinel_async(p.back(), n);
  }
  const unsigned char x = 0x00;
  gpu::copy_to_device(static_cast<unsigned char*>(p[1]) + 0, &x, 1);
  gpu::copy_to_device(static_cast<unsigned char*>(p[1]) + 4095, &x, 1);
  gpu::copy_to_device(static_cast<unsigned char*>(p[2]) + 100, &x, 1);
  gpu::copy_to_device(static_cast<unsigned char*>(p[3]), &x, 1);
  // 300 bytes of 0x5A: the one at offset 60000 + k with (60000 + k) & 0xFF == 0xFF equals the
  // pattern there (0xA5 ^ 0xFF), so 299 bytes differ.
  const std::vector<unsigned char> run(300, 0x5A);
  gpu::copy_to_device(static_cast<unsigned char*>(p[5]) + 60000, run.data(), run.size());
  std::vector<gpu::SentinelScan> got(regions.size());
  gpu::scan_sentinels(regions.data(), regions.size(), got.data());
  const std::vector<std::vector<long long>> want = {{-1, -1, 0}, {0, 4095, 2}, {100, 100, 1},
                                                    {0, 0, 1},   {-1, -1, 0},  {60000, 60299, 299},
                                                    {-1, -1, 0}};
  for (std::size_t i = 0; i < regions.size(); ++i) {
    const gpu::SentinelScan one = gpu::scan_sentinel(regions[i].p, regions[i].bytes);
    EXPECT_EQ(
        (std::vector<long long>{got[i].first_bad_byte, got[i].last_bad_byte, got[i].bad_bytes}),
        want[i])
        << "region " << i;
    EXPECT_EQ(one.first_bad_byte, got[i].first_bad_byte) << i;
    EXPECT_EQ(one.last_bad_byte, got[i].last_bad_byte) << i;
    EXPECT_EQ(one.bad_bytes, got[i].bad_bytes) << i;
  }
  for (void* q : p) gpu::device_release(q);
}

// A released block is handed out again for a request of the same size class, and not for a
// larger one; a pointer the cache did not make is refused.
TEST(GpuSentinel, BlockCacheReusesReleasedBlocks) {
  SKIP_WITHOUT_GPU();
  void* a = gpu::device_acquire(5000);  // an 8 KiB block
  gpu::device_release(a);
  EXPECT_EQ(gpu::device_acquire(8192), a);
  void* b = gpu::device_acquire(8193);  // 16 KiB: another block
  EXPECT_NE(b, a);
  gpu::device_release(a);
  gpu::device_release(b);
  EXPECT_EQ(gpu::device_acquire(0), nullptr);
  gpu::device_release(nullptr);
  void* raw = gpu::device_alloc(64);
  EXPECT_THROW(gpu::device_release(raw), std::invalid_argument);
  gpu::device_free(raw);
}

// ---- guard pages ---------------------------------------------------------------------------
TEST(GpuGuard, BufferEndsAtTheEndOfItsMappedRange) {
  SKIP_WITHOUT_GPU();
  const std::size_t gran = gpu::guard_page_granularity();
  ASSERT_GT(gran, 0u);
  for (std::size_t bytes : {std::size_t{1}, std::size_t{156} * 16 * 576 * 2, gran, gran + 3}) {
    const gpu::GuardedAllocation a = gpu::device_alloc_guarded(bytes);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.ptr) + bytes, a.mapped_end) << bytes;
    EXPECT_EQ(a.mapped_bytes % gran, 0u);
    EXPECT_GE(a.mapped_bytes, bytes);
    EXPECT_LT(a.mapped_bytes - bytes, gran);
    EXPECT_EQ(a.granularity, gran);
    std::vector<unsigned char> h(bytes, 0x5A), back(bytes, 0);
    gpu::copy_to_device(a.ptr, h.data(), bytes);  // the whole buffer, up to its last byte
    gpu::copy_to_host(back.data(), a.ptr, bytes);
    EXPECT_EQ(h, back);
    gpu::device_free_guarded(a.ptr);
  }
  std::printf("[gpu] guard granularity %zu bytes\n", gran);
}

// A cached guarded mapping: the buffer ends at the last mapped byte whatever mapping it reuses,
// a released mapping comes back for a request of its size class, and a foreign pointer is
// refused.
TEST(GpuGuard, CachedMappingsEndAtTheMappedEnd) {
  SKIP_WITHOUT_GPU();
  const std::size_t gran = gpu::guard_page_granularity();
  const gpu::GuardedAllocation a = gpu::device_acquire_guarded(gran + 5);  // two granules
  EXPECT_EQ(a.mapped_bytes, 2 * gran);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.ptr) + gran + 5, a.mapped_end);
  gpu::device_release_guarded(a.ptr);
  const gpu::GuardedAllocation b = gpu::device_acquire_guarded(7);  // one granule: another mapping
  EXPECT_EQ(b.mapped_bytes, gran);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.ptr) + 7, b.mapped_end);
  const gpu::GuardedAllocation c = gpu::device_acquire_guarded(2 * gran);  // a's mapping again
  EXPECT_EQ(c.mapped_end, a.mapped_end);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(c.ptr) + 2 * gran, c.mapped_end);
  std::vector<unsigned char> h(2 * gran, 0x3C), back(2 * gran, 0);
  gpu::copy_to_device(c.ptr, h.data(), h.size());  // up to its last byte
  gpu::copy_to_host(back.data(), c.ptr, back.size());
  EXPECT_EQ(h, back);
  gpu::device_release_guarded(b.ptr);
  gpu::device_release_guarded(c.ptr);
  gpu::device_release_guarded(nullptr);
  EXPECT_THROW(gpu::device_release_guarded(&h[0]), std::invalid_argument);
}

// In bounds (atom-2026-11), the guarded q and o change nothing: same rows, same values.
TEST(GpuGuard, CleanCaseRunsWithQOrOGuarded) {
  SKIP_WITHOUT_GPU();
  FullSizeTensors full_size;
  auto s = sim::BuiltinScenario("seed");
  ASSERT_TRUE(s.ok());
  s->engine = *sim::GetEngineProfile("atom-2026-11", "engine");
  auto rep = sim::Replay(*s);
  ASSERT_TRUE(rep.ok());
  const sim::Call* call = nullptr;
  for (const sim::Call& c : rep->trace.calls)
    if (c.step == "draft_step_0" && c.kind == sim::CallKind::kDecode) call = &c;
  ASSERT_NE(call, nullptr);
  const sim::PlanSnapshot& snap = rep->trace.plans.at(call->plan);
  ref::NumericsOptions no;
  no.seed = 7;
  auto in = ref::BuildMlaInputs(snap.request, no);
  ASSERT_TRUE(in.ok());
  gpu::DecodeOptions opt;
  opt.q_alloc_rows = opt.o_alloc_rows = call->q_rows;
  const gpu::DecodeResult plain = gpu::run_mla_decode(*in, snap.plan, opt);
  for (const char* b : {"q", "o"}) {
    opt.guard_buffer = b;
    const gpu::DecodeResult g = gpu::run_mla_decode(*in, snap.plan, opt);
    EXPECT_EQ(g.guard.bytes % 16, 0u) << b;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(g.guard.ptr) + g.guard.bytes, g.guard.mapped_end)
        << b;
    EXPECT_TRUE(g.tails.empty()) << b;
    EXPECT_EQ(g.q_rows_read_max, plain.q_rows_read_max) << b;
    EXPECT_EQ(g.o_rows_written_max, plain.o_rows_written_max) << b;
    ASSERT_EQ(g.o.size(), plain.o.size());
    int64_t diff = 0;
    for (size_t i = 0; i < g.o.size(); ++i)
      diff += !(g.o[i] == plain.o[i] || (std::isnan(g.o[i]) && std::isnan(plain.o[i])));
    EXPECT_EQ(diff, 0) << b;
  }
}

}  // namespace
}  // namespace mlasim
