// kernels/decode/reduce.h - mla_reduce_v1 (aiter-mla-metadata.md §12): merges the partial rows of
// every tile with two or more pieces into o and lse. One kernel for both backends; on NVIDIA it is
// launched as a programmatic dependent of the decode (kernels/decode.hip) and waits for it here.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/decode/config.h"
#include "kernels/decode/schedule.h"

namespace mlasim::gpu::decode {

// mla_reduce_v1 (§12): one workgroup per tile with >= 2 pieces; each warp combines one
// (row, head) pair at a time: L = log sum exp of the pieces' LSE, o = sum of exp(lse_i - L) x
// partial_o_i, its lanes holding 4 consecutive columns per 16-byte load.
__global__ void __launch_bounds__(kBlock)
    mla_reduce_kernel(const int32_t* reduce_indptr, const int32_t* final_map,
                      const int32_t* partial_map, const float* part_o, const float* part_lse,
                      uint16_t* o, float* lse, int H, int Dv, unsigned long long* log) {
#if defined(__CUDACC__)
  asm volatile("griddepcontrol.wait;\n" ::: "memory");  // launched as a dependent of the decode
#endif
  const int t = blockIdx.x;
  const int32_t g0 = reduce_indptr[t], g1 = reduce_indptr[t + 1];
  if (g1 - g0 <= 1) return;
  const int32_t q0 = final_map[2 * t], q1 = final_map[2 * t + 1];
  log_rows(log, 2, q0, q1, threadIdx.x == 0);
  constexpr int kWarps = kBlock / COMPAT_WARP_SIZE;
  constexpr int kQuads = kMaxDv / 4 / COMPAT_WARP_SIZE;  // float4 column groups per lane
  const int warp = threadIdx.x / COMPAT_WARP_SIZE, lane = threadIdx.x % COMPAT_WARP_SIZE;
  const int dv4 = Dv / 4;
  for (int64_t pair = warp; pair < int64_t{q1 - q0} * H; pair += kWarps) {
    const int64_t srow = pair / H, h = pair % H;
    float M = -INFINITY;
    for (int32_t i = g0; i < g1; ++i)
      M = fmaxf(M, part_lse[(int64_t{partial_map[i]} + srow) * H + h]);
    float S = 0;
    for (int32_t i = g0; i < g1; ++i)
      S += expf(part_lse[(int64_t{partial_map[i]} + srow) * H + h] - M);
    const float L = (S == 0.f || S != S) ? INFINITY : M + logf(S);
    float4 acc[kQuads];
#pragma unroll
    for (int k = 0; k < kQuads; ++k) acc[k] = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int32_t i = g0; i < g1; ++i) {
      const int64_t prow = (int64_t{partial_map[i]} + srow) * H + h;
      const float wgt = expf(part_lse[prow] - L);
      const float4* po = reinterpret_cast<const float4*>(part_o + prow * Dv);
#pragma unroll
      for (int k = 0; k < kQuads; ++k) {
        const int d4 = lane + k * COMPAT_WARP_SIZE;
        if (d4 < dv4) {
          const float4 v = po[d4];
          acc[k].x += wgt * v.x;
          acc[k].y += wgt * v.y;
          acc[k].z += wgt * v.z;
          acc[k].w += wgt * v.w;
        }
      }
    }
    uint2* out = reinterpret_cast<uint2*>(o + ((int64_t{q0} + srow) * H + h) * Dv);
#pragma unroll
    for (int k = 0; k < kQuads; ++k) {
      const int d4 = lane + k * COMPAT_WARP_SIZE;
      if (d4 < dv4)
        out[d4] = make_uint2(
            static_cast<uint32_t>(f2bf(acc[k].x)) | (static_cast<uint32_t>(f2bf(acc[k].y)) << 16),
            static_cast<uint32_t>(f2bf(acc[k].z)) | (static_cast<uint32_t>(f2bf(acc[k].w)) << 16));
    }
    if (lane == 0) lse[(int64_t{q0} + srow) * H + h] = L;
  }
}

}  // namespace mlasim::gpu::decode
