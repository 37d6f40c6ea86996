// GPU performance runs (tools/gpu/run.sh and tools/gpu/h200.sh run them with
// --gtest_also_run_disabled_tests; they are DISABLED_ so that a plain ctest on a GPU machine stays
// quick). Numbers go to stdout as "[perf] ..." lines, recorded in docs/performance.md and
// docs/gpu-results.md. Shapes and byte counts: tests/gpu/perf_shapes.h.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/gpu_api.h"
#include "ref/dtypes.h"
#include "ref/planner.h"
#include "tests/gpu/perf_shapes.h"

namespace mlasim {
namespace {

using perf::DecodeShape;

#define SKIP_WITHOUT_GPU() \
  if (!gpu::available()) GTEST_SKIP() << "no GPU device"

// Environment knobs for profiling runs (tools/gpu/profile.sh): MLASIM_PERF_SHAPES = comma list of
// shape names (default all but the diagnostic ones), MLASIM_PERF_TILINGS = comma list of
// DecodeOptions::tiling (default 0 = the kernel the library picks for the shape, 6 = the
// warp-specialised kernel, 4 = the lock-step kernel),
// MLASIM_PERF_CLUSTERS = comma list of the cu_count each shape is planned for (default 132, one
// workgroup per H200 SM; more clusters than SMs run as further waves of workgroups).
std::vector<int> IntList(const char* name, std::vector<int> fallback) {
  const char* env = std::getenv(name);
  if (env == nullptr || *env == 0) return fallback;
  std::vector<int> out;
  for (const char* p = env; *p != 0;) {
    char* end = nullptr;
    out.push_back(static_cast<int>(std::strtol(p, &end, 10)));
    if (end == p) break;
    p = (*end == ',') ? end + 1 : end;
  }
  return out;
}
std::vector<int> PerfTilings() { return IntList("MLASIM_PERF_TILINGS", {0, 6, 4}); }
std::vector<int> PerfClusters() { return IntList("MLASIM_PERF_CLUSTERS", {132}); }

// Whether MLASIM_PERF_SHAPES (comma separated) names the shape; unset or empty: every shape
// but the diagnostic ones (named only on request).
bool PerfShape(const std::string& shape, bool diagnostic = false) {
  const char* env = std::getenv("MLASIM_PERF_SHAPES");
  if (env == nullptr || *env == 0) return !diagnostic;
  return ("," + std::string(env) + ",").find("," + shape + ",") != std::string::npos;
}

// The rows-read-alone probe's list (host only): every row a decode reads, once, in key order.
TEST(PerfShapes, KvRowsReadListsEveryRowOnceInKeyOrder) {
  ref::MlaInputs in;
  in.page_size = 4;
  in.num_pages = 3;
  in.qo_indptr = {0, 1, 2};
  in.kv_indptr = {0, 2, 3};  // request 0: pages 2, 0 (last holds 3 tokens); request 1: page 1
  in.kv_indices = {2, 0, 1};
  in.kv_last_page_lens = {3, 1};
  EXPECT_EQ(perf::KvRowsRead(in), (std::vector<int32_t>{8, 9, 10, 11, 0, 1, 2, 4}));
  in.topk = 3;  // sparse: the lists, -1 entries skipped
  in.topk_indices = {5, -1, 7, 0, 0, -1};
  EXPECT_EQ(perf::KvRowsRead(in), (std::vector<int32_t>{5, 7, 0, 0}));

  DecodeShape s{"t", 2, 128};  // uniform shapes: page 64 lists the same rows as page 1
  s.page = 64;
  const ref::MlaInputs p64 = perf::FastInputs(perf::UniformRequest(s), s);
  s.page = 1;
  const ref::MlaInputs p1 = perf::FastInputs(perf::UniformRequest(s), s);
  std::vector<int32_t> all(256);
  for (int32_t i = 0; i < 256; ++i) all[i] = i;
  EXPECT_EQ(perf::KvRowsRead(p64), all);
  EXPECT_EQ(perf::KvRowsRead(p1), all);
  EXPECT_EQ(p64.kv_cache, p1.kv_cache);  // same values: only the page table differs
  EXPECT_EQ(p64.kv_indptr, (std::vector<int32_t>{0, 2, 4}));
}

// The probe's argument checks (before any device work).
TEST(GpuPerf, RowReadProbeRefusesRowsOutsideTheCacheAndOddRowSizes) {
  SKIP_WITHOUT_GPU();
  EXPECT_THROW(gpu::measure_row_read_bandwidth({0, 4}, 4, 1152, 1), std::invalid_argument);
  EXPECT_THROW(gpu::measure_row_read_bandwidth({-1}, 4, 1152, 1), std::invalid_argument);
  EXPECT_THROW(gpu::measure_row_read_bandwidth({0}, 4, 1144, 1), std::invalid_argument);
  EXPECT_THROW(gpu::measure_row_read_bandwidth({0}, 0, 1152, 1), std::invalid_argument);
  EXPECT_EQ(gpu::measure_row_read_bandwidth({}, 4, 1152, 1), 0.0);
  EXPECT_GT(gpu::measure_row_read_bandwidth({3, 0, 1}, 4, 1152, 2), 0.0);
}

TEST(GpuPerf, DISABLED_PlannerKernelTime) {
  SKIP_WITHOUT_GPU();
  // aiter's own benchmark shape (16 heads, qlen 1, context 8k tokens, page 1, the target's CUs)
  // and the decode perf shape (132 clusters: one per H200 SM).
  for (int32_t cu : {0, 132}) {
    for (int32_t b : {4, 64, 128, 256}) {
      DecodeShape s;
      s.batch = b;
      s.clusters = cu;
      const ref::PlanRequest r = perf::UniformRequest(s);
      for (auto choice : {ref::PlannerChoice::kSerial, ref::PlannerChoice::kAiterDispatch}) {
        const gpu::GpuPlan g = gpu::plan_mla_metadata(r, choice, 40);
        std::printf("[perf] planner %s B=%d cu=%d: %.2f us per launch (%s kernel)\n",
                    choice == ref::PlannerChoice::kSerial ? "serial" : "dispatch", b, cu,
                    g.kernel_us, g.parallel ? "parallel" : "serial");
      }
    }
  }
}

// Times decode + reduce of one shape with each tiling (DecodeOptions::tiling): medians of 5
// batches of 20 launches; the pair runs back to back (reduce as a dependent launch).
void DecodePerf(const DecodeShape& s, double copy_gbs, const std::vector<int>& tilings,
                bool diagnostic = false) {
  if (!PerfShape(s.name, diagnostic)) return;
  const ref::PlanRequest r = perf::UniformRequest(s);
  auto plan = ref::PlanMlaMetadata(r);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const ref::MlaInputs in = perf::FastInputs(r, s);
  const perf::Traffic t = perf::DecodeTraffic(s);
  // The ceiling for this shape's KV rows: read once each in the decode's order, nothing else.
  const std::vector<int32_t> rows = perf::KvRowsRead(in);
  const int32_t row_bytes = 576 * (s.kv_format == ref::NumFormat::kFp8E4m3fn ? 1 : 2);
  const double read_gbs =
      gpu::measure_row_read_bandwidth(rows, int64_t{in.num_pages} * in.page_size, row_bytes, 20);
  const double read_us = double(rows.size()) * row_bytes / (read_gbs * 1e3);
  std::printf("[perf] rows %s: its %zu KV rows read alone %.1f us, %.0f GB/s (%.1f%% of copy)\n",
              s.name.c_str(), rows.size(), read_us, read_gbs, 100.0 * read_gbs / copy_gbs);
  // fp8 q: the tilings that take it (0-2, 5), tiling 0 when the list has none of them
  std::vector<int> run = tilings;
  if (s.q_format == ref::NumFormat::kFp8E4m3fn) {
    run.clear();
    for (int tiling : tilings)
      if (tiling <= 2 || tiling == 5) run.push_back(tiling);
    if (run.empty()) run.push_back(0);
  }
  for (int tiling : run) {
    // tiling 7 runs 32 heads of one token per pass, bf16 KV only (the library refuses the rest)
    if (tiling == 7 && (s.heads % 32 != 0 || s.kv_format != ref::NumFormat::kBf16)) continue;
    if (tiling == 9 && s.heads % 32 != 0) continue;  // 32 heads of one token per pass
    // 64 heads of one token per pass, bf16 KV only
    if (tiling == 10 && (s.heads % 64 != 0 || s.kv_format != ref::NumFormat::kBf16)) continue;
    gpu::DecodeOptions opt;
    opt.timing_iterations = 20;
    opt.tiling = tiling;
    opt.kv_format = s.kv_format;
    opt.q_format = s.q_format;
    const gpu::DecodeResult g = gpu::run_mla_decode(in, *plan, opt);
    EXPECT_TRUE(g.tails.empty());
    const double us = g.decode_reduce_us;
    const double gbs = t.bytes / (us * 1e-6) / 1e9;
    std::printf(
        "[perf] decode %s (B=%d ctx=%d page=%d qlen=%d topk=%d heads=%d clusters=%d, %s): decode "
        "%.1f us, reduce %.1f us, decode+reduce %.1f us; %.0f GB/s (%.1f%% of copy %.0f GB/s), "
        "%.1f "
        "TFLOP/s; %.3fx the rows' read time\n",
        s.name.c_str(), s.batch, s.ctx, s.page, s.qlen, s.topk, s.heads,
        static_cast<int>(plan->work_indptr.size()) - 1, g.kernel.c_str(), g.decode_us, g.reduce_us,
        us, gbs, 100.0 * gbs / copy_gbs, copy_gbs, t.flops / (us * 1e-6) / 1e12, us / read_us);
    std::fflush(stdout);
  }
}

TEST(GpuPerf, DISABLED_DecodeBandwidth) {
  SKIP_WITHOUT_GPU();
  const double copy = gpu::measure_copy_bandwidth(size_t{2} << 30, 10);
  std::printf("[perf] device copy bandwidth (2 GiB D2D, read + write): %.0f GB/s on %s\n", copy,
              gpu::device_name().c_str());
  const std::vector<int> tilings = PerfTilings();
  const auto fp8 = ref::NumFormat::kFp8E4m3fn;
  DecodeShape dense{"dense-h16"};
  DecodeShape sparse{"sparse-h16", 128, 8192, 4, 2048};
  DecodeShape dense8 = dense, sparse8 = sparse;
  dense8.name = "dense-fp8-h16", dense8.kv_format = fp8;
  sparse8.name = "sparse-fp8-h16", sparse8.kv_format = fp8;
  // q in the KV cache's dtype too (ATOM#287): S on e4m3 mma
  DecodeShape dense8q = dense8, sparse8q = sparse8;
  dense8q.name = "dense-fp8q-h16", dense8q.q_format = fp8;
  sparse8q.name = "sparse-fp8q-h16", sparse8q.q_format = fp8;
  DecodeShape dense128 = dense, sparse128 = sparse;
  dense128.name = "dense-h128", dense128.heads = 128;
  sparse128.name = "sparse-h128", sparse128.heads = 128;
  DecodeShape dense8_128 = dense128;
  dense8_128.name = "dense-fp8-h128", dense8_128.kv_format = fp8;
  // fp8 q at 128 heads: tiling 0 runs the 16-rows-per-pass e4m3 kernel there (unmeasured before
  // session 20's last commit; bf16 q with fp8 KV runs tiling 9)
  DecodeShape dense8q_128 = dense8_128;
  dense8q_128.name = "dense-fp8q-h128", dense8q_128.q_format = fp8;
  // FlashMLA's layout (pages of 64 tokens: one page id per 64 rows, where page 1 reads one per row)
  DecodeShape dense_p64 = dense, dense128_p64 = dense128;
  dense_p64.name = "dense-h16-p64", dense_p64.page = 64;
  dense128_p64.name = "dense-h128-p64", dense128_p64.page = 64;
  for (const DecodeShape* s : {&dense, &sparse, &dense8, &sparse8, &dense8q, &sparse8q, &dense128,
                               &sparse128, &dense8_128, &dense8q_128, &dense_p64, &dense128_p64})
    for (int32_t clusters : PerfClusters()) {
      DecodeShape at = *s;
      at.clusters = clusters;
      DecodePerf(at, copy, tilings);
    }
  // Diagnostics of the sparse shape: its rows as consecutive runs (the gather's cost), and the
  // same rows per SM as one 8192-key list per request (the per-token groups' cost); other head
  // counts of the dense shape (64: one workgroup per cluster for tiling 10; 256: four).
  DecodeShape window = sparse, k8192 = sparse, dense64 = dense, dense256 = dense;
  window.name = "sparse-h16-window", window.topk_window = true;
  k8192.name = "sparse-h16-k8192", k8192.qlen = 1, k8192.topk = 8192;
  dense64.name = "dense-h64", dense64.heads = 64;
  dense256.name = "dense-h256", dense256.heads = 256;
  for (const DecodeShape* s : {&window, &k8192, &dense64, &dense256})
    for (int32_t clusters : PerfClusters()) {
      DecodeShape at = *s;
      at.clusters = clusters;
      DecodePerf(at, copy, tilings, true);
    }
}

}  // namespace
}  // namespace mlasim
