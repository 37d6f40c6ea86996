// kernels/kut/flashmla_kut.cu - libmlasim_kut_flashmla.so: FlashMLA's dense bf16 decode and
// combine (deepseek-ai/FlashMLA 9241ae3, compiled from the checkout -DMLASIM_FLASHMLA_DIR names;
// nothing of FlashMLA is in this repository) behind the kernel-under-test ABI of
// kernels/mlasim_kut.h, so that `mlasim fuzz --gpu sentinel|guard --kernel-under-test
// libmlasim_kut_flashmla.so` fuzzes code nobody here wrote (docs/kernel-under-test.md
// "FlashMLA adapter").
//
// One decode call runs what FlashMLA's own host code runs (csrc/api/dense_decode.h,
// dense_attn_decode_interface): its scheduler kernel (get_decoding_sched_meta: the plan, which
// replaces aiter's work_info; the call's aiter plan buffers are ignored), the dense decode
// (sm90 splitkv_mla) and the combine. The reduce call is a no-op: the combine ran inside the
// decode call. What FlashMLA's API takes and mlasim's call does not hold directly is translated
// here, into buffers the adapter owns:
//   - block_table [batch, max pages]: the flat page list kv_indices[kv_indptr[b] ..
//     kv_indptr[b+1]) copied row by row (FlashMLA reads the copy: its block-table reads are not
//     observed through mlasim's kv_indices buffer);
//   - seqlens_k [batch]: (pages - 1) * 64 + kv_last_page_lens[b] tokens (0 for no pages);
//   - the scheduler's DecodingSchedMeta [num_sm_parts] and num_splits [batch + 1], and the split
//     accumulators lse_accum [batch + num_sm_parts, s_q * h_q] and o_accum (512 more), fp32,
//     sized as dense_decode.h sizes them.
// q, the KV cache, o and lse are passed zero-copy: FlashMLA's packed row s * h_q + h of request b
// is mlasim's q / o row qo_indptr[b] + s, head h, and its lse [b, s_q, h_q] (natural log, +inf
// for a row that sees no key) is mlasim's lse [rows, heads], so sentinels and guard pages see
// every q, KV, o and lse access. A call FlashMLA cannot run is UNSUPPORTED with the reason in
// mlasim_kut_last_error: another dtype, head dims other than 576 / 512, a page size other than 64,
// sparse top-k, q lengths that differ between requests (FlashMLA takes one s_q), a KV scale other
// than 1, strides FlashMLA's layout cannot express, a device other than sm_90.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/kut/cuda_adapter.h"
#include "params.h"  // FlashMLA csrc/params.h
#include "sm90/decode/dense/splitkv_mla.h"
#include "smxx/decode/combine/combine.h"
#include "smxx/decode/get_decoding_sched_meta/get_decoding_sched_meta.h"

namespace mlasim::kut_flashmla {
namespace {

constexpr int32_t kPage = 64;  // FlashMLA's page_block_size (dense_decode.h: must be 64)
constexpr int32_t kD = 576;    // Config::HEAD_DIM_K (run_flash_splitkv_mla_kernel asserts it)
constexpr int32_t kDv = 512;   // Config::HEAD_DIM_V
constexpr int32_t kMaxHeads = 128;
constexpr int32_t kMaxSmParts = 160;  // the combine's largest NUM_SPLITS instantiation

using kut_cuda::Fail;
using kut_cuda::Scratch;

struct Buffers {
  Scratch block_table, seqlens, meta, num_splits, lse_accum, o_accum;
};
Buffers& Owned() {
  static Buffers b;  // one worker process runs one call at a time
  return b;
}

// The call's index inputs, copied to the host, and what FlashMLA's API is given from them.
struct Translated {
  int32_t batch = 0, s_q = 0, max_pages = 1;
  std::vector<int32_t> seqlens, block_table;
};

// Shapes, dtypes and strides FlashMLA's dense decode can run; "" when it can.
std::string Unrunnable(const mlasim_kut_call& c) {
  const auto s = [](int64_t v) { return std::to_string(v); };
  if (c.topk >= 0) return "sparse top-k calls (this adapter runs FlashMLA's dense decode)";
  if (c.num_kv_heads != 1) return s(c.num_kv_heads) + " KV heads (MLA: 1)";
  if (c.head_dim_qk != kD || c.head_dim_v != kDv)
    return "head dims " + s(c.head_dim_qk) + "/" + s(c.head_dim_v) +
           " (FlashMLA's dense decode is compiled for 576/512: --head-dims 576,512)";
  if (c.page_size != kPage) return "page size " + s(c.page_size) + " (FlashMLA needs 64)";
  if (c.num_heads < 1 || c.num_heads > kMaxHeads) return s(c.num_heads) + " heads (1..128)";
  if (c.q.dtype != MLASIM_KUT_BF16 || c.kv_cache.dtype != MLASIM_KUT_BF16 ||
      c.o.dtype != MLASIM_KUT_BF16 || c.lse.dtype != MLASIM_KUT_FP32)
    return "dtypes other than bf16 q / KV / o and fp32 lse";
  if (c.kv_scale != 1.0f) return "a KV scale other than 1 (FlashMLA's bf16 decode has none)";
  const int64_t H = c.num_heads;
  const bool q_ok = c.q.row_stride == H * kD * 2 && (H == 1 || c.q.head_stride == kD * 2);
  const bool o_ok = c.o.row_stride == H * kDv * 2 && (H == 1 || c.o.head_stride == kDv * 2);
  const bool lse_ok = c.lse.row_stride == H * 4 && (H == 1 || c.lse.head_stride == 4);
  const bool kv_ok = c.kv_cache.row_stride == kD * 2;
  if (!q_ok || !o_ok || !lse_ok || !kv_ok)
    return "strides other than contiguous [rows, heads, dim] q / o / lse and [tokens, 576] KV";
  if (!kut_cuda::Aligned16(c.q.data) || !kut_cuda::Aligned16(c.o.data) ||
      !kut_cuda::Aligned16(c.kv_cache.data))
    return "q, o or the KV cache not 16-byte aligned (TMA needs it)";
  return kut_cuda::NotSm90(c.device, "FlashMLA's dense decode");
}

// qo_indptr / kv_indptr / kv_last_page_lens / kv_indices into FlashMLA's s_q, seqlens_k and
// block table. Returns MLASIM_KUT_OK or the code Fail set.
int Translate(const mlasim_kut_call& c, Translated* t) {
  const int32_t B = c.batch;
  std::vector<int32_t> qo, kv, last, pages;
  int code = MLASIM_KUT_OK;
  if (!kut_cuda::Download(c.qo_indptr, 0, B + 1, "qo_indptr", &qo, &code) ||
      !kut_cuda::Download(c.kv_indptr, 0, B + 1, "kv_indptr", &kv, &code) ||
      !kut_cuda::Download(c.kv_last_page_lens, 0, B, "kv_last_page_lens", &last, &code))
    return code;
  t->batch = B;
  t->s_q = qo[1] - qo[0];
  if (qo[0] != 0 || t->s_q < 1)
    return Fail(MLASIM_KUT_UNSUPPORTED, "qo_indptr must start at 0 with a request of >= 1 row");
  for (int32_t b = 0; b < B; ++b) {
    if (qo[b + 1] - qo[b] != t->s_q)
      return Fail(MLASIM_KUT_UNSUPPORTED,
                  "ragged q lengths (request 0 has " + std::to_string(t->s_q) + " rows, request " +
                      std::to_string(b) + " " + std::to_string(qo[b + 1] - qo[b]) +
                      "): FlashMLA takes one s_q for every request");
    const int32_t n = kv[b + 1] - kv[b];
    if (n < 0 || (n > 0 && (last[b] < 1 || last[b] > kPage)))
      return Fail(MLASIM_KUT_UNSUPPORTED, "request " + std::to_string(b) + ": " +
                                              std::to_string(n) + " pages, last page of " +
                                              std::to_string(last[b]) + " tokens");
    t->max_pages = std::max(t->max_pages, n);
    t->seqlens.push_back(n == 0 ? 0 : (n - 1) * kPage + last[b]);
  }
  if (int64_t{qo[B]} * c.num_heads > (int64_t{1} << 31) / kD)
    return Fail(MLASIM_KUT_UNSUPPORTED, "more q rows than FlashMLA's int strides hold");
  if (!kut_cuda::Download(c.kv_indices, kv[0], kv[B] - kv[0], "kv_indices", &pages, &code))
    return code;
  t->block_table.assign(static_cast<size_t>(B) * t->max_pages, 0);
  for (int32_t b = 0; b < B; ++b)
    std::copy(pages.begin() + (kv[b] - kv[0]), pages.begin() + (kv[b + 1] - kv[0]),
              t->block_table.begin() + static_cast<int64_t>(b) * t->max_pages);
  return MLASIM_KUT_OK;
}

// FlashMLA's three launches, with the parameters dense_decode.h fills (h_k = 1, so q_seq_per_hk
// = s_q * h_q and FlashMLA's row i = s * h_q + h).
int Launch(const mlasim_kut_call& c, const Translated& t) {
  cudaStream_t stream = static_cast<cudaStream_t>(c.stream);
  const int32_t B = t.batch, s_q = t.s_q, h_q = c.num_heads, q_seq = s_q * h_q;
  int num_sms = 0;
  cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, c.device);
  const int parts = std::max(num_sms / ((q_seq + 63) / 64), 1);
  if (parts > kMaxSmParts)
    return Fail(MLASIM_KUT_UNSUPPORTED,
                std::to_string(parts) + " SM parts (the combine runs up to 160)");
  Buffers& o = Owned();
  const size_t splits = static_cast<size_t>(B) + parts;
  if (!o.meta.Reserve(sizeof(DecodingSchedMeta) * parts) || !o.num_splits.Reserve(4 * (B + 1)) ||
      !o.lse_accum.Reserve(4 * splits * q_seq) || !o.o_accum.Reserve(4 * splits * q_seq * kDv))
    return Fail(MLASIM_KUT_ERROR,
                "cudaMalloc of FlashMLA's scheduler or accumulator buffers failed");
  if (int rc = kut_cuda::Upload(o.seqlens, t.seqlens, stream); rc != MLASIM_KUT_OK) return rc;
  if (int rc = kut_cuda::Upload(o.block_table, t.block_table, stream); rc != MLASIM_KUT_OK)
    return rc;
  auto* seqlens = static_cast<int*>(o.seqlens.p);
  auto* meta = static_cast<DecodingSchedMeta*>(o.meta.p);
  auto* num_splits = static_cast<int*>(o.num_splits.p);
  auto* lse_accum = static_cast<float*>(o.lse_accum.p);
  auto* o_accum = static_cast<float*>(o.o_accum.p);
  GetDecodeSchedMetaParams sp{B,       s_q,     kPage, 5,          -1,    -1,    nullptr,
                              nullptr, seqlens, meta,  num_splits, parts, stream};
  smxx::decode::run_get_decoding_sched_meta_kernel(sp);

  DenseAttnDecodeParams dp{};
  const float scale = c.softmax_scale * c.q_scale;  // q enters only through q . k
  dp.b = B, dp.s_q = s_q, dp.q_seq_per_hk = q_seq, dp.d = kD, dp.d_v = kDv;
  dp.h_q = h_q, dp.h_k = 1, dp.num_blocks = c.num_pages, dp.q_head_per_hk = h_q;
  dp.is_causal = c.causal != 0 && s_q > 1;  // dense_decode.h: s_q == 1 is never causal
  dp.scale_softmax = scale;
  dp.scale_softmax_log2 = static_cast<float>(scale * M_LOG2E);
  dp.q_ptr = c.q.data, dp.k_ptr = c.kv_cache.data, dp.o_ptr = c.o.data;
  dp.softmax_lse_ptr = static_cast<float*>(c.lse.data);
  dp.q_batch_stride = int64_t{q_seq} * kD, dp.q_row_stride = kD, dp.q_head_stride = kD;
  dp.k_batch_stride = int64_t{kPage} * kD, dp.k_row_stride = kD, dp.k_head_stride = kD;
  dp.o_batch_stride = int64_t{q_seq} * kDv, dp.o_row_stride = kDv;
  dp.o_head_stride = int64_t{q_seq} * kDv;
  dp.block_table = static_cast<int*>(o.block_table.p);
  dp.block_table_batch_stride = t.max_pages;
  dp.page_block_size = kPage, dp.seqlens_k_ptr = seqlens;
  dp.tile_scheduler_metadata_ptr = meta, dp.num_sm_parts = parts;
  dp.num_splits_ptr = num_splits, dp.total_num_splits = static_cast<int>(splits);
  dp.softmax_lseaccum_ptr = lse_accum, dp.oaccum_ptr = o_accum, dp.stream = stream;
  sm90::run_flash_splitkv_mla_kernel<cutlass::bfloat16_t>(dp);

  CombineParams cp{B,           s_q,       h_q,     kDv,         dp.softmax_lse_ptr,
                   c.o.data,    q_seq,     h_q,     q_seq * kDv, h_q * kDv,
                   kDv,         lse_accum, o_accum, q_seq,       h_q,
                   q_seq * kDv, h_q * kDv, kDv,     meta,        num_splits,
                   parts,       nullptr,   stream};
  smxx::decode::run_flash_mla_combine_kernel<cutlass::bfloat16_t>(cp);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    return Fail(MLASIM_KUT_ERROR, std::string("launch: ") + cudaGetErrorString(e));
  return MLASIM_KUT_OK;
}

int Run(const mlasim_kut_call* call) {
  bool done = false;  // a reduce call is a no-op: the combine ran in the decode call
  if (int rc = kut_cuda::EnterDecode(call, &done); rc != MLASIM_KUT_OK || done) return rc;
  const mlasim_kut_call& c = *call;
  if (const std::string why = Unrunnable(c); !why.empty()) return Fail(MLASIM_KUT_UNSUPPORTED, why);
  if (c.batch < 0) return Fail(MLASIM_KUT_UNSUPPORTED, "a negative batch");
  if (c.batch == 0) return MLASIM_KUT_OK;  // no request: FlashMLA is not called (it needs b > 0)
  Translated t;
  if (int rc = Translate(c, &t); rc != MLASIM_KUT_OK) return rc;
  return Launch(c, t);
}

int Describe(const char* config, mlasim_kut_info* info) {
  if (config != nullptr && config[0] != '\0')
    return Fail(MLASIM_KUT_ERROR, "flashmla-dense-bf16 takes no --kernel-config");
  info->abi_version = MLASIM_KUT_ABI_VERSION;
  info->name = "flashmla-dense-bf16 (9241ae3)";
  info->ops = MLASIM_KUT_OP_BIT(MLASIM_KUT_OP_DECODE) | MLASIM_KUT_OP_BIT(MLASIM_KUT_OP_REDUCE);
  info->memory = MLASIM_KUT_MEMORY_DEVICE;
  info->q_dtypes = info->kv_dtypes = info->o_dtypes = MLASIM_KUT_DTYPE_BIT(MLASIM_KUT_BF16);
  info->heads_multiple = 1;
  info->max_heads = kMaxHeads;
  info->head_dim_qk_multiple = info->max_head_dim_qk = kD;
  info->head_dim_v_multiple = info->max_head_dim_v = kDv;
  info->max_page_size = kPage;
  info->page_size_multiple = kPage;
  info->dense = 1;
  info->sparse = 0;
  info->decode_contract = "builtin:flashmla_dense";
  info->reduce_contract = "builtin:in_decode";
  return MLASIM_KUT_OK;
}

}  // namespace
}  // namespace mlasim::kut_flashmla

MLASIM_KUT_CUDA_ADAPTER_EXPORTS(mlasim::kut_flashmla)
