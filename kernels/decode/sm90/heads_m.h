// kernels/decode/sm90/heads_m.h - the warpgroup-mma NVIDIA decode kernel with the q rows as the
// mma's M (DecodeOptions::tiling 10: 64 heads of one token per pass; bf16 KV, MLA's 576 / 512,
// heads a multiple of 64; sm_90a: built only where the kernel library is compiled for
// compute_90a, MLASIM_KUT_SM90A).
//
// The kernels of wgmma.h put the 64 keys of a chunk on the mma's M and the q rows on its N, so a
// pass holds 16 or 32 rows and a 128-head token re-reads its keys 4 times. Here a pass is 64 heads
// of one token, the M of both products, and the work of a chunk is the two warpgroups':
//   S  [64 rows x 64 keys]  = Q [64 rows x 576 dims] . K^T   warpgroup kw: keys 32 kw .. + 31
//                                                            (36 k16 steps of m64n32)
//   O  [64 rows x 512 dims] += P [64 rows x 64 keys] . V      warpgroup kw: dims 256 kw .. + 255
//                                                            (4 k16 steps of m64n256)
// Each warpgroup's S holds whole rows' halves: the row maxima of the two halves meet through 512
// bytes of shared memory (one barrier), each thread keeps the running sums of its two rows over its
// own keys (added up at the end), and P (bf16) goes to shared memory, the A operand of both
// warpgroups' P V. Heads are split over workgroups, not passes: with H = 64 g heads a cluster runs
// g workgroups (DecodeParams::parts, blockIdx.x = cluster x g + part), part p taking the heads
// 64 p .. 64 p + 63 of every token of the cluster's work items. The g workgroups of one cluster
// are launched side by side and stream the same cache rows, so all but the first read them from
// L2, where a pass per head group would read them from DRAM g times.
//
// Shared-memory layouts (the canonical 128-byte-swizzled wgmma layouts: 8 KB blocks of 64 rows x
// 128 bytes, the 16-byte piece c of row r at r * 128 + (c ^ r % 8) * 16):
// - KV: a ring of two chunks (18 blocks); chunk c is blocks 9 (c % 2) .. + 8, block b its dims
//   64 b .. 64 b + 63 (issue_blocks of wgmma.h copies them). Read as K (K-major B of S: rows =
//   keys) the k16 step k of keys 32 kw .. is block k / 4 at + 4096 kw + 32 (k % 4), stride byte
//   offset 1024; read as V (MN-major B of O, transposed: rows = keys, dims contiguous) the k16
//   step ks is + 2048 ks, leading byte offset 8192 (the next 64 dims: the next block), stride
//   byte offset 1024 (the next 8 keys).
// - q: 9 blocks, block b the 64 rows' dims 64 b .. (K-major A of S, as K).
// - P: one block, the 64 rows' 64 keys (K-major A of O: the k16 step ks at + 32 ks).
// Numerics as every kernel: fp32 accumulators, the online softmax in log2 units with the max
// taken per 64-key chunk, P rounded to bf16 before P V, the row sums from the unrounded weights.
#pragma once

#include <cstdint>

#include "kernels/decode/config.h"
#include "kernels/decode/params.h"
#include "kernels/decode/schedule.h"
#include "kernels/decode/sm90/lockstep.h"
#include "kernels/decode/sm90/ptx.h"
#include "kernels/decode/sm90/wgmma.h"

namespace mlasim::gpu::decode::sm90::hm {

using wg::fence_proxy_async;
using wg::fence_regs;
using wg::make_desc;
using wg::wgmma_commit;
using wg::wgmma_fence;

// d (+)= A . B for one k16 step, m64 x 256, bf16 operands from descriptors, fp32 accumulators;
// kTransB: B is MN-major (transposed). Every thread of the warpgroup calls it with the same
// descriptors; accumulate 0 overwrites d.
template <bool kTransB>
__device__ inline void wgmma_n256(float (&d)[128], uint64_t da, uint64_t db, int accumulate) {
#ifdef MLASIM_WGMMA_ASM
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,"
      "%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,"
      "%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,"
      "%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,"
      "%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,"
      "%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,"
      "%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127"
      "}, %128, %129, p, 1, 1, 0, %131;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
        "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
        "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
        "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
        "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
        "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]),
        "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
        "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]),
        "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]),
        "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
        "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]),
        "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]),
        "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]),
        "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]),
        "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]),
        "+f"(d[126]), "+f"(d[127])
      : "l"(da), "l"(db), "r"(accumulate), "n"(kTransB ? 1 : 0));
#else
  (void)d, (void)da, (void)db, (void)accumulate;
  __trap();  // not an sm_90a build: the host never picks this kernel then (kWgmmaBuilt)
#endif
}

// Tile constants and the shared-memory plan (bytes, in this order; HmSmem's views read it).
struct HmTiling {
  static constexpr int kD = 576, kDv = 512;
  static constexpr int kPassRows = 64;             // q rows (heads of one token) per pass: M
  static constexpr int kChunk = 64;                // keys per chunk
  static constexpr int kBlocks = kD / 64;          // 64-dim blocks of a chunk (9)
  static constexpr int kRing = 2 * kBlocks;        // KV ring: two whole chunks (issue_blocks)
  static constexpr int kBlockBytes = kChunk * 128;  // 8192
  static constexpr int kAtom = 1024;               // 8 rows x 128 bytes: one swizzle atom
  static constexpr int kKeysPerWg = kChunk / 2;    // S columns per warpgroup (N of S)
  static constexpr int kSteps = kD / 16;           // k16 steps of S (36)
  static constexpr int kPvSteps = kChunk / 16;     // k16 steps of O (4)
  static constexpr int kDvPerWg = kDv / 2;         // O columns per warpgroup (N of O)
  static constexpr int kSAcc = kPassRows * kKeysPerWg / 128;  // S accumulators a thread (16)
  static constexpr int kOAcc = kPassRows * kDvPerWg / 128;    // O accumulators a thread (128)
  static constexpr int kAhead = 3;  // chunks whose cache rows are held beyond the current one
  static constexpr int kSlots = kAhead + 1;
  static constexpr int kWords = kChunk / 32;  // validity words per chunk

  static constexpr size_t kRingOff = 0;
  static constexpr size_t kQOff = kRingOff + size_t{kRing} * kBlockBytes;
  static constexpr size_t kPOff = kQOff + size_t{kBlocks} * kBlockBytes;
  static constexpr size_t kRowOff = kPOff + kBlockBytes;  // [2][kPassRows] f32 per warpgroup
  static constexpr size_t kKrowOff = kRowOff + size_t{2} * kPassRows * 4;
  static constexpr size_t kValidOff = kKrowOff + size_t{kSlots} * kChunk * 8;
  static constexpr size_t kSmemBytes = kValidOff + size_t{kSlots} * kWords * 4;

  static_assert(kBlockBytes == 8192 && kPassRows == 64, "128-byte rows of 64 keys or q rows");
  static_assert(kQOff % kAtom == 0 && kPOff % kAtom == 0, "1024-byte aligned swizzle atoms");
  static_assert(kDvPerWg == 4 * 64, "m64n256: 4 blocks of V per warpgroup");
  static_assert(kSAcc == 16 && kOAcc == 128, "m64n32 and m64n256 accumulators");
  static_assert(kSmemBytes <= kSharedLimit, "shared-memory plan exceeds the sm_90 limit");
  static constexpr size_t smem_bytes() { return kSmemBytes; }
};

struct HmSmem {
  unsigned char* ring;  // [kRing] blocks of KV
  unsigned char* q;     // [kBlocks] blocks of the pass's q rows
  unsigned char* p;     // one block: P of the chunk (bf16)
  float* rowx;          // [2][kPassRows]: each warpgroup's row maxima, at the end its row sums
  int64_t* krow;        // [kSlots][kChunk] cache row of each key, -1 = masked
  uint32_t* valid;      // [kSlots][kWords] bit j = key j is read
  __device__ explicit HmSmem(unsigned char* raw)
      : ring(raw + HmTiling::kRingOff),
        q(raw + HmTiling::kQOff),
        p(raw + HmTiling::kPOff),
        rowx(reinterpret_cast<float*>(raw + HmTiling::kRowOff)),
        krow(reinterpret_cast<int64_t*>(raw + HmTiling::kKrowOff)),
        valid(reinterpret_cast<uint32_t*>(raw + HmTiling::kValidOff)) {}
};

using wg::swizzle128;

// Threads 0 .. kChunk - 1: key threadIdx.x of a chunk has cache row `row` (-1 = masked).
__device__ inline void put_rows(const HmSmem& s, int slot, int64_t row) {
  lockstep::put_rows<HmTiling>(s, slot, row);
}

// Queues the copies of q rows [first, first + 64) into the q blocks (cp.async; the caller
// commits): thread t copies the pieces t, t + 256, .. (row r / 72, dims 8 (r % 72) ..).
__device__ inline void copy_q(const DecodeParams& P, int64_t first, uint32_t q_u32) {
  constexpr int kPieces = HmTiling::kD / 8, kRuns = HmTiling::kPassRows * kPieces;
  for (int r = threadIdx.x; r < kRuns; r += kBlock) {
    const int row = r / kPieces, c = r % kPieces;
    cp_async16(q_u32 + (c / 8) * HmTiling::kBlockBytes + swizzle128(row, c % 8),
               P.q + (first + row) * HmTiling::kD + 8 * c, 16);
  }
}

// Writes the pass's rows: o and lse when the work item owns its rows (work_info loc < 0), else
// the partial rows of its split. oacc[4 j + e]: row r0 + 8 (e / 2), dim 256 kw + 8 j + 2 tq +
// e % 2 (the m64n256 accumulator layout); e0 / e1: rows r0 and r0 + 8.
__device__ inline void write_rows_hm(const DecodeParams& P, const GroupTask& t, int64_t token,
                                     int64_t first, const float (&oacc)[HmTiling::kOAcc],
                                     int kw, int r0, lockstep::RowEnd e0, lockstep::RowEnd e1) {
  constexpr int kDv = HmTiling::kDv;
  const int tq = threadIdx.x % 4;
  const int32_t loc = t.w[1];
  const int64_t pfirst =
      loc < 0 ? 0 : (int64_t{loc} + (token - t.w[2])) * P.H + (first - token * P.H);
  // pairs of columns in one store where the buffer's base allows it (it is only 2 or 4 bytes
  // aligned when a caller hands such a view)
  const bool paired = loc < 0 ? reinterpret_cast<uintptr_t>(P.o) % 4 == 0
                              : reinterpret_cast<uintptr_t>(P.part_o) % 8 == 0;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = r0 + 8 * h;
    const float inv = h == 0 ? e0.inv : e1.inv;
#pragma unroll
    for (int j = 0; j < HmTiling::kOAcc / 4; ++j) {
      const int dim = HmTiling::kDvPerWg * kw + 8 * j + 2 * tq;
      const float v0 = oacc[4 * j + 2 * h] * inv, v1 = oacc[4 * j + 2 * h + 1] * inv;
      if (loc < 0) {
        uint16_t* o = P.o + (first + row) * kDv + dim;
        if (paired)
          *reinterpret_cast<uint32_t*>(o) = uint32_t{f2bf(v0)} | uint32_t{f2bf(v1)} << 16;
        else
          o[0] = f2bf(v0), o[1] = f2bf(v1);
      } else {
        float* po = P.part_o + (pfirst + row) * kDv + dim;
        if (paired)
          *reinterpret_cast<float2*>(po) = make_float2(v0, v1);
        else
          po[0] = v0, po[1] = v1;
      }
    }
  }
  if (kw == 0 && tq == 0) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float lse = h == 0 ? e0.lse : e1.lse;
      if (loc < 0)
        P.lse[first + r0 + 8 * h] = lse;
      else
        P.part_lse[pfirst + r0 + 8 * h] = lse;
    }
  }
  if (loc < 0) log_rows(P.log, 2, token, token + 1, threadIdx.x == 0);
}

// One pass: 64 q rows (heads of one token) over the work item's keys [t.p0, t.p1).
__device__ void run_group_hm(const DecodeParams& P, const HmSmem& s, const GroupTask& t) {
  using T = HmTiling;
  constexpr int kChunk = T::kChunk, kAhead = T::kAhead, kSlots = T::kSlots;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // warpgroup: keys [32 kw, +32) of S, dims [256 kw, +256) of O; through a shuffle so that the
  // compiler knows it is warp-uniform (the descriptors built from it stay in uniform registers)
  const int kw = __shfl_sync(0xffffffffu, warp / 4, 0);
  const int tq = lane % 4;
  const int r0 = 16 * (warp % 4) + lane / 4;  // this thread's rows r0 and r0 + 8
  const int64_t first = group_first_row(P, t), token = first / P.H;
  log_rows(P.log, 0, token, token + 1, threadIdx.x == 0);
  const uint32_t ring_u32 = smem_u32(s.ring), q_u32 = smem_u32(s.q), p_u32 = smem_u32(s.p);
  const int64_t n = t.p1 - t.p0;
  if (n <= 0 && P.variant != static_cast<int>(ZeroKvVariant::kAsm)) {
    // hk: read q, write nothing (the read is what the variant's contract states)
    copy_q(P, first, q_u32);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    return;
  }
  const int64_t chunks = n > 0 ? (n + kChunk - 1) / kChunk : 0;
  const int64_t limit = causal_limit(P, t, token);
  const int64_t pos0 = t.p0 + threadIdx.x;  // this thread's key of chunk c: pos0 + 64 c

  // Cache rows of chunks 0 .. kAhead - 1; next_row: the row of chunk i + kAhead for iteration i,
  // next_index: the index load of chunk i + kAhead + 1, issued an iteration before it is needed.
  int64_t next_row = -1;
  int32_t next_index = 0;
  if (threadIdx.x < kChunk) {
    int64_t rows[kAhead];
#pragma unroll
    for (int c = 0; c < kAhead; ++c) rows[c] = key_row(P, pos0 + c * kChunk, t.p1);
    next_row = key_row(P, pos0 + kAhead * kChunk, t.p1);
    next_index = key_index(P, pos0 + (kAhead + 1) * kChunk, t.p1);
#pragma unroll
    for (int c = 0; c < kAhead; ++c) put_rows(s, c, rows[c]);
  }
  __syncthreads();
  copy_q(P, first, q_u32);
  if (chunks > 0) wg::issue_blocks<T>(P, s.krow, 0, 0, T::kBlocks, ring_u32);
  cp_async_commit();

  float oacc[T::kOAcc];
#pragma unroll
  for (int e = 0; e < T::kOAcc; ++e) oacc[e] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};  // rows r0, r0 + 8 (log2 units)
  const float scale2 = P.logit_scale * 1.4426950408889634f;
  float sacc[T::kSAcc];

  for (int64_t i = 0; i < chunks; ++i) {
    const int rs = static_cast<int>(i % kSlots);
    cp_async_wait<0>();   // chunk i (and q) landed, this thread's copies ...
    fence_proxy_async();  // ... for the tensor cores too ...
    __syncthreads();      // ... and everyone's; chunk i - 1 is consumed, its ring half free
    if (threadIdx.x < kChunk) {  // the rows of chunk i + kAhead into the slot chunk i - 1 left
      put_rows(s, static_cast<int>((i + kAhead) % kSlots), next_row);
      next_row = key_row_of(P, pos0 + (i + kAhead + 1) * kChunk, t.p1, next_index);
      next_index = key_index(P, pos0 + (i + kAhead + 2) * kChunk, t.p1);
    }
    if (i + 1 < chunks)
      wg::issue_blocks<T>(P, s.krow + ((i + 1) % kSlots) * kChunk,
                          static_cast<int>((i + 1) % 2) * T::kBlocks, 0, T::kBlocks, ring_u32);
    cp_async_commit();
    const uint32_t kv0 = ring_u32 + static_cast<uint32_t>(i % 2) * T::kBlocks * T::kBlockBytes;

    // S of this warpgroup's 32 keys: 36 k16 steps of m64n32.
    wgmma_fence();
#pragma unroll
    for (int st = 0; st < T::kSteps; ++st) {
      const uint32_t k_off = (st / 4) * T::kBlockBytes + (st % 4) * 32;
      wg::wgmma<32, false, false>(
          sacc, make_desc(q_u32 + k_off, 16, T::kAtom, true),
          make_desc(kv0 + k_off + kw * (T::kKeysPerWg / 8) * T::kAtom, 16, T::kAtom, true),
          st > 0);
    }
    wgmma_commit();
    wg::wgmma_wait<0>();
    fence_regs(sacc);

    // The online softmax: sacc[4 j + e] is row r0 + 8 (e / 2), key 32 kw + 8 j + 2 tq + e % 2.
    const uint32_t* valid = s.valid + rs * T::kWords;
    const int64_t rem = limit - i * kChunk;
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < T::kSAcc / 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int k = T::kKeysPerWg * kw + 8 * j + 2 * tq + e % 2;
        const bool read = ((valid[k / 32] >> (k % 32)) & 1u) != 0 && k < rem;
        sacc[4 * j + e] = read ? sacc[4 * j + e] * scale2 : -INFINITY;
        mx[e / 2] = fmaxf(mx[e / 2], sacc[4 * j + e]);
      }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
    }
    if (tq == 0) s.rowx[kw * T::kPassRows + r0] = mx[0], s.rowx[kw * T::kPassRows + r0 + 8] = mx[1];
    __syncthreads();  // both halves' maxima
    float alpha[2], sub[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float other = s.rowx[(1 - kw) * T::kPassRows + r0 + 8 * h];
      const float mn = fmaxf(m[h], fmaxf(mx[h], other));
      // exp2(-inf - finite) = 0 handles masked keys; a row with nothing yet subtracts 0
      sub[h] = mn == -INFINITY ? 0.f : mn;
      alpha[h] = exp2f(m[h] - sub[h]);
      m[h] = mn;
    }
    float ps[2] = {0.f, 0.f};
#pragma unroll
    for (int j = 0; j < T::kSAcc / 4; ++j) {
      const int c = (T::kKeysPerWg * kw + 8 * j) / 8;  // P's 16-byte piece of keys 8 c ..
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float p0 = exp2f(sacc[4 * j + 2 * h] - sub[h]);
        const float p1 = exp2f(sacc[4 * j + 2 * h + 1] - sub[h]);
        ps[h] += p0 + p1;
        const int row = r0 + 8 * h;
        *reinterpret_cast<uint32_t*>(s.p + swizzle128(row, c) + 4 * tq) = pack_bf16(p0, p1);
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) l[h] = l[h] * alpha[h] + ps[h];
#pragma unroll
    for (int j = 0; j < T::kOAcc / 4; ++j) {
      oacc[4 * j] *= alpha[0], oacc[4 * j + 1] *= alpha[0];
      oacc[4 * j + 2] *= alpha[1], oacc[4 * j + 3] *= alpha[1];
    }
    fence_proxy_async();  // P is read by the tensor cores
    __syncthreads();      // every row's P

    // O of this warpgroup's 256 dims: 4 k16 steps of m64n256, V MN-major.
    fence_regs(oacc);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < T::kPvSteps; ++ks)
      wgmma_n256<true>(oacc, make_desc(p_u32 + 32 * ks, 16, T::kAtom, true),
                       make_desc(kv0 + 4 * kw * T::kBlockBytes + 2 * ks * T::kAtom,
                                 T::kBlockBytes, T::kAtom, true),
                       1);
    wgmma_commit();
    wg::wgmma_wait<0>();
    fence_regs(oacc);
  }
  cp_async_wait<0>();

  // Row sums: the quad's lanes, then the two warpgroups through shared memory.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
  }
  __syncthreads();  // (a safety barrier: the last chunk's maxima were read before its P barrier)
  if (tq == 0) s.rowx[kw * T::kPassRows + r0] = l[0], s.rowx[kw * T::kPassRows + r0 + 8] = l[1];
  __syncthreads();
  const lockstep::RowEnd e0(P, m[0], s.rowx[r0] + s.rowx[T::kPassRows + r0]);
  const lockstep::RowEnd e1(P, m[1], s.rowx[r0 + 8] + s.rowx[T::kPassRows + r0 + 8]);
  write_rows_hm(P, t, token, first, oacc, kw, r0, e0, e1);
  __syncthreads();  // the next pass rewrites q, the cache rows and rowx
}

// Walks the cluster's work items (cluster blockIdx.x / P.parts) and runs part blockIdx.x %
// P.parts of each: groups (64 q rows) p, p + parts, .. of the item (with H = 64 parts, the heads
// 64 p .. of every token).
template <class Fn>
__device__ inline void for_each_part_group(const DecodeParams& P, Fn&& fn) {
  const int c = blockIdx.x / P.parts, part = blockIdx.x % P.parts;
  const int32_t w1 = P.work_indptr[c + 1];
  WorkItem it;
  for (int32_t wi = load_work_item(P, P.work_indptr[c], w1, it); wi < w1;
       wi = load_work_item(P, wi + 1, w1, it)) {
    GroupTask t{it.w, it.p0, it.p1, it.key_first, it.lk, it.lq, it.req_q0, 0,
                HmTiling::kPassRows, 0, 0, -1};
    const int groups = (it.w[3] - it.w[2]) * P.H / HmTiling::kPassRows;
    for (t.g = part; t.g < groups; t.g += P.parts) fn(t);
  }
}

__global__ void __launch_bounds__(kBlock, 1) mla_decode_hm_kernel(DecodeParams P) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];  // (the swizzle atoms' alignment)
  const HmSmem s(smem_raw);
  for_each_part_group(P, [&](const GroupTask& t) { run_group_hm(P, s, t); });
}

}  // namespace mlasim::gpu::decode::sm90::hm
