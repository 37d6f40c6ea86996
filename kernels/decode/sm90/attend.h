// kernels/decode/sm90/attend.h - the math of one 64-key chunk in the warp-specialised decode
// kernel, run by the 8 consumer warps: S = Q K^T (mma.sync), the online softmax (each warp owns
// 2 rows: no exponential is computed twice), O += P V. Barriers between the phases are the
// caller's (kernel.h).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/decode/config.h"
#include "kernels/decode/sm90/load.h"
#include "kernels/decode/sm90/ptx.h"

namespace mlasim::gpu::decode::sm90 {

// Online-softmax state of the row a lane's half-warp owns (row 2 warp + lane / 16); the 16 lanes
// of a half-warp hold the same values. Units: log2 of the scaled scores.
struct RowState {
  float m = -INFINITY;  // running max
  float l = 0.f;        // running sum of exp2(score - m), from the unrounded weights
};

// S partial of warp (kh = dimension half, quarter = keys [16 quarter, +16)) over the chunk at
// shared address kb, scaled to log2 units and stored to score[kh]. Two accumulator sets (even /
// odd k16 steps) halve the dependent mma chain.
template <class C>
__device__ inline void chunk_scores(const WsSmem<C>& s, uint32_t kb,
                                    const uint32_t (&qa)[C::kHalfSteps][4], float scale2) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gq = lane / 4, tq = lane % 4;
  const int kh = warp / 4, quarter = warp % 4;
  // x4 = (keys 0-7 | 8-15) x (dims 0-7 | 8-15) of one k16 step
  const uint32_t s_lane = ((quarter * 16 + (lane / 16) * 8 + lane % 8) * C::kLdk +
                           kh * (C::kD / 2) + ((lane / 8) % 2) * 8) *
                          2;
  float acc[2][2][4] = {};
#pragma unroll
  for (int st = 0; st < C::kHalfSteps; ++st) {
    uint32_t b[4];
    ldmatrix_x4(b, kb + s_lane + st * 32);
    mma_k16<C::kFp8>(acc[st & 1][0], qa[st], b[0], b[1]);
    mma_k16<C::kFp8>(acc[st & 1][1], qa[st], b[2], b[3]);
  }
  float* sp = s.score + kh * kRows * C::kLdS + quarter * 16 + 2 * tq;
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
    *reinterpret_cast<float2*>(sp + gq * C::kLdS + nt * 8) = make_float2(
        (acc[0][nt][0] + acc[1][nt][0]) * scale2, (acc[0][nt][1] + acc[1][nt][1]) * scale2);
    *reinterpret_cast<float2*>(sp + (gq + 8) * C::kLdS + nt * 8) = make_float2(
        (acc[0][nt][2] + acc[1][nt][2]) * scale2, (acc[0][nt][3] + acc[1][nt][3]) * scale2);
  }
}

// Online softmax of the owned row over the chunk: keys 4 (lane % 16) .. + 3. A key counts when
// its cache row is valid (valid0 / valid1: keys 0-31 / 32-63) and it lies before the causal
// limit (`rem` keys of this chunk may be seen). Writes P (rounded to the operand format) and the
// row's rescale factor alpha; the row sum uses the unrounded weights.
template <class C>
__device__ inline void chunk_softmax(const WsSmem<C>& s, RowState& rs, uint32_t valid0,
                                     uint32_t valid1, int64_t rem) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = 2 * warp + lane / 16, k0 = 4 * (lane % 16);
  const float4 a = *reinterpret_cast<const float4*>(s.score + row * C::kLdS + k0);
  const float4 b = *reinterpret_cast<const float4*>(s.score + (kRows + row) * C::kLdS + k0);
  const uint32_t bits = ((k0 < 32 ? valid0 : valid1) >> (k0 % 32)) & 0xfu;
  const int64_t lim = rem - k0;  // keys k0 + e with e < lim are before the causal limit
  const uint32_t causal = lim >= 4 ? 0xfu : lim <= 0 ? 0u : (1u << lim) - 1u;
  const uint32_t keep = bits & causal;
  float x[4] = {a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w};
  float mx = -INFINITY;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    if (!((keep >> e) & 1u)) x[e] = -INFINITY;
    mx = fmaxf(mx, x[e]);
  }
#pragma unroll
  for (int off = 8; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
  const float mn = fmaxf(rs.m, mx);
  // exp2(-inf - finite) = 0 handles masked keys; a row with nothing yet (mn = -inf) subtracts 0.
  const float sub = mn == -INFINITY ? 0.f : mn;
  const float alpha = exp2f(rs.m - sub);
  float p[4], ps = 0.f;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    p[e] = exp2f(x[e] - sub);
    ps += p[e];
  }
#pragma unroll
  for (int off = 8; off > 0; off >>= 1) ps += __shfl_xor_sync(0xffffffffu, ps, off);
  rs.l = rs.l * alpha + ps;
  rs.m = mn;
  *reinterpret_cast<uint2*>(s.p + row * C::kLdP + k0) =
      make_uint2(pack_operand<C::kFp8>(p[0], p[1]), pack_operand<C::kFp8>(p[2], p[3]));
  if (lane % 16 == 0) s.alpha[row] = alpha;
}

// O (rows gq, gq + 8; this warp's 64 columns) = alpha O + P V over the chunk at shared address kb.
template <class C>
__device__ inline void chunk_pv(const WsSmem<C>& s, uint32_t kb, float (&oacc)[8][4]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gq = lane / 4;
  const float al_lo = s.alpha[gq], al_hi = s.alpha[gq + 8];
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    oacc[nt][0] *= al_lo;
    oacc[nt][1] *= al_lo;
    oacc[nt][2] *= al_hi;
    oacc[nt][3] *= al_hi;
  }
  // A = P: x4 = (rows 0-7 | 8-15) x (keys 0-7 | 8-15) of one k16 step
  const uint32_t p_lane = smem_u32(s.p) + ((lane % 16) * C::kLdP + (lane / 16) * 8) * 2;
  // B = V: x4.trans = (keys 0-7 | 8-15) x (dims 0-7 | 8-15) of this warp's columns
  const uint32_t v_lane =
      ((((lane / 8) % 2) * 8 + lane % 8) * C::kLdk + warp * 64 + (lane / 16) * 8) * 2;
#pragma unroll
  for (int ks = 0; ks < C::kPvSteps; ++ks) {
    uint32_t pa[4];
    ldmatrix_x4(pa, p_lane + ks * 32);
#pragma unroll
    for (int pp = 0; pp < 4; ++pp) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, kb + v_lane + (ks * 16 * C::kLdk + pp * 16) * 2);
      mma_k16<C::kFp8>(oacc[2 * pp], pa, b[0], b[1]);
      mma_k16<C::kFp8>(oacc[2 * pp + 1], pa, b[2], b[3]);
    }
  }
}

}  // namespace mlasim::gpu::decode::sm90
