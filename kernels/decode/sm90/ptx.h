// kernels/decode/sm90/ptx.h - the PTX the NVIDIA decode kernels use (sm_80 mma.sync / ldmatrix /
// cp.async with mbarrier completion, sm_89 e4m3 mma.sync, sm_90 mbarrier waits, named barriers,
// programmatic dependent launch, fp8 conversion).
// NVIDIA only: included under __CUDACC__.
#pragma once

#include <cstdint>

namespace mlasim::gpu::decode::sm90 {

__device__ inline uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---- cp.async (16 bytes per thread; src_bytes = 0 writes zeros) --------------------------------
__device__ inline void cp_async16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes));
}
__device__ inline void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ inline void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// One arrival on `bar` when every cp.async this thread has issued so far has landed (sm_80);
// .noinc: the barrier's expected count includes this arrival.
__device__ inline void cp_async_mbar_arrive_noinc(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_u32(bar))
               : "memory");
}

// ---- mbarrier (sm_90) ---------------------------------------------------------------------------
__device__ inline void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count)
               : "memory");
}
// Makes the initialised barriers visible (to the async proxy too) before their first use.
__device__ inline void fence_mbar_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ inline void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}
// Blocks until the phase with the given parity has completed.
__device__ inline void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@!p bra WAIT;\n"
      "}\n" ::"r"(smem_u32(bar)),
      "r"(parity)
      : "memory");
}
__device__ inline void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
}
// Barrier `id` (1..15) among `threads` threads (a multiple of 32); id 0 is __syncthreads.
__device__ inline void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// ---- programmatic dependent launch (sm_90) ------------------------------------------------------
__device__ inline void grid_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}
__device__ inline void grid_dependency_wait() {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
}

// ---- matrix fragments ---------------------------------------------------------------------------
__device__ inline void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ inline void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
// c += a (16x16, row major) * b (16x8, column major), fp32 accumulate; bf16 or fp16 operands.
template <bool kF16>
__device__ inline void mma_k16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (kF16)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// c += a (16x32, row major) * b (32x8, column major), fp32 accumulate; e4m3 operands (sm_89+),
// 4 elements a register: a[0] row g, k 4 t .. 4 t + 3; a[1] row g + 8, the same k; a[2], a[3]
// the same rows at k + 16; b0 k 4 t .. 4 t + 3 of column g, b1 k + 16 (g = lane / 4, t = lane % 4;
// PTX ISA "mma.m16n8k32"). The products of e4m3 values are exact in fp32.
__device__ inline void mma_e4m3_k32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
  (void)c, (void)a, (void)b0, (void)b1;
  __trap();  // no e4m3 mma before sm_89: the host never picks the kernel then (kWgmmaBuilt)
#else
  asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// Shared-memory loads of 16, 8 and 4 bytes (addr aligned to its size).
__device__ inline uint4 lds128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr));
  return v;
}
__device__ inline uint2 lds64(uint32_t addr) {
  uint2 v;
  asm volatile("ld.shared.v2.b32 {%0,%1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "r"(addr));
  return v;
}
__device__ inline uint32_t lds32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr));
  return v;
}

// 16 bytes of read-only global memory (addr 16-byte aligned), not kept in L1: streamed KV rows.
__device__ inline uint4 ldg_stream128(const void* addr) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.b32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(addr));
  return v;
}

// ---- conversions --------------------------------------------------------------------------------
// Two floats to f16x2 (round to nearest even; lo in the low half).
__device__ inline uint32_t pack_f16(float lo, float hi) {
  uint32_t out;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(out) : "f"(hi), "f"(lo));
  return out;
}
// Two floats to bf16x2 (round to nearest even; lo in the low half; NaN stays NaN).
__device__ inline uint32_t pack_bf16(float lo, float hi) {
  uint32_t out;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(out) : "f"(hi), "f"(lo));
  return out;
}
template <bool kF16>
__device__ inline uint32_t pack_operand(float lo, float hi) {
  if constexpr (kF16)
    return pack_f16(lo, hi);
  else
    return pack_bf16(lo, hi);
}
// bf16x2 to f16x2 (exact for |x| in fp16's normal range; bf16 q values beyond it round).
__device__ inline uint32_t bf16x2_to_f16x2(uint32_t v) {
  return pack_f16(__uint_as_float(v << 16), __uint_as_float(v & 0xffff0000u));
}
// Two e4m3fn values (low byte first) to f16x2, exactly (every e4m3fn value is an fp16 value;
// NaN stays NaN).
__device__ inline uint32_t e4m3x2_to_f16x2(uint16_t two) {
  uint32_t h2;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(two));
  return h2;
}

// 16 fp8 e4m3fn bytes (one 16-byte load) widened exactly to 16 fp16 values: b[2 k], b[2 k + 1] =
// bytes 4 k .. 4 k + 3 as two f16x2 words (element order kept).
__device__ inline void e4m3x16_to_f16(const uint4& v, uint32_t (&b)[8]) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int k = 0; k < 4; ++k)  // (the halves split in PTX: no shift per high half)
    asm("{\n.reg .b16 lo, hi;\nmov.b32 {lo, hi}, %2;\n"
        "cvt.rn.f16x2.e4m3x2 %0, lo;\ncvt.rn.f16x2.e4m3x2 %1, hi;\n}\n"
        : "=r"(b[2 * k]), "=r"(b[2 * k + 1])
        : "r"(w[k]));
}

}  // namespace mlasim::gpu::decode::sm90
