// kernels/decode/sm90/epilogue.h - the end of a group in the warp-specialised decode kernel: the
// row owners publish v_scale / l and write the LSE; every consumer warp writes its 64 columns of
// the 16 rows, as bf16 o rows (unsplit tile, work_info[1] < 0) or fp32 partial rows at
// partial_qo_loc (aiter-mla-metadata.md §11).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/decode/config.h"
#include "kernels/decode/params.h"
#include "kernels/decode/schedule.h"
#include "kernels/decode/sm90/attend.h"
#include "kernels/decode/sm90/ptx.h"

namespace mlasim::gpu::decode::sm90 {

constexpr int kConsumerBarrier = 1;  // named barrier id of the consumer warps

// Row owners (lanes 0 and 16 of each consumer warp): LSE of the row, and v_scale / l (0 for a
// row that saw no key) into inv[parity]. Rows with no key get o = 0 and lse = -inf.
template <class C>
__device__ inline void publish_rows(const DecodeParams& P, const WsSmem<C>& s, const RowState& rs,
                                    const GroupTask& t, int64_t first, int parity) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane % 16 != 0) return;
  const int row = 2 * warp + lane / 16;
  const bool empty = rs.m == -INFINITY || rs.l == 0;
  s.inv[parity * kRows + row] = empty ? 0.f : P.v_scale / rs.l;
  const float lse = empty ? -INFINITY : (rs.m + log2f(rs.l)) * 0.6931471805599453f;
  const int32_t loc = t.w[1];
  if (loc < 0) {
    P.lse[first + row] = lse;
  } else {
    const int64_t token = first / P.H, q0 = t.w[2];
    P.part_lse[(int64_t{loc} + (token - q0)) * P.H + (first - token * P.H) + row] = lse;
  }
}

// Every consumer warp: its 64 columns of rows gq and gq + 8, scaled by inv.
template <class C>
__device__ inline void store_rows(const DecodeParams& P, const WsSmem<C>& s,
                                  const float (&oacc)[8][4], const GroupTask& t, int64_t first,
                                  int parity) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gq = lane / 4, tq = lane % 4;
  const float inv_lo = s.inv[parity * kRows + gq], inv_hi = s.inv[parity * kRows + gq + 8];
  const int col0 = warp * 64 + 2 * tq;
  const int32_t loc = t.w[1];
  const int64_t token = first / P.H;
  if (loc < 0) {
    uint16_t* o_lo = P.o + (first + gq) * C::kDv + col0;
    uint16_t* o_hi = P.o + (first + gq + 8) * C::kDv + col0;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      *reinterpret_cast<uint32_t*>(o_lo + nt * 8) =
          pack_bf16(oacc[nt][0] * inv_lo, oacc[nt][1] * inv_lo);
      *reinterpret_cast<uint32_t*>(o_hi + nt * 8) =
          pack_bf16(oacc[nt][2] * inv_hi, oacc[nt][3] * inv_hi);
    }
    log_rows(P.log, 2, token, token + 1, threadIdx.x == 0);
  } else {
    const int64_t q0 = t.w[2];
    const int64_t pfirst = (int64_t{loc} + (token - q0)) * P.H + (first - token * P.H);
    float* po_lo = P.part_o + (pfirst + gq) * C::kDv + col0;
    float* po_hi = P.part_o + (pfirst + gq + 8) * C::kDv + col0;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      *reinterpret_cast<float2*>(po_lo + nt * 8) =
          make_float2(oacc[nt][0] * inv_lo, oacc[nt][1] * inv_lo);
      *reinterpret_cast<float2*>(po_hi + nt * 8) =
          make_float2(oacc[nt][2] * inv_hi, oacc[nt][3] * inv_hi);
    }
  }
}

}  // namespace mlasim::gpu::decode::sm90
