// kernels/kut/flashinfer_kut.cu - libmlasim_kut_flashinfer.so: FlashInfer's fa3 MLA decode for
// sm90 (flashinfer-ai/flashinfer fb28d72: MLAPlan + mla::BatchMLAPageAttentionHopper, compiled
// from the checkout -DMLASIM_FLASHINFER_DIR names; nothing of FlashInfer is in this repository)
// behind the kernel-under-test ABI of kernels/mlasim_kut.h (docs/kernel-under-test.md "FlashInfer
// adapter").
//
// One decode call does what FlashInfer's own host code does (csrc/batch_mla_plan.cu and
// csrc/batch_mla_sm90_run.cu): MLAPlan on the host over qo_indptr (tokens), kv_indptr (pages) and
// kv_len (tokens) - its plan, which replaces aiter's work_info (the call's aiter plan buffers are
// ignored) - copied by MLAPlan into the adapter's int workspace, then one cooperative launch of
// the fa3 kernel, which merges its splits itself after a grid sync (the reduce call is a no-op).
// kv_len[b] = (pages - 1) * page_size + kv_last_page_lens[b] (0 for no pages) is the only
// translated input; q (q_nope = columns 0..511, q_pe = 512..575 of the same rows), the KV cache
// (ckv and kpe the same way), kv_indices (the kernel reads the page table itself: sentinels and
// guard pages see those reads), o and lse (natural log: return_lse_base_on_e = true) are passed
// zero-copy. The workspaces (8 MiB int + a pinned host copy, 128 MiB float, as FlashInfer's
// tests size them) are the adapter's. UNSUPPORTED (reason in mlasim_kut_last_error): sparse
// calls, dtypes other than bf16, head dims other than 576 / 512, page sizes other than 1 and 64,
// a KV scale other than 1, strides other than contiguous, a device other than sm_90.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "flashinfer/attention/mla_hopper.cuh"
#include "flashinfer/attention/mla_params.cuh"
#include "flashinfer/attention/scheduler.cuh"
#include "kernels/mlasim_kut.h"

namespace mlasim::kut_flashinfer {
namespace {

constexpr int32_t kD = 576, kDv = 512, kDpe = kD - kDv;
constexpr int32_t kMaxHeads = 128;
constexpr size_t kIntBytes = size_t{8} << 20, kFloatBytes = size_t{128} << 20;

using Params = flashinfer::MLAParams<nv_bfloat16, nv_bfloat16, nv_bfloat16, int32_t>;

thread_local std::string g_error;

int Fail(int code, std::string why) {
  g_error = std::move(why);
  return code;
}

// The workspaces, allocated at the first call and kept (one worker runs one call at a time).
struct Workspace {
  void *int_buf = nullptr, *float_buf = nullptr, *pinned = nullptr;
  bool Ready() {
    if (int_buf != nullptr) return true;
    if (cudaMalloc(&int_buf, kIntBytes) != cudaSuccess ||
        cudaMalloc(&float_buf, kFloatBytes) != cudaSuccess ||
        cudaMallocHost(&pinned, kIntBytes) != cudaSuccess) {
      int_buf = nullptr;
      return false;
    }
    return true;
  }
};
Workspace& Owned() {
  static Workspace w;
  return w;
}

bool Aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

// Int32 elements [0, n) of `t` on the host; false (reason set) when `t` holds fewer.
bool Download(const mlasim_kut_tensor& t, int64_t n, const char* name, std::vector<int32_t>* out) {
  out->assign(static_cast<size_t>(std::max<int64_t>(n, 0)), 0);
  if (n <= 0) return true;
  if (t.data == nullptr || n * 4 > static_cast<int64_t>(t.bytes))
    return Fail(MLASIM_KUT_UNSUPPORTED,
                std::string(name) + " holds fewer than " + std::to_string(n) + " elements"),
           false;
  if (cudaMemcpy(out->data(), t.data, static_cast<size_t>(n) * 4, cudaMemcpyDeviceToHost) !=
      cudaSuccess)
    return Fail(MLASIM_KUT_ERROR, std::string("copying ") + name + " to the host failed"), false;
  return true;
}

std::string Unrunnable(const mlasim_kut_call& c) {
  const auto s = [](int64_t v) { return std::to_string(v); };
  if (c.topk >= 0) return "sparse top-k calls (FlashInfer's MLA decode is paged dense)";
  if (c.num_kv_heads != 1) return s(c.num_kv_heads) + " KV heads (MLA: 1)";
  if (c.head_dim_qk != kD || c.head_dim_v != kDv)
    return "head dims " + s(c.head_dim_qk) + "/" + s(c.head_dim_v) +
           " (the adapter instantiates 512 + 64 / 512: --head-dims 576,512)";
  if (c.page_size != 1 && c.page_size != 64)
    return "page size " + s(c.page_size) + " (the adapter runs pages of 1 and 64 tokens)";
  if (c.num_heads < 1 || c.num_heads > kMaxHeads) return s(c.num_heads) + " heads (1..128)";
  if (c.q.dtype != MLASIM_KUT_BF16 || c.kv_cache.dtype != MLASIM_KUT_BF16 ||
      c.o.dtype != MLASIM_KUT_BF16 || c.lse.dtype != MLASIM_KUT_FP32)
    return "dtypes other than bf16 q / KV / o and fp32 lse";
  if (c.kv_scale != 1.0f) return "a KV scale other than 1 (the bf16 path has none)";
  const int64_t H = c.num_heads;
  if (c.q.row_stride != H * kD * 2 || (H > 1 && c.q.head_stride != kD * 2) ||
      c.o.row_stride != H * kDv * 2 || (H > 1 && c.o.head_stride != kDv * 2) ||
      c.lse.row_stride != H * 4 || (H > 1 && c.lse.head_stride != 4) ||
      c.kv_cache.row_stride != kD * 2)
    return "strides other than contiguous [rows, heads, dim] q / o / lse and [tokens, 576] KV";
  if (!Aligned16(c.q.data) || !Aligned16(c.o.data) || !Aligned16(c.kv_cache.data))
    return "q, o or the KV cache not 16-byte aligned";
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, c.device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, c.device);
  if (major != 9 || minor != 0)
    return "a device of compute capability " + s(major) + "." + s(minor) + " (fa3 is sm_90a)";
  return "";
}

// MLAPlan's inputs on the host: qo_indptr (tokens), kv_indptr (pages), kv_len (tokens).
int PlanInputs(const mlasim_kut_call& c, std::vector<int32_t>* qo, std::vector<int32_t>* kv,
               std::vector<int32_t>* kv_len) {
  std::vector<int32_t> last;
  const int32_t B = c.batch;
  if (!Download(c.qo_indptr, B + 1, "qo_indptr", qo) ||
      !Download(c.kv_indptr, B + 1, "kv_indptr", kv) ||
      !Download(c.kv_last_page_lens, B, "kv_last_page_lens", &last))
    return MLASIM_KUT_UNSUPPORTED;
  for (int32_t b = 0; b < B; ++b) {
    const int32_t n = (*kv)[b + 1] - (*kv)[b];
    if ((*qo)[b + 1] < (*qo)[b] || n < 0 || (n > 0 && (last[b] < 1 || last[b] > c.page_size)))
      return Fail(MLASIM_KUT_UNSUPPORTED, "request " + std::to_string(b) +
                                              ": negative q rows or pages, or a last page of " +
                                              std::to_string(last[b]) + " tokens");
    kv_len->push_back(n == 0 ? 0 : (n - 1) * c.page_size + last[b]);
  }
  return MLASIM_KUT_OK;
}

Params MakeParams(const mlasim_kut_call& c, const flashinfer::MLAPlanInfo& plan, Workspace& w) {
  using flashinfer::GetPtrFromBaseOffset;
  auto ints = [&](int64_t offset) { return GetPtrFromBaseOffset<int32_t>(w.int_buf, offset); };
  Params p{};
  auto* q = static_cast<nv_bfloat16*>(c.q.data);
  auto* kv = static_cast<nv_bfloat16*>(c.kv_cache.data);
  p.q_nope = q, p.q_pe = q + kDv, p.ckv = kv, p.kpe = kv + kDv;
  p.q_indptr = ints(plan.q_indptr_offset), p.kv_indptr = ints(plan.kv_indptr_offset);
  p.partial_indptr = ints(plan.partial_indptr_offset);
  p.kv_indices = static_cast<int32_t*>(c.kv_indices.data);
  p.q_len = ints(plan.q_len_offset), p.kv_len = ints(plan.kv_len_offset);
  p.q_start = ints(plan.q_start_offset), p.kv_start = ints(plan.kv_start_offset);
  p.kv_end = ints(plan.kv_end_offset), p.work_indptr = ints(plan.work_indptr_offset);
  p.merge_packed_offset_start = ints(plan.merge_packed_offset_start_offset);
  p.merge_packed_offset_end = ints(plan.merge_packed_offset_end_offset);
  p.merge_partial_packed_offset_start = ints(plan.merge_partial_packed_offset_start_offset);
  p.merge_partial_packed_offset_end = ints(plan.merge_partial_packed_offset_end_offset);
  p.merge_partial_stride = ints(plan.merge_partial_stride_offset);
  p.final_o = static_cast<nv_bfloat16*>(c.o.data);
  p.final_lse = static_cast<float*>(c.lse.data);
  p.partial_o = GetPtrFromBaseOffset<nv_bfloat16>(w.float_buf, plan.partial_o_offset);
  p.partial_lse = GetPtrFromBaseOffset<float>(w.float_buf, plan.partial_lse_offset);
  p.num_heads = flashinfer::uint_fastdiv(c.num_heads);
  p.block_size = flashinfer::uint_fastdiv(c.page_size);
  p.q_nope_stride_n = p.q_pe_stride_n = c.num_heads * kD;  // elements
  p.q_nope_stride_h = p.q_pe_stride_h = kD;
  p.ckv_stride_page = p.kpe_stride_page = c.page_size * kD;
  p.ckv_stride_n = p.kpe_stride_n = kD;
  p.o_stride_n = c.num_heads * kDv;
  p.o_stride_h = kDv;
  p.sm_scale = c.softmax_scale * c.q_scale;  // q enters only through q . k
  p.ckv_scale = p.kpe_scale = 1.f;
  p.ckv_scale_arr = nullptr;
  p.return_lse_base_on_e = true;  // mlasim's lse is natural log
  return p;
}

int Decode(const mlasim_kut_call& c) {
  std::vector<int32_t> qo, kv, kv_len;
  if (int rc = PlanInputs(c, &qo, &kv, &kv_len); rc != MLASIM_KUT_OK) return rc;
  Workspace& w = Owned();
  if (!w.Ready()) return Fail(MLASIM_KUT_ERROR, "allocating FlashInfer's workspaces failed");
  cudaStream_t stream = static_cast<cudaStream_t>(c.stream);
  const bool causal = c.causal != 0;
  flashinfer::MLAPlanInfo plan;
  try {
    const cudaError_t e = flashinfer::MLAPlan<int32_t>(
        w.float_buf, kFloatBytes, w.int_buf, w.pinned, kIntBytes, plan, qo.data(), kv.data(),
        kv_len.data(), static_cast<uint32_t>(c.batch), static_cast<uint32_t>(c.num_heads), kDv,
        causal, stream);
    if (e != cudaSuccess)
      return Fail(MLASIM_KUT_ERROR, std::string("MLAPlan: ") + cudaGetErrorString(e));
  } catch (const std::exception& e) {  // FLASHINFER_ERROR / FLASHINFER_CHECK throw
    return Fail(MLASIM_KUT_ERROR, std::string("MLAPlan refused the call: ") + e.what());
  }
  const Params p = MakeParams(c, plan, w);
  const auto bx = static_cast<uint32_t>(plan.num_blks_x),
             by = static_cast<uint32_t>(plan.num_blks_y);
  const cudaError_t e =
      causal
          ? flashinfer::mla::BatchMLAPageAttentionHopper<flashinfer::MaskMode::kCausal, kDv, kDpe>(
                p, bx, by, stream)
          : flashinfer::mla::BatchMLAPageAttentionHopper<flashinfer::MaskMode::kNone, kDv, kDpe>(
                p, bx, by, stream);
  if (e != cudaSuccess)
    return Fail(MLASIM_KUT_ERROR, std::string("launch: ") + cudaGetErrorString(e));
  return MLASIM_KUT_OK;
}

int Run(const mlasim_kut_call* call) {
  if (call == nullptr || call->abi_version != MLASIM_KUT_ABI_VERSION ||
      call->struct_bytes != sizeof(mlasim_kut_call))
    return Fail(MLASIM_KUT_ERROR, "a call of another ABI version or struct size");
  const mlasim_kut_call& c = *call;
  if (c.op == MLASIM_KUT_OP_REDUCE) return MLASIM_KUT_OK;  // merged inside the decode launch
  if (c.op != MLASIM_KUT_OP_DECODE) return Fail(MLASIM_KUT_UNSUPPORTED, "unknown operation");
  if (cudaSetDevice(c.device) != cudaSuccess)
    return Fail(MLASIM_KUT_ERROR, "cudaSetDevice(" + std::to_string(c.device) + ") failed");
  if (const std::string why = Unrunnable(c); !why.empty()) return Fail(MLASIM_KUT_UNSUPPORTED, why);
  if (c.batch < 0) return Fail(MLASIM_KUT_UNSUPPORTED, "a negative batch");
  if (c.batch == 0) return MLASIM_KUT_OK;  // MLAPlan divides by the batch size
  return Decode(c);
}

int Describe(const char* config, mlasim_kut_info* info) {
  if (config != nullptr && config[0] != '\0')
    return Fail(MLASIM_KUT_ERROR, "flashinfer-fa3-mla takes no --kernel-config");
  info->abi_version = MLASIM_KUT_ABI_VERSION;
  info->name = "flashinfer-fa3-mla (fb28d72)";
  info->ops = MLASIM_KUT_OP_BIT(MLASIM_KUT_OP_DECODE) | MLASIM_KUT_OP_BIT(MLASIM_KUT_OP_REDUCE);
  info->memory = MLASIM_KUT_MEMORY_DEVICE;
  info->q_dtypes = info->kv_dtypes = info->o_dtypes = MLASIM_KUT_DTYPE_BIT(MLASIM_KUT_BF16);
  info->heads_multiple = 1;
  info->max_heads = kMaxHeads;
  info->head_dim_qk_multiple = info->max_head_dim_qk = kD;
  info->head_dim_v_multiple = info->max_head_dim_v = kDv;
  info->max_page_size = 64;      // pages of 1 or 64 tokens: others are UNSUPPORTED at the call
  info->page_size_multiple = 0;  // page 1 is run: no multiple
  info->dense = 1;
  info->sparse = 0;
  info->decode_contract = "builtin:flashinfer_fa3";
  info->reduce_contract = "builtin:in_decode";
  return MLASIM_KUT_OK;
}

}  // namespace
}  // namespace mlasim::kut_flashinfer

#define MLASIM_KUT_EXPORT extern "C" __attribute__((visibility("default")))
MLASIM_KUT_EXPORT uint32_t mlasim_kut_abi_version(void) {
  return MLASIM_KUT_ABI_VERSION;
}
MLASIM_KUT_EXPORT int mlasim_kut_describe(const char* config, mlasim_kut_info* info) {
  return mlasim::kut_flashinfer::Describe(config, info);
}
MLASIM_KUT_EXPORT int mlasim_kut_run(const mlasim_kut_call* call) {
  return mlasim::kut_flashinfer::Run(call);
}
MLASIM_KUT_EXPORT const char* mlasim_kut_last_error(void) {
  return mlasim::kut_flashinfer::g_error.c_str();
}
