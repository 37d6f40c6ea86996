// planner.hip - aiter's v1.2 fast-mode planner (serial and parallel) and decode_update as GPU
// kernels, bit-identical to ref::PlanMlaMetadata / ref::DecodeUpdateMlaMetadataV1 (HIP names
// only; nvcc builds it through hip_compat.h). The host decisions (clusters, folding, payload
// overhead, dispatch) are the reference's own DecidePlan, as aiter takes them on the host too;
// the walks, the payload sum and every store run on the device.
#include "kernels/hip_compat.h"  // first: the HIP/CUDA names the other headers use

#include "kernels/gpu_api.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "ref/planner.h"
#include "ref/sizing.h"

namespace mlasim::gpu {
namespace {

constexpr int kPlanBlock = 256;
constexpr size_t kPlanStagedBytes = 44 * 1024;  // staged inputs: within 48 KB, room left for static
constexpr int32_t kPoison = ref::Plan::kPoison;

// Everything the walks need, fixed on the host (ref's WalkParams + PlanDerived, as scalars).
struct PlanParams {
  int32_t nb, uni, ori, fold, gran, page, ovh, thr, topk_p;
  int32_t num_clusters, num_splits, packed, planner_heads;
  int32_t sparse, qo_split, lds_batch_info, is_cp_rr, is_causal;
  int32_t trim_needs_causal, kv_offset_token_tail, batch_idx_is_request;
  int32_t lpl_size;
  int32_t n_work_indptr, n_work_info, n_reduce_indptr, n_final_map, n_partial_map;
  int32_t n_kv;    // kv_indptr entries
  int32_t staged;  // 1: kv_indptr (and the parallel planner's scan state) live in shared memory
};

struct PlanBuffers {
  int32_t* work_indptr;
  int32_t* work_info;
  int32_t* reduce_indptr;
  int32_t* reduce_final_map;
  int32_t* reduce_partial_map;
  int32_t* status;  // [0]: OOB stores, [1]: walk did not terminate, [2]: num_tiles, [3]: payload
};

__device__ inline int32_t cdiv(int32_t a, int32_t b) {
  return (a + b - 1) / b;
}

// Exact division of 0 <= n < 2^31 by a divisor fixed for a whole scan (d >= 1; d = 0 is never
// divided by): q = (umulhi(n, m) + n) >> l with l = ceil(log2 d) and m = floor(2^32 (2^l - d) / d)
// + 1 (Granlund and Montgomery, PLDI 1994, the round-up method; n < 2^31 keeps the 33-bit sum in
// 32 bits). Two instructions on the lane-0 scan's critical path instead of a full division.
struct FastDiv {
  uint32_t m = 0, l = 0;
  int32_t d = 0;
  __device__ explicit FastDiv(int32_t divisor) : d(divisor) {
    if (d <= 0) return;
    while ((uint64_t{1} << l) < static_cast<uint64_t>(d)) ++l;
    m = static_cast<uint32_t>((uint64_t{1} << 32) * ((uint64_t{1} << l) - d) / d + 1);
  }
  __device__ int32_t div(int32_t n) const {
    const uint32_t u = static_cast<uint32_t>(n);
    return static_cast<int32_t>((__umulhi(u, m) + u) >> l);
  }
  __device__ int32_t cdiv(int32_t n) const { return div(n + d - 1); }
};

// kv_indptr for the walks: copied into shared memory (`smem`, n_kv ints) when it fits, so the
// one-lane scans read it at shared-memory latency instead of global. Every thread calls it.
__device__ inline const int32_t* stage_kv(const PlanParams& p, const int32_t* kv, int32_t* smem) {
  if (!p.staged) return kv;
  for (int32_t i = threadIdx.x; i < p.n_kv; i += blockDim.x) smem[i] = kv[i];
  __syncthreads();
  return smem;
}

__device__ inline void store(int32_t* buf, int32_t n, int64_t i, int32_t v, int32_t* status) {
  if (i < 0 || i >= n) {
    atomicAdd(&status[0], 1);
    return;
  }
  buf[i] = v;
}

__device__ inline int32_t kv_len(const PlanParams& p, const int32_t* kv, int32_t v) {
  const int32_t b = p.sparse ? v / p.ori / p.fold : v / p.fold;
  const int32_t len = kv[b + 1] - kv[b];
  return p.sparse ? min(len, p.topk_p) : len;
}

__device__ inline int32_t num_qo_tiles(const PlanParams& p) {
  if (!p.qo_split) return 1;
  if (p.planner_heads * 2 > p.packed) return p.uni;
  return cdiv(p.uni * p.planner_heads, p.packed);
}

// Sum over the block of each thread's `s` (every thread calls it, every thread gets the sum):
// a butterfly within each warp, then each thread adds the warps' partial sums (one barrier).
__device__ long long block_sum(long long s) {
  constexpr int kWarps = kPlanBlock / COMPAT_WARP_SIZE;
  __shared__ long long warp_sum[kWarps];
  for (int m = COMPAT_WARP_SIZE / 2; m > 0; m /= 2) s += compat_shfl_xor(s, m);
  if (threadIdx.x % COMPAT_WARP_SIZE == 0) warp_sum[threadIdx.x / COMPAT_WARP_SIZE] = s;
  __syncthreads();
  long long sum = 0;
  for (int w = 0; w < kWarps; ++w) sum += warp_sum[w];
  return sum;
}

// The payload per cluster in KV blocks from the block-wide sum of per-batch costs (aiter's
// kernel does this reduction on the device too).
__device__ inline int32_t payload_from_sum(const PlanParams& p, long long sum) {
  return p.num_splits > 0 ? (int32_t)((sum + p.num_splits - 1) / p.num_splits) + p.ovh : p.ovh;
}

__device__ int32_t payload_of(const PlanParams& p, const int32_t* kv, int32_t n_tiles) {
  long long s = 0;
  for (int32_t v = threadIdx.x; v < p.nb; v += blockDim.x)
    s += (long long)(cdiv(kv_len(p, kv, v), p.gran) + p.ovh) * n_tiles;
  return payload_from_sum(p, block_sum(s));
}

struct Walk {
  PlanParams p;
  const int32_t* kv;
  const int32_t* lpl;
  PlanBuffers b;
  int32_t v = 0, tile = 0, sub = 0, kblk = 0, nsplit = 0, kb = 0, ke = 0;
  bool tail_done = false;
  int32_t num_works = 0, partial_idx = 0, tiles = 0, last_reduce = 0, n_tiles = 1, qts = 1;

  __device__ void make_piece(int32_t cap, bool is_final, int32_t* w) {
    const int32_t batch_kv = p.sparse ? v / p.ori / p.fold : v;
    w[0] = batch_kv;
    w[1] = 0;
    w[2] = p.uni * v + tile * qts;
    w[3] = min(w[2] + qts, p.uni * v + p.uni);
    w[4] = kb + kblk * p.gran;
    if (p.page == 1) {
      int32_t bt = p.is_cp_rr ? 0 : n_tiles - 1 - tile;
      if (!p.sparse && p.fold != 1) bt = n_tiles - (w[2] / p.fold) % p.ori - 1;
      bt = max(bt, 0);
      if (p.trim_needs_causal && !p.is_causal) bt = 0;
      int32_t k1 = min(w[4] + cap * p.gran, ke - bt);
      if (is_final) {
        const int32_t left = ke - k1;
        if ((left > 0 && left < p.thr) || tail_done) k1 = min(ke - bt, ke);
      } else if (ke - k1 < p.thr) {
        tail_done = true;
        k1 = min(ke, ke - bt);
      }
      w[5] = k1;
      w[6] = ke - k1;
      if (p.sparse && p.fold == 1 && p.kv_offset_token_tail) {
        w[0] = v / p.ori;
        w[6] += p.ori - 1 - v % p.ori;
      }
    } else {
      const int32_t k1 = min(w[4] + cap * p.gran, ke);
      w[5] = k1;
      if (k1 == ke) {
        w[6] = 0;
      } else {
        const int32_t idx = p.batch_idx_is_request ? batch_kv : v;
        // Past the array the reference records an undefined value and models it as 0.
        w[6] = (idx >= 0 && idx < p.lpl_size) ? (ke - k1 - 1) * p.page + lpl[idx] : 0;
      }
    }
    if (p.sparse && !p.batch_idx_is_request) w[0] = v;
    w[7] = 0;
  }

  __device__ void store_work(const int32_t* w) {
    for (int f = 0; f < 8; ++f)
      store(b.work_info, p.n_work_info, (int64_t)num_works * 8 + f, w[f], b.status);
  }

  __device__ void emit_final(int32_t rblk) {
    int32_t w[8];
    make_piece(rblk, true, w);
    const int32_t pieces = nsplit + 1;
    if (nsplit > 0) {
      w[1] = partial_idx;
      store(b.reduce_indptr, p.n_reduce_indptr, tiles + 1, last_reduce + pieces, b.status);
      store(b.reduce_final_map, p.n_final_map, (int64_t)tiles * 2, w[2], b.status);
      store(b.reduce_final_map, p.n_final_map, (int64_t)tiles * 2 + 1, w[3], b.status);
      for (int32_t s = 0; s < pieces; ++s)
        store(b.reduce_partial_map, p.n_partial_map, last_reduce + s,
              partial_idx - (nsplit - s) * qts, b.status);
      partial_idx += qts;
      last_reduce += pieces;
    } else {
      w[1] = -1;
      store(b.reduce_indptr, p.n_reduce_indptr, tiles + 1, last_reduce, b.status);
    }
    store_work(w);
    ++num_works;
    ++tiles;
  }

  __device__ void advance() {
    tile = tile == n_tiles - 1 ? 0 : tile + 1;
    if (!p.qo_split || tile == 0) {
      ++v;
      sub = sub == p.fold - 1 ? 0 : sub + 1;
      if (v < p.nb && sub == 0) {
        const int32_t len = kv_len(p, kv, v);
        kb = p.sparse ? kb + p.topk_p : ke;
        ke = kb + len;
      }
    }
    kblk = 0;
    nsplit = 0;
    tail_done = false;
  }

  __device__ void run(int32_t payload) {
    n_tiles = num_qo_tiles(p);
    qts = cdiv(p.uni, n_tiles);
    store(b.work_indptr, p.n_work_indptr, 0, 0, b.status);
    store(b.reduce_indptr, p.n_reduce_indptr, 0, 0, b.status);
    if (p.nb > 0)
      ke = p.lds_batch_info ? kv_len(p, kv, 0) : (p.sparse ? min(kv[1], p.topk_p) : kv[1]);
    const long long max_iter = (long long)p.nb * n_tiles * 2 + (long long)p.num_clusters * 2 + 8;
    long long iter = 0;
    for (int32_t c = 0; c < p.num_clusters; ++c) {
      int32_t rem = payload;
      while (v < p.nb) {
        if (++iter > max_iter) {
          b.status[1] = 1;
          return;
        }
        const int32_t nkb = cdiv(ke - kb, p.gran);
        const int32_t rblk = nkb - kblk;
        if (rem >= rblk + p.ovh || tail_done) {
          emit_final(rblk);
          rem -= rblk + p.ovh;
          advance();
          continue;
        }
        if (rem > p.ovh) {
          const int32_t consuming = rem - p.ovh;
          int32_t w[8];
          make_piece(consuming, false, w);
          if (!tail_done) {
            w[1] = partial_idx;
            store_work(w);
            partial_idx += qts;
            ++num_works;
            kblk += consuming;
            ++nsplit;
          }
        }
        if (!tail_done) break;
      }
      store(b.work_indptr, p.n_work_indptr, c + 1, num_works, b.status);
    }
    for (int32_t i = tiles; i < p.n_reduce_indptr; ++i)
      store(b.reduce_indptr, p.n_reduce_indptr, i, last_reduce, b.status);
    b.status[2] = tiles;
  }
};

__global__ void __launch_bounds__(kPlanBlock)
    serial_plan_kernel(PlanParams p, const int32_t* kv_global, const int32_t* lpl, PlanBuffers b) {
  extern __shared__ int32_t plan_smem[];
  const int32_t* kv = stage_kv(p, kv_global, plan_smem);
  const int32_t n_tiles = num_qo_tiles(p);
  const int32_t payload = payload_of(p, kv, n_tiles);
  if (threadIdx.x != 0) return;  // one lane walks, as in aiter's kn_get_mla_metadata_v1_2
  b.status[3] = payload;
  Walk w;
  w.p = p;
  w.kv = kv;
  w.lpl = lpl;
  w.b = b;
  w.run(payload);
}

// kn_get_mla_metadata_v1_2_parallel, in four parallel steps: every thread computes the KV blocks
// of its batches and their sum (the payload); lane 0 scans the batches' starting state (cluster,
// remaining payload, works, reduce and partial counts: a short serial recurrence over shared
// memory); then every thread writes the per-batch cells of its batches and the work items of its
// fragments (a fragment finds its batch by binary search over the batches' first work index). The
// cells written are the reference's (ref/planner.cpp RunParallel); no two batches write the same
// cell, so the order of the stores does not matter. `state` holds 6 ints per batch and the totals
// after the last: cu, remain, works, reduce, partial, nkb; `nkbs` the batches' KV blocks again,
// in an array the scan reads and never writes (its loads need not wait for its stores).
struct ParallelScan {
  PlanParams p;
  const int32_t* kv;
  int32_t* state;
  int32_t payload;
  FastDiv bpc_div;  // payload - ovh, the blocks a cluster holds

  __device__ const int32_t* at(int32_t bi) const { return state + 6 * int64_t{bi}; }

  // The fragments of batch bi (the reference's fits / split / waste cases).
  struct Batch {
    int32_t cu, remain, works, reduce, partial, nkb, fresh, frags;
    bool fits, waste;
  };
  __device__ Batch batch(int32_t bi) const {
    const int32_t* s = at(bi);
    Batch b{s[0], s[1], s[2], s[3], s[4], s[5], 0, 0, false, false};
    const int32_t ovh = p.ovh;
    b.fits = b.nkb + ovh <= b.remain;
    if (b.fits) {
      b.fresh = b.frags = 1;
    } else if (b.remain > ovh) {
      b.fresh = bpc_div.cdiv(b.nkb - (b.remain - ovh));
      b.frags = b.fresh + 1;
    } else {
      b.fresh = b.frags = bpc_div.cdiv(b.nkb);
      b.waste = true;
    }
    return b;
  }

  // One lane. The three cases of batch() without branches: the recurrence on `remain` is the
  // critical path (about ten dependent integer operations per batch), so the selects keep it
  // free of divergent jumps. fits: the batch ends in the current cluster (no new cluster);
  // split: it fills the cluster and continues in `fresh` new ones; waste: the cluster has no room
  // past its overhead and the batch starts in a new one.
  __device__ void scan(const int32_t* nkbs) const {
    const int32_t ovh = p.ovh, bpc = payload - ovh;
    int32_t cu = 0, remain = payload, works = 0, reduce = 0, partial = 0;
#pragma unroll 4
    for (int32_t i = 0; i < p.nb; ++i) {
      const int32_t nkb = nkbs[i];
      int32_t* s = state + 6 * int64_t{i};
      s[0] = cu, s[1] = remain, s[2] = works, s[3] = reduce, s[4] = partial;
      const int32_t cost = nkb + ovh;
      const bool fits = cost <= remain;
      const bool waste = remain <= ovh;
      const int32_t left = waste ? nkb : cost - remain;  // blocks for the new clusters
      const int32_t fresh = fits ? 0 : bpc_div.cdiv(left);
      const int32_t frags = fits ? 1 : (waste ? fresh : fresh + 1);
      const int32_t last = left - (fresh - 1) * bpc;  // blocks in the last new cluster
      remain = fits ? remain - cost : payload - (last + ovh);
      cu += fresh;
      works += frags;
      reduce += frags > 1 ? frags : 0;
      partial += frags > 1 ? frags * p.uni : 0;
    }
    int32_t* t = state + 6 * int64_t{p.nb};
    t[0] = cu, t[1] = remain, t[2] = works, t[3] = reduce, t[4] = partial, t[5] = 0;
  }

  __device__ void batch_cells(int32_t bi, const PlanBuffers& b) const {
    const Batch s = batch(bi);
    const int32_t q0 = p.uni * bi, q1 = q0 + p.uni;
    if (s.frags > 1) {
      store(b.reduce_indptr, p.n_reduce_indptr, bi + 1, s.reduce + s.frags, b.status);
      store(b.reduce_final_map, p.n_final_map, (int64_t)bi * 2, q0, b.status);
      store(b.reduce_final_map, p.n_final_map, (int64_t)bi * 2 + 1, q1, b.status);
    } else {
      store(b.reduce_indptr, p.n_reduce_indptr, bi + 1, s.reduce, b.status);
    }
    if (s.waste && s.cu + 1 <= p.num_clusters)
      store(b.work_indptr, p.n_work_indptr, s.cu + 1, s.works, b.status);
  }

  // Last batch whose first work index is <= wi (batches without fragments share the next one's).
  __device__ int32_t batch_of(int32_t wi) const {
    int32_t lo = 0, hi = p.nb;  // answer in [lo, hi)
    while (hi - lo > 1) {
      const int32_t mid = (lo + hi) / 2;
      if (at(mid)[2] <= wi)
        lo = mid;
      else
        hi = mid;
    }
    return lo;
  }

  __device__ void fragment_cells(int32_t wi, const PlanBuffers& b) const {
    const int32_t bi = batch_of(wi);
    const Batch s = batch(bi);
    const int32_t f = wi - s.works, bpc = payload - p.ovh, first_blocks = s.remain - p.ovh;
    const int32_t kv0 = kv[0], kv_begin = kv[bi] - kv0, kv_end = kv[bi + 1] - kv0;
    int32_t blk0, blk1, frag_cu;
    if (s.fits) {
      blk0 = 0, blk1 = s.nkb, frag_cu = s.cu;
    } else if (!s.waste) {
      blk0 = f == 0 ? 0 : first_blocks + (f - 1) * bpc;
      blk1 = f < s.fresh ? first_blocks + f * bpc : s.nkb;
      frag_cu = s.cu + f;
    } else {
      blk0 = f * bpc;
      blk1 = f < s.fresh - 1 ? (f + 1) * bpc : s.nkb;
      frag_cu = s.cu + 1 + f;
    }
    const bool split = s.frags > 1;
    const int32_t k0 = kv_begin + blk0 * p.gran;
    const int32_t k1 = min(kv_begin + blk1 * p.gran, kv_end);
    const int32_t ploc = split ? s.partial + f * p.uni : -1;
    const int32_t q0 = p.uni * bi;
    const int32_t w[8] = {bi, ploc, q0, q0 + p.uni, k0, k1, kv_end - k1, 0};
    for (int i = 0; i < 8; ++i)
      store(b.work_info, p.n_work_info, (int64_t)wi * 8 + i, w[i], b.status);
    if (split) store(b.reduce_partial_map, p.n_partial_map, s.reduce + f, ploc, b.status);
    if (f != s.frags - 1 && frag_cu + 1 <= p.num_clusters)
      store(b.work_indptr, p.n_work_indptr, frag_cu + 1, wi + 1, b.status);
  }
};

// Ints of shared memory (kStaged) or global scratch the parallel kernel's state needs besides
// the staged kv_indptr: `state` (6 per batch and the totals) and `nkbs` (1 per batch, 1 spare).
inline size_t ParallelScratchInts(int32_t nb) { return 7 * (static_cast<size_t>(nb) + 1); }

// kStaged: kv_indptr and the scan state in shared memory (the compiler then addresses them as
// shared); otherwise the state lives in `scratch` (ParallelScratchInts ints of global memory).
template <bool kStaged>
__global__ void __launch_bounds__(kPlanBlock)
    parallel_plan_kernel(PlanParams p, const int32_t* kv_global, PlanBuffers b, int32_t* scratch) {
  extern __shared__ int32_t plan_smem[];
  int32_t* state = kStaged ? plan_smem + p.n_kv : scratch;
  int32_t* nkbs = state + 6 * (int64_t{p.nb} + 1);
  // Stage kv_indptr, compute each batch's KV blocks and their sum in one pass.
  long long cost = 0;
  for (int32_t i = threadIdx.x; i < max(p.nb, p.n_kv); i += blockDim.x) {
    if (kStaged && i < p.n_kv) plan_smem[i] = kv_global[i];
    if (i < p.nb) {
      const int32_t nkb = cdiv(kv_global[i + 1] - kv_global[i], p.gran);
      state[6 * int64_t{i} + 5] = nkb;
      nkbs[i] = nkb;
      cost += nkb + p.ovh;
    }
  }
  const int32_t payload = payload_from_sum(p, block_sum(cost));  // its barrier orders the pass
  const ParallelScan ps{p, kStaged ? plan_smem : kv_global, state, payload,
                        FastDiv(payload - p.ovh)};
  if (threadIdx.x == 0) {
    b.status[3] = payload;
    ps.scan(nkbs);
    store(b.reduce_indptr, p.n_reduce_indptr, 0, 0, b.status);
    store(b.work_indptr, p.n_work_indptr, 0, 0, b.status);
  }
  __syncthreads();
  const int32_t total_works = ps.at(p.nb)[2], total_reduce = ps.at(p.nb)[3];
  // work_indptr entries of clusters after the last fragment keep the total; the fragments'
  // stores below overwrite the others, ordered after these by the barrier.
  for (int32_t c = 1 + threadIdx.x; c <= p.num_clusters; c += blockDim.x)
    store(b.work_indptr, p.n_work_indptr, c, total_works, b.status);
  __syncthreads();
  for (int32_t bi = threadIdx.x; bi < p.nb; bi += blockDim.x) ps.batch_cells(bi, b);
  for (int32_t wi = threadIdx.x; wi < total_works; wi += blockDim.x) ps.fragment_cells(wi, b);
  // reduce_indptr[nb] is also the last batch's cell: both stores write the total.
  for (int32_t i = p.nb + threadIdx.x; i < p.n_reduce_indptr; i += blockDim.x)
    store(b.reduce_indptr, p.n_reduce_indptr, i, total_reduce, b.status);
  if (threadIdx.x == 0) b.status[2] = p.nb;
}

__global__ void fill_i32_kernel(int32_t* p, int64_t n, int32_t v) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    p[i] = v;
}

// decode_update_mla_metadata_v1, one lane (the reference's order of partial-map updates).
struct UpdateParams {
  int32_t fold, has_rejects, cu_num, max_work, kv_size, rej_size, n_reduce_indptr, n_final_map,
      n_partial_map;
};

__global__ void decode_update_kernel(UpdateParams u, const int32_t* kv, const int32_t* rej,
                                     int32_t* work_indptr, int32_t* work_info,
                                     const int32_t* reduce_indptr, int32_t* final_map,
                                     int32_t* partial_map) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  const int32_t num_workers = work_indptr[u.cu_num];
  for (int32_t w = 0; w < num_workers && w < u.max_work; ++w) {
    int32_t* info = work_info + (int64_t)w * 8;
    const int32_t batch_id = info[0];
    const int32_t real = batch_id / u.fold;
    const int64_t ki = (int64_t)real + 1;
    const int32_t seq_kv_end = (ki >= 0 && ki < u.kv_size) ? kv[ki] : 0;
    int32_t rejected = 0;
    if (u.has_rejects) rejected = (real >= 0 && real < u.rej_size) ? rej[real] : 0;
    const int32_t delta = 1 - rejected;
    int32_t partial = info[1], q_start = info[2], q_end = info[3];
    int32_t kv_start = info[4], kv_end = info[5], kv_offset = info[6];
    const int32_t ori_partial = partial;
    int32_t len = kv_end - kv_start;
    if (kv_offset == 0) {
      if (len > 0) {
        kv_end = seq_kv_end;
        kv_start = len + delta > 0 ? kv_end - len - delta : kv_end - 1;
      }
    } else {
      kv_offset += delta;
      if (kv_offset <= 0) {
        len += kv_offset - 1;
        if (len < 1) len = 1;
        kv_offset = 1;
      }
      kv_end = seq_kv_end - kv_offset;
      kv_start = kv_end - len;
    }
    const int32_t q_len = q_end - q_start;
    if (q_len > 1) {
      q_start = batch_id;
      q_end = batch_id + 1;
      if (partial >= 0) partial = partial / q_len;
    }
    info[1] = partial, info[2] = q_start, info[3] = q_end, info[4] = kv_start, info[5] = kv_end;
    info[6] = kv_offset, info[7] = 0;
    if (q_len > 1 && ori_partial >= 0) {
      const int32_t tile = batch_id;
      if (kv_offset == 0 && tile >= 0 && (int64_t)tile * 2 + 1 < u.n_final_map) {
        final_map[(int64_t)tile * 2] = q_start;
        final_map[(int64_t)tile * 2 + 1] = q_end;
      }
      if (tile >= 0 && tile + 1 < u.n_reduce_indptr) {
        const int32_t p0 = reduce_indptr[tile], p1 = reduce_indptr[tile + 1];
        for (int32_t i = p0; i < p1; ++i) {
          if (i < 0 || i >= u.n_partial_map) break;
          if (partial_map[i] == ori_partial) {
            partial_map[i] = partial;
            break;
          }
        }
      }
    }
  }
}

// Median over 5 batches of the mean time of `iterations` back-to-back launches (events, after a
// warm-up launch). Microseconds.
template <class F>
double median_launch_us(int iterations, F&& launch) {
  launch();
  hipEvent_t e0, e1;
  HIP_CHECK(hipEventCreate(&e0));
  HIP_CHECK(hipEventCreate(&e1));
  double us[5];
  for (double& u : us) {
    HIP_CHECK(hipEventRecord(e0, 0));
    for (int i = 0; i < iterations; ++i) launch();
    HIP_CHECK(hipEventRecord(e1, 0));
    HIP_CHECK(hipEventSynchronize(e1));
    float ms = 0;
    HIP_CHECK(hipEventElapsedTime(&ms, e0, e1));
    u = 1000.0 * ms / iterations;
  }
  (void)hipEventDestroy(e0);
  (void)hipEventDestroy(e1);
  std::sort(us, us + 5);
  return us[2];
}

struct DevPlan {
  int32_t* bufs[5] = {};
  int32_t sizes[5] = {};
  ~DevPlan() {
    for (auto* b : bufs) device_release(b);  // blocks of the per-process cache (gpu_api.h)
  }
  void alloc(const ref::MetadataSizes& s) {
    const int32_t n[5] = {s.work_indptr, s.work_info_rows * 8, s.reduce_indptr,
                          s.reduce_final_map_rows * 2, s.reduce_partial_map};
    for (int i = 0; i < 5; ++i) {
      sizes[i] = n[i];
      bufs[i] = static_cast<int32_t*>(device_acquire(sizeof(int32_t) * std::max(n[i], 1)));
    }
  }
  void poison() {
    for (int i = 0; i < 5; ++i) {
      hipLaunchKernelGGL(fill_i32_kernel, dim3(64), dim3(256), 0, 0, bufs[i], (int64_t)sizes[i],
                         kPoison);
      HIP_CHECK(hipGetLastError());
    }
  }
  void upload(const ref::Plan& plan) {
    const ref::Int32Buffer::Ints* src[5] = {&plan.work_indptr.data, &plan.work_info.data,
                                            &plan.reduce_indptr.data, &plan.reduce_final_map.data,
                                            &plan.reduce_partial_map.data};
    for (int i = 0; i < 5; ++i) {
      sizes[i] = static_cast<int32_t>(src[i]->size());
      bufs[i] = static_cast<int32_t*>(device_acquire(sizeof(int32_t) * std::max(sizes[i], 1)));
      copy_to_device(bufs[i], src[i]->data(), sizeof(int32_t) * src[i]->size());
    }
  }
  void download(GpuPlan& out) {
    std::vector<int32_t>* dst[5] = {&out.work_indptr, &out.work_info, &out.reduce_indptr,
                                    &out.reduce_final_map, &out.reduce_partial_map};
    for (int i = 0; i < 5; ++i) {
      dst[i]->resize(sizes[i]);
      copy_to_host(dst[i]->data(), bufs[i], sizeof(int32_t) * sizes[i]);
    }
  }
};

struct DevI32 {
  int32_t* p = nullptr;
  explicit DevI32(const std::vector<int32_t>& v, size_t min_elems = 1) {
    p = static_cast<int32_t*>(device_acquire(sizeof(int32_t) * std::max(v.size(), min_elems)));
    copy_to_device(p, v.data(), sizeof(int32_t) * v.size());
  }
  explicit DevI32(size_t n) {
    p = static_cast<int32_t*>(device_acquire(sizeof(int32_t) * std::max<size_t>(n, 1)));
  }
  ~DevI32() { device_release(p); }
};

}  // namespace

GpuPlan plan_mla_metadata(const ref::PlanRequest& r, const ref::MetadataSizes& sizes,
                          ref::PlannerChoice choice, int timing_iterations) {
  if (auto st = ref::ValidatePlanRequest(r); !st.ok()) throw std::invalid_argument(st.ToString());
  auto derived = ref::DecidePlan(r, choice);
  if (!derived.ok()) throw std::invalid_argument(derived.status().ToString());
  const ref::PlanDerived& d = *derived;
  const ref::RevisionRules& rules = ref::GetRevisionRules(r.revision);
  PlanParams p{};
  p.sparse = r.topk >= 0;
  p.uni = r.uni_seqlen_qo;
  p.ori = d.ori_seqlen_qo;
  p.fold = d.fold_ratio;
  p.nb = p.sparse ? d.planner_batches * d.ori_seqlen_qo : d.planner_batches;
  p.gran = r.kv_granularity;
  p.page = r.page_size;
  p.ovh = d.fixed_overhead_blocks;
  p.thr = d.tail_done_threshold;
  p.topk_p = d.topk_pages;
  p.num_clusters = d.num_clusters;
  p.num_splits = d.num_splits;
  p.packed = d.packed_qo_len_per_wg;
  p.planner_heads = d.planner_heads;
  p.qo_split = d.qo_split;
  p.lds_batch_info = int64_t{p.nb} * 4 <= ref::GetTargetProfile(r.target).lds_bytes;
  p.is_cp_rr = r.is_cp_round_robin;
  p.is_causal = r.is_causal;
  p.trim_needs_causal = rules.causal_trim_needs_is_causal;
  p.kv_offset_token_tail = rules.sparse_kv_offset_adds_token_tail;
  p.batch_idx_is_request = rules.sparse_batch_idx_is_request;
  p.lpl_size = static_cast<int32_t>(r.kv_last_page_lens.size());

  DevPlan dp;
  dp.alloc(sizes);
  p.n_work_indptr = dp.sizes[0], p.n_work_info = dp.sizes[1], p.n_reduce_indptr = dp.sizes[2];
  p.n_final_map = dp.sizes[3], p.n_partial_map = dp.sizes[4];
  p.n_kv = static_cast<int32_t>(r.kv_indptr.size());
  const size_t scratch_ints = ParallelScratchInts(p.nb);
  const size_t smem_ints = p.n_kv + (d.parallel_planner_used ? scratch_ints : 0);
  p.staged = smem_ints * sizeof(int32_t) <= kPlanStagedBytes;
  const size_t smem = p.staged ? smem_ints * sizeof(int32_t) : 0;
  DevI32 kv(r.kv_indptr), lpl(r.kv_last_page_lens), status(4), scratch(scratch_ints);
  PlanBuffers b{dp.bufs[0], dp.bufs[1], dp.bufs[2], dp.bufs[3], dp.bufs[4], status.p};
  auto launch = [&] {
    if (d.parallel_planner_used && p.staged)
      hipLaunchKernelGGL(parallel_plan_kernel<true>, dim3(1), dim3(kPlanBlock), smem, 0, p, kv.p,
                         b, scratch.p);
    else if (d.parallel_planner_used)
      hipLaunchKernelGGL(parallel_plan_kernel<false>, dim3(1), dim3(kPlanBlock), 0, 0, p, kv.p, b,
                         scratch.p);
    else
      hipLaunchKernelGGL(serial_plan_kernel, dim3(1), dim3(kPlanBlock), smem, 0, p, kv.p, lpl.p, b);
    HIP_CHECK(hipGetLastError());
  };
  GpuPlan out;
  out.parallel = d.parallel_planner_used;
  if (timing_iterations > 0) out.kernel_us = median_launch_us(timing_iterations, launch);
  dp.poison();
  const int32_t zero[4] = {0, 0, 0, 0};
  copy_to_device(status.p, zero, sizeof zero);
  launch();
  HIP_CHECK(hipDeviceSynchronize());
  dp.download(out);
  int32_t st[4];
  copy_to_host(st, status.p, sizeof st);
  out.oob_stores = st[0];
  out.walk_failed = st[1] != 0;
  out.num_tiles = st[2];
  out.payload = st[3];
  return out;
}

GpuPlan plan_mla_metadata(const ref::PlanRequest& r, ref::PlannerChoice choice,
                          int timing_iterations) {
  const int32_t batch = static_cast<int32_t>(r.kv_indptr.size()) - 1;
  auto sizes = ref::GetMlaMetadataInfoV1(r, batch);
  if (!sizes.ok()) throw std::invalid_argument(sizes.status().ToString());
  return plan_mla_metadata(r, *sizes, choice, timing_iterations);
}

void decode_update_mla_metadata(const ref::DecodeUpdateRequest& r, ref::Plan& plan) {
  UpdateParams u{};
  u.fold = ref::DecodeUpdateFoldRatio(r);
  u.has_rejects = r.has_num_reject_tokens;
  u.cu_num = static_cast<int32_t>(plan.work_indptr.size()) - 1;
  u.max_work = static_cast<int32_t>(plan.work_info.size() / 8);
  u.kv_size = static_cast<int32_t>(r.kv_indptr.size());
  u.rej_size = static_cast<int32_t>(r.num_reject_tokens.size());
  if (u.cu_num < 0) throw std::invalid_argument("decode_update: empty work_indptr");
  DevPlan dp;
  dp.upload(plan);
  u.n_reduce_indptr = dp.sizes[2], u.n_final_map = dp.sizes[3], u.n_partial_map = dp.sizes[4];
  DevI32 kv(r.kv_indptr), rej(r.num_reject_tokens);
  hipLaunchKernelGGL(decode_update_kernel, dim3(1), dim3(32), 0, 0, u, kv.p, rej.p, dp.bufs[0],
                     dp.bufs[1], dp.bufs[2], dp.bufs[3], dp.bufs[4]);
  HIP_CHECK(hipGetLastError());
  HIP_CHECK(hipDeviceSynchronize());
  GpuPlan out;
  dp.download(out);
  plan.work_info.data.assign(out.work_info.begin(), out.work_info.end());
  plan.reduce_final_map.data.assign(out.reduce_final_map.begin(), out.reduce_final_map.end());
  plan.reduce_partial_map.data.assign(out.reduce_partial_map.begin(),
                                      out.reduce_partial_map.end());
}

}  // namespace mlasim::gpu
