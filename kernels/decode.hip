// decode.hip - the host side of mlasim's persistent MLA decode: run_mla_decode (kernels/gpu_api.h)
// builds the device buffers (sentinel tails or guard pages, poisoned outputs, the access log)
// and runs the decode and the split-KV reduce through mlasim's GPU kernel library
// (libmlasim_kut_gpu.so, kernels/kut/gpu_kut.hip, loaded by kernels/kut_client.h): the decode
// kernels (kernels/decode/) live only there, behind the kernel-under-test ABI of
// kernels/mlasim_kut.h, so the GPU tests reach them the way any kernel under test is reached.
// HIP names only; nvcc builds it through hip_compat.h. Design notes and measurements:
// docs/kernels.md, docs/performance.md.
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

#include "kernels/kut_client.h"
#include "kernels/mlasim_kut.h"

namespace mlasim::gpu {
namespace {

constexpr int kRows = 16;     // q rows per group of the decode kernels (heads % 16 == 0)
constexpr int kMaxD = 576;    // largest head_dim_qk they run
constexpr int kMaxDv = 512;   // largest head_dim_v
constexpr int kBlock = 256;   // threads of the reduce

__global__ void fill_u8_kernel(unsigned char* p, size_t n, unsigned char v) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    p[i] = v;
}

// Reads the rows list[0 .. n) of `cache` (row_vecs 16-byte pieces per row) once each, in list
// order: workgroup g takes the contiguous slice [n g / G, n (g + 1) / G), its threads stride
// over the slice's pieces. Nothing is kept (the pieces are folded into one word that is stored
// only if it equals an unlikely value, so that the loads stay).
__global__ void read_rows_kernel(const uint4* cache, const int32_t* list, int64_t n,
                                 int32_t row_vecs, uint32_t* sink) {
  const int64_t b = n * blockIdx.x / gridDim.x, e = n * (blockIdx.x + 1) / gridDim.x;
  const int32_t total = static_cast<int32_t>((e - b) * row_vecs);
  uint32_t acc = 0;
#pragma unroll 8
  for (int32_t k = threadIdx.x; k < total; k += blockDim.x) {
    const uint4 x = cache[int64_t{list[b + k / row_vecs]} * row_vecs + k % row_vecs];
    acc ^= x.x ^ x.y ^ x.z ^ x.w;
  }
  if (acc == 0x9e3779b9u) sink[blockIdx.x] = acc;
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

template <class T, class A>
T* upload(const std::vector<T, A>& v, std::vector<void*>& owned) {
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

// q in the device format, `rows` rows (the inputs' rows, then zeros): bf16 bits, or e4m3fn
// bytes (every value must already be an e4m3fn value: std::invalid_argument naming the first
// that is not).
std::vector<uint8_t> encode_q(const ref::MlaInputs& in, bool q_fp8, int64_t rows) {
  const size_t n = static_cast<size_t>(rows) * in.num_heads * in.head_dim_qk;
  std::vector<uint8_t> bytes(n * (q_fp8 ? 1 : 2), 0);
  for (size_t i = 0; i < in.q.size() && i < n; ++i) {
    if (!q_fp8) {
      const uint16_t b = host_f2bf(in.q[i]);
      std::memcpy(bytes.data() + 2 * i, &b, 2);
    } else if (!host_e4m3fn_exact(in.q[i], &bytes[i])) {
      throw std::invalid_argument("run_mla_decode: q[" + std::to_string(i) + "] = " +
                                  std::to_string(in.q[i]) +
                                  " is not an fp8_e4m3fn value (build the inputs with q_format "
                                  "fp8_e4m3fn)");
    }
  }
  return bytes;
}

// Everything on the device for one run_mla_decode call (freed on scope exit).
struct DecodeBuffers {
  std::vector<void*> owned;
  TailedBuffer q, o, lse, po, pl;
  DecodeBuffers(const ref::MlaInputs& in, const ref::Plan& plan, const DecodeOptions& opt)
      : q("q", opt.q_alloc_rows >= 0 ? opt.q_alloc_rows : in.q_rows(),
          int64_t{in.num_heads} * in.head_dim_qk *
              (opt.q_format == ref::NumFormat::kFp8E4m3fn ? 1 : 2),
          opt.tail_rows, opt.guard_buffer == "q"),
        o("o", opt.o_alloc_rows >= 0 ? opt.o_alloc_rows : in.q_rows(),
          int64_t{in.num_heads} * in.head_dim_v * 2, opt.tail_rows, opt.guard_buffer == "o"),
        lse("lse", o.rows, int64_t{in.num_heads} * 4, opt.tail_rows),
        po("partial_o", partial_rows(in, plan), int64_t{in.num_heads} * in.head_dim_v * 4,
           opt.tail_rows),
        pl("partial_lse", po.rows, int64_t{in.num_heads} * 4, opt.tail_rows) {}
  ~DecodeBuffers() {
    for (void* p : owned) (void)hipFree(p);
  }
  template <class T, class A>
  T* upload(const std::vector<T, A>& v) {
    return mlasim::gpu::upload(v, owned);
  }
  static int64_t partial_rows(const ref::MlaInputs& in, const ref::Plan& plan) {
    int32_t max_q = 1;
    for (size_t b = 0; b + 1 < in.qo_indptr.size(); ++b)
      max_q = std::max(max_q, in.qo_indptr[b + 1] - in.qo_indptr[b]);
    return std::max<int64_t>(plan.reduce_partial_map.size(), 1) * max_q;
  }
};

mlasim_kut_tensor Tensor(void* data, int64_t rows, int32_t heads, int32_t cols, int32_t dtype,
                         int elem) {
  mlasim_kut_tensor t{};
  t.data = data;
  t.rows = rows;
  t.heads = heads;
  t.cols = cols;
  t.dtype = dtype;
  t.row_stride = int64_t{heads} * cols * elem;
  t.head_stride = heads > 1 ? int64_t{cols} * elem : 0;
  t.bytes = static_cast<uint64_t>(rows * t.row_stride);
  return t;
}

template <class T, class A>
mlasim_kut_tensor Ints(DecodeBuffers& b, const std::vector<T, A>& v, int32_t cols) {
  return Tensor(b.upload(v), static_cast<int64_t>(v.size()) / cols, 1, cols, MLASIM_KUT_INT32, 4);
}

// The kernel-under-test call over the uploaded inputs (q and the outputs are `b`'s buffers).
mlasim_kut_call make_call(const ref::MlaInputs& in, DecodeBuffers& b, bool kv_fp8, bool q_fp8,
                          const std::vector<uint16_t>& kvh, const std::vector<uint8_t>& kv8h,
                          const ref::Plan& plan, const std::string& config) {
  mlasim_kut_call c{};
  c.abi_version = MLASIM_KUT_ABI_VERSION;
  c.struct_bytes = sizeof(c);
  c.config = config.c_str();
  c.batch = in.num_requests();
  c.num_heads = in.num_heads;
  c.num_kv_heads = 1;
  c.head_dim_qk = in.head_dim_qk;
  c.head_dim_v = in.head_dim_v;
  c.page_size = in.page_size;
  c.num_pages = in.num_pages;
  int32_t max_q = 1;
  for (size_t r = 0; r + 1 < in.qo_indptr.size(); ++r)
    max_q = std::max(max_q, in.qo_indptr[r + 1] - in.qo_indptr[r]);
  c.max_seqlen_q = max_q;
  c.causal = in.is_causal && in.topk < 0;
  c.topk = in.topk;
  c.softmax_scale = static_cast<float>(in.effective_sm_scale());
  c.q_scale = static_cast<float>(in.q_scale);
  c.kv_scale = static_cast<float>(in.kv_scale);
  const int32_t H = in.num_heads, D = in.head_dim_qk, Dv = in.head_dim_v;
  const int64_t cache_rows = int64_t{in.num_pages} * in.page_size;
  c.q = q_fp8 ? Tensor(b.q.p, b.q.rows, H, D, MLASIM_KUT_FP8_E4M3FN, 1)
              : Tensor(b.q.p, b.q.rows, H, D, MLASIM_KUT_BF16, 2);
  c.kv_cache = kv_fp8 ? Tensor(b.upload(kv8h), cache_rows, 1, D, MLASIM_KUT_FP8_E4M3FN, 1)
                      : Tensor(b.upload(kvh), cache_rows, 1, D, MLASIM_KUT_BF16, 2);
  c.kv_indices = Ints(b, in.kv_indices, 1);
  c.topk_indices = Ints(b, in.topk_indices, std::max(1, in.topk));
  c.kv_indptr = Ints(b, in.kv_indptr, 1);
  c.kv_last_page_lens = Ints(b, in.kv_last_page_lens, 1);
  c.qo_indptr = Ints(b, in.qo_indptr, 1);
  c.work_indptr = Ints(b, plan.work_indptr.data, 1);
  c.work_info = Ints(b, plan.work_info.data, 8);
  c.reduce_indptr = Ints(b, plan.reduce_indptr.data, 1);
  c.reduce_final_map = Ints(b, plan.reduce_final_map.data, 2);
  c.reduce_partial_map = Ints(b, plan.reduce_partial_map.data, 1);
  c.o = Tensor(b.o.p, b.o.rows, H, Dv, MLASIM_KUT_BF16, 2);
  c.lse = Tensor(b.lse.p, b.lse.rows, H, 1, MLASIM_KUT_FP32, 4);
  c.partial_o = Tensor(b.po.p, b.po.rows, H, Dv, MLASIM_KUT_FP32, 4);
  c.partial_lse = Tensor(b.pl.p, b.pl.rows, H, 1, MLASIM_KUT_FP32, 4);
  return c;
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
  const bool q_fp8 = opt.q_format == ref::NumFormat::kFp8E4m3fn;
  if (!q_fp8 && opt.q_format != ref::NumFormat::kBf16)
    throw std::invalid_argument("run_mla_decode: q_format must be bf16 or fp8_e4m3fn");
  std::vector<uint16_t> kvh;
  std::vector<uint8_t> kv8h;
  encode_kv(in, kv_fp8, kvh, kv8h);

  DecodeBuffers b(in, plan, opt);
  {
    const std::vector<uint8_t> qh = encode_q(in, q_fp8, b.q.rows);
    copy_to_device(b.q.p, qh.data(), qh.size());
  }
  static const char* kVariants[] = {"asm", "opus", "hk"};
  const std::string config = "variant=" + std::string(kVariants[static_cast<int>(opt.variant)]) +
                             ",tiling=" + std::to_string(opt.tiling);
  mlasim_kut_call call = make_call(in, b, kv_fp8, q_fp8, kvh, kv8h, plan, config);
  unsigned long long* log = b.upload(std::vector<unsigned long long>{~0ull, 0, ~0ull, 0});
  call.access_log = reinterpret_cast<uint64_t*>(log);
  const KutClient& kut = KutClient::Get();
  hipStream_t stream;  // a blocking stream: ordered after the poison fills on the null stream
  HIP_CHECK(hipStreamCreate(&stream));
  struct StreamGuard {
    hipStream_t s;
    ~StreamGuard() { (void)hipStreamDestroy(s); }
  } stream_guard{stream};
  call.stream = stream;
  int dev = 0;
  HIP_CHECK(hipGetDevice(&dev));
  call.device = dev;
  const bool reduce_needed = opt.run_reduce && plan.reduce_indptr.data.size() > 1;
  auto decode = [&] {
    call.op = MLASIM_KUT_OP_DECODE;
    kut.Run(call);
  };
  auto reduce = [&] {
    if (!reduce_needed) return;
    call.op = MLASIM_KUT_OP_REDUCE;
    kut.Run(call);
  };
  b.o.poison(0xFF);  // bf16 / fp32 NaN
  b.lse.poison(0xFF);
  b.po.poison(0xFF);
  b.pl.poison(0xFF);
  decode();
  reduce();
  HIP_CHECK(hipStreamSynchronize(stream));

  DecodeResult res;
  res.kernel =
      kut.KernelName(config.c_str(), in.num_heads, in.head_dim_qk, in.head_dim_v, kv_fp8, q_fp8);
  if (b.q.guarded) res.guard = b.q.guard;
  if (b.o.guarded) res.guard = b.o.guard;
  read_back(in, b, log, res);
  if (opt.timing_iterations > 0) {
    call.access_log = nullptr;
    res.decode_us = time_launches(stream, opt.timing_iterations, decode);
    res.reduce_us = time_launches(stream, opt.timing_iterations, reduce);
    res.decode_reduce_us = time_launches(stream, opt.timing_iterations, [&] {
      decode();
      reduce();
    });
  }
  return res;
}

double measure_row_read_bandwidth(const std::vector<int32_t>& rows, int64_t cache_rows,
                                  int32_t row_bytes, int iterations) {
  if (row_bytes <= 0 || row_bytes % 16 != 0 || cache_rows <= 0)
    throw std::invalid_argument("measure_row_read_bandwidth: row_bytes must be a positive "
                                "multiple of 16 and cache_rows positive");
  for (int32_t r : rows)
    if (r < 0 || r >= cache_rows)
      throw std::invalid_argument("measure_row_read_bandwidth: a row id outside the cache");
  if (rows.empty()) return 0.0;
  std::vector<void*> owned;
  const std::size_t bytes = static_cast<std::size_t>(cache_rows) * row_bytes;
  void* cache = device_alloc(bytes);
  owned.push_back(cache);
  HIP_CHECK(hipMemset(cache, 1, bytes));
  const int32_t* list = upload(rows, owned);
  auto* sink = static_cast<uint32_t*>(device_alloc(4096 * sizeof(uint32_t)));
  owned.push_back(sink);
  int device = 0;
  HIP_CHECK(hipGetDevice(&device));
  hipDeviceProp_t prop;
  HIP_CHECK(hipGetDeviceProperties(&prop, device));
  const int blocks = std::min(4096, 4 * prop.multiProcessorCount);
  const auto n = static_cast<int64_t>(rows.size());
  const double us = time_launches(0, iterations, [&] {
    hipLaunchKernelGGL(read_rows_kernel, dim3(blocks), dim3(512), 0, 0,
                       static_cast<const uint4*>(cache), list, n, row_bytes / 16, sink);
    HIP_CHECK(hipGetLastError());
  });
  for (void* p : owned) device_free(p);
  return double(n) * row_bytes / (us * 1e-6) / 1e9;
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
