// GPU performance runs (tools/gpu/run.sh runs them with --gtest_also_run_disabled_tests; they are
// DISABLED_ so that a plain ctest on a GPU machine stays quick). Numbers go to stdout as
// "[perf] ..." lines, recorded in docs/performance.md and docs/gpu-results.md.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/gpu_api.h"
#include "ref/dtypes.h"
#include "ref/planner.h"

namespace mlasim {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (!gpu::available()) GTEST_SKIP() << "no GPU device"

ref::PlanRequest Uniform(int32_t b, int32_t ctx, int32_t qlen, int32_t topk, int32_t cu) {
  ref::PlanRequest r;
  r.cu_count = cu;
  r.qlen = r.max_seqlen_qo = r.uni_seqlen_qo = qlen;
  r.topk = topk;
  if (topk >= 0) r.uni_seqlen_qo = r.max_seqlen_qo = 1;  // sparse plans are per token
  r.qo_indptr = {0};
  r.kv_indptr = {0};
  for (int32_t i = 0; i < b; ++i) {
    r.kv_indptr.push_back(r.kv_indptr.back() + ctx);
    r.kv_last_page_lens.push_back(1);
    r.qo_indptr.push_back(r.qo_indptr.back() + qlen);
  }
  return r;
}

TEST(GpuPerf, DISABLED_PlannerKernelTime) {
  SKIP_WITHOUT_GPU();
  for (int32_t b : {4, 64, 256}) {
    for (auto choice : {ref::PlannerChoice::kSerial, ref::PlannerChoice::kAiterDispatch}) {
      // aiter's own benchmark shape: 16 heads, qlen 1, context 8k tokens, page 1, 80 CUs (gfx942: 304)
      const ref::PlanRequest r = Uniform(b, 8192, 1, -1, 0);
      const gpu::GpuPlan g = gpu::plan_mla_metadata(r, choice, 200);
      std::printf("[perf] planner %s B=%d: %.2f us per launch (%s kernel)\n",
                  choice == ref::PlannerChoice::kSerial ? "serial" : "dispatch", b, g.kernel_us,
                  g.parallel ? "parallel" : "serial");
    }
  }
}

// Inputs with values in [-1, 1) rounded to bf16, identity page table, no NaN filling (fast to build).
ref::MlaInputs FastInputs(const ref::PlanRequest& r, int32_t ctx) {
  ref::MlaInputs in;
  in.num_heads = 16;
  in.page_size = 1;
  const int32_t b = static_cast<int32_t>(r.kv_indptr.size()) - 1;
  in.num_pages = r.kv_indptr.back();
  in.qo_indptr = r.qo_indptr;
  in.kv_indptr = r.kv_indptr;
  in.kv_last_page_lens = r.kv_last_page_lens;
  in.kv_indices.resize(static_cast<size_t>(in.num_pages));
  for (int32_t i = 0; i < in.num_pages; ++i) in.kv_indices[i] = i;
  uint32_t s = 12345;
  auto next = [&] {
    s = s * 1664525u + 1013904223u;
    return static_cast<float>(static_cast<int32_t>(s >> 16) - 32768) / 32768.f;
  };
  in.q.resize(static_cast<size_t>(in.q_rows()) * 16 * 576);
  for (auto& x : in.q) x = next();
  in.kv_cache.resize(static_cast<size_t>(in.num_pages) * 576);
  for (auto& x : in.kv_cache) x = next();
  if (r.topk >= 0) {
    in.topk = r.topk;
    in.topk_indices.resize(static_cast<size_t>(in.q_rows()) * r.topk);
    for (int32_t t = 0; t < in.q_rows(); ++t) {
      const int32_t req = t / (r.qo_indptr[1] - r.qo_indptr[0]);
      for (int32_t j = 0; j < r.topk; ++j)
        in.topk_indices[static_cast<size_t>(t) * r.topk + j] =
            req * ctx + static_cast<int32_t>((j * 2654435761u + t) % ctx);
    }
  }
  (void)b;
  return in;
}

// Times the decode + reduce of one uniform batch with each NVIDIA tiling (DecodeOptions::tiling).
// Traffic counted: the KV rows each 16-row group reads, q and o once.
void DecodePerf(const char* name, int32_t b, int32_t ctx, int32_t qlen, int32_t topk, int32_t cu,
                double copy_gbs, const std::vector<int>& tilings,
                ref::NumFormat kv_format = ref::NumFormat::kBf16) {
  const ref::PlanRequest r = Uniform(b, ctx, qlen, topk, cu);
  auto plan = ref::PlanMlaMetadata(r);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ref::MlaInputs in = FastInputs(r, ctx);
  const bool fp8 = kv_format == ref::NumFormat::kFp8E4m3fn;
  if (fp8) {  // e4m3fn values with |v| < 2: the fraction and sign bits of the uniform draws
    for (float& x : in.kv_cache) {
      uint32_t u;
      std::memcpy(&u, &x, 4);
      x = static_cast<float>(
          ref::DecodeFp8(kv_format, static_cast<uint8_t>(((u >> 13) & 0x87u) | 0x30u)));
    }
  }
  const int64_t tokens = in.q_rows();
  const double kv_elem = fp8 ? 1 : 2;  // bytes
  const int64_t keys_per_token = topk >= 0 ? topk : ctx;
  const int64_t groups_per_item = topk >= 0 ? 1 : qlen;  // dense MTP re-reads KV per token group
  const double kv_bytes = topk >= 0 ? double(tokens) * keys_per_token * 576 * kv_elem
                                    : double(b) * groups_per_item * ctx * 576 * kv_elem;
  const double q_bytes = double(tokens) * 16 * 576 * 2, o_bytes = double(tokens) * 16 * 512 * 2;
  const double flops = 2.0 * tokens * 16 * double(keys_per_token) * (576 + 512);
  for (int tiling : tilings) {
    gpu::DecodeOptions opt;
    opt.timing_iterations = 20;
    opt.tiling = tiling;
    opt.kv_format = kv_format;
    const gpu::DecodeResult g = gpu::run_mla_decode(in, *plan, opt);
    EXPECT_TRUE(g.tails.empty());
    const double us = g.decode_us + g.reduce_us;
    const double gbs = (kv_bytes + q_bytes + o_bytes) / (us * 1e-6) / 1e9;
    std::printf(
        "[perf] decode %s (B=%d ctx=%d qlen=%d topk=%d clusters=%d, %s): decode %.1f us + reduce "
        "%.1f us; "
        "%.0f GB/s of KV+q+o (%.0f%% of copy %.0f GB/s), %.1f TFLOP/s\n",
        name, b, ctx, qlen, topk, static_cast<int>(plan->work_indptr.size()) - 1, g.kernel.c_str(),
        g.decode_us, g.reduce_us, gbs, 100.0 * gbs / copy_gbs, copy_gbs,
        flops / (us * 1e-6) / 1e12);
    std::fflush(stdout);
  }
}

// Environment knobs for profiling runs (tools/gpu/profile.sh): MLASIM_PERF_SHAPES = dense | sparse
// (default both), MLASIM_PERF_TILINGS = comma list of DecodeOptions::tiling (default 1,2,3,4).
std::vector<int> PerfTilings() {
  const char* env = std::getenv("MLASIM_PERF_TILINGS");
  if (env == nullptr || *env == 0) return {1, 2, 3, 4};
  std::vector<int> out;
  for (const char* p = env; *p != 0;) {
    char* end = nullptr;
    out.push_back(static_cast<int>(std::strtol(p, &end, 10)));
    p = (*end == ',') ? end + 1 : end;
    if (end == p && *p != 0) break;
  }
  return out;
}

bool PerfShape(const char* shape) {
  const char* env = std::getenv("MLASIM_PERF_SHAPES");
  return env == nullptr || *env == 0 || std::strcmp(env, shape) == 0;
}

TEST(GpuPerf, DISABLED_DecodeBandwidth) {
  SKIP_WITHOUT_GPU();
  const double copy = gpu::measure_copy_bandwidth(size_t{2} << 30, 10);
  std::printf("[perf] device copy bandwidth (2 GiB D2D, read + write): %.0f GB/s on %s\n", copy,
              gpu::device_name().c_str());
  const std::vector<int> tilings = PerfTilings(), dflt = {0};
  if (PerfShape("dense")) DecodePerf("dense bf16 16 heads", 128, 8192, 1, -1, 132, copy, tilings);
  if (PerfShape("sparse"))
    DecodePerf("sparse MTP bf16 16 heads", 128, 8192, 4, 2048, 132, copy, tilings);
  const auto fp8 = ref::NumFormat::kFp8E4m3fn;
  if (PerfShape("dense-fp8"))
    DecodePerf("dense fp8 KV 16 heads", 128, 8192, 1, -1, 132, copy, {0, 4}, fp8);
  if (PerfShape("sparse-fp8"))
    DecodePerf("sparse MTP fp8 KV 16 heads", 128, 8192, 4, 2048, 132, copy, {0, 4}, fp8);
  if (std::getenv("MLASIM_PERF_TILINGS") != nullptr) return;
  DecodePerf("dense bf16 16 heads", 128, 8192, 1, -1, 264, copy, dflt);
  DecodePerf("sparse MTP bf16 16 heads", 128, 8192, 4, 2048, 264, copy, dflt);
}

}  // namespace
}  // namespace mlasim
