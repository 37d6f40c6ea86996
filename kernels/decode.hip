// decode.hip - the host side of mlasim's persistent MLA decode: run_mla_decode (kernels/gpu_api.h)
// builds the device buffers (sentinel tails or guard pages, poisoned outputs, the access log),
// picks a decode kernel, launches it over the plan's clusters and the split-KV reduce after it,
// and reads back outputs, tails and the log. HIP names only; nvcc builds it through
// hip_compat.h. The kernels live in kernels/decode/, split by phase:
//   params.h, config.h        launch parameters; tile constants and shared-memory plans
//   schedule.h                how a workgroup walks the plan (work items -> 16-row groups -> keys)
//   sm90/                     NVIDIA (MLA's 576 / 512): kernel.h, the warp-specialised kernel,
//                             with load.h (producer, q, fp8 widening), attend.h (S, softmax,
//                             P V), epilogue.h (stores), ptx.h; lockstep.h, the previous kernel
//   portable/kernel.h         any head dims; the AMD build's kernel
//   reduce.h                  the split-KV reduce (§12)
// Design notes and measurements: docs/kernels.md, docs/performance.md.
#include "kernels/hip_compat.h"  // first: the HIP/CUDA names the other headers use

#include "kernels/gpu_api.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <stdexcept>
#include <vector>

#include "kernels/decode/config.h"
#include "kernels/decode/params.h"
#include "kernels/decode/portable/kernel.h"
#include "kernels/decode/reduce.h"
#include "kernels/decode/schedule.h"
#if defined(__CUDACC__)
#include "kernels/decode/sm90/kernel.h"
#include "kernels/decode/sm90/lockstep.h"
#endif

namespace mlasim::gpu {
namespace {

using decode::DecodeParams;
using decode::kBlock;
using decode::kMaxD;
using decode::kMaxDv;
using decode::kRows;

// The decode kernel a run uses (DecodeOptions::tiling). Defaults, from the same-run H200
// measurements in docs/performance.md: bf16 KV runs the lock-step kernel (64 keys x 2 stages),
// fp8 KV the warp-specialised one; other head dims, tiling 5 and the AMD build run the portable
// kernel.
struct DecodeKernel {
  void (*fn)(DecodeParams);
  size_t smem;  // dynamic shared memory, bytes
  int threads;
  const char* name;
};

DecodeKernel pick_decode_kernel(int D, int Dv, int tiling, bool kv_fp8) {
  const DecodeKernel portable{&decode::portable::mla_decode_portable_kernel,
                              decode::portable::portable_smem_bytes(D, Dv), kBlock, "portable"};
#if defined(__CUDACC__)
  namespace ls = decode::sm90::lockstep;
  using Ws = decode::WsConfig<false>;
  using WsFp8 = decode::WsConfig<true>;
  if (tiling == 5 || D != Ws::kD || Dv != Ws::kDv) return portable;
  if (tiling == 6 || (tiling == 0 && kv_fp8)) {
    if (kv_fp8)
      return {&decode::sm90::mla_decode_ws_kernel<WsFp8>, WsFp8::kSmemBytes, WsFp8::kThreads,
              "warp-specialised fp8 64 keys x 3 stages"};
    return {&decode::sm90::mla_decode_ws_kernel<Ws>, Ws::kSmemBytes, Ws::kThreads,
            "warp-specialised 64 keys x 2 stages"};
  }
  using T32x4 = ls::MmaTiling<32, 4>;
  using T32x5 = ls::MmaTiling<32, 5>;
  using T32x6 = ls::MmaTiling<32, 6>;
  using T64x2 = ls::MmaTiling<64, 2>;
  using F64x2 = ls::MmaTiling<64, 2, true>;
  using F64x3 = ls::MmaTiling<64, 3, true>;
  if (kv_fp8) {
    if (tiling == 4)
      return {&ls::mla_decode_mma_kernel<F64x2>, F64x2::smem_bytes(), kBlock,
              "lockstep fp8 64 keys x 2 stages"};
    return {&ls::mla_decode_mma_kernel<F64x3>, F64x3::smem_bytes(), kBlock,
            "lockstep fp8 64 keys x 3 stages"};
  }
  switch (tiling) {
    case 1:
      return {&ls::mla_decode_mma_kernel<T32x4>, T32x4::smem_bytes(), kBlock,
              "lockstep 32 keys x 4 stages"};
    case 2:
      return {&ls::mla_decode_mma_kernel<T32x5>, T32x5::smem_bytes(), kBlock,
              "lockstep 32 keys x 5 stages"};
    case 3:
      return {&ls::mla_decode_mma_kernel<T32x6>, T32x6::smem_bytes(), kBlock,
              "lockstep 32 keys x 6 stages"};
    default:
      return {&ls::mla_decode_mma_kernel<T64x2>, T64x2::smem_bytes(), kBlock,
              "lockstep 64 keys x 2 stages"};
  }
#else
  (void)tiling;
  (void)kv_fp8;
  return portable;
#endif
}

__global__ void fill_u8_kernel(unsigned char* p, size_t n, unsigned char v) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    p[i] = v;
}

// A device buffer of `rows` rows of `row_bytes` plus `tail_rows` sentinel rows.
struct TailedBuffer {
  std::string name;
  unsigned char* p = nullptr;
  int64_t rows = 0, row_bytes = 0, tail_rows = 0;
  bool guarded = false;  // placed by device_alloc_guarded: no tail, the next byte is unmapped
  GuardedAllocation guard;
  TailedBuffer(std::string n, int64_t r, int64_t rb, int64_t tail, bool guard_pages = false)
      : name(std::move(n)),
        rows(r),
        row_bytes(rb),
        tail_rows(guard_pages && r > 0 ? 0 : tail),
        guarded(guard_pages && r > 0) {
    if (guarded) {
      guard = device_alloc_guarded(static_cast<std::size_t>(bytes()));
      p = static_cast<unsigned char*>(guard.ptr);
      return;
    }
    HIP_CHECK(
        hipMalloc(reinterpret_cast<void**>(&p), std::max<int64_t>(bytes() + tail_bytes(), 16)));
    fill_sentinel(p + bytes(), tail_bytes());
  }
  ~TailedBuffer() {
    if (guarded) {
      try {
        device_free_guarded(p);
      } catch (...) {  // a destructor must not throw; the process is ending after a fault anyway
      }
    } else {
      (void)hipFree(p);
    }
  }
  TailedBuffer(const TailedBuffer&) = delete;
  TailedBuffer& operator=(const TailedBuffer&) = delete;
  int64_t bytes() const { return rows * row_bytes; }
  int64_t tail_bytes() const { return tail_rows * row_bytes; }
  void poison(unsigned char v) {
    if (bytes() == 0) return;
    hipLaunchKernelGGL(fill_u8_kernel, dim3(1024), dim3(256), 0, 0, p, static_cast<size_t>(bytes()),
                       v);
    HIP_CHECK(hipGetLastError());
  }
  void scan(std::vector<TailDamage>& out) const {
    const SentinelScan sc = scan_sentinel(p + bytes(), tail_bytes());
    if (sc.bad_bytes == 0) return;
    out.push_back(TailDamage{name, rows, rows + sc.first_bad_byte / row_bytes,
                             rows + sc.last_bad_byte / row_bytes, sc.bad_bytes});
  }
};

uint16_t host_f2bf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
// The e4m3fn encoding of f when f is an e4m3fn value (NaN included); false otherwise (no
// rounding: the caller's inputs are already quantised, ref::RoundTo).
bool host_e4m3fn_exact(float f, uint8_t* out) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return *out = sign | 0x7f, true;  // NaN
  if (a == 0) return *out = sign, true;
  const int e = static_cast<int>(a >> 23) - 127;
  const uint32_t man = a & 0x7fffffu;
  if (e >= -6) {  // normal: 3 fraction bits, exponent -6..8, 448 the largest
    if (e > 8 || (man & 0xfffffu) != 0) return false;
    const uint32_t m = man >> 20, E = static_cast<uint32_t>(e + 7);
    if (E == 15 && m == 7) return false;
    return *out = static_cast<uint8_t>(sign | (E << 3) | m), true;
  }
  if (e < -9 || (a >> 23) == 0) return false;  // below 2^-9, or an fp32 subnormal
  const int sh = e + 9;                        // subnormal m * 2^-9, m = 1..7
  const uint32_t full = 0x800000u | man;
  if ((full & ((1u << (23 - sh)) - 1)) != 0) return false;
  return *out = static_cast<uint8_t>(sign | (full >> (23 - sh))), true;
}

double host_bf2d(uint16_t x) {
  const uint32_t u = static_cast<uint32_t>(x) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <class T>
T* upload(const std::vector<T>& v, std::vector<void*>& owned) {
  T* p = static_cast<T*>(device_alloc(std::max<size_t>(v.size(), 1) * sizeof(T)));
  owned.push_back(p);
  copy_to_device(p, v.data(), v.size() * sizeof(T));
  return p;
}

constexpr int kTimingBatches = 5;

// Median over kTimingBatches batches of the mean time of `iterations` back-to-back calls of f on
// `stream` (events), after one warm-up call. Microseconds.
double time_launches(hipStream_t stream, int iterations, const std::function<void()>& f) {
  hipEvent_t e0, e1;
  HIP_CHECK(hipEventCreate(&e0));
  HIP_CHECK(hipEventCreate(&e1));
  f();  // warm-up
  std::vector<double> us;
  for (int b = 0; b < kTimingBatches; ++b) {
    HIP_CHECK(hipEventRecord(e0, stream));
    for (int i = 0; i < iterations; ++i) f();
    HIP_CHECK(hipEventRecord(e1, stream));
    HIP_CHECK(hipEventSynchronize(e1));
    float ms = 0;
    HIP_CHECK(hipEventElapsedTime(&ms, e0, e1));
    us.push_back(1000.0 * ms / iterations);
  }
  (void)hipEventDestroy(e0);
  (void)hipEventDestroy(e1);
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

// Shapes the kernels run (heads in groups of 16 rows, head dims within the portable kernel's
// limits) and plans they can run without reading past the plan's own buffers: the kernels read
// work_info rows [work_indptr[c], work_indptr[c + 1]) per cluster and, per tile with two or more
// pieces, reduce_final_map[2t..2t+1] and reduce_partial_map[g0..g1). A plan whose values point
// past its buffers (a class-D sizing overflow, a poisoned start before a written end) is refused,
// naming the cell.
void check_decode_inputs(const ref::MlaInputs& in, const ref::Plan& plan) {
  const int H = in.num_heads, D = in.head_dim_qk, Dv = in.head_dim_v;
  if (H % kRows != 0 || D % 32 != 0 || D > kMaxD || Dv % 16 != 0 || Dv > kMaxDv || Dv > D ||
      Dv * kRows % kBlock != 0)
    throw std::invalid_argument(
        "run_mla_decode: needs heads % 16 == 0, head_dim_qk a multiple of 32 and <= 576, "
        "head_dim_v a multiple of 16 "
        "and <= min(512, head_dim_qk)");
  if (plan.derived.fold_ratio != 1)
    throw std::invalid_argument("run_mla_decode: head-folded plans are not run");
  const int64_t rows = plan.work_info.size() / 8;
  const auto& wi = plan.work_indptr.data;
  for (size_t c = 0; c + 1 < wi.size(); ++c)
    if (wi[c] < wi[c + 1] && (wi[c] < 0 || wi[c + 1] > rows))
      throw std::invalid_argument("run_mla_decode: work_indptr[" + std::to_string(c) + ".." +
                                  std::to_string(c + 1) + "] = " + std::to_string(wi[c]) + ".." +
                                  std::to_string(wi[c + 1]) + " lies outside work_info (" +
                                  std::to_string(rows) + " rows)");
  const auto& ri = plan.reduce_indptr.data;
  for (size_t t = 0; t + 1 < ri.size(); ++t) {
    if (ri[t + 1] - int64_t{ri[t]} < 2) continue;
    if (ri[t] < 0 || ri[t + 1] > plan.reduce_partial_map.size() ||
        int64_t(2 * t + 1) >= plan.reduce_final_map.size())
      throw std::invalid_argument("run_mla_decode: reduce tile " + std::to_string(t) +
                                  " points past reduce_partial_map or reduce_final_map");
    for (int32_t i = ri[t]; i < ri[t + 1]; ++i)
      if (plan.reduce_partial_map.data[i] < 0)
        throw std::invalid_argument("run_mla_decode: reduce_partial_map[" + std::to_string(i) +
                                    "] is negative");
  }
}

// The KV cache in the device format: bf16 bits, or e4m3fn bytes (every value must already be an
// e4m3fn value: std::invalid_argument naming the first that is not).
void encode_kv(const ref::MlaInputs& in, bool kv_fp8, std::vector<uint16_t>& kvh,
               std::vector<uint8_t>& kv8h) {
  if (!kv_fp8) {
    kvh.resize(in.kv_cache.size());
    for (size_t i = 0; i < kvh.size(); ++i) kvh[i] = host_f2bf(in.kv_cache[i]);
    return;
  }
  kv8h.resize(in.kv_cache.size());
  for (size_t i = 0; i < kv8h.size(); ++i)
    if (!host_e4m3fn_exact(in.kv_cache[i], &kv8h[i]))
      throw std::invalid_argument(
          "run_mla_decode: kv_cache[" + std::to_string(i) +
          "] = " + std::to_string(in.kv_cache[i]) +
          " is not an fp8_e4m3fn value (build the inputs with kv_format fp8_e4m3fn)");
}

// The reduce launch: on NVIDIA a programmatic dependent of the decode before it in the stream
// (its CTAs start as decode workgroups retire and wait in griddepcontrol.wait), as FlashMLA
// launches its combine.
void launch_reduce(hipStream_t stream, int tiles, const int32_t* ri, const int32_t* fm,
                   const int32_t* pm, const DecodeParams& P, unsigned long long* log) {
#if defined(__CUDACC__)
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(tiles);
  cfg.blockDim = dim3(kBlock);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  HIP_CHECK(cudaLaunchKernelEx(&cfg, decode::mla_reduce_kernel, ri, fm, pm,
                               static_cast<const float*>(P.part_o),
                               static_cast<const float*>(P.part_lse), P.o, P.lse, P.H, P.Dv, log));
#else
  hipLaunchKernelGGL(decode::mla_reduce_kernel, dim3(tiles), dim3(kBlock), 0, stream, ri, fm, pm,
                     P.part_o, P.part_lse, P.o, P.lse, P.H, P.Dv, log);
  HIP_CHECK(hipGetLastError());
#endif
}

// Everything on the device for one run_mla_decode call (freed on scope exit).
struct DecodeBuffers {
  std::vector<void*> owned;
  TailedBuffer q, o, lse, po, pl;
  DecodeBuffers(const ref::MlaInputs& in, const ref::Plan& plan, const DecodeOptions& opt)
      : q("q", opt.q_alloc_rows >= 0 ? opt.q_alloc_rows : in.q_rows(),
          int64_t{in.num_heads} * in.head_dim_qk * 2, opt.tail_rows, opt.guard_buffer == "q"),
        o("o", opt.o_alloc_rows >= 0 ? opt.o_alloc_rows : in.q_rows(),
          int64_t{in.num_heads} * in.head_dim_v * 2, opt.tail_rows, opt.guard_buffer == "o"),
        lse("lse", o.rows, int64_t{in.num_heads} * 4, opt.tail_rows),
        po("partial_o", partial_rows(in, plan), int64_t{in.num_heads} * in.head_dim_v * 4,
           opt.tail_rows),
        pl("partial_lse", po.rows, int64_t{in.num_heads} * 4, opt.tail_rows) {}
  ~DecodeBuffers() {
    for (void* p : owned) (void)hipFree(p);
  }
  template <class T>
  T* upload(const std::vector<T>& v) {
    return mlasim::gpu::upload(v, owned);
  }
  static int64_t partial_rows(const ref::MlaInputs& in, const ref::Plan& plan) {
    int32_t max_q = 1;
    for (size_t b = 0; b + 1 < in.qo_indptr.size(); ++b)
      max_q = std::max(max_q, in.qo_indptr[b + 1] - in.qo_indptr[b]);
    return std::max<int64_t>(plan.reduce_partial_map.size(), 1) * max_q;
  }
};

// Launch parameters over the uploaded inputs (q and the outputs are `b`'s buffers).
DecodeParams make_params(const ref::MlaInputs& in, DecodeBuffers& b, bool kv_fp8,
                         const std::vector<uint16_t>& kvh, const std::vector<uint8_t>& kv8h,
                         const ref::Plan& plan, ZeroKvVariant variant) {
  DecodeParams P{};
  P.q = reinterpret_cast<const uint16_t*>(b.q.p);
  P.kv = b.upload(kvh);
  P.kv8 = b.upload(kv8h);
  P.kv_fp8 = kv_fp8;
  P.kv_indices = b.upload(in.kv_indices);
  P.kv_indptr = b.upload(in.kv_indptr);
  P.lpl = b.upload(in.kv_last_page_lens);
  P.qo_indptr = b.upload(in.qo_indptr);
  P.topk = b.upload(in.topk_indices);
  P.work_indptr = b.upload(plan.work_indptr.data);
  P.work_info = b.upload(plan.work_info.data);
  P.o = reinterpret_cast<uint16_t*>(b.o.p);
  P.lse = reinterpret_cast<float*>(b.lse.p);
  P.part_o = reinterpret_cast<float*>(b.po.p);
  P.part_lse = reinterpret_cast<float*>(b.pl.p);
  P.H = in.num_heads, P.D = in.head_dim_qk, P.Dv = in.head_dim_v, P.page = in.page_size;
  P.sparse = in.topk >= 0;
  P.causal = in.is_causal && !P.sparse;
  P.batch = in.num_requests();
  P.variant = static_cast<int>(variant);
  P.cache_rows = int64_t{in.num_pages} * in.page_size;
  P.logit_scale = static_cast<float>(in.effective_sm_scale() * in.q_scale * in.kv_scale);
  P.v_scale = static_cast<float>(in.kv_scale);
  return P;
}

// Copies o and lse back (rows that exist in both q and o), the tails' damage and the access log.
void read_back(const ref::MlaInputs& in, DecodeBuffers& b, unsigned long long* log,
               DecodeResult& res) {
  for (const TailedBuffer* t : {&b.q, &b.o, &b.lse, &b.po, &b.pl}) t->scan(res.tails);
  unsigned long long lg[4];
  copy_to_host(lg, log, sizeof lg);
  if (lg[1] != 0)
    res.q_rows_read_min = static_cast<int64_t>(lg[0]),
    res.q_rows_read_max = static_cast<int64_t>(lg[1]) - 1;
  if (lg[3] != 0)
    res.o_rows_written_min = static_cast<int64_t>(lg[2]),
    res.o_rows_written_max = static_cast<int64_t>(lg[3]) - 1;
  const int64_t out_rows = std::min<int64_t>(in.q_rows(), b.o.rows);
  std::vector<uint16_t> oh(static_cast<size_t>(out_rows) * in.num_heads * in.head_dim_v);
  std::vector<float> lh(static_cast<size_t>(out_rows) * in.num_heads);
  copy_to_host(oh.data(), b.o.p, oh.size() * 2);
  copy_to_host(lh.data(), b.lse.p, lh.size() * 4);
  res.o.resize(oh.size());
  res.lse.resize(lh.size());
  for (size_t i = 0; i < oh.size(); ++i) res.o[i] = host_bf2d(oh[i]);
  for (size_t i = 0; i < lh.size(); ++i) res.lse[i] = lh[i];
}

}  // namespace

DecodeResult run_mla_decode(const ref::MlaInputs& in, const ref::Plan& plan,
                            const DecodeOptions& opt) {
  check_decode_inputs(in, plan);
  if (!opt.guard_buffer.empty() && opt.guard_buffer != "q" && opt.guard_buffer != "o")
    throw std::invalid_argument("run_mla_decode: guard_buffer must be \"q\", \"o\" or empty");
  const bool kv_fp8 = opt.kv_format == ref::NumFormat::kFp8E4m3fn;
  if (!kv_fp8 && opt.kv_format != ref::NumFormat::kBf16)
    throw std::invalid_argument("run_mla_decode: kv_format must be bf16 or fp8_e4m3fn");
  std::vector<uint16_t> kvh;
  std::vector<uint8_t> kv8h;
  encode_kv(in, kv_fp8, kvh, kv8h);

  DecodeBuffers b(in, plan, opt);
  {
    std::vector<uint16_t> qh(static_cast<size_t>(b.q.rows) * in.num_heads * in.head_dim_qk, 0);
    for (size_t i = 0; i < in.q.size() && i < qh.size(); ++i) qh[i] = host_f2bf(in.q[i]);
    copy_to_device(b.q.p, qh.data(), qh.size() * 2);
  }
  DecodeParams P = make_params(in, b, kv_fp8, kvh, kv8h, plan, opt.variant);
  const int32_t* ri = b.upload(plan.reduce_indptr.data);
  const int32_t* fm = b.upload(plan.reduce_final_map.data);
  const int32_t* pm = b.upload(plan.reduce_partial_map.data);
  unsigned long long* log = b.upload(std::vector<unsigned long long>{~0ull, 0, ~0ull, 0});
  P.log = log;

  const DecodeKernel dk = pick_decode_kernel(P.D, P.Dv, opt.tiling, kv_fp8);
  HIP_CHECK(hipFuncSetAttribute(reinterpret_cast<const void*>(dk.fn),
                                hipFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(dk.smem)));
  hipStream_t stream;  // a blocking stream: ordered after the poison fills on the null stream
  HIP_CHECK(hipStreamCreate(&stream));
  struct StreamGuard {
    hipStream_t s;
    ~StreamGuard() { (void)hipStreamDestroy(s); }
  } stream_guard{stream};
  const int clusters = static_cast<int>(plan.work_indptr.data.size()) - 1;
  const int tiles = static_cast<int>(plan.reduce_indptr.data.size()) - 1;
  auto decode = [&] {
    if (clusters > 0)
      hipLaunchKernelGGL(dk.fn, dim3(clusters), dim3(dk.threads), dk.smem, stream, P);
    HIP_CHECK(hipGetLastError());
  };
  auto reduce = [&] {
    if (opt.run_reduce && tiles > 0) launch_reduce(stream, tiles, ri, fm, pm, P, P.log);
  };
  b.o.poison(0xFF);  // bf16 / fp32 NaN
  b.lse.poison(0xFF);
  b.po.poison(0xFF);
  b.pl.poison(0xFF);
  decode();
  reduce();
  HIP_CHECK(hipStreamSynchronize(stream));

  DecodeResult res;
  res.kernel = dk.name;
  if (b.q.guarded) res.guard = b.q.guard;
  if (b.o.guarded) res.guard = b.o.guard;
  read_back(in, b, log, res);
  if (opt.timing_iterations > 0) {
    P.log = nullptr;
    res.decode_us = time_launches(stream, opt.timing_iterations, decode);
    res.reduce_us = time_launches(stream, opt.timing_iterations, reduce);
    res.decode_reduce_us = time_launches(stream, opt.timing_iterations, [&] {
      decode();
      reduce();
    });
  }
  return res;
}

double measure_copy_bandwidth(std::size_t bytes, int iterations) {
  void* a = device_alloc(bytes);
  void* b = device_alloc(bytes);
  HIP_CHECK(hipMemset(a, 1, bytes));
  const double us = time_launches(
      0, iterations, [&] { HIP_CHECK(hipMemcpyAsync(b, a, bytes, hipMemcpyDeviceToDevice, 0)); });
  device_free(a);
  device_free(b);
  return 2.0 * bytes / (us * 1e-6) / 1e9;
}

}  // namespace mlasim::gpu
