// kernels/kut/flashmla_sparse_kut.cu - libmlasim_kut_flashmla_sparse.so: FlashMLA's sparse fp8
// decode for DeepSeek V3.2 on sm90 (deepseek-ai/FlashMLA 9241ae3,
// run_flash_splitkv_mla_fp8_sparse_kernel<ModelType::V32, 64 | 128>, compiled from the checkout
// -DMLASIM_FLASHMLA_DIR names; nothing of FlashMLA is in this repository) behind the
// kernel-under-test ABI of kernels/mlasim_kut.h, so that `mlasim fuzz --gpu sentinel|guard
// --kernel-under-test libmlasim_kut_flashmla_sparse.so` fuzzes the sparse steps of MTP engines
// through it (docs/kernel-under-test.md "FlashMLA sparse adapter").
//
// One decode call runs what FlashMLA's sparse_attn_decode_interface (csrc/api/sparse_decode.h)
// runs on sm90: its scheduler (get_decoding_sched_meta with block_size_topk 64, fixed overhead 5,
// topk, extra_topk 0, no topk_length), the sparse fp8 decode and the combine. The reduce call is a
// no-op. mlasim's call is translated into FlashMLA's API as an engine would call it:
//   - FlashMLA's b is the call's requests and s_q their q length (one for every request: ragged q
//     lengths are UNSUPPORTED); q, o and lse are passed zero-copy (row qo_indptr[b] + s, head h is
//     FlashMLA's [b, s, h]), so sentinels and guard pages see those accesses;
//   - indices [b, s_q, width] (int32, a copy the adapter owns), one list of cache rows per q row,
//     -1 after its length (V3.2 takes no topk_length and reads every entry; -1 is the only value
//     it skips). A top-k call (topk >= 0) gives q row t's row of topk_indices, its first
//     min(kv_indptr[b + 1] - kv_indptr[b], topk) entries, width topk. A page-size-1 call -
//     aiter's form of a sparse step, which ATOM's per-token plans hand the decode - gives request
//     b's kv_indices[kv_indptr[b] .. kv_indptr[b + 1]) to each of its q rows, width the longest
//     list rounded up to 64 (a causal request of several q rows cannot share one list:
//     UNSUPPORTED);
//   - the KV cache in FlashMLA's V3.2 layout (656 bytes a token: 512 fp8 e4m3fn, four fp32 tile
//     scales, 64 bf16 rope values), converted on the device from mlasim's [rows, 576] fp8 cache
//     with its per-tensor kv_scale into a buffer the adapter owns, in blocks of 64 tokens; the rows
//     of the last block past the cache hold NaN. FlashMLA reads that copy: an index past the cache
//     reads the padding or faults outside the copy, which the simulator predicts from the index
//     values (the contract's invalid_index = minus_one_masked), not from guard pages.
// The kernel rounds the fp32 scales to bf16 and keeps the rope values in bf16, so only a KV scale
// that is a power of two is exact: any other is UNSUPPORTED. Also UNSUPPORTED (reason in
// mlasim_kut_last_error): pages of more than one token, head counts other than 64 and 128, top-k
// not a positive multiple of 64, head dims other than 576 / 512, q / o not bf16, a KV cache not fp8 e4m3fn,
// strides FlashMLA's layout cannot express, a device other than sm_90.
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/kut/cuda_adapter.h"
#include "params.h"  // FlashMLA csrc/params.h
#include "sm90/decode/sparse_fp8/splitkv_mla.h"
#include "smxx/decode/combine/combine.h"
#include "smxx/decode/get_decoding_sched_meta/get_decoding_sched_meta.h"

namespace mlasim::kut_flashmla_sparse {
namespace {

using kut_cuda::Fail;
using kut_cuda::Scratch;

constexpr int32_t kD = 576, kDv = 512;  // V3.2: d_qk 576 = 512 latent + 64 rope, d_v 512
constexpr int32_t kRope = kD - kDv;     // bf16 rope values per token
constexpr int32_t kScales = kDv / 128;  // one fp32 scale per 128 latent values
constexpr int32_t kTokenBytes = kDv + kScales * 4 + kRope * 2;  // 656 (the kernel asserts it)
constexpr int32_t kBlock = 64;         // tokens per block of the converted cache
constexpr int32_t kTopkBlock = 64;     // block_size_topk of Decode_Sm90_Impl
constexpr int32_t kFixedOverhead = 5;  // fixed_overhead_num_blocks of Decode_Sm90_Impl
constexpr int32_t kMaxSmParts = 160;   // the combine's largest NUM_SPLITS instantiation

struct Buffers {
  Scratch kv, indices, meta, num_splits, lse_accum, o_accum;
};
Buffers& Owned() {
  static Buffers b;
  return b;
}

// Token r of the V3.2 cache from row r of mlasim's fp8 cache (value = stored * scale): the 512
// latent bytes as they are, four copies of the scale, the rope values times the scale in bf16.
// Rows past the cache (the last block's padding) are NaN.
__global__ void ToV32Layout(const uint8_t* __restrict__ src, int64_t src_row_bytes, int64_t rows,
                            float scale, uint8_t* __restrict__ dst, int64_t dst_rows) {
  const int64_t r = blockIdx.x;
  if (r >= dst_rows) return;
  uint8_t* out = dst + r * kTokenBytes;
  auto* scales = reinterpret_cast<float*>(out + kDv);
  auto* rope = reinterpret_cast<__nv_bfloat16*>(out + kDv + kScales * 4);
  const bool real = r < rows;
  const uint8_t* in = src + r * src_row_bytes;
  for (int32_t i = threadIdx.x; i < kDv; i += blockDim.x) out[i] = real ? in[i] : uint8_t{0x7f};
  for (int32_t i = threadIdx.x; i < kScales; i += blockDim.x) scales[i] = real ? scale : NAN;
  for (int32_t i = threadIdx.x; i < kRope; i += blockDim.x) {
    float v = NAN;
    if (real) {
      __nv_fp8_e4m3 x;
      x.__x = in[kDv + i];
      v = static_cast<float>(x) * scale;
    }
    rope[i] = __float2bfloat16_rn(v);
  }
}

// Shapes, dtypes and strides FlashMLA's sparse decode can run; "" when it can.
std::string Unrunnable(const mlasim_kut_call& c) {
  const auto s = [](int64_t v) { return std::to_string(v); };
  if (c.topk < 0 && c.page_size != 1)
    return "page tables of " + s(c.page_size) +
           "-token pages (FlashMLA's sparse decode takes lists of cache rows: page size 1)";
  if (c.topk >= 0 && (c.topk == 0 || c.topk % kTopkBlock != 0))
    return "top-k " + s(c.topk) +
           " (FlashMLA's sm90 sparse decode needs a positive multiple of 64)";
  if (c.topk >= 0 && c.page_size != 1) return "sparse calls of page size " + s(c.page_size);
  if (c.num_kv_heads != 1) return s(c.num_kv_heads) + " KV heads (MLA: 1)";
  if (c.head_dim_qk != kD || c.head_dim_v != kDv)
    return "head dims " + s(c.head_dim_qk) + "/" + s(c.head_dim_v) +
           " (V3.2's sparse decode is 576/512: --head-dims 576,512)";
  if (c.num_heads != 64 && c.num_heads != 128)
    return s(c.num_heads) + " heads (FlashMLA's sm90 sparse decode runs 64 or 128)";
  if (c.q.dtype != MLASIM_KUT_BF16 || c.kv_cache.dtype != MLASIM_KUT_FP8_E4M3FN ||
      c.o.dtype != MLASIM_KUT_BF16 || c.lse.dtype != MLASIM_KUT_FP32)
    return "dtypes other than bf16 q / o, an fp8 e4m3fn KV cache and fp32 lse";
  int exponent = 0;
  if (!std::isfinite(c.kv_scale) || c.kv_scale <= 0 || std::frexp(c.kv_scale, &exponent) != 0.5f)
    return "a KV scale that is not a power of two (FlashMLA rounds its scales to bf16 and keeps "
           "the rope values in bf16: only a power of two is exact)";
  const int64_t H = c.num_heads;
  const bool q_ok = c.q.row_stride == H * kD * 2 && c.q.head_stride == kD * 2;
  const bool o_ok = c.o.row_stride == H * kDv * 2 && c.o.head_stride == kDv * 2;
  const bool lse_ok = c.lse.row_stride == H * 4 && c.lse.head_stride == 4;
  if (!q_ok || !o_ok || !lse_ok || c.kv_cache.row_stride < kD)
    return "strides other than contiguous [rows, heads, dim] q / o / lse";
  if (!kut_cuda::Aligned16(c.q.data) || !kut_cuda::Aligned16(c.o.data))
    return "q or o not 16-byte aligned (TMA needs it)";
  return kut_cuda::NotSm90(c.device, "FlashMLA's sparse fp8 decode");
}

// FlashMLA's b, s_q and indices [b, s_q, width] for the call, -1 past each list's length.
struct Lists {
  int32_t s_q = 0, width = 0;
  std::vector<int32_t> indices;
};

// The lists of a top-k call: q row t's row of topk_indices, its first
// min(kv_indptr[b + 1] - kv_indptr[b], topk) entries (request b holds row t).
int TopkLists(const mlasim_kut_call& c, const std::vector<int32_t>& qo,
              const std::vector<int32_t>& kv, Lists* l) {
  int code = MLASIM_KUT_OK;
  const int64_t rows = qo[c.batch];
  if (!kut_cuda::Download(c.topk_indices, 0, rows * c.topk, "topk_indices", &l->indices, &code))
    return code;
  l->width = c.topk;
  for (int32_t b = 0; b < c.batch; ++b) {
    const int64_t len = std::min<int64_t>(kv[b + 1] - kv[b], c.topk);
    for (int64_t t = qo[b]; t < qo[b + 1]; ++t)
      std::fill(l->indices.begin() + t * c.topk + len, l->indices.begin() + (t + 1) * c.topk, -1);
  }
  return MLASIM_KUT_OK;
}

// The lists of a page-size-1 call (aiter's form of a sparse step: ATOM's per-token plans): request
// b's cache rows kv_indices[kv_indptr[b] .. kv_indptr[b + 1]), the same list for each of its q
// rows, in rows as wide as the longest list rounded up to 64. Causal masking of a request with
// several q rows cannot be said with one list per request: UNSUPPORTED.
int PageOneLists(const mlasim_kut_call& c, const std::vector<int32_t>& qo,
                 const std::vector<int32_t>& kv, Lists* l) {
  if (c.causal != 0 && l->s_q > 1)
    return Fail(MLASIM_KUT_UNSUPPORTED,
                "causal requests of " + std::to_string(l->s_q) +
                    " q rows (FlashMLA's sparse decode gives each request one list of keys)");
  int64_t longest = 0;
  for (int32_t b = 0; b < c.batch; ++b) longest = std::max<int64_t>(longest, kv[b + 1] - kv[b]);
  const int64_t width = std::max<int64_t>((longest + kTopkBlock - 1) / kTopkBlock, 1) * kTopkBlock;
  if (width * qo[c.batch] >= (int64_t{1} << 31))
    return Fail(MLASIM_KUT_UNSUPPORTED, "index lists past FlashMLA's int strides");
  std::vector<int32_t> rows;
  int code = MLASIM_KUT_OK;
  if (!kut_cuda::Download(c.kv_indices, kv[0], kv[c.batch] - kv[0], "kv_indices", &rows, &code))
    return code;
  l->width = static_cast<int32_t>(width);
  l->indices.assign(static_cast<size_t>(width * qo[c.batch]), -1);
  for (int32_t b = 0; b < c.batch; ++b)
    for (int64_t t = qo[b]; t < qo[b + 1]; ++t)
      std::copy(rows.begin() + (kv[b] - kv[0]), rows.begin() + (kv[b + 1] - kv[0]),
                l->indices.begin() + t * width);
  return MLASIM_KUT_OK;
}

// The call's requests as FlashMLA's b and s_q, and its index lists. Returns MLASIM_KUT_OK or the
// code Fail set.
int Translate(const mlasim_kut_call& c, Lists* l) {
  const int32_t B = c.batch;
  std::vector<int32_t> qo, kv;
  int code = MLASIM_KUT_OK;
  if (!kut_cuda::Download(c.qo_indptr, 0, B + 1, "qo_indptr", &qo, &code) ||
      !kut_cuda::Download(c.kv_indptr, 0, B + 1, "kv_indptr", &kv, &code))
    return code;
  l->s_q = qo[1] - qo[0];
  if (qo[0] != 0 || l->s_q < 1)
    return Fail(MLASIM_KUT_UNSUPPORTED, "qo_indptr must start at 0 with a request of >= 1 row");
  for (int32_t b = 0; b < B; ++b) {
    if (qo[b + 1] - qo[b] != l->s_q)
      return Fail(MLASIM_KUT_UNSUPPORTED,
                  "ragged q lengths (request 0 has " + std::to_string(l->s_q) + " rows, request " +
                      std::to_string(b) + " " + std::to_string(qo[b + 1] - qo[b]) +
                      "): FlashMLA takes one s_q for every request");
    if (kv[b + 1] < kv[b])
      return Fail(MLASIM_KUT_UNSUPPORTED, "request " + std::to_string(b) + ": kv_indptr falls");
  }
  if (int64_t{qo[B]} * c.num_heads * kD >= (int64_t{1} << 31))
    return Fail(MLASIM_KUT_UNSUPPORTED, "more q rows than FlashMLA's int strides hold");
  return c.topk >= 0 ? TopkLists(c, qo, kv, l) : PageOneLists(c, qo, kv, l);
}

// The cache in V3.2's layout, in the adapter's buffer. Returns its blocks, or -1 (Fail set).
int64_t ConvertCache(const mlasim_kut_call& c, cudaStream_t stream) {
  const int64_t rows = c.kv_cache.rows;
  const int64_t blocks = std::max<int64_t>((rows + kBlock - 1) / kBlock, 1);
  if (blocks * kBlock * kTokenBytes >= (int64_t{1} << 31))
    return Fail(MLASIM_KUT_UNSUPPORTED, "a KV cache past FlashMLA's int block strides"), -1;
  Scratch& kv = Owned().kv;
  if (!kv.Reserve(static_cast<size_t>(blocks * kBlock * kTokenBytes)))
    return Fail(MLASIM_KUT_ERROR, "cudaMalloc of the V3.2 KV cache copy failed"), -1;
  ToV32Layout<<<static_cast<unsigned>(blocks * kBlock), 128, 0, stream>>>(
      static_cast<const uint8_t*>(c.kv_cache.data), c.kv_cache.row_stride, rows, c.kv_scale,
      static_cast<uint8_t*>(kv.p), blocks * kBlock);
  return blocks;
}

// FlashMLA's three launches with the parameters sparse_decode.h fills (strides in elements; the
// KV cache's in bytes, as for its 1-byte tensor).
int Launch(const mlasim_kut_call& c, const Lists& l, int64_t blocks, cudaStream_t stream) {
  const int32_t B = c.batch, H = c.num_heads, s_q = l.s_q, width = l.width;
  int num_sms = 0;
  cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, c.device);
  const int parts = std::max(num_sms / s_q / (H / 64), 1);
  if (parts > kMaxSmParts)
    return Fail(MLASIM_KUT_UNSUPPORTED,
                std::to_string(parts) + " SM parts (the combine runs up to 160)");
  Buffers& o = Owned();
  const int64_t splits = int64_t{B} + parts, rows_h = int64_t{s_q} * H;
  if (!o.meta.Reserve(sizeof(DecodingSchedMeta) * parts) || !o.num_splits.Reserve(4 * (B + 1)) ||
      !o.lse_accum.Reserve(4 * splits * rows_h) || !o.o_accum.Reserve(4 * splits * rows_h * kDv))
    return Fail(MLASIM_KUT_ERROR,
                "cudaMalloc of FlashMLA's scheduler or accumulator buffers failed");
  auto* meta = static_cast<DecodingSchedMeta*>(o.meta.p);
  auto* num_splits = static_cast<int*>(o.num_splits.p);
  GetDecodeSchedMetaParams sp{B,       s_q,     kTopkBlock, kFixedOverhead, width, 0,     nullptr,
                              nullptr, nullptr, meta,       num_splits,     parts, stream};
  smxx::decode::run_get_decoding_sched_meta_kernel(sp);

  SparseAttnDecodeParams p{};
  const float scale = c.softmax_scale * c.q_scale;  // kv_scale is in the dequantised cache
  p.b = B, p.s_q = s_q, p.h_q = H, p.h_kv = 1, p.d_qk = kD, p.d_v = kDv;
  p.sm_scale = scale, p.sm_scale_div_log2 = static_cast<float>(scale * M_LOG2E);
  p.num_blocks = static_cast<int>(blocks), p.page_block_size = kBlock, p.topk = width;
  p.model_type = ModelType::V32;
  p.q = static_cast<cutlass::bfloat16_t*>(c.q.data);
  p.kv = static_cast<cutlass::bfloat16_t*>(o.kv.p);
  p.indices = static_cast<int*>(o.indices.p);
  p.lse = static_cast<float*>(c.lse.data);
  p.out = static_cast<cutlass::bfloat16_t*>(c.o.data);
  p.stride_q_b = static_cast<int>(rows_h * kD), p.stride_q_s_q = H * kD, p.stride_q_h_q = kD;
  p.stride_kv_block = kBlock * kTokenBytes, p.stride_kv_row = kTokenBytes;
  p.stride_indices_b = s_q * width, p.stride_indices_s_q = width;
  p.stride_lse_b = static_cast<int>(rows_h), p.stride_lse_s_q = H;
  p.stride_o_b = static_cast<int>(rows_h * kDv), p.stride_o_s_q = H * kDv, p.stride_o_h_q = kDv;
  p.stream = stream;
  p.lse_accum = static_cast<float*>(o.lse_accum.p);
  p.o_accum = static_cast<float*>(o.o_accum.p);
  p.stride_lse_accum_split = static_cast<int>(rows_h), p.stride_lse_accum_s_q = H;
  p.stride_o_accum_split = static_cast<int>(rows_h * kDv), p.stride_o_accum_s_q = H * kDv;
  p.stride_o_accum_h_q = kDv;
  p.tile_scheduler_metadata_ptr = meta, p.num_splits_ptr = num_splits, p.num_sm_parts = parts;
  if (H == 64)
    sm90::decode::sparse_fp8::run_flash_splitkv_mla_fp8_sparse_kernel<ModelType::V32, 64>(p);
  else
    sm90::decode::sparse_fp8::run_flash_splitkv_mla_fp8_sparse_kernel<ModelType::V32, 128>(p);

  CombineParams cp{B,
                   s_q,
                   H,
                   kDv,
                   p.lse,
                   c.o.data,
                   p.stride_lse_b,
                   p.stride_lse_s_q,
                   p.stride_o_b,
                   p.stride_o_s_q,
                   p.stride_o_h_q,
                   p.lse_accum,
                   p.o_accum,
                   p.stride_lse_accum_split,
                   p.stride_lse_accum_s_q,
                   p.stride_o_accum_split,
                   p.stride_o_accum_s_q,
                   p.stride_o_accum_h_q,
                   meta,
                   num_splits,
                   parts,
                   nullptr,
                   stream};
  smxx::decode::run_flash_mla_combine_kernel<cutlass::bfloat16_t>(cp);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return Fail(MLASIM_KUT_ERROR, std::string("launch: ") + cudaGetErrorString(e));
  return MLASIM_KUT_OK;
}

int Run(const mlasim_kut_call* call) {
  bool done = false;
  if (int rc = kut_cuda::EnterDecode(call, &done); rc != MLASIM_KUT_OK || done) return rc;
  const mlasim_kut_call& c = *call;
  if (const std::string why = Unrunnable(c); !why.empty()) return Fail(MLASIM_KUT_UNSUPPORTED, why);
  if (c.batch < 0) return Fail(MLASIM_KUT_UNSUPPORTED, "a negative batch");
  if (c.batch == 0) return MLASIM_KUT_OK;  // no request: FlashMLA is not called (it needs b > 0)
  cudaStream_t stream = static_cast<cudaStream_t>(c.stream);
  Lists lists;
  if (int rc = Translate(c, &lists); rc != MLASIM_KUT_OK) return rc;
  // (a copy from pageable memory has read the lists by the time cudaMemcpyAsync returns)
  if (int rc = kut_cuda::Upload(Owned().indices, lists.indices, stream); rc != MLASIM_KUT_OK)
    return rc;
  const int64_t blocks = ConvertCache(c, stream);
  if (blocks < 0) return MLASIM_KUT_UNSUPPORTED;
  return Launch(c, lists, blocks, stream);
}

int Describe(const char* config, mlasim_kut_info* info) {
  if (config != nullptr && config[0] != '\0')
    return Fail(MLASIM_KUT_ERROR, "flashmla-sparse-fp8 takes no --kernel-config");
  info->abi_version = MLASIM_KUT_ABI_VERSION;
  info->name = "flashmla-sparse-fp8-v32 (9241ae3)";
  info->ops = MLASIM_KUT_OP_BIT(MLASIM_KUT_OP_DECODE) | MLASIM_KUT_OP_BIT(MLASIM_KUT_OP_REDUCE);
  info->memory = MLASIM_KUT_MEMORY_DEVICE;
  info->q_dtypes = info->o_dtypes = MLASIM_KUT_DTYPE_BIT(MLASIM_KUT_BF16);
  info->kv_dtypes = MLASIM_KUT_DTYPE_BIT(MLASIM_KUT_FP8_E4M3FN);
  info->heads_multiple = 64;
  info->max_heads = 128;
  info->head_dim_qk_multiple = info->max_head_dim_qk = kD;
  info->head_dim_v_multiple = info->max_head_dim_v = kDv;
  info->max_page_size = 1;
  info->page_size_multiple = 1;
  info->dense = 1;  // page-size-1 calls: aiter's form of a sparse step (lists of cache rows)
  info->sparse = 1;
  info->decode_contract = "builtin:flashmla_sparse";
  info->reduce_contract = "builtin:in_decode";
  return MLASIM_KUT_OK;
}

}  // namespace
}  // namespace mlasim::kut_flashmla_sparse

MLASIM_KUT_CUDA_ADAPTER_EXPORTS(mlasim::kut_flashmla_sparse)
