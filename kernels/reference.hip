// reference.hip - the plain fp32 GPU reference of MLA decode (kernels/gpu_api.h
// reference_attention): what the numerics of a kernel under test are compared with on the
// device (fuzz/kut_check.h). Written for obviousness: one workgroup per (q row, head), two
// passes over the row's keys, nothing rounded. HIP names only (nvcc builds it through
// hip_compat.h).
#include "kernels/hip_compat.h"  // first: the HIP/CUDA names the other headers use

#include "kernels/gpu_api.h"
#include "ref/input_values.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
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

__device__ float dot_row(const float* qs, const float* k, int D) {
  float s = 0;
  for (int d = 0; d < D; ++d) s += qs[d] * k[d];
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
  for (int d = threadIdx.x; d < P.D; d += kThreads)
    qs[d] = P.q[(row * P.H + h) * P.D + d] * P.scale;
  __syncthreads();
  const int64_t n = visible_keys(P, row, b);
  // pass 1: the maximum logit
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < n; j += kThreads) {
    const int64_t r = key_row(P, row, b, j);
    if (r >= 0) mx = fmaxf(mx, dot_row(qs, P.kv + r * P.D, P.D));
  }
  red[threadIdx.x] = mx;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (static_cast<int>(threadIdx.x) < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  const float M = red[0];
  __syncthreads();
  // pass 2: chunks of kThreads keys: p_j by one thread each, then o columns by every thread
  float acc[kCols] = {};
  float l_part = 0;
  for (int64_t j0 = 0; j0 < n && M != -INFINITY; j0 += kThreads) {
    const int64_t j = j0 + threadIdx.x;
    const int64_t r = j < n ? key_row(P, row, b, j) : -1;
    p[threadIdx.x] = r >= 0 ? expf(dot_row(qs, P.kv + r * P.D, P.D) - M) : 0.f;
    kr[threadIdx.x] = r;
    l_part += p[threadIdx.x];
    __syncthreads();
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
  T* p = static_cast<T*>(device_alloc(std::max<size_t>(v.size(), 1) * sizeof(T)));
  owned.push_back(p);
  copy_to_device(p, v.data(), v.size() * sizeof(T));
  return p;
}

// Runs the reference over `in`'s shape with q and the cache already on the device (fp32;
// `dq`, `dkv`), every other buffer uploaded into `owned`.
ref::AttentionOutput run_reference(const ref::MlaInputs& in, const float* dq, const float* dkv,
                                   std::vector<void*>& owned);

// Device buffers freed at the end of a scope.
struct FreeAll {
  std::vector<void*>& v;
  ~FreeAll() {
    for (void* p : v) (void)hipFree(p);
  }
};

void check_dims(const ref::MlaInputs& in) {
  if (in.head_dim_qk > kMaxD || in.head_dim_v > kMaxDv)
    throw std::invalid_argument("reference_attention: head dims above 1024 / 512");
}

}  // namespace

ref::AttentionOutput reference_attention(const ref::MlaInputs& in) {
  const Status st = ref::ValidateMlaInputs(in);
  if (!st.ok()) throw std::invalid_argument("reference_attention: " + st.ToString());
  check_dims(in);
  std::vector<void*> owned;
  const FreeAll free_all{owned};
  const float* dq = upload(in.q, owned);
  const float* dkv = upload(in.kv_cache, owned);
  return run_reference(in, dq, dkv, owned);
}

ref::AttentionOutput reference_attention(const ref::MlaInputs& in, const GeneratedTensor& q,
                                         const GeneratedTensor& kv) {
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
  std::vector<void*> owned;
  const FreeAll free_all{owned};
  auto* dq = static_cast<float*>(device_alloc(std::max<int64_t>(q_elems, 1) * sizeof(float)));
  owned.push_back(dq);
  auto* dkv = static_cast<float*>(device_alloc(std::max<int64_t>(kv_elems, 1) * sizeof(float)));
  owned.push_back(dkv);
  fill_generated(q, ref::values::kDtypeFp32, dq, q_elems);
  fill_generated(kv, ref::values::kDtypeFp32, dkv, kv_elems);
  return run_reference(in, dq, dkv, owned);
}

namespace {

ref::AttentionOutput run_reference(const ref::MlaInputs& in, const float* dq, const float* dkv,
                                   std::vector<void*>& owned) {
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
  ref::AttentionOutput out;
  out.q_rows = static_cast<int32_t>(rows);
  out.num_heads = in.num_heads;
  out.head_dim_v = in.head_dim_v;
  std::vector<float> o(static_cast<size_t>(rows * in.num_heads * in.head_dim_v));
  std::vector<float> lse(static_cast<size_t>(rows * in.num_heads));
  P.o = upload(o, owned);
  P.lse = upload(lse, owned);
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
  copy_to_host(o.data(), P.o, o.size() * sizeof(float));
  copy_to_host(lse.data(), P.lse, lse.size() * sizeof(float));
  out.o.assign(o.begin(), o.end());
  out.lse.assign(lse.begin(), lse.end());
  return out;
}

}  // namespace

}  // namespace mlasim::gpu
