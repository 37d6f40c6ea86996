// kernels/decode/fragments.h - the k orders of the lock-step kernels that read fp8 KV straight
// from shared memory as mma operands (kernels/decode/sm90/lockstep.h, kDirect and kQ8): which
// physical dims of a q / KV row and which keys of a chunk each lane's fragment words hold. A sum
// over k may take its terms in any order, so the kernels permute k to make each fragment one
// wide shared-memory load; these maps must then be permutations, and the A and B sides of each
// mma must use the same one. Plain integer functions, host and device: tests/gpu/
// fragments_test.cpp checks them against the PTX fragment layouts on the CPU.
#pragma once

#include "ref/host_device.h"

namespace mlasim::gpu::decode {

// S = Q K^T with f16 m16n8k16 (fp8 KV widened per fragment): a dimension half of kD dims (kD /
// 2 = 288 for MLA's 576) is 4 blocks of 64 dims and a tail of 32; k16 step st = 4 blk + w. Lane
// (gq, tq) loads 16 bytes of its key (dims 16 tq .. of block blk; the tail: 8 bytes, dims 8 tq ..)
// and uses its 32-bit word w for step st: the mma's logical k {2 tq, 2 tq + 1, 2 tq + 8, 2 tq + 9}
// are the physical dims d, d + 1, d + 2, d + 3 with d = direct_dim(kD, kh, st, tq). q's A
// fragments are loaded in the same order.
MLASIM_HOST_DEVICE constexpr int direct_dim(int kD, int kh, int st, int tq) {
  return kh * (kD / 2) + 64 * (st / 4) + (st / 4 < 4 ? 16 : 8) * tq + 4 * (st % 4);
}

// S with e4m3 m16n8k32 (fp8 q): k32 step j is the k16 steps 2 j and 2 j + 1, so its logical k
// 4 tq .. 4 tq + 3 are the dims d .. d + 3 and 16 + 4 tq .. the dims d + 4 .. d + 7, d =
// direct_dim(kD, kh, 2 j, tq) (one 8-byte q load per row; one 16-byte K load feeds two steps).
MLASIM_HOST_DEVICE constexpr int direct_dim_k32(int kD, int kh, int j, int tq) {
  return direct_dim(kD, kh, 2 * j, tq);
}

// The key (0..15) of a warp's quarter of a chunk in column n (0..7) of S's C fragment of n8 tile
// nt: the tile's column gq is key 2 gq + nt (the B rows the lane loads: 2 gq + nt).
MLASIM_HOST_DEVICE constexpr int direct_s_key(int nt, int n) { return 2 * n + nt; }
// So lane tq's four S values of one quarter (tile nt = e & 1, column 2 tq + (e >> 1)) are the keys
// 4 tq + e, e = 0..3: the kernel stores them by that index.
MLASIM_HOST_DEVICE constexpr bool direct_s_keys_are_4tq_plus_e() {
  for (int tq = 0; tq < 4; ++tq)
    for (int e = 0; e < 4; ++e)
      if (direct_s_key(e & 1, 2 * tq + (e >> 1)) != 4 * tq + e) return false;
  return true;
}

// P V's k16 step covers the 16 keys of one quarter with logical k {2 tq, 2 tq + 1, 2 tq + 8,
// 2 tq + 9} = keys {tq, tq + 4, tq + 8, tq + 12}: the V row of the lane's word j is key tq + 4 j
// (one 4-byte load of 4 output columns each). S (and so P) is stored in that logical order: key
// 4 t + j of a step (t, j = 0..3) at column 2 j + (t & 1) + 8 (t >> 1).
MLASIM_HOST_DEVICE constexpr int direct_pv_key(int tq, int j) { return tq + 4 * j; }
MLASIM_HOST_DEVICE constexpr int direct_s_column(int key_in_step) {
  return 2 * (key_in_step % 4) + ((key_in_step / 4) & 1) + 8 * ((key_in_step / 4) >> 1);
}
// Chunk key of S column `col` (0 .. chunk - 1): direct_s_column's inverse within each 16 columns.
MLASIM_HOST_DEVICE constexpr int direct_key_of_column(int col) {
  const int c = col % 16;
  return col - c + (c % 8) / 2 + 4 * (c % 2) + 8 * (c / 8);
}

}  // namespace mlasim::gpu::decode
