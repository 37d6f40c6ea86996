// kernels/decode/sm90/wgmma.h - the warpgroup-mma NVIDIA decode kernel (DecodeOptions::tiling 8:
// 16 q rows per pass, 9: 32; sm_90a: built only where the kernel library is compiled for
// compute_90a, MLASIM_KUT_SM90A).
//
// The lock-step kernel's schedule (lockstep.h: all 8 warps copy 64-key chunks with cp.async into
// a ring of stages, three barriers per chunk, the split online softmax through shared memory; for
// bf16 KV: fp8 KV differs, below),
// with the two products on Hopper's warpgroup mma (wgmma, operands read by the tensor cores from
// shared memory through matrix descriptors) in the transposed orientation, so that the 16 (or 32)
// q rows of a pass are the mma's N and the 64 keys of a chunk (S) or 64 output dims (O) its M:
//   S^T [64 keys x N rows]  = K [64 keys x 576 dims] . Q^T   (warpgroup kh: dims of half kh,
//                                                             18 k16 steps; the halves are summed
//                                                             by the softmax, as in lockstep.h)
//   O^T [512 dims x N rows] += V^T [512 dims x 64 keys] . P^T (warpgroup kh: dims 256 kh .. +255,
//                                                             4 m64 tiles x 4 k16 steps)
// One instruction covers 64 x N x 16 per warpgroup instead of 16 x 8 x 16 per warp, and with
// 16-bit KV no thread loads an operand fragment: what the lock-step kernel spends on ldmatrix and
// mma issue is gone.
//
// Shared-memory layouts (the canonical wgmma layouts):
// - A KV chunk (16-bit) is 9 blocks of 64 dims; block b holds the 64 keys' dims 64 b .. 64 b + 63
//   as rows of 128 bytes (key j at b * 8192 + 128 j) with the 128-byte swizzle: the 16-byte piece
//   c (dims 8 c ..) of key j at ((c ^ j % 8) * 16) in its row. Read as K (K-major A: rows = keys,
//   k = dims) the k16 step of dims 16 k .. is block k / 4 at + 32 (k % 4) (the tensor cores apply
//   the swizzle to the address bits), stride byte offset 1024 (next 8 keys); read as V^T (M-major
//   A, transposed: rows = dims, k = keys) an m64 tile is one block, a k16 step + 2048 (16 keys),
//   stride byte offset 1024 (next 8 keys). bf16 KV lives in a ring of such blocks (WgTiling);
//   each 8 lanes copy one whole 128-byte line of one key into one row, which the swizzle spreads
//   over all banks.
// - q and P use the no-swizzle layout: 8 x 8 core matrices of 16-bit elements, each 8 rows of 16
//   bytes stored as 128 contiguous bytes; q is [row group][dim group] (K-major B of S^T: leading
//   byte offset 128 = next 8 dims, stride byte offset 9216 = next 8 rows), P is [row group][key
//   group] (K-major B of O^T: 128, and 1024 = next 8 rows).
//
// fp8 e4m3fn KV: each thread loads its share of a chunk (one key, 9 pieces of 16 bytes) from
// global memory into registers an iteration ahead (load_fp8), and widens it exactly to fp16
// straight into the chunk layout above (widen_fp8) beside the softmax of the current chunk; two
// widened chunks alternate (18 blocks), and the loop has two barriers per chunk (run_group_wg).
// Every element is converted once and read by both products from shared memory, as bf16 KV is;
// the mma runs on fp16 operands (q converted from bf16, P rounded to fp16), the same numerics as
// every fp8 path.
#pragma once

#include <cstdint>

#include "kernels/decode/config.h"
#include "kernels/decode/params.h"
#include "kernels/decode/schedule.h"
#include "kernels/decode/sm90/lockstep.h"
#include "kernels/decode/sm90/ptx.h"

namespace mlasim::gpu::decode::sm90::wg {

// ---- PTX: warpgroup mma (sm_90a) ----------------------------------------------------------------
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define MLASIM_WGMMA_ASM 1
#endif

// Matrix descriptor of an operand at shared address addr: leading byte offset `lbo`, stride byte
// offset `sbo` (bytes, multiples of 16: the descriptor keeps bits 4..17); `sw128`: the 128-byte
// swizzle (layout type 1; its 1024-byte atoms must be 1024-byte aligned: base offset 0), else no
// swizzle (type 0). What lbo and sbo step over depends on the layout (see the file comment).
__device__ inline uint64_t make_desc(uint32_t addr, uint32_t lbo, uint32_t sbo,
                                     bool sw128 = false) {
  return uint64_t{(addr & 0x3ffffu) >> 4} | uint64_t{(lbo & 0x3ffffu) >> 4} << 16 |
         uint64_t{(sbo & 0x3ffffu) >> 4} << 32 | uint64_t{sw128 ? 1u : 0u} << 62;
}

__device__ inline void wgmma_fence() {
#ifdef MLASIM_WGMMA_ASM
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ inline void wgmma_commit() {
#ifdef MLASIM_WGMMA_ASM
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int N>
__device__ inline void wgmma_wait() {
#ifdef MLASIM_WGMMA_ASM
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}
// Shared-memory writes of this thread (st.shared, cp.async) become visible to the tensor cores'
// reads (the async proxy) once a barrier follows this fence.
__device__ inline void fence_proxy_async() {
#ifdef MLASIM_WGMMA_ASM
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
// Keeps the compiler from moving accumulator reads or writes across a wgmma wait.
template <int kN>
__device__ inline void fence_regs(float (&d)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// d (+)= A . B for one k16 step, m64 x kN (kN = 16 or 32), A and B from descriptors, fp32
// accumulators; kF16: f16 operands (else bf16); kTransA: A is M-major (transposed); accumulate:
// 0 = d is overwritten. Every thread of the warpgroup calls it with the same descriptors.
template <int kN, bool kF16, bool kTransA>
__device__ inline void wgmma(float (&d)[kN / 2], uint64_t da, uint64_t db, int accumulate) {
#ifdef MLASIM_WGMMA_ASM
  static_assert(kN == 16 || kN == 32, "N of 16 or 32 rows");
  if constexpr (kN == 16) {
    if constexpr (kF16)
      asm volatile(
          "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
          "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, "
          "p, 1, 1, %11, 0;\n}\n"
          : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
            "+f"(d[7])
          : "l"(da), "l"(db), "r"(accumulate), "n"(kTransA ? 1 : 0));
    else
      asm volatile(
          "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
          "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7}, %8, "
          "%9, p, 1, 1, %11, 0;\n}\n"
          : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
            "+f"(d[7])
          : "l"(da), "l"(db), "r"(accumulate), "n"(kTransA ? 1 : 0));
  } else {
    if constexpr (kF16)
      asm volatile(
          "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
          "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,"
          "%11,%12,%13,%14,%15}, %16, %17, p, 1, 1, %19, 0;\n}\n"
          : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
            "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]),
            "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
          : "l"(da), "l"(db), "r"(accumulate), "n"(kTransA ? 1 : 0));
    else
      asm volatile(
          "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
          "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,"
          "%10,%11,%12,%13,%14,%15}, %16, %17, p, 1, 1, %19, 0;\n}\n"
          : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
            "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]),
            "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
          : "l"(da), "l"(db), "r"(accumulate), "n"(kTransA ? 1 : 0));
  }
#else
  (void)d, (void)da, (void)db, (void)accumulate;
  __trap();  // not an sm_90a build: the host never picks this kernel then (kWgmmaBuilt)
#endif
}

// ---- tiling and shared-memory plan ---------------------------------------------------------------
// kBuf: the blocks of the KV ring (8 KB each: 64 dims of a chunk's 64 keys; 18 = two chunks ..
// 26); fp8 KV: 18, the two widened chunks. kM m16 tiles of q rows per pass (N = 16 kM rows of
// one token).
//
// The bf16 ring: block b of chunk c (dims 64 b ..) lives in ring slot (9 c + b) % kRing; a wgmma
// operand never spans two blocks, so a chunk need not be contiguous. At iteration i (after the
// barrier that retires chunk i - 1) the blocks [9 i + kRing - 9, 9 i + kRing) are queued as two
// copy groups: the rest of chunk i + 1 and the first kRing - 18 blocks of chunk i + 2. With more
// than 18 blocks more than one chunk is in flight while a chunk is computed (two stages of whole
// chunks leave one in flight, then none at the chunk's end).
template <int kBufT, bool kFp8T = false, int kMT = 1>
struct WgTiling {
  static constexpr int kD = 576, kDv = 512;
  static constexpr bool kFp8 = kFp8T;
  static constexpr bool kDirect = false;  // (lockstep.h's split_softmax asks)
  static constexpr int kChunk = 64;       // keys per chunk = the M of S^T
  static constexpr int kBlocks = kD / 64;          // 64-dim blocks of a chunk (9)
  static constexpr int kRing = kBufT;              // KV ring blocks
  // chunks whose cache rows are held beyond the current one (the ring queues chunk i + 2; fp8
  // loads chunk i + 2 into registers)
  static constexpr int kAhead = 3;
  static constexpr int kSlots = kAhead + 1;  // ring of per-chunk cache rows / masks
  static constexpr int kWords = kChunk / 32;  // validity words per chunk
  static constexpr int kM = kMT;
  static constexpr int kPassRows = kM * kRows;  // N of every wgmma
  static constexpr int kCore = 128;              // bytes of one core matrix
  static constexpr int kDimGroups = kD / 8;      // 72 core matrices along a 576-dim row
  static constexpr int kKeyGroupBytes = kDimGroups * kCore;  // 9216: 8 rows x 576 dims
  static constexpr int kTileBytes = kChunk * kD * 2;         // one 16-bit chunk, tiled
  static constexpr int kBlockBytes = kChunk * 128;  // 64 dims of every key of a chunk (swizzled)
  static_assert(kBlockBytes == 8192, "64 keys x 128 bytes");
  static constexpr int kAtom = 1024;                // 8 rows x 128 bytes: one swizzle atom
  static constexpr size_t kKvBufBytes = size_t{kRing} * kBlockBytes;
  static constexpr int kConvBytes = 0;  // (lockstep.h's MmaSmem carves a conv view: empty)
  // fp8: 16-byte pieces of a chunk per thread (load_fp8: one key, dims 16 (4 r + lane % 4) ..)
  static constexpr int kFp8Pieces = kD / 64;
  static constexpr int kQBytes = kPassRows * kD * 2;        // q of the pass, tiled
  static constexpr int kHalfSteps = kD / 32;                // k16 steps per dimension half (18)
  static constexpr int kPvSteps = kChunk / 16;              // k16 steps of O^T (4)
  static constexpr int kOTiles = kDv / 2 / 64;              // m64 tiles of O^T per warpgroup (4)
  static constexpr int kLdS = kChunk + 8;  // floats per row of a score half
  // split_softmax (lockstep.h): each warp owns kPassRows / 8 rows
  static constexpr int kRowsPerWarp = kPassRows / 8;
  static constexpr int kLanesPerRow = 32 / kRowsPerWarp;
  static constexpr int kKeysPerLane = kChunk / kLanesPerRow;
  static constexpr int kPBytes = kPassRows * kChunk * 2;  // P, tiled [row group][key group]
  static constexpr int kRowStateBytes = 3 * kPassRows * 4;
  // 16-bit element index of P (row, key) in its tiled layout (core matrix (row / 8, key / 8))
  __host__ __device__ static constexpr int p_index(int row, int k) {
    return (row / 8) * (kChunk * 8) + (k / 8) * 64 + (row % 8) * 8 + k % 8;
  }
  static_assert(kM == 1 || kM == 2, "N = 16 or 32 rows");
  static_assert(kFp8 ? kRing == 2 * kBlocks : kRing >= 2 * kBlocks && kRing < 3 * kBlocks,
                "fp8: two widened chunks; bf16: a ring of two to three chunks");
  static_assert(4 * kFp8Pieces * 16 == kD && kChunk * 4 == kBlock,
                "fp8: four threads per key, 9 pieces each, cover a chunk");
  static_assert(kKeysPerLane % 2 == 0 && kKeysPerLane <= 8 && 8 % kKeysPerLane == 0,
                "split softmax: a lane's P keys stay inside one core-matrix row");
  static_assert(kKeyGroupBytes / 16 < (1 << 14), "descriptor offsets fit 14 bits");

  static constexpr size_t kKsOff = 0;
  static constexpr size_t kConvOff = kKsOff + kKvBufBytes;
  static constexpr size_t kQOff = kConvOff + kConvBytes;
  static constexpr size_t kSpOff = kQOff + kQBytes;
  static constexpr size_t kPOff = kSpOff + size_t{2} * kPassRows * kLdS * 4;
  static constexpr size_t kRowOff = kPOff + kPBytes;
  static constexpr size_t kKrowOff = kRowOff + kRowStateBytes;
  static constexpr size_t kValidOff = kKrowOff + size_t{kSlots} * kChunk * 8;
  static constexpr size_t kSmemBytes = kValidOff + size_t{kSlots} * kWords * 4;
  static_assert(kConvOff % kAtom == 0, "1024-byte aligned swizzle atoms");
  static_assert(kConvOff % 128 == 0 && kQOff % 128 == 0 &&
                    kPOff % 128 == 0 && kRowStateBytes % 16 == 0,
                "128-byte aligned operands");
  static_assert(kSmemBytes <= kSharedLimit, "shared-memory plan exceeds the sm_90 limit");
  static constexpr size_t smem_bytes() { return kSmemBytes; }
};

// Byte offset of the 16-byte piece c (0..7: elements 8 c .. 8 c + 7) of row r in a block of
// 128-byte rows with the 128-byte swizzle (the canonical wgmma layout; 1024-byte atoms).
__device__ inline uint32_t swizzle128(int r, int c) {
  return r * 128 + ((c ^ (r % 8)) * 16);
}

// Byte offset in a contiguous 16-bit chunk (the fp8 path's widened chunk; see the file comment) of
// key j's 16-byte piece `piece` (dims 8 piece .. 8 piece + 7).
template <class T>
__device__ inline uint32_t kv_offset(int j, int piece) {
  return (piece / 8) * T::kBlockBytes + swizzle128(j, piece % 8);
}

// bf16: queues the copies of blocks [b0, b1) of one chunk (cache rows from krow; -1 =
// zero-filled) into their ring slots: block b at ring slot slot0 + b (mod kRing; slot0 < kRing),
// ks the ring's shared address. A block is 64 keys x 128 bytes: thread t copies pieces t and
// t + 256 of every block (keys t / 8 and t / 8 + 32, dims 64 b + 8 (t % 8) ..), so each 8 lanes
// read one whole 128-byte line and write one swizzled row; the cache rows are read once.
template <class T>
__device__ inline void issue_blocks(const DecodeParams& P, const int64_t* krow, int slot0, int b0,
                                    int b1, uint32_t ks) {
  const int j = threadIdx.x / 8, cp = threadIdx.x % 8;
  const int64_t r0 = krow[j], r1 = krow[j + kBlock / 8];
  const uint16_t* s0 = P.kv + (r0 >= 0 ? r0 : 0) * T::kD + 8 * cp;
  const uint16_t* s1 = P.kv + (r1 >= 0 ? r1 : 0) * T::kD + 8 * cp;
  const uint32_t d0 = j * 128 + ((cp ^ (j % 8)) * 16), d1 = d0 + (kBlock / 8) * 128;
  for (int b = b0; b < b1; ++b) {
    const int slot = slot0 + b >= T::kRing ? slot0 + b - T::kRing : slot0 + b;
    const uint32_t dst = ks + slot * T::kBlockBytes;
    cp_async16(dst + d0, s0 + 64 * b, r0 >= 0 ? 16 : 0);
    cp_async16(dst + d1, s1 + 64 * b, r1 >= 0 ? 16 : 0);
  }
}

// fp8: loads this thread's share of one chunk (cache rows from krow; -1 = zeros) into v: key
// threadIdx.x / 4 of the chunk, its 16-byte pieces r = 0 .. 8 at bytes 16 (4 r + threadIdx.x % 4)
// of the row (a warp reads 8 keys x 64 contiguous bytes per load). Read-only, not kept in L1.
template <class T>
__device__ inline void load_fp8(const DecodeParams& P, const int64_t* krow,
                                uint4 (&v)[T::kFp8Pieces]) {
  const int64_t row = krow[threadIdx.x / 4];
  const uint8_t* src = P.kv8 + (row >= 0 ? row : 0) * T::kD + 16 * (threadIdx.x % 4);
#pragma unroll
  for (int r = 0; r < T::kFp8Pieces; ++r)
    v[r] = row >= 0 ? ldg_stream128(src + 64 * r) : make_uint4(0u, 0u, 0u, 0u);
}

// fp8: widens the share loaded by load_fp8 exactly to fp16 into a chunk in the swizzled layout
// (chunk: its block 0): fp8 piece c = 4 r + threadIdx.x % 4 of key j becomes the 16-bit pieces
// 2 c and 2 c + 1 (kv_offset). A warp's 32 stores of one instruction fall in one block and, keys
// j % 8 all different, cover all 8 16-byte bank groups four times: conflict-free.
template <class T>
__device__ inline void widen_fp8(const uint4 (&v)[T::kFp8Pieces], unsigned char* chunk) {
  const int j = threadIdx.x / 4;
#pragma unroll
  for (int r = 0; r < T::kFp8Pieces; ++r) {
    const int c = 4 * r + threadIdx.x % 4;
    uint32_t b[8];
    e4m3x16_to_f16(v[r], b);
    *reinterpret_cast<uint4*>(chunk + kv_offset<T>(j, 2 * c)) = make_uint4(b[0], b[1], b[2], b[3]);
    *reinterpret_cast<uint4*>(chunk + kv_offset<T>(j, 2 * c + 1)) =
        make_uint4(b[4], b[5], b[6], b[7]);
  }
}

// q rows [first, first + kPassRows) into the q buffer (no swizzle, [row group][k core]): run r =
// (row group, dim group, row % 8) at linear position r; fp8 KV, converted to fp16.
template <class T>
__device__ inline void load_q_tiled(const DecodeParams& P, int64_t first, uint16_t* q) {
  constexpr int kRuns = T::kPassRows * T::kDimGroups, kGroupRuns = 8 * T::kDimGroups;
  for (int r = threadIdx.x; r < kRuns; r += kBlock) {
    const int row = 8 * (r / kGroupRuns) + r % 8, c = r % kGroupRuns / 8;
    const uint16_t* qrow = P.q + (first + row) * T::kD;
    uint4 v = *reinterpret_cast<const uint4*>(qrow + c * 8);
    if constexpr (T::kFp8)
      v = make_uint4(bf16x2_to_f16x2(v.x), bf16x2_to_f16x2(v.y), bf16x2_to_f16x2(v.z),
                     bf16x2_to_f16x2(v.w));
    reinterpret_cast<uint4*>(q)[r] = v;
  }
}

// Writes the pass's rows [first, first + kPassRows) (heads of one token): o and lse when the work
// item owns its rows (work_info loc < 0), else the partial rows of its split. oacc[mt][4 j + e]:
// O^T (dim 256 kh + 64 mt + 16 (warp % 4) + lane / 4 + 8 (e / 2), row 8 j + 2 (lane % 4) + e % 2)
// unscaled; s.alpha[kPR + row] / [2 kPR + row]: the rows' inv and lse (RowEnd).
template <class T>
__device__ inline void write_rows_t(const DecodeParams& P, const lockstep::MmaSmem<T>& s,
                                    const GroupTask& t, int64_t token, int64_t first,
                                    const float (&oacc)[T::kOTiles][T::kPassRows / 2]) {
  constexpr int kPR = T::kPassRows, kDv = T::kDv;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, gq = lane / 4, tq = lane % 4;
  const int dim0 = 256 * (warp / 4) + 16 * (warp % 4) + gq;
  const int32_t loc = t.w[1];
  const int64_t pfirst =
      loc < 0 ? 0 : (int64_t{loc} + (token - t.w[2])) * P.H + (first - token * P.H);
#pragma unroll
  for (int j = 0; j < kPR / 8; ++j) {
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int row = 8 * j + 2 * tq + c;
      const float inv = s.alpha[kPR + row];
#pragma unroll
      for (int mt = 0; mt < T::kOTiles; ++mt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int dim = dim0 + 64 * mt + 8 * h;
          const float v = oacc[mt][4 * j + 2 * h + c] * inv;
          if (loc < 0)
            P.o[(first + row) * kDv + dim] = f2bf(v);
          else
            P.part_o[(pfirst + row) * kDv + dim] = v;
        }
      }
    }
  }
  if (threadIdx.x < kPR) {
    const float lse = s.alpha[2 * kPR + threadIdx.x];
    if (loc < 0)
      P.lse[first + threadIdx.x] = lse;
    else
      P.part_lse[pfirst + threadIdx.x] = lse;
  }
  if (loc < 0) log_rows(P.log, 2, token, token + 1, threadIdx.x == 0);
}

// S^T (+)= K Q^T over dimension half kh: 18 k16 steps (dims 16 k ..: block k / 4 of the chunk,
// + 32 (k % 4) bytes), A = K (swizzled, K-major), B = q of the half (no swizzle, K-major).
// No branch may surround a wgmma: ptxas then serializes every wgmma of the kernel (C7520: a
// compiler-inserted warpgroup.arrive in a divergent path), so the half is a run-time value here.
template <class T, class Block>
__device__ inline void scores_half(float (&sacc)[T::kPassRows / 2], const Block& block, int kh,
                                   uint32_t q_half) {
#pragma unroll
  for (int st = 0; st < T::kHalfSteps; ++st) {
    const int k16 = kh * T::kHalfSteps + st;
    wgmma<T::kPassRows, T::kFp8, false>(
        sacc, make_desc(block(k16 / 4) + (k16 % 4) * 32, 16, T::kAtom, true),
        make_desc(q_half + 2 * st * T::kCore, T::kCore, T::kKeyGroupBytes), st > 0);
  }
}

// S^T of this warpgroup (sacc[4 j + e]: key 16 w4 + gq + 8 (e / 2), row 8 j + 2 tq + e % 2),
// scaled by scale2 (logit scale x log2 e), into its half of the score buffer: sp[kh][row][key].
template <class T>
__device__ inline void store_scores(const lockstep::MmaSmem<T>& s,
                                    const float (&sacc)[T::kPassRows / 2], float scale2) {
  constexpr int kPR = T::kPassRows;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* sp = s.sp + (warp / 4) * kPR * T::kLdS + 16 * (warp % 4) + lane / 4;
#pragma unroll
  for (int j = 0; j < kPR / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      sp[(8 * j + 2 * (lane % 4) + e % 2) * T::kLdS + 8 * (e / 2)] = sacc[4 * j + e] * scale2;
}

// O^T += V^T P^T for dims [256 kh, +256) of the chunk at block(0 .. 7): the accumulators rescaled
// by their rows' alpha, then 4 k16 steps x 4 m64 tiles issued (the caller fences, commits and
// waits). P (no swizzle, [row group][key group]) at shared address p_u32.
template <class T, class Block>
__device__ inline void pv_issue(const lockstep::MmaSmem<T>& s,
                                float (&oacc)[T::kOTiles][T::kPassRows / 2], const Block& block,
                                int kh, uint32_t p_u32) {
  const int tq = threadIdx.x % 4;
#pragma unroll
  for (int j = 0; j < T::kPassRows / 8; ++j) {
    const float a0 = s.alpha[8 * j + 2 * tq], a1 = s.alpha[8 * j + 2 * tq + 1];
#pragma unroll
    for (int mt = 0; mt < T::kOTiles; ++mt) {
      oacc[mt][4 * j] *= a0, oacc[mt][4 * j + 2] *= a0;
      oacc[mt][4 * j + 1] *= a1, oacc[mt][4 * j + 3] *= a1;
    }
  }
#pragma unroll
  for (int mt = 0; mt < T::kOTiles; ++mt) fence_regs(oacc[mt]);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < T::kPvSteps; ++ks) {
    const uint64_t db = make_desc(p_u32 + 2 * ks * T::kCore, T::kCore, T::kChunk / 8 * T::kCore);
#pragma unroll
    for (int mt = 0; mt < T::kOTiles; ++mt) {
      const uint32_t a = block(4 * kh + mt) + 2 * ks * T::kAtom;
      wgmma<T::kPassRows, T::kFp8, true>(oacc[mt], make_desc(a, T::kBlockBytes, T::kAtom, true),
                                         db, 1);
    }
  }
}

// bf16: queues the copies of q rows [first, first + kPassRows) into the q buffer in
// load_q_tiled's layout (cp.async: the caller commits, waits, fences and syncs before a wgmma
// reads them).
template <class T>
__device__ inline void copy_q_tiled(const DecodeParams& P, int64_t first, uint16_t* q) {
  static_assert(!T::kFp8, "fp8 KV converts q: load_q_tiled");
  constexpr int kRuns = T::kPassRows * T::kDimGroups, kGroupRuns = 8 * T::kDimGroups;
  const uint32_t q_u32 = smem_u32(q);
  for (int r = threadIdx.x; r < kRuns; r += kBlock) {
    const int row = 8 * (r / kGroupRuns) + r % 8, c = r % kGroupRuns / 8;
    cp_async16(q_u32 + 16 * r, P.q + (first + row) * T::kD + c * 8, 16);
  }
}

// What a group hands to the next one when its pipeline runs on into it (bf16 KV; run_group_wg's
// run_on): the next group's prologue is done and in flight, not waited for: the cache rows of
// its chunks 0 .. kAhead - 1 in the row slots from row0 on, next_row / next_index as its prologue
// leaves them, its first copies queued into the ring from block ring0 (chunk 0, and the first
// kRing - 18 blocks of chunk 1) and its q rows into the q buffer, as the last copy group.
struct Handover {
  bool active = false;
  int row0 = 0;   // row slot (of kSlots) of the group's chunk 0
  int ring0 = 0;  // ring block of its chunk 0's block 0
  int64_t next_row = -1;
  int32_t next_index = 0;
};

template <class T>
__device__ void run_group_wg(const DecodeParams& P, const lockstep::MmaSmem<T>& s,
                             const GroupTask& t, Handover& ho) {
  constexpr int kChunk = T::kChunk, kAhead = T::kAhead, kSlots = T::kSlots;
  constexpr int kPR = T::kPassRows, kAcc = T::kPassRows / 2;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // warpgroup = dimension half; through a shuffle so that the compiler knows it is warp-uniform
  // and keeps the matrix descriptors built from it in uniform registers
  const int kh = __shfl_sync(0xffffffffu, warp / 4, 0);
  const int64_t first = group_first_row(P, t), token = first / P.H;
  log_rows(P.log, 0, token, token + 1, threadIdx.x == 0);
  const int64_t n = t.p1 - t.p0;
  // this group's prologue was run by the group before it; the handed-over state through shuffles,
  // so that the compiler knows it is warp-uniform (the ring slots feed the matrix descriptors:
  // held in registers of each thread instead, they cost 14 % more instructions, call 4)
  const bool handed = !T::kFp8 && __shfl_sync(0xffffffffu, ho.active ? 1 : 0, 0) != 0;
  ho.active = false;
  if (n <= 0 && P.variant != static_cast<int>(ZeroKvVariant::kAsm)) {
    // hk: read q, write nothing (the read is what the variant's contract states)
    load_q_tiled<T>(P, first, s.q);
    __syncthreads();
    return;
  }
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  const int64_t limit = causal_limit(P, t, token);
  // Whether the pipeline runs on into the next group (bf16): its cache rows, copies and q start
  // during this group's last chunks instead of after its epilogue (the ring would otherwise
  // drain at every group boundary). Everything loaded for it here reaches its chunk kAhead + 1,
  // which must lie inside it: past its end the group after it would begin.
  const int64_t next_chunks = (t.next_p1 - t.next_p0 + kChunk - 1) / kChunk;
  const bool run_on = !T::kFp8 && chunks >= 1 && t.next_first >= 0 && next_chunks >= kAhead + 2;
  // Position of this thread's key of chunk k (counted from this group's chunk 0, on into the
  // next group's chunks when run_on) and the end of its range; past both: masked.
  // (32-bit: positions stay below 2^30, ValidatePlanRequest; the loop is short of issue slots)
  const int64_t np1 = run_on ? t.next_p1 : 0;
  const int32_t chunks32 = static_cast<int32_t>(chunks);
  const int32_t here0 = static_cast<int32_t>(t.p0) + static_cast<int32_t>(threadIdx.x);
  const int32_t there0 =
      run_on ? static_cast<int32_t>(t.next_p0) - chunks32 * kChunk + static_cast<int32_t>(threadIdx.x)
             : 0;
  auto key_at = [&](int32_t k, int64_t* end) -> int64_t {
    const bool here = k < chunks32;
    *end = here ? t.p1 : np1;
    return (here ? here0 : there0) + k * kChunk;
  };
  // whether chunk k has keys to copy (this group's, or the next one's when run_on)
  const int64_t copy_end = chunks + (run_on ? next_chunks : 0);
  auto copies = [&](int64_t k) { return k < copy_end; };
  // row slot of chunk 0; chunk i + d: (row0 + i + d) % kSlots
  static_assert((kSlots & (kSlots - 1)) == 0, "row slots counted with a mask");
  const int row0 = T::kFp8 ? 0 : __shfl_sync(0xffffffffu, handed ? ho.row0 : 0, 0);

  // Cache rows of chunks 0 .. kAhead - 1, then the first copies: bf16, blocks [0, kRing - 9)
  // (chunk 0, and the first kRing - 18 blocks of chunk 1) as two groups, so that every iteration
  // below waits for all but its last group; fp8, chunk 0 loaded and widened into widened chunk 0,
  // chunk 1 loaded into registers.
  // next_row: the row of chunk i + kAhead for iteration i; next_index: the index load of chunk
  // i + kAhead + 1, issued an iteration before its row is needed.
  int64_t next_row = handed ? ho.next_row : -1;
  int32_t next_index = handed ? ho.next_index : 0;
  if (!handed) {
    load_q_tiled<T>(P, first, s.q);  // visible after the prologue's fence and barrier
    if (threadIdx.x < kChunk) {
      int64_t rows[kAhead], end;
#pragma unroll
      for (int c = 0; c < kAhead; ++c) {
        const int64_t pos = key_at(c, &end);
        rows[c] = key_row(P, pos, end);
      }
      const int64_t pos = key_at(kAhead, &end);
      next_row = key_row(P, pos, end);
      const int64_t pos1 = key_at(kAhead + 1, &end);
      next_index = key_index(P, pos1, end);
#pragma unroll
      for (int c = 0; c < kAhead; ++c) lockstep::put_rows(s, c, rows[c]);
    }
    __syncthreads();
  }
  const uint32_t ks_u32 = smem_u32(s.ks);
  unsigned char* const widened = reinterpret_cast<unsigned char*>(s.ks);  // fp8: 2 chunks
  uint4 raw[T::kFp8 ? T::kFp8Pieces : 1];  // fp8: this thread's share of the next chunk
  if constexpr (T::kFp8) {
    load_fp8<T>(P, s.krow, raw);
    widen_fp8<T>(raw, widened);
    if (chunks > 1) load_fp8<T>(P, s.krow + kChunk, raw);
  } else if (!handed) {
    issue_blocks<T>(P, s.krow, 0, 0, T::kBlocks, ks_u32);
    cp_async_commit();
    if (copies(1))
      issue_blocks<T>(P, s.krow + kChunk, T::kBlocks, 0, T::kRing - 2 * T::kBlocks, ks_u32);
    cp_async_commit();
  }

  // Descriptor parts that do not change: q of this half, P.
  const uint32_t q_half = smem_u32(s.q) + kh * (T::kDimGroups / 2) * T::kCore;
  const uint32_t p_u32 = smem_u32(s.p);
  float oacc[T::kOTiles][kAcc];
#pragma unroll
  for (int mt = 0; mt < T::kOTiles; ++mt)
#pragma unroll
    for (int e = 0; e < kAcc; ++e) oacc[mt][e] = 0.f;
  float m_own = -INFINITY, l_own = 0.f;
  const float scale2 = P.logit_scale * 1.4426950408889634f;

  // The next chunk's cache rows (chunk i + kAhead at iteration i; every thread's copies or loads
  // of chunk i + 2 read them after a barrier).
  // (slot: the row slot of chunk i + kAhead)
  auto put_next_rows = [&](int64_t i, int slot) {
    if (threadIdx.x < kChunk) {
      lockstep::put_rows(s, slot, next_row);
      const int32_t k = static_cast<int32_t>(i) + kAhead + 1;
      int64_t end, end1;
      const int64_t pos = key_at(k, &end);
      next_row = key_row_of(P, pos, end, next_index);
      const int64_t pos1 = key_at(k + 1, &end1);
      next_index = key_index(P, pos1, end1);
    }
  };
  float sacc[kAcc];  // S^T of one chunk (the first k16 step overwrites it)
  // bf16: ring slot of the current chunk's block 0
  int ring0 = __shfl_sync(0xffffffffu, handed ? ho.ring0 : 0, 0);

  if constexpr (T::kFp8) {
    // Two barriers per chunk. Iteration i, with S of chunk i in sp: the softmax of chunk i and the
    // widening of chunk i + 1 (and loads of chunk i + 2) | barrier | O^T += V^T P^T of chunk i
    // and S^T of chunk i + 1 on the tensor cores together, S stored | barrier. (The last
    // iteration's S^T reads chunk i again and is discarded: no branch around a wgmma.)
    auto widened_block = [&](int64_t c) {  // block b of widened chunk c % 2
      const uint32_t base = ks_u32 + static_cast<uint32_t>(c % 2) * T::kBlocks * T::kBlockBytes;
      return [base](int b) -> uint32_t { return base + b * T::kBlockBytes; };
    };
    fence_proxy_async();  // widened chunk 0 and q, for the tensor cores
    __syncthreads();
    wgmma_fence();
    scores_half<T>(sacc, widened_block(0), kh, q_half);
    wgmma_commit();
    wgmma_wait<0>();
    fence_regs(sacc);
    store_scores<T>(s, sacc, scale2);
    __syncthreads();
    for (int64_t i = 0; i < chunks; ++i) {
      put_next_rows(i, static_cast<int>((i + kAhead) % kSlots));
      lockstep::split_softmax<T>(s, s.valid + (i % kSlots) * T::kWords, limit - i * kChunk,
                                 m_own, l_own);
      if (i + 1 < chunks)
        widen_fp8<T>(raw, widened + static_cast<int>((i + 1) % 2) * T::kBlocks * T::kBlockBytes);
      if (i + 2 < chunks) load_fp8<T>(P, s.krow + ((i + 2) % kSlots) * kChunk, raw);
      fence_proxy_async();  // P and the widened chunk i + 1 are read by the tensor cores
      __syncthreads();      // ... and every row's P and alpha are written
      pv_issue<T>(s, oacc, widened_block(i), kh, p_u32);
      scores_half<T>(sacc, widened_block(i + 1 < chunks ? i + 1 : i), kh, q_half);
      wgmma_commit();
      wgmma_wait<0>();
#pragma unroll
      for (int mt = 0; mt < T::kOTiles; ++mt) fence_regs(oacc[mt]);
      fence_regs(sacc);
      store_scores<T>(s, sacc, scale2);  // (S of chunk i + 1: sp was read before the barrier)
      __syncthreads();  // S of chunk i + 1; chunk i fully consumed (its buffer is widened next)
    }
  } else {
    int rs = row0;  // row slot of chunk i
    if (handed) cp_async_wait<0>();  // chunk 0 and q, copied during the group before
    for (int64_t i = 0; i < chunks; ++i) {
      // chunk i has landed (this thread's copies: all but the last group) ...
      cp_async_wait<1>();
      fence_proxy_async();  // ... for the tensor cores too (and q, P of the last chunk)
      __syncthreads();      // ... and everyone's; chunk i - 1 is fully consumed
      put_next_rows(i, (rs + kAhead) & (kSlots - 1));
      // blocks [9 i + kRing - 9, 9 i + kRing): the rest of chunk i + 1, the start of chunk i + 2
      constexpr int kRest = 3 * T::kBlocks - T::kRing;  // blocks of chunk i + 1 still to queue
      // ring slots of chunks i, i + 1, i + 2: ring0, + 9, + 18 (mod kRing)
      const int slot0 = ring0;
      const int slot1 = slot0 + T::kBlocks >= T::kRing ? slot0 + T::kBlocks - T::kRing
                                                       : slot0 + T::kBlocks;
      const int slot2 = slot1 + T::kBlocks >= T::kRing ? slot1 + T::kBlocks - T::kRing
                                                       : slot1 + T::kBlocks;
      if (copies(i + 1))
        issue_blocks<T>(P, s.krow + ((rs + 1) & (kSlots - 1)) * kChunk, slot1,
                        T::kBlocks - kRest, T::kBlocks, ks_u32);
      cp_async_commit();
      if (copies(i + 2))
        issue_blocks<T>(P, s.krow + ((rs + 2) & (kSlots - 1)) * kChunk, slot2, 0,
                        T::kBlocks - kRest, ks_u32);
      cp_async_commit();
      ring0 = slot1;
      // shared address of block b (dims 64 b ..) of the current chunk
      auto block = [&](int b) -> uint32_t {
        const int slot = slot0 + b;
        return ks_u32 + (slot >= T::kRing ? slot - T::kRing : slot) * T::kBlockBytes;
      };

      // S^T of this warpgroup's dimension half: 18 k16 steps of m64 (keys) x N (rows).
      wgmma_fence();
      scores_half<T>(sacc, block, kh, q_half);
      wgmma_commit();
      wgmma_wait<0>();
      fence_regs(sacc);
      store_scores<T>(s, sacc, scale2);
      __syncthreads();

      lockstep::split_softmax<T>(s, s.valid + rs * T::kWords, limit - i * kChunk, m_own, l_own);
      fence_proxy_async();  // P is read by the tensor cores
      __syncthreads();      // P and alpha of every row

      pv_issue<T>(s, oacc, block, kh, p_u32);
      wgmma_commit();
      wgmma_wait<0>();
#pragma unroll
      for (int mt = 0; mt < T::kOTiles; ++mt) fence_regs(oacc[mt]);
      rs = (rs + 1) & (kSlots - 1);
    }
    if (run_on) {  // the next group's copies stay in flight through this epilogue, with its q
      copy_q_tiled<T>(P, t.next_first, s.q);  // (every S^T of this group has read q)
      cp_async_commit();
      ho = Handover{true, rs, ring0, next_row, next_index};
    }
  }
  if (!run_on) cp_async_wait<0>();

  if (lane % T::kLanesPerRow == 0) {  // each owner's inv and lse through shared memory
    const int row = T::kRowsPerWarp * warp + lane / T::kLanesPerRow;
    const lockstep::RowEnd e(P, m_own, l_own);
    s.alpha[kPR + row] = e.inv;
    s.alpha[2 * kPR + row] = e.lse;
  }
  __syncthreads();
  write_rows_t<T>(P, s, t, token, first, oacc);
  __syncthreads();  // the next group's prologue rewrites q and the cache-row ring
}

template <class T>
__global__ void __launch_bounds__(kBlock, 1) mla_decode_wg_kernel(DecodeParams P) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];  // (the swizzle atoms' alignment)
  const lockstep::MmaSmem<T> s(smem_raw);
  Handover ho;
  for_each_group<T::kPassRows>(P, [&](const GroupTask& t) { run_group_wg<T>(P, s, t, ho); });
}

}  // namespace mlasim::gpu::decode::sm90::wg
