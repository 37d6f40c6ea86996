// tests/gpu/flashmla_bench.cu - FlashMLA and mlasim side by side on the H200, in one process:
// FlashMLA's dense bf16 decode + combine and its scheduler (deepseek-ai/FlashMLA, the checkout
// given by -DMLASIM_FLASHMLA_DIR, compiled with its own nvcc flags for sm_90a; nothing of it is
// in this repository) against mlasim's decode + reduce (kernels/decode.hip) and GPU planner
// (kernels/planner.hip) on the same shapes and the same input values. Prints medians, GB/s of
// the bytes the shape must move (tests/gpu/perf_shapes.h), % of the measured device copy
// bandwidth, TFLOP/s, and how far the two outputs are apart.
//
// FlashMLA is driven as its own host code drives it (csrc/api/dense_decode.h: h_k = 1, page
// block 64, num_sm_parts = SMs / ceil(s_q * h_q / 64), scheduler block 64 with 5 blocks of fixed
// overhead); the KV buffer is the same identity-paged cache mlasim reads.
//
// Usage: mlasim_flashmla_bench [--shapes dense-h16,dense-h128] ; exit 0 when every run completed.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/gpu_api.h"
#include "params.h"  // FlashMLA csrc/params.h
#include "ref/flashmla/sched.h"
#include "ref/planner.h"
#include "sm90/decode/dense/splitkv_mla.h"
#include "smxx/decode/combine/combine.h"
#include "smxx/decode/get_decoding_sched_meta/get_decoding_sched_meta.h"
#include "tests/gpu/perf_shapes.h"

namespace {

using mlasim::perf::DecodeShape;

void Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

template <class T>
T* DeviceCopy(const std::vector<T>& h) {
  T* d = nullptr;
  Check(cudaMalloc(&d, std::max<size_t>(h.size(), 1) * sizeof(T)), "cudaMalloc");
  Check(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  return d;
}
template <class T>
T* DeviceAlloc(size_t n) {
  T* d = nullptr;
  Check(cudaMalloc(&d, std::max<size_t>(n, 1) * sizeof(T)), "cudaMalloc");
  return d;
}

uint16_t Bf16Bits(float f) {  // the inputs are exact in bf16: truncation is exact
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}
double Bf16Value(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Median over 5 batches of the mean of `iters` back-to-back calls (events on `stream`), after a
// warm-up call. Microseconds.
double MedianUs(cudaStream_t stream, int iters, const std::function<void()>& f) {
  cudaEvent_t a, b;
  Check(cudaEventCreate(&a), "event");
  Check(cudaEventCreate(&b), "event");
  f();
  std::vector<double> us;
  for (int k = 0; k < 5; ++k) {
    Check(cudaEventRecord(a, stream), "record");
    for (int i = 0; i < iters; ++i) f();
    Check(cudaEventRecord(b, stream), "record");
    Check(cudaEventSynchronize(b), "sync");
    float ms = 0;
    Check(cudaEventElapsedTime(&ms, a, b), "elapsed");
    us.push_back(1000.0 * ms / iters);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(us.begin(), us.end());
  return us[2];
}

// FlashMLA's dense decode on the shape's inputs: buffers, parameters, and the three launches.
struct FlashMla {
  int b = 0, s_q = 0, h_q = 0, num_sm_parts = 0, blocks_per_seq = 0;
  uint16_t *q = nullptr, *k = nullptr, *o = nullptr;
  float *lse = nullptr, *lse_accum = nullptr, *o_accum = nullptr;
  int *block_table = nullptr, *seqlens = nullptr, *num_splits = nullptr;
  DecodingSchedMeta* meta = nullptr;
  cudaStream_t stream = nullptr;
  DenseAttnDecodeParams dp{};
  CombineParams cp{};
  GetDecodeSchedMetaParams sp{};

  FlashMla(const DecodeShape& s, const mlasim::ref::MlaInputs& in, int num_sms) {
    b = s.batch, s_q = s.qlen, h_q = s.heads, blocks_per_seq = s.ctx / 64;
    if (s.ctx % 64 != 0 || s.topk >= 0 || s.kv_format != mlasim::ref::NumFormat::kBf16)
      throw std::invalid_argument("FlashMLA dense decode: bf16, page 64, dense shapes only");
    num_sm_parts = std::max(num_sms / ((s_q * h_q + 63) / 64), 1);
    const int q_seq = s_q * h_q, total_splits = b + num_sm_parts;
    std::vector<uint16_t> h(in.q.size());
    for (size_t i = 0; i < h.size(); ++i) h[i] = Bf16Bits(in.q[i]);
    q = DeviceCopy(h);
    h.resize(in.kv_cache.size());
    for (size_t i = 0; i < h.size(); ++i) h[i] = Bf16Bits(in.kv_cache[i]);
    k = DeviceCopy(h);
    std::vector<int> bt(static_cast<size_t>(b) * blocks_per_seq), sl(b, s.ctx);
    for (size_t i = 0; i < bt.size(); ++i) bt[i] = static_cast<int>(i);  // identity pages
    block_table = DeviceCopy(bt);
    seqlens = DeviceCopy(sl);
    o = DeviceAlloc<uint16_t>(static_cast<size_t>(b) * q_seq * 512);
    lse = DeviceAlloc<float>(static_cast<size_t>(b) * q_seq);
    lse_accum = DeviceAlloc<float>(static_cast<size_t>(total_splits) * q_seq);
    o_accum = DeviceAlloc<float>(static_cast<size_t>(total_splits) * q_seq * 512);
    meta = DeviceAlloc<DecodingSchedMeta>(num_sm_parts);
    num_splits = DeviceAlloc<int>(b + 1);
    Check(cudaStreamCreate(&stream), "stream");
    FillParams(in.effective_sm_scale());
  }
  ~FlashMla() {
    for (void* p :
         {static_cast<void*>(q), static_cast<void*>(k), static_cast<void*>(o),
          static_cast<void*>(lse), static_cast<void*>(lse_accum), static_cast<void*>(o_accum),
          static_cast<void*>(block_table), static_cast<void*>(seqlens),
          static_cast<void*>(num_splits), static_cast<void*>(meta)})
      cudaFree(p);
    cudaStreamDestroy(stream);
  }

  void FillParams(double sm_scale) {
    const int q_seq = s_q * h_q;
    sp = GetDecodeSchedMetaParams{b,       s_q,     64,   5,          -1,           -1,    nullptr,
                                  nullptr, seqlens, meta, num_splits, num_sm_parts, stream};
    dp.b = b, dp.s_q = s_q, dp.q_seq_per_hk = q_seq, dp.d = 576, dp.d_v = 512;
    dp.h_q = h_q, dp.h_k = 1, dp.num_blocks = b * blocks_per_seq, dp.q_head_per_hk = h_q;
    dp.is_causal = false;
    dp.scale_softmax = static_cast<float>(sm_scale);
    dp.scale_softmax_log2 = static_cast<float>(sm_scale * M_LOG2E);
    dp.q_ptr = q, dp.k_ptr = k, dp.o_ptr = o, dp.softmax_lse_ptr = lse;
    dp.q_batch_stride = int64_t{q_seq} * 576, dp.q_row_stride = 576, dp.q_head_stride = 576;
    dp.k_batch_stride = 64 * 576, dp.k_row_stride = 576, dp.k_head_stride = 576;
    dp.o_batch_stride = int64_t{q_seq} * 512, dp.o_row_stride = 512;
    dp.o_head_stride = int64_t{q_seq} * 512;
    dp.block_table = block_table, dp.block_table_batch_stride = blocks_per_seq;
    dp.page_block_size = 64, dp.seqlens_k_ptr = seqlens;
    dp.tile_scheduler_metadata_ptr = meta, dp.num_sm_parts = num_sm_parts;
    dp.num_splits_ptr = num_splits, dp.total_num_splits = b + num_sm_parts;
    dp.softmax_lseaccum_ptr = lse_accum, dp.oaccum_ptr = o_accum, dp.stream = stream;
    cp = CombineParams{b,
                       s_q,
                       h_q,
                       512,
                       lse,
                       o,
                       q_seq,
                       h_q,
                       h_q * s_q * 512,
                       h_q * 512,
                       512,
                       lse_accum,
                       o_accum,
                       q_seq,
                       h_q,
                       h_q * s_q * 512,
                       h_q * 512,
                       512,
                       meta,
                       num_splits,
                       num_sm_parts,
                       nullptr,
                       stream};
  }
  void Schedule() { smxx::decode::run_get_decoding_sched_meta_kernel(sp); }
  void Decode() {
    sm90::run_flash_splitkv_mla_kernel<cutlass::bfloat16_t>(dp);
    smxx::decode::run_flash_mla_combine_kernel<cutlass::bfloat16_t>(cp);
  }
};

struct Row {
  std::string what;
  double us = 0, gbs = 0, pct = 0, tflops = 0;
};

void Print(const Row& r, double copy) {
  std::printf("[bench] %-58s %9.1f us %6.0f GB/s %5.1f%% of copy %6.1f TFLOP/s\n", r.what.c_str(),
              r.us, r.gbs, 100.0 * r.gbs / copy, r.tflops);
  std::fflush(stdout);
}

// FlashMLA and mlasim (the warp-specialised and the lock-step kernel) on one dense shape.
void CompareDense(const DecodeShape& s, double copy, int num_sms) {
  const mlasim::ref::PlanRequest r = mlasim::perf::UniformRequest(s);
  auto plan = mlasim::ref::PlanMlaMetadata(r);
  if (!plan.ok()) throw std::runtime_error(plan.status().ToString());
  const mlasim::ref::MlaInputs in = mlasim::perf::FastInputs(r, s);
  const mlasim::perf::Traffic t = mlasim::perf::DecodeTraffic(s);
  auto row = [&](const std::string& what, double us) {
    Row x{what, us, t.bytes / (us * 1e-6) / 1e9, 0, t.flops / (us * 1e-6) / 1e12};
    Print(x, copy);
    return x;
  };
  FlashMla f(s, in, num_sms);
  f.Schedule();
  f.Decode();
  Check(cudaStreamSynchronize(f.stream), "FlashMLA run");
  const double f_us = MedianUs(f.stream, 20, [&] { f.Decode(); });
  row("FlashMLA decode + combine, " + s.name + " (" + std::to_string(f.num_sm_parts) + " parts)",
      f_us);
  std::vector<uint16_t> fo(static_cast<size_t>(s.batch) * s.qlen * s.heads * 512);
  std::vector<float> fl(static_cast<size_t>(s.batch) * s.qlen * s.heads);
  Check(cudaMemcpy(fo.data(), f.o, fo.size() * 2, cudaMemcpyDeviceToHost), "copy o");
  Check(cudaMemcpy(fl.data(), f.lse, fl.size() * 4, cudaMemcpyDeviceToHost), "copy lse");
  // the NVIDIA kernels (DecodeOptions::tiling): the default for the shape, warp-specialised,
  // lock-step, and the lock-step kernel with 32 rows per pass where the heads allow it
  std::vector<int> tilings{0, 6, 4};
  if (s.heads % 32 == 0) tilings.push_back(7);
  for (int tiling : tilings) {
    mlasim::gpu::DecodeOptions opt;
    opt.tiling = tiling;
    opt.timing_iterations = 20;
    const mlasim::gpu::DecodeResult g = mlasim::gpu::run_mla_decode(in, *plan, opt);
    row("mlasim decode + reduce, " + s.name + " (" + g.kernel + ")", g.decode_reduce_us);
    double o_diff = 0, l_diff = 0;
    for (size_t i = 0; i < fo.size(); ++i)
      o_diff = std::max(o_diff, std::fabs(Bf16Value(fo[i]) - g.o[i]));
    for (size_t i = 0; i < fl.size(); ++i)
      l_diff = std::max(l_diff, std::fabs(double(fl[i]) - g.lse[i]));
    std::printf("[bench]   %s vs FlashMLA: o max |diff| %.3g, lse max |diff| %.3g (%s)\n",
                g.kernel.c_str(), o_diff, l_diff,
                std::isfinite(o_diff) && o_diff < 0.0625 ? "agree" : "DISAGREE");
  }
}

// mlasim's reference model of that scheduler (ref/flashmla/sched.h, on the host) on the same
// inputs: its rows and num_splits are checked equal to what the kernel just wrote, then it is
// timed (median of 5 x 40 calls, wall clock) against the kernel's time per launch `f_us`.
void CompareReferenceScheduler(const DecodeShape& s, int parts, const DecodingSchedMeta* meta,
                               const int* num_splits, double f_us) {
  namespace fm = mlasim::ref::flashmla;
  fm::SchedInput in;
  in.batch_size = s.batch;
  in.num_sm_parts = parts;
  in.seqlens_k.assign(static_cast<size_t>(s.batch), s.ctx);
  const auto ref_meta = fm::GetDecodingSchedMeta(in);
  std::vector<int32_t> words(static_cast<size_t>(parts) * fm::kRowWords);
  std::vector<int32_t> splits(static_cast<size_t>(s.batch) + 1);
  Check(cudaMemcpy(words.data(), meta, words.size() * 4, cudaMemcpyDeviceToHost), "meta");
  Check(cudaMemcpy(splits.data(), num_splits, splits.size() * 4, cudaMemcpyDeviceToHost),
        "num_splits");
  bool equal = ref_meta.ok() && ref_meta->num_splits == splits;
  for (int p = 0; equal && p < parts; ++p) {
    const std::vector<int32_t> w = fm::RowWords(fm::Revision::k9241ae3, ref_meta->rows[p]);
    equal = std::equal(w.begin(), w.end(), words.begin() + int64_t{p} * fm::kRowWords);
  }
  std::vector<double> us;
  for (int k = 0; k < 5; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 40; ++i) {
      auto m = fm::GetDecodingSchedMeta(in);
      if (!m.ok()) throw std::runtime_error(m.status().ToString());
    }
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                     .count() / 40);
  }
  std::sort(us.begin(), us.end());
  std::printf("[bench] %-58s %9.2f us per call (%.3fx FlashMLA's time), outputs %s\n",
              ("mlasim reference scheduler (host), B=" + std::to_string(s.batch)).c_str(), us[2],
              us[2] / f_us, equal ? "equal" : "DIFFER");
}

// FlashMLA's scheduler against mlasim's GPU planner (aiter's dispatch) on the same batch: B
// requests of ctx tokens, 16 heads, qlen 1, one part / cluster per SM.
void ComparePlanners(const DecodeShape& s, int num_sms) {
  const int parts = std::max(num_sms / ((s.qlen * s.heads + 63) / 64), 1);
  int* seqlens = DeviceCopy(std::vector<int>(s.batch, s.ctx));
  DecodingSchedMeta* meta = DeviceAlloc<DecodingSchedMeta>(parts);
  int* num_splits = DeviceAlloc<int>(s.batch + 1);
  cudaStream_t stream;
  Check(cudaStreamCreate(&stream), "stream");
  GetDecodeSchedMetaParams sp{s.batch, s.qlen,  64,   5,          -1,    -1,    nullptr,
                              nullptr, seqlens, meta, num_splits, parts, stream};
  const double f_us =
      MedianUs(stream, 40, [&] { smxx::decode::run_get_decoding_sched_meta_kernel(sp); });
  std::printf("[bench] %-58s %9.2f us per launch\n",
              ("FlashMLA scheduler, B=" + std::to_string(s.batch) + " (" + std::to_string(parts) +
               " parts)")
                  .c_str(),
              f_us);
  CompareReferenceScheduler(s, parts, meta, num_splits, f_us);
  const mlasim::ref::PlanRequest r = mlasim::perf::UniformRequest(s);
  for (auto choice :
       {mlasim::ref::PlannerChoice::kAiterDispatch, mlasim::ref::PlannerChoice::kSerial}) {
    const mlasim::gpu::GpuPlan g = mlasim::gpu::plan_mla_metadata(r, choice, 40);
    std::printf(
        "[bench] %-58s %9.2f us per launch (%.2fx FlashMLA's time)\n",
        ("mlasim GPU planner, " +
         std::string(choice == mlasim::ref::PlannerChoice::kSerial ? "serial walk"
                                                                   : "aiter dispatch") +
         " (" + (g.parallel ? "parallel" : "serial") + " kernel), B=" + std::to_string(s.batch))
            .c_str(),
        g.kernel_us, g.kernel_us / f_us);
  }
  cudaFree(seqlens);
  cudaFree(meta);
  cudaFree(num_splits);
  cudaStreamDestroy(stream);
}

bool Wanted(const std::string& list, const std::string& name) {
  return list.empty() || ("," + list + ",").find("," + name + ",") != std::string::npos;
}

}  // namespace

int main(int argc, char** argv) {
  std::string shapes;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--shapes") == 0 && i + 1 < argc) {
      shapes = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--shapes dense-h16,dense-h128,planner]\n", argv[0]);
      return 2;
    }
  }
  try {
    if (!mlasim::gpu::available()) {
      std::fprintf(stderr, "no GPU device\n");
      return 1;
    }
    cudaDeviceProp prop{};
    Check(cudaGetDeviceProperties(&prop, 0), "properties");
    const double copy = mlasim::gpu::measure_copy_bandwidth(size_t{2} << 30, 10);
    std::printf("[bench] %s, %d SMs; device copy (2 GiB D2D, read + write): %.0f GB/s\n", prop.name,
                prop.multiProcessorCount, copy);
    DecodeShape h16;
    h16.name = "B=128 ctx=8192 h16 qlen 1";
    DecodeShape h128 = h16;
    h128.name = "B=128 ctx=8192 h128 qlen 1";
    h128.heads = 128;
    if (Wanted(shapes, "dense-h16")) CompareDense(h16, copy, prop.multiProcessorCount);
    if (Wanted(shapes, "dense-h128")) CompareDense(h128, copy, prop.multiProcessorCount);
    if (Wanted(shapes, "planner")) {
      for (int32_t b : {4, 64, 128, 256}) {
        DecodeShape p = h16;
        p.batch = b;
        ComparePlanners(p, prop.multiProcessorCount);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mlasim_flashmla_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
