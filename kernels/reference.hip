// reference.hip - the plain fp32 GPU reference of MLA decode (kernels/gpu_api.h
// reference_attention): what the numerics of a kernel under test are compared with on the
// device (fuzz/kut_check.h). Written for obviousness: one workgroup per (q row, head), two
// passes over the row's keys (each key's dot product by one warp, its lanes reading the key's
// row side by side), nothing rounded. HIP names only (nvcc builds it through hip_compat.h).
#include "kernels/hip_compat.h"  // first: the HIP/CUDA names the other headers use

#include "kernels/gpu_api.h"
#include "kernels/mlasim_kut.h"
#include "ref/input_values.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace mlasim::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxD = 1024;  // q row of one head in shared memory
constexpr int kMaxDv = 512;
constexpr int kCols = kMaxDv / kThreads;  // output columns per thread

struct RefParams {
  const float* q;           // [q rows, H, D]
  const float* kv;          // [cache rows, D]
  const int32_t* kv_indices;
  const int32_t* kv_indptr;  // [B + 1] pages
  const int32_t* lpl;        // [B]
  const int32_t* qo_indptr;  // [B + 1]
  const int32_t* topk;       // [q rows, topk] (sparse)
  const int32_t* row_req;    // [q rows]: the request of each q row
  float* o;                  // [q rows, H, Dv]
  float* lse;                // [q rows, H]
  int32_t H, D, Dv, page, topk_len, causal;
  int64_t cache_rows;
  float scale;    // softmax scale x q scale x kv scale
  float v_scale;  // kv scale
};

// The cache row of key j of q row `row` (request b) or -1 when the key is not visible.
__device__ int64_t key_row(const RefParams& P, int64_t row, int32_t b, int64_t j) {
  if (P.topk_len >= 0) {
    const int64_t r = P.topk[row * P.topk_len + j];
    return (r >= 0 && r < P.cache_rows) ? r : -1;
  }
  const int64_t r = int64_t{P.kv_indices[P.kv_indptr[b] + j / P.page]} * P.page + j % P.page;
  return (r >= 0 && r < P.cache_rows) ? r : -1;
}

// Keys the row may see: [0, n).
__device__ int64_t visible_keys(const RefParams& P, int64_t row, int32_t b) {
  const int64_t pages = P.kv_indptr[b + 1] - P.kv_indptr[b];
  if (P.topk_len >= 0) return pages < P.topk_len ? pages : P.topk_len;
  const int64_t lk = pages == 0 ? 0 : (pages - 1) * P.page + P.lpl[b];
  if (!P.causal) return lk;
  const int64_t lq = P.qo_indptr[b + 1] - P.qo_indptr[b];
  const int64_t i = row - P.qo_indptr[b];
  const int64_t limit = i + lk - lq + 1;
  return limit < 0 ? 0 : (limit < lk ? limit : lk);
}

constexpr int kWarps = kThreads / COMPAT_WARP_SIZE;

// q . k over D columns by the lanes of one warp (lane x takes columns x, x + W, x + 2W, ...; W the
// warp size), the lanes' sums added by a butterfly: every lane returns the dot. The same key
// gives the same bits in both passes. Called by whole warps only (the shuffles).
__device__ float warp_dot(const float* qs, const float* k, int D, int lane) {
  float s = 0;
  for (int d = lane; d < D; d += COMPAT_WARP_SIZE) s += qs[d] * k[d];
  for (int m = COMPAT_WARP_SIZE / 2; m > 0; m /= 2) s += compat_shfl_xor(s, m);
  return s;
}

__global__ void __launch_bounds__(kThreads) reference_kernel(RefParams P) {
  __shared__ float qs[kMaxD];
  __shared__ float red[kThreads];
  __shared__ float p[kThreads];
  __shared__ int64_t kr[kThreads];
  const int64_t row = blockIdx.x / P.H;
  const int h = blockIdx.x % P.H;
  const int32_t b = P.row_req[row];
  const int lane = threadIdx.x % COMPAT_WARP_SIZE, warp = threadIdx.x / COMPAT_WARP_SIZE;
  for (int d = threadIdx.x; d < P.D; d += kThreads)
    qs[d] = P.q[(row * P.H + h) * P.D + d] * P.scale;
  __syncthreads();
  const int64_t n = visible_keys(P, row, b);
  // pass 1: the maximum logit; warp w takes keys w, w + kWarps, ... (a key's row is read by the
  // lanes side by side)
  float mx = -INFINITY;
  for (int64_t j = warp; j < n; j += kWarps) {
    const int64_t r = key_row(P, row, b, j);
    if (r >= 0) mx = fmaxf(mx, warp_dot(qs, P.kv + r * P.D, P.D, lane));
  }
  red[threadIdx.x] = mx;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (static_cast<int>(threadIdx.x) < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  const float M = red[0];
  __syncthreads();
  // pass 2: chunks of kThreads keys: p_j of each key by a warp into shared memory, then o
  // columns by every thread
  float acc[kCols] = {};
  float l_part = 0;
  for (int64_t j0 = 0; j0 < n && M != -INFINITY; j0 += kThreads) {
    for (int t = warp; t < kThreads; t += kWarps) {
      const int64_t j = j0 + t;
      const int64_t r = j < n ? key_row(P, row, b, j) : -1;
      const float s = r >= 0 ? warp_dot(qs, P.kv + r * P.D, P.D, lane) : 0.f;
      if (lane == 0) {
        p[t] = r >= 0 ? expf(s - M) : 0.f;
        kr[t] = r;
      }
    }
    __syncthreads();
    l_part += p[threadIdx.x];
    for (int c = 0; c * kThreads + static_cast<int>(threadIdx.x) < P.Dv; ++c) {
      const int d = c * kThreads + threadIdx.x;
      for (int t = 0; t < kThreads; ++t)
        if (kr[t] >= 0) acc[c] += p[t] * P.kv[kr[t] * P.D + d];
    }
    __syncthreads();
  }
  red[threadIdx.x] = l_part;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (static_cast<int>(threadIdx.x) < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  const float l = red[0];
  const bool empty = M == -INFINITY || l == 0.f;
  for (int c = 0; c * kThreads + static_cast<int>(threadIdx.x) < P.Dv; ++c) {
    const int d = c * kThreads + threadIdx.x;
    P.o[(row * P.H + h) * P.Dv + d] = empty ? 0.f : acc[c] * P.v_scale / l;
  }
  if (threadIdx.x == 0) P.lse[row * P.H + h] = empty ? -INFINITY : M + logf(l);
}

template <class T>
T* upload(const std::vector<T>& v, std::vector<void*>& owned) {
  T* p = static_cast<T*>(device_acquire(std::max<size_t>(v.size(), 1) * sizeof(T)));
  owned.push_back(p);
  copy_to_device(p, v.data(), v.size() * sizeof(T));
  return p;
}

// Device blocks (device_acquire) given back to the per-process cache at the end of a scope: a
// campaign runs the reference once per decode call, and a hipMalloc / hipFree of its fp32 KV
// copy (~100 MB) each time waits for the whole device.
// A release that fails (a context a device fault ended) is ignored: it must not throw out of a
// destructor, perhaps during the unwinding of that fault's own exception.
void release_quietly(void* p) noexcept {
  try {
    device_release(p);
  } catch (...) {
  }
}

struct ReleaseAll {
  std::vector<void*>& v;
  ~ReleaseAll() {
    for (void* p : v) release_quietly(p);
  }
};

void check_dims(const ref::MlaInputs& in) {
  if (in.head_dim_qk > kMaxD || in.head_dim_v > kMaxDv)
    throw std::invalid_argument("reference_attention: head dims above 1024 / 512");
}

// Launches the reference over `in`'s shape with q and the cache already on the device (fp32;
// `dq`, `dkv`), every other buffer uploaded into `owned`: o into `dev_o` ([q rows, H, Dv] fp32,
// device), lse copied back into `out.lse` (which waits for the kernel); `out`'s shape fields
// set, its o left empty.
void launch_reference(const ref::MlaInputs& in, const float* dq, const float* dkv, float* dev_o,
                      ref::AttentionOutput& out, std::vector<void*>& owned) {
  const int64_t rows = in.q_rows();
  std::vector<int32_t> row_req(static_cast<size_t>(rows));
  for (int32_t b = 0; b < in.num_requests(); ++b)
    for (int32_t r = in.qo_indptr[b]; r < in.qo_indptr[b + 1]; ++r) row_req[r] = b;
  RefParams P{};
  P.q = dq;
  P.kv = dkv;
  P.kv_indices = upload(in.kv_indices, owned);
  P.kv_indptr = upload(in.kv_indptr, owned);
  P.lpl = upload(in.kv_last_page_lens, owned);
  P.qo_indptr = upload(in.qo_indptr, owned);
  P.topk = upload(in.topk_indices, owned);
  P.row_req = upload(row_req, owned);
  out.q_rows = static_cast<int32_t>(rows);
  out.num_heads = in.num_heads;
  out.head_dim_v = in.head_dim_v;
  out.o.clear();
  std::vector<float> lse(static_cast<size_t>(rows * in.num_heads));
  P.o = dev_o;
  P.lse = static_cast<float*>(device_acquire(std::max<size_t>(lse.size(), 1) * sizeof(float)));
  owned.push_back(P.lse);
  P.H = in.num_heads, P.D = in.head_dim_qk, P.Dv = in.head_dim_v, P.page = in.page_size;
  P.topk_len = in.topk;
  P.causal = in.is_causal && in.topk < 0;
  P.cache_rows = int64_t{in.num_pages} * in.page_size;
  P.scale = static_cast<float>(in.effective_sm_scale() * in.q_scale * in.kv_scale);
  P.v_scale = static_cast<float>(in.kv_scale);
  if (rows > 0) {
    hipLaunchKernelGGL(reference_kernel, dim3(static_cast<unsigned>(rows * in.num_heads)),
                       dim3(kThreads), 0, 0, P);
    HIP_CHECK(hipGetLastError());
  }
  copy_to_host(lse.data(), P.lse, lse.size() * sizeof(float));
  out.lse.assign(lse.begin(), lse.end());
}

int64_t o_elements(const ref::MlaInputs& in) {
  return int64_t{in.q_rows()} * in.num_heads * in.head_dim_v;
}

// The generated q and KV as fp32 device copies (into `owned`), after the shape checks.
std::pair<const float*, const float*> generate_inputs(const ref::MlaInputs& in,
                                                      const GeneratedTensor& q,
                                                      const GeneratedTensor& kv,
                                                      std::vector<void*>& owned) {
  const Status st = ref::ValidateMlaShape(in);
  if (!st.ok()) throw std::invalid_argument("reference_attention: " + st.ToString());
  check_dims(in);
  const int64_t q_elems = int64_t{in.q_rows()} * in.num_heads * in.head_dim_qk;
  const int64_t kv_elems = int64_t{in.num_pages} * in.page_size * in.head_dim_qk;
  if (q.rows * q.cols != q_elems || kv.rows * kv.cols != kv_elems)
    throw std::invalid_argument("reference_attention: generated q / KV of " +
                                std::to_string(q.rows * q.cols) + " / " +
                                std::to_string(kv.rows * kv.cols) + " values, the shape needs " +
                                std::to_string(q_elems) + " / " + std::to_string(kv_elems));
  auto* dq = static_cast<float*>(device_acquire(std::max<int64_t>(q_elems, 1) * sizeof(float)));
  owned.push_back(dq);
  auto* dkv = static_cast<float*>(device_acquire(std::max<int64_t>(kv_elems, 1) * sizeof(float)));
  owned.push_back(dkv);
  fill_generated(q, ref::values::kDtypeFp32, dq, q_elems);
  fill_generated(kv, ref::values::kDtypeFp32, dkv, kv_elems);
  return {dq, dkv};
}

// o downloaded into out.o (double), from the device copy at dev_o.
void download_o(const float* dev_o, ref::AttentionOutput& out) {
  std::vector<float> o(static_cast<size_t>(int64_t{out.q_rows} * out.num_heads * out.head_dim_v));
  copy_to_host(o.data(), dev_o, o.size() * sizeof(float));
  out.o.assign(o.begin(), o.end());
}

}  // namespace

DeviceAttention::~DeviceAttention() { release_quietly(o); }

ref::AttentionOutput reference_attention(const ref::MlaInputs& in) {
  const Status st = ref::ValidateMlaInputs(in);
  if (!st.ok()) throw std::invalid_argument("reference_attention: " + st.ToString());
  check_dims(in);
  std::vector<void*> owned;
  const ReleaseAll release{owned};
  const float* dq = upload(in.q, owned);
  const float* dkv = upload(in.kv_cache, owned);
  auto* dev_o = static_cast<float*>(device_acquire(std::max<int64_t>(o_elements(in), 1) * 4));
  owned.push_back(dev_o);
  ref::AttentionOutput out;
  launch_reference(in, dq, dkv, dev_o, out, owned);
  download_o(dev_o, out);
  return out;
}

ref::AttentionOutput reference_attention(const ref::MlaInputs& in, const GeneratedTensor& q,
                                         const GeneratedTensor& kv) {
  std::unique_ptr<DeviceAttention> dev = reference_attention_on_device(in, q, kv);
  download_o(dev->o, dev->host);
  return std::move(dev->host);
}

std::unique_ptr<DeviceAttention> reference_attention_on_device(const ref::MlaInputs& in,
                                                               const GeneratedTensor& q,
                                                               const GeneratedTensor& kv) {
  std::vector<void*> owned;
  const ReleaseAll release{owned};
  const auto [dq, dkv] = generate_inputs(in, q, kv, owned);
  auto dev = std::make_unique<DeviceAttention>();
  dev->o = static_cast<float*>(device_acquire(std::max<int64_t>(o_elements(in), 1) * 4));
  launch_reference(in, dq, dkv, dev->o, dev->host, owned);
  return dev;
}

// ---- compare_on_device -------------------------------------------------------------------------
namespace {

constexpr int kCompareThreads = 256;
constexpr int kCompareMaxBlocks = 1024;

// One block's share of ref::CompareResult; first / index fields -1 = none.
struct ComparePartial {
  long long elements, nan_mismatches, inf_mismatches, first_anomaly, violations, first_violation;
  long long max_abs_index, max_rel_index;
  double max_abs, max_rel, sdd, sxx_yy;
};

__host__ __device__ long long first_of(long long a, long long b) {
  return a < 0 ? b : (b < 0 ? a : (a < b ? a : b));
}

// The larger value; on a tie the smaller index (CompareTensors keeps the first index that
// reached its maximum; a maximum of 0 keeps index -1 there and here).
__host__ __device__ void keep_max(double& v, long long& i, double v2, long long i2) {
  if (v2 > v || (v2 == v && i2 >= 0 && (i < 0 || i2 < i))) v = v2, i = i2;
}

__host__ __device__ void merge(ComparePartial& a, const ComparePartial& b) {
  a.elements += b.elements;
  a.nan_mismatches += b.nan_mismatches;
  a.inf_mismatches += b.inf_mismatches;
  a.first_anomaly = first_of(a.first_anomaly, b.first_anomaly);
  a.violations += b.violations;
  a.first_violation = first_of(a.first_violation, b.first_violation);
  keep_max(a.max_abs, a.max_abs_index, b.max_abs, b.max_abs_index);
  keep_max(a.max_rel, a.max_rel_index, b.max_rel, b.max_rel_index);
  a.sdd += b.sdd;
  a.sxx_yy += b.sxx_yy;
}

__host__ __device__ ComparePartial empty_partial() {
  return {0, 0, 0, -1, 0, -1, -1, -1, 0.0, 0.0, 0.0, 0.0};
}

struct CompareParams {
  const void* actual;
  int fp32;  // 1: fp32, 0: bf16
  const float* expected;
  const uint8_t* skip;  // per group, or null
  long long n;
  int group;
  double atol, rtol;
  ComparePartial* partials;  // [gridDim.x]
};

__device__ double actual_at(const CompareParams& P, long long i) {
  if (P.fp32) return static_cast<const float*>(P.actual)[i];
  const unsigned int u = static_cast<unsigned int>(static_cast<const uint16_t*>(P.actual)[i]) << 16;
  return __uint_as_float(u);
}

// The per-element rules of ref::CompareTensors, into `p`.
__device__ void compare_element(const CompareParams& P, long long i, ComparePartial& p) {
  if (P.skip && P.skip[i / P.group]) return;
  ++p.elements;
  const double x = actual_at(P, i), y = P.expected[i];
  const bool xn = isnan(x), yn = isnan(y), xi = isinf(x), yi = isinf(y);
  if (xn != yn || (!xn && (xi || yi) && x != y)) {
    ++(xn != yn ? p.nan_mismatches : p.inf_mismatches);
    p.first_anomaly = first_of(p.first_anomaly, i);
    return;
  }
  if (xn || xi) return;
  const double d = fabs(x - y);
  keep_max(p.max_abs, p.max_abs_index, d, d > 0 ? i : -1);
  if (y != 0) {
    const double rel = d / fabs(y);
    keep_max(p.max_rel, p.max_rel_index, rel, rel > 0 ? i : -1);
  }
  // Rounded as the host rounds it (no fused multiply-add): the same verdict at the boundary.
  if (d > __dadd_rn(P.atol, __dmul_rn(P.rtol, fabs(y)))) {
    ++p.violations;
    p.first_violation = first_of(p.first_violation, i);
  }
  p.sdd += (x - y) * (x - y);
  p.sxx_yy += x * x + y * y;
}

__global__ void __launch_bounds__(kCompareThreads) compare_kernel(CompareParams P) {
  __shared__ ComparePartial part[kCompareThreads];
  ComparePartial p = empty_partial();
  const long long stride = static_cast<long long>(gridDim.x) * kCompareThreads;
  for (long long i = static_cast<long long>(blockIdx.x) * kCompareThreads + threadIdx.x; i < P.n;
       i += stride)
    compare_element(P, i, p);
  part[threadIdx.x] = p;
  __syncthreads();
  for (int s = kCompareThreads / 2; s > 0; s /= 2) {
    if (static_cast<int>(threadIdx.x) < s) merge(part[threadIdx.x], part[threadIdx.x + s]);
    __syncthreads();
  }
  if (threadIdx.x == 0) P.partials[blockIdx.x] = part[0];
}

}  // namespace

ref::CompareResult compare_on_device(const void* dev_actual, int32_t dtype,
                                     const float* dev_expected, int64_t n, int32_t group,
                                     const uint8_t* skip_groups, const ref::Tolerance& tol) {
  if (dtype != MLASIM_KUT_BF16 && dtype != MLASIM_KUT_FP32)
    throw std::invalid_argument("compare_on_device: dtype " + std::to_string(dtype) +
                                " is neither bf16 nor fp32");
  if (group < 1 || n < 0)
    throw std::invalid_argument("compare_on_device: group " + std::to_string(group) + ", n " +
                                std::to_string(n));
  if (n > 0 && (!dev_actual || !dev_expected))
    throw std::invalid_argument("compare_on_device: null pointer");
  ComparePartial total = empty_partial();
  if (n > 0) {
    std::vector<void*> owned;
    const ReleaseAll release{owned};
    const long long blocks_needed = (n + kCompareThreads - 1) / kCompareThreads;
    const int blocks = static_cast<int>(std::min<long long>(blocks_needed, kCompareMaxBlocks));
    CompareParams P{};
    P.actual = dev_actual;
    P.fp32 = dtype == MLASIM_KUT_FP32;
    P.expected = dev_expected;
    P.n = n;
    P.group = group;
    P.atol = tol.atol;
    P.rtol = tol.rtol;
    if (skip_groups) {
      const std::vector<uint8_t> skip(skip_groups, skip_groups + (n + group - 1) / group);
      P.skip = upload(skip, owned);
    }
    std::vector<ComparePartial> partials(static_cast<size_t>(blocks));
    P.partials = static_cast<ComparePartial*>(device_acquire(partials.size() * sizeof(ComparePartial)));
    owned.push_back(P.partials);
    hipLaunchKernelGGL(compare_kernel, dim3(static_cast<unsigned>(blocks)), dim3(kCompareThreads),
                       0, 0, P);
    HIP_CHECK(hipGetLastError());
    copy_to_host(partials.data(), P.partials, partials.size() * sizeof(ComparePartial));
    for (const ComparePartial& b : partials) merge(total, b);  // block order: deterministic
  }
  ref::CompareResult r;
  r.elements = total.elements;
  r.nan_mismatches = total.nan_mismatches;
  r.inf_mismatches = total.inf_mismatches;
  r.first_anomaly_mismatch = total.first_anomaly;
  r.max_abs = total.max_abs;
  r.max_abs_index = total.max_abs_index;
  r.max_rel = total.max_rel;
  r.max_rel_index = total.max_rel_index;
  r.tolerance_violations = total.violations;
  r.first_violation = total.first_violation;
  r.cos_diff = total.sxx_yy > 0 ? total.sdd / total.sxx_yy : 0.0;
  r.passed = r.anomalies_match() && r.tolerance_violations == 0 && r.cos_diff <= tol.cos_diff;
  return r;
}

}  // namespace mlasim::gpu
