// kernels/decode/reduce.h - mla_reduce_v1 (aiter-mla-metadata.md §12): merges the partial rows of
// every tile with two or more pieces into o and lse. One kernel for both backends; on NVIDIA it is
// launched as a programmatic dependent of the decode (kernels/decode.hip) and waits for it here.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/decode/config.h"
#include "kernels/decode/schedule.h"

namespace mlasim::gpu::decode {

// mla_reduce_v1 (§12) for the tiles with two or more pieces: grid (tiles, ceil(H / warps per
// workgroup)); each warp owns one head of its tile and walks the tile's rows. Per (row, head):
// the lanes load the pieces' LSE side by side (piece i on lane i mod warp), L = log sum exp of
// them (warp max and sum), then o = sum of exp(lse_i - L) x partial_o_i over the pieces in order,
// each lane holding 4 consecutive columns per 16-byte load; a piece's weight and partial row come
// from its lane by shuffle. A tile of H heads is H warps working at once (it was one workgroup's
// 8 warps one pair after another): the reduce is a chain of dependent loads per pair, so its time
// is how many pairs each warp walks.
__global__ void __launch_bounds__(kBlock)
    mla_reduce_kernel(const int32_t* reduce_indptr, const int32_t* final_map,
                      const int32_t* partial_map, const float* part_o, const float* part_lse,
                      uint16_t* o, float* lse, int H, int Dv, unsigned long long* log) {
#if defined(__CUDACC__)
  asm volatile("griddepcontrol.wait;\n" ::: "memory");  // launched as a dependent of the decode
#endif
  const int t = blockIdx.x;
  const int32_t g0 = reduce_indptr[t], n = reduce_indptr[t + 1] - g0;
  if (n <= 1) return;
  const int32_t q0 = final_map[2 * t], q1 = final_map[2 * t + 1];
  log_rows(log, 2, q0, q1, threadIdx.x == 0 && blockIdx.y == 0);
  constexpr int kW = COMPAT_WARP_SIZE;
  constexpr int kWarps = kBlock / kW;
  constexpr int kQuads = kMaxDv / 4 / kW;  // float4 column groups per lane
  const int lane = threadIdx.x % kW;
  const int h = static_cast<int>(blockIdx.y) * kWarps + static_cast<int>(threadIdx.x) / kW;
  if (h >= H) return;  // no barrier below: whole warps leave
  const int dv4 = Dv / 4;
  for (int64_t srow = 0; srow < q1 - q0; ++srow) {
    float M = -INFINITY;
    for (int32_t i = lane; i < n; i += kW)
      M = fmaxf(M, part_lse[(int64_t{partial_map[g0 + i]} + srow) * H + h]);
    for (int m = kW / 2; m > 0; m /= 2) M = fmaxf(M, compat_shfl_xor(M, m));
    float S = 0;
    for (int32_t i = lane; i < n; i += kW)
      S += expf(part_lse[(int64_t{partial_map[g0 + i]} + srow) * H + h] - M);
    for (int m = kW / 2; m > 0; m /= 2) S += compat_shfl_xor(S, m);
    const float L = (S == 0.f || S != S) ? INFINITY : M + logf(S);
    float4 acc[kQuads];
#pragma unroll
    for (int k = 0; k < kQuads; ++k) acc[k] = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int32_t base = 0; base < n; base += kW) {
      // this lane's piece of the run: its partial row and weight, handed to every lane in turn
      const int32_t mine = base + lane < n ? base + lane : base;
      const int64_t my_row = (int64_t{partial_map[g0 + mine]} + srow) * H + h;
      const float my_wgt = expf(part_lse[my_row] - L);
      const int run = n - base < kW ? n - base : kW;
      for (int j = 0; j < run; ++j) {
        const int64_t prow = compat_shfl(my_row, j);
        const float wgt = compat_shfl(my_wgt, j);
        const float4* po = reinterpret_cast<const float4*>(part_o + prow * Dv);
#pragma unroll
        for (int k = 0; k < kQuads; ++k) {
          const int d4 = lane + k * kW;
          if (d4 < dv4) {
            const float4 v = po[d4];
            acc[k].x += wgt * v.x;
            acc[k].y += wgt * v.y;
            acc[k].z += wgt * v.z;
            acc[k].w += wgt * v.w;
          }
        }
      }
    }
    uint2* out = reinterpret_cast<uint2*>(o + ((int64_t{q0} + srow) * H + h) * Dv);
#pragma unroll
    for (int k = 0; k < kQuads; ++k) {
      const int d4 = lane + k * kW;
      if (d4 < dv4)
        out[d4] = make_uint2(
            static_cast<uint32_t>(f2bf(acc[k].x)) | (static_cast<uint32_t>(f2bf(acc[k].y)) << 16),
            static_cast<uint32_t>(f2bf(acc[k].z)) | (static_cast<uint32_t>(f2bf(acc[k].w)) << 16));
    }
    if (lane == 0) lse[(int64_t{q0} + srow) * H + h] = L;
  }
}

}  // namespace mlasim::gpu::decode
