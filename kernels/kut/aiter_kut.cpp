// kernels/kut/aiter_kut.cpp - libmlasim_kut_aiter.so: aiter's real persistent MLA decode on AMD MI
// hardware behind the kernel-under-test ABI of kernels/mlasim_kut.h (docs/kut-aiter.md).
//
//   run(DECODE) -> aiter's mla_decode_stage1_asm_fwd   (csrc/py_itfs_cu/asm_mla.cu, C linkage,
//                  built by aiter's JIT into module_mla_asm.so), persistent mode
//   run(REDUCE) -> aiter's mla_reduce_v1               (csrc/kernels/mla/reduce.cu, declared in
//                  csrc/include/mla_reduce.h, built into module_mla_reduce.so)
//
// The adapter translates mlasim_kut_call's tensors into aiter_tensor_t views (no copies) and owns
// two small device buffers per device: the per-tensor q / kv scales (aiter takes them as [1]
// fp32 device tensors) and the work metadata (the two pointers work_indptr, work_info that
// aiter's asm entry otherwise copies into a fresh hipMalloc on every call and never frees).
//
// Built only for GPU_BACKEND=HIP with -DMLASIM_AITER_DIR (a full aiter checkout) and
// -DMLASIM_AITER_JIT_DIR (aiter's built modules), cmake/AiterKut.cmake. The AMD compile check
// (AMD_DEVICE_CHECK) compiles this file for AMD_CHECK_ARCHS against the aiter headers given;
// headers the pinned archive lacks (aiter_tensor.h, aiter_stream.h) then come from
// tests/kut/aiter_shim/. Host code only: it launches nothing itself.
//
// Config (--kernel-config, kernels/kut/kut_config.h): variant=asm (the only stage-1 kernel this
// adapter calls), heads=16|any, each at most once.
// Shapes: dense only; 16 heads (heads=any: multiples of 8 up to 128); num_kv_heads 1; head
// dims 576 / 512; page size a power of two; bf16 or
// fp8 q, bf16 or fp8 KV (fp8 q needs fp8 KV), bf16 o; contiguous rows and heads. aiter's own
// dispatch (asm_mla.cu) decides which head counts and q lengths have a kernel on the device's
// arch; a call it has none for fails inside aiter (docs/kut-aiter.md says how that surfaces).
#include <hip/hip_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <mutex>
#include <optional>
#include <string>

#include "aiter_stream.h"  // aiter::setCurrentHIPStream: mla_reduce_v1 launches on it
#include "aiter_tensor.h"  // aiter_tensor_t, AiterDtype
#include "kernels/kut/kut_config.h"
#include "kernels/mlasim_kut.h"
#include "mla.h"         // MlaWorkInfo, MlaPartialTileInfo: the plan rows aiter's kernels read
#include "mla_reduce.h"  // mla_reduce_v1

// aiter's stage-1 entry point has C linkage and no header (aiter/ops/attention.py loads it with
// ctypes from module_mla_asm.so); this declaration follows its definition in
// csrc/py_itfs_cu/asm_mla.cu, and the kut_aiter_signature test compares the two parameter lists
// type by type. Parameters: q, kv cache, qo_indptr, kv_indptr, kv page indices, kv last page
// lengths, split indptr (null: persistent), work metadata, work_indptr, work_info, max q length,
// page size, kv heads, softmax scale, partial o, partial lse, o, lse, q scale, kv scale,
// context-parallel global kv_indptr / world size / rank, split-count scratch and its switch,
// causal, stream.
extern "C" void mla_decode_stage1_asm_fwd(
    aiter_tensor_t* q, aiter_tensor_t* kv, aiter_tensor_t* qo_indptr, aiter_tensor_t* kv_indptr,
    aiter_tensor_t* kv_page_indices, aiter_tensor_t* kv_last_page_lens,
    aiter_tensor_t* num_kv_splits_indptr, aiter_tensor_t* work_meta_data,
    aiter_tensor_t* work_indptr, aiter_tensor_t* work_info_set, int max_seqlen_q, int page_size,
    int nhead_kv, float softmax_scale, aiter_tensor_t* split_data, aiter_tensor_t* split_lse,
    aiter_tensor_t* output, aiter_tensor_t* lse, aiter_tensor_t* q_scale, aiter_tensor_t* kv_scale,
    aiter_tensor_t* g_kv_indptr, int cp_world_size, int cp_rank, aiter_tensor_t* valid_split_count,
    int use_valid_split_count_reduce, int causal, hipStream_t stream);

// The ABI's work_info and reduce_final_map columns are aiter's structs, field for field.
static_assert(sizeof(MlaWorkInfo) == 8 * sizeof(int32_t), "work_info rows are 8 int32");
static_assert(offsetof(MlaWorkInfo, batch_idx) == 0 && offsetof(MlaWorkInfo, partial_qo_loc) == 4 &&
                  offsetof(MlaWorkInfo, qo_start) == 8 && offsetof(MlaWorkInfo, qo_end) == 12 &&
                  offsetof(MlaWorkInfo, kv_start) == 16 && offsetof(MlaWorkInfo, kv_end) == 20 &&
                  offsetof(MlaWorkInfo, kv_offset) == 24,
              "work_info columns: batch_idx, partial_qo_loc, qo_start, qo_end, kv_start, kv_end, "
              "kv_offset, pad (kernels/mlasim_kut.h)");
static_assert(sizeof(MlaPartialTileInfo) == 2 * sizeof(int32_t) &&
                  offsetof(MlaPartialTileInfo, q_start) == 0 &&
                  offsetof(MlaPartialTileInfo, q_end) == 4,
              "reduce_final_map rows: q_start, q_end");

namespace mlasim::kut_aiter {
namespace {

constexpr int kHeadDimQk = 576;  // aiter's asm MLA kernels: 512 latent + 64 rope
constexpr int kHeadDimV = 512;
constexpr int kMaxHeads = 128;
constexpr int kMetaSlots = 10;  // uint64 slots of aiter's work metadata (asm_mla.cu allocates 10)

thread_local std::string g_error;

int Fail(int code, std::string why) {
  g_error = std::move(why);
  return code;
}

// Config (comma-separated): variant=asm (the default and the only stage-1 kernel called here;
// opus and hk are other aiter entry points) and heads=16|any. heads=16 (default): only 16 heads
// per call, the shape aiter/mla.py passes to stage 1 unchanged on every arch (it folds 32..128
// heads into 16 in Python, which this adapter does not). heads=any: multiples of 8 up to 128
// go to aiter's dispatch as they are (docs/kut-aiter.md: on gfx942, bf16 with 128 heads picks
// a non-persistent kernel for the persistent arguments).
struct Config {
  bool any_heads = false;
};

// Parses the config (kernels/kut/kut_config.h, AiterKeys), each key at most once. False with the
// reason in g_error for anything else.
bool ParseConfig(const char* text, Config* c) {
  using namespace kut_config;
  std::vector<int64_t> v;
  std::string why;
  if (!Parse(text, AiterKeys(), &v, &why)) return Fail(MLASIM_KUT_UNSUPPORTED, why), false;
  c->any_heads = v[kAiterHeads] == 1;
  return true;
}

// A view of `data` with the given shape and strides (elements), as aiter's tensors describe
// memory (aiter csrc/include/aiter_tensor.h: pointer, element count, dims, sizes, strides, dtype,
// device).
aiter_tensor_t View(void* data, AiterDtype dtype, int device, std::initializer_list<int64_t> shape,
                    std::initializer_list<int64_t> strides) {
  aiter_tensor_t t;
  std::memset(&t, 0, sizeof(t));
  t.ptr = data;
  t.ndim = static_cast<int>(shape.size());
  size_t numel = 1;
  int d = 0;
  for (int64_t s : shape) t.shape[d++] = s, numel *= static_cast<size_t>(s);
  d = 0;
  for (int64_t s : strides) t.strides[d++] = s;
  t.numel_ = numel;
  t.dtype_ = dtype;
  t.device_id = device;
  return t;
}

// An int32 vector of `n` entries (the index and plan buffers).
aiter_tensor_t Ints(const mlasim_kut_tensor& b, int64_t n, int device) {
  return View(b.data, AITER_DTYPE_i32, device, {n}, {1});
}

AiterDtype ToAiter(int32_t dtype) {
  switch (dtype) {
    case MLASIM_KUT_BF16: return AITER_DTYPE_bf16;
    case MLASIM_KUT_FP16: return AITER_DTYPE_fp16;
    case MLASIM_KUT_FP32: return AITER_DTYPE_fp32;
    case MLASIM_KUT_FP8_E4M3FN: return AITER_DTYPE_fp8;
    default: return AITER_DTYPE_i32;
  }
}

int ElementBytes(int32_t dtype) {
  return dtype == MLASIM_KUT_FP8_E4M3FN ? 1 : dtype == MLASIM_KUT_FP32 ? 4 : 2;
}

// Rows of `heads` x `cols` elements with no gaps (aiter's kernels take base pointers only).
bool Dense(const mlasim_kut_tensor& t) {
  const int64_t e = ElementBytes(t.dtype);
  return t.row_stride == int64_t{t.heads} * t.cols * e &&
         (t.heads <= 1 || t.head_stride == int64_t{t.cols} * e);
}

std::string UnsupportedShape(const mlasim_kut_call& c, const Config& cfg) {
  if (c.topk >= 0) return "dense calls only (aiter's sparse MLA decode is another entry point)";
  if (c.num_kv_heads != 1) return "num_kv_heads must be 1 (asm_mla.cu checks it)";
  if (c.head_dim_qk != kHeadDimQk || c.head_dim_v != kHeadDimV)
    return "head dims must be 576 / 512 (aiter's asm MLA kernels)";
  if (!cfg.any_heads && c.num_heads != 16)
    return "num_heads must be 16 (config heads=any passes other counts to aiter's dispatch)";
  if (c.num_heads < 1 || c.num_heads > kMaxHeads || c.num_heads % 8 != 0)
    return "num_heads must be a multiple of 8 up to 128";
  if (c.page_size < 1 || (c.page_size & (c.page_size - 1)) != 0)
    return "page_size must be a power of two (aiter passes log2(page_size) to the kernel)";
  if (c.max_seqlen_q < 1) return "max_seqlen_q must be at least 1";
  return "";
}

std::string UnsupportedTypes(const mlasim_kut_call& c) {
  const int32_t q = c.q.dtype, kv = c.kv_cache.dtype;
  if (q != MLASIM_KUT_BF16 && q != MLASIM_KUT_FP8_E4M3FN) return "q must be bf16 or fp8_e4m3fn";
  if (kv != MLASIM_KUT_BF16 && kv != MLASIM_KUT_FP8_E4M3FN) return "KV must be bf16 or fp8_e4m3fn";
  if (q == MLASIM_KUT_FP8_E4M3FN && kv != MLASIM_KUT_FP8_E4M3FN) return "fp8 q needs fp8 KV";
  if (c.o.dtype != MLASIM_KUT_BF16) return "o must be bf16";
  // aiter reads a scale only for an fp8 tensor (asm_mla.cu): a bf16 tensor's scale must be 1.
  if ((q == MLASIM_KUT_BF16 && c.q_scale != 1.0f) || (kv == MLASIM_KUT_BF16 && c.kv_scale != 1.0f))
    return "a bf16 tensor's scale must be 1 (aiter applies scales to fp8 tensors only)";
  if (!Dense(c.q) || !Dense(c.kv_cache) || !Dense(c.o) || !Dense(c.partial_o) ||
      !Dense(c.partial_lse) || (c.lse.data != nullptr && !Dense(c.lse)))
    return "q, KV, o, lse and the partial buffers must have contiguous rows and heads";
  return "";
}

// gfx94x (MI300) runs fp8 as e4m3fnuz (aiter/utility/dtypes.py); the ABI's fp8 is e4m3fn.
std::string UnsupportedOnDevice(const mlasim_kut_call& c) {
  if (c.q.dtype != MLASIM_KUT_FP8_E4M3FN && c.kv_cache.dtype != MLASIM_KUT_FP8_E4M3FN) return "";
  hipDeviceProp_t prop;
  if (hipGetDeviceProperties(&prop, c.device) != hipSuccess) return "hipGetDeviceProperties failed";
  if (std::strncmp(prop.gcnArchName, "gfx94", 5) == 0)
    return std::string("fp8 on ") + prop.gcnArchName +
           " is e4m3fnuz in aiter; the ABI's fp8 is e4m3fn (run bf16 KV there)";
  return "";
}

// Per-device scratch the adapter owns for the life of the worker process.
struct Scratch {
  float* scales = nullptr;   // [q_scale, kv_scale]
  uint64_t* meta = nullptr;  // kMetaSlots: work_indptr, work_info pointers, then zeros
};

std::mutex g_scratch_mutex;
Scratch g_scratch[64];

hipError_t GetScratch(int device, Scratch** out) {
  if (device < 0 || device >= 64) return hipErrorInvalidDevice;
  std::lock_guard<std::mutex> lock(g_scratch_mutex);
  Scratch& s = g_scratch[device];
  hipError_t e = hipSuccess;
  if (s.scales == nullptr) e = hipMalloc(reinterpret_cast<void**>(&s.scales), 2 * sizeof(float));
  if (e == hipSuccess && s.meta == nullptr)
    e = hipMalloc(reinterpret_cast<void**>(&s.meta), kMetaSlots * sizeof(uint64_t));
  *out = &s;
  return e;
}

// Writes the call's scales and plan pointers into the scratch, ordered before the decode on
// `stream` (and waited for, so the host staging may go away).
hipError_t StageScratch(const mlasim_kut_call& c, const Scratch& s, hipStream_t stream) {
  const float scales[2] = {c.q_scale, c.kv_scale};
  uint64_t meta[kMetaSlots] = {};
  meta[0] = reinterpret_cast<uint64_t>(c.work_indptr.data);
  meta[1] = reinterpret_cast<uint64_t>(c.work_info.data);
  hipError_t e = hipMemcpyAsync(s.scales, scales, sizeof(scales), hipMemcpyHostToDevice, stream);
  if (e == hipSuccess)
    e = hipMemcpyAsync(s.meta, meta, sizeof(meta), hipMemcpyHostToDevice, stream);
  if (e == hipSuccess) e = hipStreamSynchronize(stream);
  return e;
}

// The decode call's tensors as aiter's stage 1 takes them (aiter/mla.py, persistent path).
struct DecodeArgs {
  aiter_tensor_t q, kv, qo_indptr, kv_indptr, kv_indices, last_page_lens, meta, work_indptr,
      work_info, partial_o, partial_lse, o, lse, q_scale, kv_scale;
};

DecodeArgs MakeDecodeArgs(const mlasim_kut_call& c, const Scratch& s) {
  const int dev = c.device, H = c.num_heads, D = c.head_dim_qk, Dv = c.head_dim_v;
  const int64_t P = c.page_size, partial_rows = c.partial_o.rows;
  DecodeArgs a;
  a.q = View(c.q.data, ToAiter(c.q.dtype), dev, {c.q.rows, H, D}, {int64_t{H} * D, D, 1});
  a.kv = View(c.kv_cache.data, ToAiter(c.kv_cache.dtype), dev, {c.num_pages, P, 1, D},
              {P * D, D, D, 1});
  a.qo_indptr = Ints(c.qo_indptr, c.batch + 1, dev);
  a.kv_indptr = Ints(c.kv_indptr, c.batch + 1, dev);
  a.kv_indices = Ints(c.kv_indices, c.kv_indices.rows, dev);
  a.last_page_lens = Ints(c.kv_last_page_lens, c.batch, dev);
  a.meta = View(s.meta, AITER_DTYPE_u64, dev, {kMetaSlots}, {1});
  a.work_indptr = Ints(c.work_indptr, c.work_indptr.rows, dev);
  a.work_info = View(c.work_info.data, AITER_DTYPE_i32, dev, {c.work_info.rows, 8}, {8, 1});
  // aiter's logits / attn_lse: [partial rows, 1 split, heads, Dv] and [partial rows, 1, heads, 1].
  a.partial_o = View(c.partial_o.data, AITER_DTYPE_fp32, dev, {partial_rows, 1, H, Dv},
                     {int64_t{H} * Dv, int64_t{H} * Dv, Dv, 1});
  a.partial_lse =
      View(c.partial_lse.data, AITER_DTYPE_fp32, dev, {c.partial_lse.rows, 1, H, 1}, {H, H, 1, 1});
  a.o = View(c.o.data, AITER_DTYPE_bf16, dev, {c.o.rows, H, Dv}, {int64_t{H} * Dv, Dv, 1});
  a.lse = View(c.lse.data, AITER_DTYPE_fp32, dev, {c.lse.rows, H}, {H, 1});
  a.q_scale = View(s.scales, AITER_DTYPE_fp32, dev, {1}, {1});
  a.kv_scale = View(s.scales + 1, AITER_DTYPE_fp32, dev, {1}, {1});
  return a;
}

int RunDecode(const mlasim_kut_call& c, hipStream_t stream) {
  Scratch* s = nullptr;
  hipError_t e = GetScratch(c.device, &s);
  if (e == hipSuccess) e = StageScratch(c, *s, stream);
  if (e != hipSuccess)
    return Fail(MLASIM_KUT_ERROR, std::string("scratch: ") + hipGetErrorString(e));
  DecodeArgs a = MakeDecodeArgs(c, *s);
  const bool q_fp8 = c.q.dtype == MLASIM_KUT_FP8_E4M3FN;
  const bool kv_fp8 = c.kv_cache.dtype == MLASIM_KUT_FP8_E4M3FN;
  mla_decode_stage1_asm_fwd(&a.q, &a.kv, &a.qo_indptr, &a.kv_indptr, &a.kv_indices,
                            &a.last_page_lens, /*num_kv_splits_indptr=*/nullptr, &a.meta,
                            &a.work_indptr, &a.work_info, c.max_seqlen_q, c.page_size,
                            c.num_kv_heads, c.softmax_scale, &a.partial_o, &a.partial_lse, &a.o,
                            c.lse.data != nullptr ? &a.lse : nullptr, q_fp8 ? &a.q_scale : nullptr,
                            kv_fp8 ? &a.kv_scale : nullptr, /*g_kv_indptr=*/nullptr,
                            /*cp_world_size=*/1, /*cp_rank=*/0, /*valid_split_count=*/nullptr,
                            /*use_valid_split_count_reduce=*/0, c.causal, stream);
  e = hipGetLastError();
  if (e != hipSuccess)
    return Fail(MLASIM_KUT_ERROR, std::string("stage 1: ") + hipGetErrorString(e));
  return MLASIM_KUT_OK;
}

int RunReduce(const mlasim_kut_call& c, hipStream_t stream) {
  const int dev = c.device, H = c.num_heads, Dv = c.head_dim_v;
  const int64_t tiles = c.reduce_indptr.rows - 1;
  if (tiles <= 0) return MLASIM_KUT_OK;
  const aiter_tensor_t partial_o = View(c.partial_o.data, AITER_DTYPE_fp32, dev,
                                        {c.partial_o.rows, H, Dv}, {int64_t{H} * Dv, Dv, 1});
  const aiter_tensor_t partial_lse =
      View(c.partial_lse.data, AITER_DTYPE_fp32, dev, {c.partial_lse.rows, H}, {H, 1});
  const aiter_tensor_t indptr = Ints(c.reduce_indptr, c.reduce_indptr.rows, dev);
  const aiter_tensor_t final_map =
      View(c.reduce_final_map.data, AITER_DTYPE_i32, dev, {c.reduce_final_map.rows, 2}, {2, 1});
  const aiter_tensor_t partial_map = Ints(c.reduce_partial_map, c.reduce_partial_map.rows, dev);
  aiter_tensor_t o =
      View(c.o.data, AITER_DTYPE_bf16, dev, {c.o.rows, H, Dv}, {int64_t{H} * Dv, Dv, 1});
  std::optional<aiter_tensor_t> lse;
  if (c.lse.data != nullptr) lse = View(c.lse.data, AITER_DTYPE_fp32, dev, {c.lse.rows, H}, {H, 1});
  aiter::setCurrentHIPStream(stream);
  // num_kv_splits 0: aiter sizes its split scratch from the device's CU count (aiter/ops/attention.py).
  mla_reduce_v1(partial_o, partial_lse, indptr, final_map, partial_map, c.max_seqlen_q,
                /*num_kv_splits=*/0, o, lse);
  // aiter's current stream is a thread_local of an inline function: if module_mla_reduce.so holds
  // its own copy, the reduce ran on the null stream. Waiting for the device covers both.
  hipError_t e = hipDeviceSynchronize();
  if (e == hipSuccess) e = hipGetLastError();
  if (e != hipSuccess)
    return Fail(MLASIM_KUT_ERROR, std::string("reduce: ") + hipGetErrorString(e));
  return MLASIM_KUT_OK;
}

int RunChecked(const mlasim_kut_call& c) {
  Config cfg;
  if (!ParseConfig(c.config, &cfg)) return MLASIM_KUT_UNSUPPORTED;
  for (const std::string& why : {UnsupportedShape(c, cfg), UnsupportedTypes(c)})
    if (!why.empty()) return Fail(MLASIM_KUT_UNSUPPORTED, why);
  if (hipSetDevice(c.device) != hipSuccess) return Fail(MLASIM_KUT_ERROR, "hipSetDevice failed");
  if (const std::string why = UnsupportedOnDevice(c); !why.empty())
    return Fail(MLASIM_KUT_UNSUPPORTED, why);
  const hipStream_t stream = static_cast<hipStream_t>(c.stream);
  if (c.op == MLASIM_KUT_OP_DECODE) return RunDecode(c, stream);
  if (c.op == MLASIM_KUT_OP_REDUCE) return RunReduce(c, stream);
  return Fail(MLASIM_KUT_UNSUPPORTED, "unknown op " + std::to_string(c.op));
}

}  // namespace

int Describe(const char* config, mlasim_kut_info* info) {
  Config cfg;
  if (!ParseConfig(config, &cfg)) return MLASIM_KUT_UNSUPPORTED;
  const uint32_t bf16_fp8 =
      MLASIM_KUT_DTYPE_BIT(MLASIM_KUT_BF16) | MLASIM_KUT_DTYPE_BIT(MLASIM_KUT_FP8_E4M3FN);
  info->abi_version = MLASIM_KUT_ABI_VERSION;
  info->name = "aiter-asm-mla";
  info->ops = MLASIM_KUT_OP_BIT(MLASIM_KUT_OP_DECODE) | MLASIM_KUT_OP_BIT(MLASIM_KUT_OP_REDUCE);
  info->memory = MLASIM_KUT_MEMORY_DEVICE;
  info->q_dtypes = bf16_fp8;
  info->kv_dtypes = bf16_fp8;
  info->o_dtypes = MLASIM_KUT_DTYPE_BIT(MLASIM_KUT_BF16);
  info->heads_multiple = cfg.any_heads ? 8 : 16;
  info->max_heads = cfg.any_heads ? kMaxHeads : 16;
  info->head_dim_qk_multiple = kHeadDimQk;
  info->max_head_dim_qk = kHeadDimQk;
  info->head_dim_v_multiple = kHeadDimV;
  info->max_head_dim_v = kHeadDimV;
  info->max_page_size = 0;
  info->dense = 1;
  info->sparse = 0;
  // docs/contracts.md: the built-in asm contract is this kernel's (zero-KV items read q and
  // write their output rows); the reduce is aiter's own mla_reduce_v1.
  info->decode_contract = "builtin:asm";
  info->reduce_contract = "builtin:mla_reduce_v1";
  return MLASIM_KUT_OK;
}

int Run(const mlasim_kut_call* c) {
  if (c == nullptr || c->abi_version != MLASIM_KUT_ABI_VERSION ||
      c->struct_bytes != sizeof(mlasim_kut_call))
    return Fail(MLASIM_KUT_ERROR, "call descriptor of another ABI version or size");
  try {
    return RunChecked(*c);
  } catch (const std::exception& e) {  // aiter's AITER_CHECK throws when it may, else aborts
    return Fail(MLASIM_KUT_ERROR, std::string("aiter: ") + e.what());
  }
}

}  // namespace mlasim::kut_aiter

#define MLASIM_KUT_EXPORT extern "C" __attribute__((visibility("default")))

MLASIM_KUT_EXPORT uint32_t mlasim_kut_abi_version(void) {
  return MLASIM_KUT_ABI_VERSION;
}
MLASIM_KUT_EXPORT int mlasim_kut_describe(const char* config, mlasim_kut_info* info) {
  return mlasim::kut_aiter::Describe(config, info);
}
MLASIM_KUT_EXPORT int mlasim_kut_run(const mlasim_kut_call* call) {
  return mlasim::kut_aiter::Run(call);
}
MLASIM_KUT_EXPORT const char* mlasim_kut_last_error(void) {
  return mlasim::kut_aiter::g_error.c_str();
}
