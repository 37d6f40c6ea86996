// kernels/kut/gpu_kut.hip - libmlasim_kut_gpu.so: mlasim's persistent MLA decode kernels
// (kernels/decode/) and the split-KV reduce behind the kernel-under-test ABI of
// kernels/mlasim_kut.h. The decode kernels live only in this library: run_mla_decode
// (kernels/decode.hip), `mlasim replay --gpu` and `mlasim fuzz --gpu` all reach them through it.
// HIP names only (nvcc builds it through hip_compat.h; the AMD device check compiles it too).
//
// Config (--kernel-config, kernels/kut/gpu_config.h): comma-separated `variant=asm|opus|hk` (the
// zero-KV behaviour and the built-in contract it declares, default asm) and `tiling=0..10`
// (DecodeOptions::tiling), each at most once. `tiling=7` (the lock-step kernel with 32 q rows per
// pass) declares heads a multiple of 32 and bf16 KV, `tiling=9` (the warpgroup-mma kernel with 32
// rows per pass) heads a multiple of 32, `tiling=10` (the warpgroup-mma kernel with the q rows as
// the mma's M, kernels/decode/sm90/heads_m.h) heads a multiple of 64 and bf16 KV: a campaign then
// draws only those. `tiling=8`, `9` and `10` need the library built for sm_90a
// (MLASIM_KUT_SM90A, cmake/KernelUnderTest.cmake); elsewhere the library refuses them (describe
// and run: UNSUPPORTED, naming the build they need).
// Shapes: bf16 o, bf16 or fp8 e4m3fn KV, bf16 or fp8 e4m3fn q (fp8 q, as an engine that keeps
// q in the KV cache's dtype calls it, ATOM#287: declared for tilings 0 and 5; with fp8 KV at
// MLA's head dims on sm_90a builds the lock-step kernel with S on e4m3 mma, else the portable
// kernel; Fp8QUnsupported),
// heads a multiple of 16, head_dim_qk a multiple of 32 up to 576, head_dim_v a multiple of 16 up
// to min(512, head_dim_qk), contiguous rows.
#include "kernels/hip_compat.h"  // first: the HIP/CUDA names the other headers use

#include <cstring>
#include <string>

#include "kernels/decode/config.h"
#include "kernels/decode/params.h"
#include "kernels/decode/portable/kernel.h"
#include "kernels/decode/reduce.h"
#include "kernels/decode/schedule.h"
#include "kernels/gpu_api.h"
#include "kernels/kut/gpu_config.h"
#include "kernels/mlasim_kut.h"
#if defined(__CUDACC__)
#include "kernels/decode/sm90/heads_m.h"
#include "kernels/decode/sm90/kernel.h"
#include "kernels/decode/sm90/lockstep.h"
#include "kernels/decode/sm90/wgmma.h"
#endif

namespace mlasim::gpu::kut {
namespace {

using decode::DecodeParams;
using decode::kBlock;
using decode::kMaxD;
using decode::kMaxDv;
using decode::kRows;

thread_local std::string g_error;

int Fail(int code, std::string why) {
  g_error = std::move(why);
  return code;
}

using Config = GpuConfig;  // kernels/kut/gpu_config.h

// Parses the config (gpu_config.h: kut_config.h with GpuKeys). False with the reason in g_error.
bool ParseConfig(const char* text, Config* c) {
  std::string why;
  if (!ParseGpuConfig(text, c, &why)) return Fail(0, why), false;
  return true;
}

// Whether this library holds the warpgroup-mma kernels (tilings 8, 9 and 10) and the e4m3 mma of
// fp8 q (sm_89+): built for sm_90a.
#if defined(MLASIM_KUT_SM90A)
constexpr bool kWgmmaBuilt = true;
#else
constexpr bool kWgmmaBuilt = false;
#endif

// The decode kernel a call runs (DecodeOptions::tiling; kernels/decode.hip documents the
// defaults, measured on the H200 in docs/performance.md).
struct DecodeKernel {
  void (*fn)(DecodeParams);
  size_t smem;  // dynamic shared memory, bytes
  int threads;
  const char* name;
  // > 0: the kernel splits a cluster's heads over H / heads_per_part workgroups
  // (DecodeParams::parts; tiling 10); 0: one workgroup per cluster
  int heads_per_part = 0;
};

// The portable kernel runs: tiling 5, head dims other than MLA's 576 / 512, and every call of the
// AMD build (its only kernel).
bool PicksPortable(int D, int Dv, int tiling) {
#if defined(__CUDACC__)
  return tiling == 5 || D != decode::WsConfig<false>::kD || Dv != decode::WsConfig<false>::kDv;
#else
  (void)D, (void)Dv, (void)tiling;
  return true;
#endif
}

// tiling 0 (automatic): bf16 KV, the warpgroup-mma kernel with the heads as M (tiling 10) when
// the heads are a multiple of 64 (dense, B = 128, 8k context: 128 heads 711.0-741.5 against
// 1270.5-1373.1 us for tiling 9, docs/performance.md "Session 19"; 64 heads 394.4 against 687.7
// us, 256 heads 1400.4 against 2697.7 us, "Session 20"), else with 32 rows per pass (tiling 9)
// when the heads allow it, else 16 (tiling 8); where the library is not built for sm_90a the
// lock-step kernel, 7 or 64 x 2 (4). fp8 KV: the warpgroup-mma kernel with 32 rows per pass (9)
// when the heads allow it and the library has it (dense, 128 heads: 1748.4 against 2065.7 us),
// else the lock-step kernel reading the fp8 bytes directly as mma operands, 64 x 4 (tiling 1; at
// 16 heads 266.7 us against 292.1 for tiling 8; docs/performance.md "Session 12"). fp8 q (fp8
// KV, sm_90a): tilings 0 and 1 the direct kernel of 64 x 4 with S on e4m3 mma (dense 16 heads
// 268.8 against 272.9 us with bf16 q, "Session 20"), 2 the same of 64 x 5; fp8 q elsewhere:
// the portable kernel (tiling 0 with bf16 KV or without sm_90a, tiling 5; Unsupported refuses the
// explicit tilings that cannot take it).
// Measured fastest on the H200 (docs/performance.md).
DecodeKernel PickDecodeKernel(int D, int Dv, int tiling, bool kv_fp8, bool q_fp8, int heads) {
  const DecodeKernel portable{&decode::portable::mla_decode_portable_kernel,
                              decode::portable::portable_smem_bytes(D, Dv), kBlock, "portable"};
#if defined(__CUDACC__)
  namespace ls = decode::sm90::lockstep;
  using Ws = decode::WsConfig<false>;
  using WsFp8 = decode::WsConfig<true>;
  if (PicksPortable(D, Dv, tiling)) return portable;
  using Q64x4 = ls::MmaTiling<64, 4, true, 1, true, true>;
  using Q64x5 = ls::MmaTiling<64, 5, true, 1, true, true>;
  if (q_fp8) {  // only these two kernels read fp8 q (Fp8QUnsupported refuses the other configs)
    if (!kv_fp8 || !kWgmmaBuilt || tiling > 2) return portable;
    return tiling == 2 ? DecodeKernel{&ls::mla_decode_mma_kernel<Q64x5>, Q64x5::smem_bytes(),
                                      kBlock, "lockstep fp8 q e4m3 mma, direct 64 keys x 5 stages"}
                       : DecodeKernel{&ls::mla_decode_mma_kernel<Q64x4>, Q64x4::smem_bytes(),
                                      kBlock, "lockstep fp8 q e4m3 mma, direct 64 keys x 4 stages"};
  }
  if (tiling == 6) {
    if (kv_fp8)
      return {&decode::sm90::mla_decode_ws_kernel<WsFp8>, WsFp8::kSmemBytes, WsFp8::kThreads,
              "warp-specialised fp8 64 keys x 3 stages"};
    return {&decode::sm90::mla_decode_ws_kernel<Ws>, Ws::kSmemBytes, Ws::kThreads,
            "warp-specialised 64 keys x 2 stages"};
  }
  using T32x3 = ls::MmaTiling<32, 3>;
  using T32x4 = ls::MmaTiling<32, 4>;
  using T32x5 = ls::MmaTiling<32, 5>;  // (32 x 6 no longer fits beside the P buffer)
  using T64x2 = ls::MmaTiling<64, 2>;
  using T64x2m2 = ls::MmaTiling<64, 2, false, 2>;
  using F64x2 = ls::MmaTiling<64, 2, true>;
  using F64x3 = ls::MmaTiling<64, 3, true>;
  using D64x4 = ls::MmaTiling<64, 4, true, 1, true>;
  using D64x5 = ls::MmaTiling<64, 5, true, 1, true>;
  namespace wg = decode::sm90::wg;
  // Rings of 18 blocks = two whole chunks (docs/performance.md "Session 14"): 16 rows per pass,
  // dense 16 heads 281.2-282.5 us against 286.3-288.1 with 24 blocks (2.67 chunks), sparse
  // 329.2-331.7 against 328.6-329.6; 32 rows per pass, dense 128 heads 1358.9-1361.6 us against
  // 1405.7-1407.5 with 20 blocks, sparse 1502.7-1527.0 against 1530.3-1544.5.
  using W16 = wg::WgTiling<18>;
  using W32 = wg::WgTiling<18, false, 2>;
  using W16f = wg::WgTiling<18, true>;  // fp8: two widened chunks
  using W32f = wg::WgTiling<18, true, 2>;
  if (tiling == 0 && !kv_fp8)
    tiling = kWgmmaBuilt && heads % (4 * kRows) == 0 ? 10
             : heads % (2 * kRows) == 0             ? (kWgmmaBuilt ? 9 : 7)
                                                    : (kWgmmaBuilt ? 8 : 4);
  if (tiling == 0 && kv_fp8 && kWgmmaBuilt && heads % (2 * kRows) == 0) tiling = 9;
  if (tiling == 10 && !kv_fp8)  // bf16 KV only (Unsupported refuses fp8)
    return {&decode::sm90::hm::mla_decode_hm_kernel, decode::sm90::hm::HmTiling::smem_bytes(),
            kBlock, "wgmma heads as M, 64 rows per pass, a workgroup per 64 heads",
            decode::sm90::hm::HmTiling::kPassRows};
  if (tiling == 8)
    return kv_fp8 ? DecodeKernel{&wg::mla_decode_wg_kernel<W16f>, W16f::smem_bytes(), kBlock,
                                 "wgmma fp8 64 keys x 2 widened chunks, 16 rows per pass"}
                  : DecodeKernel{&wg::mla_decode_wg_kernel<W16>, W16::smem_bytes(), kBlock,
                                 "wgmma 64 keys x 18 blocks, 16 rows per pass"};
  if (tiling == 9)
    return kv_fp8 ? DecodeKernel{&wg::mla_decode_wg_kernel<W32f>, W32f::smem_bytes(), kBlock,
                                 "wgmma fp8 64 keys x 2 widened chunks, 32 rows per pass"}
                  : DecodeKernel{&wg::mla_decode_wg_kernel<W32>, W32::smem_bytes(), kBlock,
                                 "wgmma 64 keys x 18 blocks, 32 rows per pass"};
  if (kv_fp8) {  // 1, 2: fp8 operands read directly; 3, 4: the chunk widened to fp16 first
    if (tiling == 0 || tiling == 1)
      return {&ls::mla_decode_mma_kernel<D64x4>, D64x4::smem_bytes(), kBlock,
              "lockstep fp8 direct 64 keys x 4 stages"};
    if (tiling == 2)
      return {&ls::mla_decode_mma_kernel<D64x5>, D64x5::smem_bytes(), kBlock,
              "lockstep fp8 direct 64 keys x 5 stages"};
    if (tiling == 4)
      return {&ls::mla_decode_mma_kernel<F64x2>, F64x2::smem_bytes(), kBlock,
              "lockstep fp8 64 keys x 2 stages"};
    return {&ls::mla_decode_mma_kernel<F64x3>, F64x3::smem_bytes(), kBlock,
            "lockstep fp8 64 keys x 3 stages"};
  }
  switch (tiling) {
    case 1:
      return {&ls::mla_decode_mma_kernel<T32x3>, T32x3::smem_bytes(), kBlock,
              "lockstep 32 keys x 3 stages"};
    case 2:
      return {&ls::mla_decode_mma_kernel<T32x4>, T32x4::smem_bytes(), kBlock,
              "lockstep 32 keys x 4 stages"};
    case 3:
      return {&ls::mla_decode_mma_kernel<T32x5>, T32x5::smem_bytes(), kBlock,
              "lockstep 32 keys x 5 stages"};
    case 7:
      return {&ls::mla_decode_mma_kernel<T64x2m2>, T64x2m2::smem_bytes(), kBlock,
              "lockstep 64 keys x 2 stages, 32 rows per pass"};
    default:
      return {&ls::mla_decode_mma_kernel<T64x2>, T64x2::smem_bytes(), kBlock,
              "lockstep 64 keys x 2 stages"};
  }
#else
  (void)tiling;
  (void)kv_fp8;
  (void)q_fp8;
  (void)heads;
  return portable;
#endif
}

// The reduce launch: on NVIDIA a programmatic dependent of the decode before it in the stream
// (its workgroups start as decode workgroups retire and wait in griddepcontrol.wait), as
// FlashMLA launches its combine.
hipError_t LaunchReduce(hipStream_t stream, int tiles, const int32_t* ri, const int32_t* fm,
                        const int32_t* pm, const DecodeParams& P) {
  // one warp per head of a tile (decode/reduce.h)
  constexpr int kWarps = decode::kBlock / COMPAT_WARP_SIZE;
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>((P.H + kWarps - 1) / kWarps));
#if defined(__CUDACC__)
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(kBlock);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, decode::mla_reduce_kernel, ri, fm, pm,
                            static_cast<const float*>(P.part_o),
                            static_cast<const float*>(P.part_lse), P.o, P.lse, P.H, P.Dv, P.log);
#else
  hipLaunchKernelGGL(decode::mla_reduce_kernel, grid, dim3(kBlock), 0, stream, ri, fm, pm,
                     P.part_o, P.part_lse, P.o, P.lse, P.H, P.Dv, P.log);
  return hipGetLastError();
#endif
}

bool Contiguous(const mlasim_kut_tensor& t, int elem) {
  return t.bytes == 0 || (t.row_stride == int64_t{t.heads} * t.cols * elem &&
                          (t.heads <= 1 || t.head_stride == int64_t{t.cols} * elem));
}

// Shapes the kernels run; "" when they run this call.
// Heads per pass of the config's kernel: 32 for tilings 7 and 9, 64 for tiling 10, else 16
// (Describe's heads_multiple).
int HeadsMultiple(const Config& cfg) {
  if (cfg.tiling == 10) return 4 * kRows;
  return cfg.tiling == 7 || cfg.tiling == 9 ? 2 * kRows : kRows;
}

// Why this library cannot run the config's kernel at all ("" when it can): tilings 8, 9 and 10
// without sm_90a.
std::string NotBuilt(const Config& cfg) {
  if (cfg.tiling >= 8 && cfg.tiling <= 10 && !kWgmmaBuilt)
    return "tiling=" + std::to_string(cfg.tiling) +
           " needs the kernel library built for sm_90a (MLASIM_KUT_SM90A: a CUDA build for "
           "CMAKE_CUDA_ARCHITECTURES 90)";
  return "";
}

// Why fp8 q cannot run ("" for bf16 q, or where it can). Two kernels read it (PickDecodeKernel):
// the lock-step kernel with S on e4m3 mma (fp8 KV, MLA's head dims, sm_90a builds, tilings 0-2)
// and the portable kernel, which widens q to bf16 (any KV: tiling 0 where the e4m3 kernel does
// not apply, tiling 5, other head dims). Tilings 1 and 2 take fp8 q only as the e4m3 kernel;
// 3, 4 and 6-10 take bf16 q only.
std::string Fp8QUnsupported(const mlasim_kut_call& c, const Config& cfg) {
  if (c.q.dtype != MLASIM_KUT_FP8_E4M3FN || cfg.tiling == 0 ||
      PicksPortable(c.head_dim_qk, c.head_dim_v, cfg.tiling))
    return "";
  const std::string tiling = "tiling=" + std::to_string(cfg.tiling);
  if (cfg.tiling > 2)
    return tiling + " takes bf16 q only (fp8_e4m3fn q runs on tilings 0, 1, 2 and 5)";
  if (c.kv_cache.dtype != MLASIM_KUT_FP8_E4M3FN)
    return tiling + " takes fp8_e4m3fn q only with fp8_e4m3fn KV (S on e4m3 mma); got bf16 KV "
           "(tilings 0 and 5 run it on the portable kernel)";
  if (!kWgmmaBuilt)
    return tiling + " takes fp8_e4m3fn q only in a kernel library built for sm_90a "
           "(MLASIM_KUT_SM90A: the e4m3 kernel is enabled there); tilings 0 and 5 run it on the "
           "portable kernel";
  return "";
}

// Whether Describe declares fp8 q for the config: tilings 0 and 5, which run it whatever the KV
// (so a campaign hands fp8 q only where no call of it is refused for that); every config of the
// AMD build, whose only kernel is the portable one.
bool Fp8QDeclared(const Config& cfg) {
#if defined(__CUDACC__)
  return cfg.tiling == 0 || cfg.tiling == 5;
#else
  (void)cfg;
  return true;
#endif
}

std::string Unsupported(const mlasim_kut_call& c, const Config& cfg) {
  const int H = c.num_heads, D = c.head_dim_qk, Dv = c.head_dim_v;
  if (H < 1 || H % kRows != 0 || D % 32 != 0 || D > kMaxD || Dv % 16 != 0 || Dv > kMaxDv ||
      Dv > D)
    return "needs heads >= 1 and a multiple of 16, head_dim_qk a multiple of 32 up to 576, "
           "head_dim_v a multiple of 16 up to min(512, head_dim_qk)";
  if (const std::string why = NotBuilt(cfg); !why.empty()) return why;
  if (const int m = HeadsMultiple(cfg); H % m != 0)
    return "tiling=" + std::to_string(cfg.tiling) + " needs heads % " + std::to_string(m) +
           " == 0 (" + std::to_string(m) + " q rows of one token per pass); got " +
           std::to_string(H);
  if ((cfg.tiling == 7 || cfg.tiling == 10) && c.kv_cache.dtype != MLASIM_KUT_BF16)
    return "tiling=" + std::to_string(cfg.tiling) +
           " needs bf16 KV (fp8 KV runs tilings 0-6, 8 and 9)";
  if ((c.q.dtype != MLASIM_KUT_BF16 && c.q.dtype != MLASIM_KUT_FP8_E4M3FN) ||
      c.o.dtype != MLASIM_KUT_BF16 ||
      (c.kv_cache.dtype != MLASIM_KUT_BF16 && c.kv_cache.dtype != MLASIM_KUT_FP8_E4M3FN))
    return "needs bf16 o, bf16 or fp8_e4m3fn KV and bf16 or fp8_e4m3fn q";
  if (const std::string why = Fp8QUnsupported(c, cfg); !why.empty()) return why;
  const int kv_elem = c.kv_cache.dtype == MLASIM_KUT_FP8_E4M3FN ? 1 : 2;
  const int q_elem = c.q.dtype == MLASIM_KUT_FP8_E4M3FN ? 1 : 2;
  if (!Contiguous(c.q, q_elem) || !Contiguous(c.o, 2) || !Contiguous(c.kv_cache, kv_elem) ||
      !Contiguous(c.partial_o, 4))
    return "needs contiguous rows and heads";
  // Every kernel reads q and KV rows in 16-byte pieces (cp.async, 16-byte loads; the portable one
  // too): a misaligned base would fault on the device ("misaligned address"), so it is refused
  // here. (Rows are multiples of 16 bytes at these head dims.)
  const auto misaligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 != 0; };
  const void* bad = misaligned(c.q.data)          ? c.q.data
                    : misaligned(c.kv_cache.data) ? c.kv_cache.data
                                                  : nullptr;
  if (bad != nullptr)
    return std::string("needs q and kv_cache data 16-byte aligned (the kernels read them in "
                       "16-byte pieces); ") +
           (bad == c.q.data ? "q" : "kv_cache") + " data is " +
           std::to_string(reinterpret_cast<uintptr_t>(bad) % 16) + " bytes past a multiple of 16";
  return "";
}

DecodeParams Params(const mlasim_kut_call& c, const Config& cfg) {
  DecodeParams P{};
  const bool fp8 = c.kv_cache.dtype == MLASIM_KUT_FP8_E4M3FN;
  const bool q8 = c.q.dtype == MLASIM_KUT_FP8_E4M3FN;
  P.q = q8 ? nullptr : static_cast<const uint16_t*>(c.q.data);
  P.q8 = q8 ? static_cast<const uint8_t*>(c.q.data) : nullptr;
  P.q_fp8 = q8;
  P.kv = fp8 ? nullptr : static_cast<const uint16_t*>(c.kv_cache.data);
  P.kv8 = fp8 ? static_cast<const uint8_t*>(c.kv_cache.data) : nullptr;
  P.kv_fp8 = fp8;
  P.kv_indices = static_cast<const int32_t*>(c.kv_indices.data);
  P.kv_indptr = static_cast<const int32_t*>(c.kv_indptr.data);
  P.lpl = static_cast<const int32_t*>(c.kv_last_page_lens.data);
  P.qo_indptr = static_cast<const int32_t*>(c.qo_indptr.data);
  P.topk = static_cast<const int32_t*>(c.topk_indices.data);
  P.work_indptr = static_cast<const int32_t*>(c.work_indptr.data);
  P.work_info = static_cast<const int32_t*>(c.work_info.data);
  P.o = static_cast<uint16_t*>(c.o.data);
  P.lse = static_cast<float*>(c.lse.data);
  P.part_o = static_cast<float*>(c.partial_o.data);
  P.part_lse = static_cast<float*>(c.partial_lse.data);
  P.log = reinterpret_cast<unsigned long long*>(c.access_log);
  P.H = c.num_heads, P.D = c.head_dim_qk, P.Dv = c.head_dim_v, P.page = c.page_size;
  P.sparse = c.topk >= 0;
  P.causal = c.causal && !P.sparse;
  P.batch = c.batch;
  P.variant = static_cast<int>(cfg.zero_kv);
  P.cache_rows = c.kv_cache.rows;
  P.logit_scale = c.softmax_scale * c.q_scale * c.kv_scale;
  P.v_scale = c.kv_scale;
  P.parts = 1;  // RunDecode sets the kernel's own
  return P;
}

int RunDecode(const mlasim_kut_call& c, const Config& cfg, hipStream_t stream) {
  DecodeParams P = Params(c, cfg);
  const DecodeKernel dk = PickDecodeKernel(P.D, P.Dv, cfg.tiling, P.kv_fp8, P.q_fp8, P.H);
  if (dk.heads_per_part > 0) P.parts = P.H / dk.heads_per_part;
  hipError_t e = hipFuncSetAttribute(reinterpret_cast<const void*>(dk.fn),
                                     hipFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(dk.smem));
  const int clusters = static_cast<int>(c.work_indptr.rows) - 1;
  if (e == hipSuccess && clusters > 0) {
    hipLaunchKernelGGL(dk.fn, dim3(static_cast<unsigned>(clusters) * P.parts), dim3(dk.threads),
                       dk.smem, stream, P);
    e = hipGetLastError();
  }
  if (e != hipSuccess) return Fail(MLASIM_KUT_ERROR, std::string("decode launch: ") + hipGetErrorString(e));
  return MLASIM_KUT_OK;
}

int RunReduce(const mlasim_kut_call& c, const Config& cfg, hipStream_t stream) {
  const DecodeParams P = Params(c, cfg);
  const int tiles = static_cast<int>(c.reduce_indptr.rows) - 1;
  if (tiles <= 0) return MLASIM_KUT_OK;
  const hipError_t e = LaunchReduce(stream, tiles, static_cast<const int32_t*>(c.reduce_indptr.data),
                                    static_cast<const int32_t*>(c.reduce_final_map.data),
                                    static_cast<const int32_t*>(c.reduce_partial_map.data), P);
  if (e != hipSuccess) return Fail(MLASIM_KUT_ERROR, std::string("reduce launch: ") + hipGetErrorString(e));
  return MLASIM_KUT_OK;
}

}  // namespace

int Describe(const char* config, mlasim_kut_info* info) {
  Config cfg;
  if (!ParseConfig(config, &cfg)) return MLASIM_KUT_UNSUPPORTED;
  if (const std::string why = NotBuilt(cfg); !why.empty())
    return Fail(MLASIM_KUT_UNSUPPORTED, why);
  // The variant's built-in contract, with what these kernels do with a row outside the cache:
  // mask it (decode/schedule.h key_row_of), where aiter's asm kernel reads it.
  static thread_local std::string contract;
  contract = "{\"extends\": \"" + cfg.variant + "\", \"name\": \"mlasim-gpu-" + cfg.variant +
             "\", \"semantics\": {\"invalid_index\": \"masked\", \"sources\": {\"invalid_index\": "
             "\"kernels/decode/schedule.h key_row_of: a cache row outside the cache is masked and "
             "never read\"}}}";
  info->abi_version = MLASIM_KUT_ABI_VERSION;
  info->name = "mlasim-gpu";
  info->ops = MLASIM_KUT_OP_BIT(MLASIM_KUT_OP_DECODE) | MLASIM_KUT_OP_BIT(MLASIM_KUT_OP_REDUCE);
  info->memory = MLASIM_KUT_MEMORY_DEVICE;
  info->q_dtypes = MLASIM_KUT_DTYPE_BIT(MLASIM_KUT_BF16) |
                   (Fp8QDeclared(cfg) ? MLASIM_KUT_DTYPE_BIT(MLASIM_KUT_FP8_E4M3FN) : 0u);
  info->kv_dtypes = MLASIM_KUT_DTYPE_BIT(MLASIM_KUT_BF16) |
                    (cfg.tiling == 7 || cfg.tiling == 10
                         ? 0u
                         : MLASIM_KUT_DTYPE_BIT(MLASIM_KUT_FP8_E4M3FN));
  info->o_dtypes = MLASIM_KUT_DTYPE_BIT(MLASIM_KUT_BF16);
  info->heads_multiple = HeadsMultiple(cfg);
  info->max_heads = 0;
  info->head_dim_qk_multiple = 32;
  info->max_head_dim_qk = kMaxD;
  info->head_dim_v_multiple = 16;
  info->max_head_dim_v = kMaxDv;
  info->max_page_size = 0;
  info->dense = 1;
  info->sparse = 1;
  info->decode_contract = contract.c_str();
  info->reduce_contract = "builtin:mla_reduce_v1";
  return MLASIM_KUT_OK;
}

int Run(const mlasim_kut_call* c) {
  if (c == nullptr || c->abi_version != MLASIM_KUT_ABI_VERSION ||
      c->struct_bytes != sizeof(mlasim_kut_call))
    return Fail(MLASIM_KUT_ERROR, "call descriptor of another ABI version or size");
  Config cfg;
  if (!ParseConfig(c->config, &cfg)) return MLASIM_KUT_UNSUPPORTED;
  if (const std::string why = Unsupported(*c, cfg); !why.empty())
    return Fail(MLASIM_KUT_UNSUPPORTED, why);
  if (hipSetDevice(c->device) != hipSuccess) return Fail(MLASIM_KUT_ERROR, "hipSetDevice failed");
  const hipStream_t stream = static_cast<hipStream_t>(c->stream);
  if (c->op == MLASIM_KUT_OP_DECODE) return RunDecode(*c, cfg, stream);
  if (c->op == MLASIM_KUT_OP_REDUCE) return RunReduce(*c, cfg, stream);
  return Fail(MLASIM_KUT_UNSUPPORTED, "unknown op " + std::to_string(c->op));
}

const char* KernelName(const char* config, int heads, int D, int Dv, int kv_fp8, int q_fp8) {
  Config cfg;
  if (!ParseConfig(config, &cfg) || !NotBuilt(cfg).empty()) return "";
  return PickDecodeKernel(D, Dv, cfg.tiling, kv_fp8 != 0, q_fp8 != 0, heads).name;
}

}  // namespace mlasim::gpu::kut

#define MLASIM_KUT_EXPORT extern "C" __attribute__((visibility("default")))

MLASIM_KUT_EXPORT uint32_t mlasim_kut_abi_version(void) {
  return MLASIM_KUT_ABI_VERSION;
}
MLASIM_KUT_EXPORT int mlasim_kut_describe(const char* config, mlasim_kut_info* info) {
  return mlasim::gpu::kut::Describe(config, info);
}
MLASIM_KUT_EXPORT int mlasim_kut_run(const mlasim_kut_call* call) {
  return mlasim::gpu::kut::Run(call);
}
MLASIM_KUT_EXPORT const char* mlasim_kut_last_error(void) {
  return mlasim::gpu::kut::g_error.c_str();
}
// mlasim's own extra export (kernels/kut_client.h): the decode kernel a config picks for a shape
// (heads: tiling 0 picks by the head count; kv_fp8, q_fp8: 1 for fp8 e4m3fn). _v2: the q format
// argument (session 20); a stale library of the old name is then not found, not misread.
MLASIM_KUT_EXPORT const char* mlasim_kut_gpu_kernel_name_v2(const char* config, int heads,
                                                           int head_dim_qk, int head_dim_v,
                                                           int kv_fp8, int q_fp8) {
  return mlasim::gpu::kut::KernelName(config, heads, head_dim_qk, head_dim_v, kv_fp8, q_fp8);
}
