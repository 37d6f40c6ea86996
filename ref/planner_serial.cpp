// The serial v1.2 walk (kn_get_mla_metadata_v1_2, aiter-mla-metadata.md §4.5). Variable names
// follow the spec: v (virtual batch), tile (q tile of v), kb/ke (KV begin/end of v in the
// planner's KV space), kblk (blocks already emitted for this tile), nsplit (pieces already
// emitted for this tile). The request index of v (v / fold, sparse: v / ori / fold) is tracked
// incrementally instead of divided out at every step.
//
// Speed: the walk state and a copy of the parameters are locals of RunSerial and every step
// below is inlined into it, so they live in registers (stores into the int32 plan buffers could
// otherwise alias int32 members and force reloads after every store).
#include <algorithm>
#include <cstdint>

#include "ref/mutant.h"
#include "ref/planner_walk.h"

#define MLASIM_INLINE [[gnu::always_inline]] inline

namespace mlasim::ref::internal {
namespace {

struct SerialState {
  int32_t v = 0, tile = 0, sub = 0, tok = 0, req = 0, kblk = 0, nsplit = 0;
  int32_t kb = 0, ke = 0;
  // Of the current tile: q rows [qs, qe) and the KV end after the causal trim (ke - bt).
  int32_t qs = 0, qe = 0, ke_trim = 0;
  bool tail_done = false;
  int32_t num_works = 0, partial_idx = 0, tiles = 0, last_reduce = 0;
  int64_t final_map_end = 0;  // one past the last reduce_final_map element stored
};

template <CellTracking kMode, bool kBounded>
struct SerialOut {
  explicit SerialOut(Plan& p)
      : plan(&p),
        work_indptr(p.work_indptr),
        work_info(p.work_info),
        reduce_indptr(p.reduce_indptr),
        final_map(p.reduce_final_map),
        partial_map(p.reduce_partial_map) {}
  Plan* plan;
  Sink<kMode, kBounded> work_indptr, work_info, reduce_indptr, final_map, partial_map;
};

// The kNondeterministicPad mutant leaks host state into the plan (as reading uninitialised memory
// would): the address of the buffer it fills, which differs between two plans of the same batch.
// No static counter: a mutant run is as deterministic as the state it leaks.
[[gnu::noinline]] int32_t LeakedPad(const Plan& plan) {
  return static_cast<int32_t>(reinterpret_cast<uintptr_t>(plan.work_info.data.data()) >> 4);
}

// (Out of line and given no pointer to the walk's locals, which must stay in registers.)
[[gnu::noinline]] void RecordLastPageRead(Plan& plan, int64_t size, int32_t index,
                                          int32_t work_row) {
  plan.input_violations.push_back(
      InputViolation{"kv_last_page_lens", index, size, work_row, kKvOffset});
}

// bt of §4.5: the causal trim of this tile's KV end (page size 1). With folded heads aiter
// computes n_tiles - (qo_start / fold) % ori - 1, which is <= 0 (so 0) for a single tile.
MLASIM_INLINE int32_t CausalTail(const WalkParams& p, const SerialState& s) {
  if (!p.page1 || !p.causal_trim) return 0;
  int32_t bt = p.req->is_cp_round_robin ? 0 : p.n_tiles - 1 - s.tile;
  if (!p.sparse && p.fold != 1) {
    if (p.n_tiles == 1) return 0;
    bt = p.n_tiles - static_cast<int32_t>(p.by_ori.Mod(p.by_fold.Div(s.qs))) - 1;
  }
  return std::max(bt, 0);
}

// Caches what is fixed for the whole current tile.
MLASIM_INLINE void EnterTile(const WalkParams& p, SerialState& s) {
  s.qs = p.uni * s.v + s.tile * p.qts;
  s.qe = std::min(s.qs + p.qts, p.uni * s.v + p.uni);
  s.ke_trim = s.ke - CausalTail(p, s);
}

// KV end and kv_offset of a piece at page size 1; may set tail_done (non-final pieces).
MLASIM_INLINE void PieceEndPage1(const WalkParams& p, SerialState& s, int32_t cap_blocks,
                                 bool is_final, int32_t* w) {
  // (bt >= 0, so aiter's min(ke - bt, ke) and min(ke, ke - bt) are both ke_trim.)
  int32_t k1 = std::min(w[kKvStart] + cap_blocks * p.gran, s.ke_trim);
  const bool tail_rule = !MLASIM_MUTANT(p.mutant, kNoTailRule);
  if (is_final) {
    const int32_t left = s.ke - k1;
    if ((tail_rule && left > 0 && left < p.thr) || s.tail_done) k1 = s.ke_trim;
  } else if (tail_rule && s.ke - k1 < p.thr) {
    s.tail_done = true;
    k1 = s.ke_trim;
  }
  w[kKvEnd] = k1;
  w[kKvOffset] = s.ke - k1;
  if (p.sparse_kv_offset_token_tail) {
    w[kBatchIdx] = s.req;  // v / ori with fold 1
    w[kKvOffset] += p.ori - 1 - s.tok;
  }
}

// Fills w[] for the piece at the current state. Returns -1, or the kv_last_page_lens index read
// past its end (the piece's kv_offset is then undefined).
MLASIM_INLINE int32_t MakePiece(const WalkParams& p, SerialState& s, int32_t cap_blocks,
                                bool is_final, int32_t* w) {
  const int32_t batch_kv = p.sparse ? s.req : s.v;
  int32_t undefined_index = -1;
  w[kBatchIdx] = batch_kv;
  w[kPartialQoLoc] = 0;
  w[kQoStart] = s.qs;
  w[kQoEnd] = s.qe;
  w[kKvStart] = s.kb + s.kblk * p.gran;
  if (p.page1) {
    PieceEndPage1(p, s, cap_blocks, is_final, w);
  } else {
    const int32_t k1 = std::min(w[kKvStart] + cap_blocks * p.gran, s.ke);
    w[kKvEnd] = k1;
    w[kKvOffset] = 0;
    if (k1 != s.ke) {
      // HEAD indexes kv_last_page_lens by the request (sparse) or the virtual batch (dense);
      // with folding the virtual index can run past the array (§4.5).
      const int32_t idx = p.batch_idx_is_request ? batch_kv : s.v;
      const std::vector<int32_t>& lpl = p.req->kv_last_page_lens;
      if (idx >= 0 && idx < static_cast<int32_t>(lpl.size()))
        w[kKvOffset] = (s.ke - k1 - 1) * p.page + lpl[idx];
      else
        undefined_index = idx;
    }
  }
  if (p.sparse && !p.batch_idx_is_request) w[kBatchIdx] = s.v;
  w[kPad] = 0;  // (the kNondeterministicPad mutant fills it in StoreWork)
  return undefined_index;
}

template <class Out>
MLASIM_INLINE void StoreWork(const WalkParams& p, SerialState& s, const Out& o, const int32_t* w,
                             int32_t undefined_index) {
  const bool undefined = undefined_index >= 0;
  int32_t leaked[kWorkInfoWidth];
  if (MLASIM_MUTANT(p.mutant, kNondeterministicPad)) {
    std::copy(w, w + kWorkInfoWidth, leaked);
    leaked[kPad] = LeakedPad(*o.plan);
    w = leaked;
  }
  o.work_info.PutWork(s.num_works, w, undefined ? kKvOffset : -1);
  if (undefined)
    RecordLastPageRead(*o.plan, static_cast<int64_t>(p.req->kv_last_page_lens.size()),
                       undefined_index, s.num_works);
  ++s.num_works;
}

// The final piece of a tile and the tile's reduce bookkeeping.
template <class Out>
MLASIM_INLINE void EmitFinal(const WalkParams& p, SerialState& s, const Out& o, int32_t rblk) {
  int32_t w[kWorkInfoWidth];
  const int32_t undefined_index = MakePiece(p, s, rblk, /*is_final=*/true, w);
  const int32_t pieces = s.nsplit + 1;
  if (s.nsplit > 0) {
    w[kPartialQoLoc] = s.partial_idx;
    o.reduce_indptr.Put(s.tiles + 1, s.last_reduce + pieces);
    const int64_t row = int64_t{s.tiles} * kReduceFinalMapWidth;
    o.final_map.Put(row + kFinalQoStart, w[kQoStart]);
    o.final_map.Put(row + kFinalQoEnd, w[kQoEnd]);
    s.final_map_end = row + kReduceFinalMapWidth;
    const int32_t shift = MLASIM_MUTANT(p.mutant, kPartialMapOffByOne) ? p.qts : 0;
    for (int32_t i = 0; i < pieces; ++i)
      o.partial_map.Put(s.last_reduce + i, s.partial_idx - (s.nsplit - i) * p.qts + shift);
    s.partial_idx += p.qts;
    s.last_reduce += pieces;
  } else {
    w[kPartialQoLoc] = -1;
    o.reduce_indptr.Put(s.tiles + 1, s.last_reduce);
  }
  const bool drop = MLASIM_MUTANT(p.mutant, kDropLastPiece) && s.nsplit > 0;
  if (!drop) StoreWork(p, s, o, w, undefined_index);
  ++s.tiles;
}

// A non-final piece that fills the rest of the cluster (unless the tail rule finishes the tile).
template <class Out>
MLASIM_INLINE void EmitPiece(const WalkParams& p, SerialState& s, const Out& o, int32_t consuming) {
  int32_t w[kWorkInfoWidth];
  const int32_t undefined_index = MakePiece(p, s, consuming, /*is_final=*/false, w);
  if (s.tail_done) return;
  w[kPartialQoLoc] = s.partial_idx;
  StoreWork(p, s, o, w, undefined_index);
  s.partial_idx += p.qts;
  s.kblk += consuming;
  ++s.nsplit;
}

// Non-final pieces that each take a whole cluster (the middle of a tile longer than a cluster):
// at a cluster's start rem = payload, so such a piece consumes bpc = payload - ovh blocks and
// every field moves by a constant step from one to the next. Emits them from cluster c on while
// the next piece is certainly one (not final, not cut by the causal trim or the tail rule, a
// defined kv_offset) and returns how many clusters they closed. The same stores as the generic
// loop, without its per-piece decisions; mutants always take the generic loop.
template <class Out>
MLASIM_INLINE int32_t EmitWholeClusters(const WalkParams& p, SerialState& s, const Out& o,
                                        int32_t c) {
  const int32_t bpc = p.d.payload - p.ovh;
  if (p.mutant != PlannerMutant::kNone || bpc <= 0) return 0;
  if (Blocks(p, s.ke - s.kb) - s.kblk <= bpc) return 0;  // the tile ends in this cluster
  int32_t batch_idx = p.sparse ? s.req : s.v;
  int32_t offset_extra = 0;  // page 1: the sparse token tail; page > 1: the last page's tokens
  if (p.page1 && p.sparse_kv_offset_token_tail) {
    batch_idx = s.req;
    offset_extra = p.ori - 1 - s.tok;
  }
  if (!p.page1) {
    const int32_t idx = p.batch_idx_is_request ? batch_idx : s.v;
    const std::vector<int32_t>& lpl = p.req->kv_last_page_lens;
    if (idx < 0 || idx >= static_cast<int32_t>(lpl.size())) return 0;
    offset_extra = lpl[idx];
  }
  if (p.sparse && !p.batch_idx_is_request) batch_idx = s.v;
  const int32_t step = bpc * p.gran;
  int32_t n = 0;
  for (; c + n < p.d.num_clusters; ++n) {
    if (Blocks(p, s.ke - s.kb) - s.kblk <= bpc) break;  // the tile ends in this cluster
    const int32_t ks = s.kb + s.kblk * p.gran, k1 = ks + step;
    int32_t offset;
    if (p.page1) {
      if (k1 > s.ke_trim || s.ke - k1 < p.thr) break;  // trimmed, or the tail rule applies
      offset = s.ke - k1 + offset_extra;
    } else {
      if (k1 >= s.ke) break;
      offset = (s.ke - k1 - 1) * p.page + offset_extra;
    }
    const int32_t w[kWorkInfoWidth] = {batch_idx, s.partial_idx, s.qs, s.qe, ks, k1, offset, 0};
    o.work_info.PutWork(s.num_works, w, -1);
    ++s.num_works;
    s.partial_idx += p.qts;
    s.kblk += bpc;
    ++s.nsplit;
    o.work_indptr.Put(c + n + 1, s.num_works);
  }
  return n;
}

// ++v, keeping sub = v % fold, tok = (v / fold) % ori (sparse) and req = the request of v.
MLASIM_INLINE void NextVirtualBatch(const WalkParams& p, const int32_t* kv, SerialState& s) {
  ++s.v;
  s.sub = s.sub == p.fold - 1 ? 0 : s.sub + 1;
  if (s.sub != 0) return;
  if (p.sparse) {
    s.tok = s.tok == p.ori - 1 ? 0 : s.tok + 1;
    if (s.tok == 0) ++s.req;
  } else {
    ++s.req;
  }
  if (s.v < p.nb) {
    const int32_t len = kv[s.req + 1] - kv[s.req];
    s.kb = p.sparse ? s.kb + p.topk_p : s.ke;
    s.ke = s.kb + (p.sparse ? std::min(len, p.topk_p) : len);
  }
}

MLASIM_INLINE void Advance(const WalkParams& p, const int32_t* kv, SerialState& s) {
  s.tile = s.tile == p.n_tiles - 1 ? 0 : s.tile + 1;
  if (!p.d.qo_split || s.tile == 0) NextVirtualBatch(p, kv, s);
  EnterTile(p, s);
  s.kblk = 0;
  s.nsplit = 0;
  s.tail_done = false;
}

// Final pieces of fresh tiles that fit in the rest of the cluster (most tiles): such a piece is
// the tile's KV [kb, ke - bt) with kv_offset bt at page size 1 (the whole KV, kv_offset 0,
// otherwise), writes final rows (partial_qo_loc -1) and an empty reduce group. Emits them while
// they fit, as the generic step would, without its per-piece decisions; returns how many.
template <class Out>
MLASIM_INLINE int32_t EmitWholeTiles(const WalkParams& p, const int32_t* kv, SerialState& s,
                                     const Out& o, int32_t* rem) {
  if (p.mutant != PlannerMutant::kNone) return 0;
  int32_t n = 0;
  for (; s.v < p.nb && s.kblk == 0; ++n) {
    const int32_t rblk = Blocks(p, s.ke - s.kb);
    if (*rem < rblk + p.ovh) break;
    int32_t batch_idx = p.sparse ? s.req : s.v;
    int32_t k1 = s.ke, offset = 0;
    if (p.page1) {
      k1 = s.ke_trim;  // kb + rblk * gran >= ke >= ke - bt
      offset = s.ke - k1;
      if (p.sparse_kv_offset_token_tail) {
        batch_idx = s.req;
        offset += p.ori - 1 - s.tok;
      }
    }
    if (p.sparse && !p.batch_idx_is_request) batch_idx = s.v;
    const int32_t w[kWorkInfoWidth] = {batch_idx, -1, s.qs, s.qe, s.kb, k1, offset, 0};
    o.reduce_indptr.Put(s.tiles + 1, s.last_reduce);
    o.work_info.PutWork(s.num_works, w, -1);
    ++s.num_works;
    ++s.tiles;
    *rem -= rblk + p.ovh;
    Advance(p, kv, s);
  }
  return n;
}

// The clusters' loop of the kernel. Bound: each inner iteration emits a final piece (advancing
// the tile), emits a non-final piece and leaves the cluster, or sets tail_done (the next
// iteration is final).
template <class Out>
MLASIM_INLINE void WalkClusters(const WalkParams& p, SerialState& s, const Out& o) {
  const int32_t* kv = p.req->kv_indptr.data();
  const int64_t max_iterations = int64_t{p.nb} * p.n_tiles * 2 + int64_t{p.d.num_clusters} * 2 + 8;
  int64_t iterations = 0;
  for (int32_t c = 0; c < p.d.num_clusters; ++c) {
    if (s.v < p.nb) {
      const int32_t run = EmitWholeClusters(p, s, o, c);
      iterations += run;
      c += run;
      if (c >= p.d.num_clusters) break;
    }
    int32_t rem = p.d.payload;
    while (s.v < p.nb) {
      iterations += EmitWholeTiles(p, kv, s, o, &rem);
      if (s.v >= p.nb) break;
      MLASIM_ASSERT(++iterations <= max_iterations, "serial planner walk did not terminate");
      const int32_t rblk = Blocks(p, s.ke - s.kb) - s.kblk;
      if (rem >= rblk + p.ovh || s.tail_done) {
        EmitFinal(p, s, o, rblk);
        rem -= rblk + p.ovh;
        Advance(p, kv, s);
        continue;
      }
      if (rem > p.ovh) EmitPiece(p, s, o, rem - p.ovh);
      if (!s.tail_done) break;
    }
    o.work_indptr.Put(c + 1, s.num_works);
  }
}

// Whether no store of the serial walk can fall outside the plan's buffers, from the walk's
// structure: with T = nb x n_tiles q tiles and K clusters, it stores work_indptr[0..K],
// reduce_indptr[0..T] (and the tail), reduce_final_map rows below T, and one work row per final
// piece (<= T) or per cluster it leaves mid-tile (<= K; one left in the last cluster belongs to a
// tile never finalised), so below T + K - 1 rows; reduce_partial_map entries are pieces of
// finalised split tiles: below T + K - 1 and below 2 (K - 1) (each such tile has >= 2 pieces).
bool SerialStoresFit(const WalkParams& p, const Plan& plan) {
  const int64_t tiles = int64_t{p.nb} * p.n_tiles, k = p.d.num_clusters;
  const int64_t pieces = tiles + std::max<int64_t>(k - 1, 0);
  const int64_t partial = std::min(pieces, 2 * std::max<int64_t>(k - 1, 0));
  return plan.work_indptr.size() >= k + 1 && plan.work_info.rows() >= pieces &&
         plan.reduce_indptr.size() >= tiles + 1 && plan.reduce_final_map.rows() >= tiles &&
         plan.reduce_partial_map.size() >= partial;
}

// One instantiation per (page size 1, sparse) combination and two kinds: the unchecked one
// (no mutant, every store proved in range: SerialStoresFit) and the checked one (mutants, or
// buffers that may be too small). The walk's copy of the parameters gets the shape as constants,
// so the compiler drops every branch on them.
template <CellTracking kMode, bool kPage1, bool kSparse, bool kChecked>
void RunSerialShaped(const WalkParams& params, Plan& plan) {
  WalkParams p = params;  // a local copy: no int32 store can alias it
  p.page1 = kPage1;
  p.sparse = kSparse;
  if (!kChecked) p.mutant = PlannerMutant::kNone;
  const SerialOut<kMode, kChecked> o(plan);
  SerialState s;
  o.work_indptr.Put(0, 0);
  o.reduce_indptr.Put(0, 0);
  if (p.nb > 0) {
    // With the LDS batch cache the first length is relative; without it aiter reads the raw
    // kv_indptr[1] (identical when kv_indptr[0] == 0).
    const std::vector<int32_t>& kv = p.req->kv_indptr;
    const int32_t first = p.lds_batch_info ? kv[1] - kv[0] : kv[1];
    s.ke = p.sparse ? std::min(first, p.topk_p) : first;
  }
  EnterTile(p, s);
  WalkClusters(p, s, o);
  o.reduce_indptr.Fill(s.tiles, o.reduce_indptr.size(), s.last_reduce);
  o.work_indptr.SetWrittenEnd(int64_t{p.d.num_clusters} + 1);
  o.work_info.SetWrittenEnd(int64_t{s.num_works} * kWorkInfoWidth);
  o.reduce_indptr.SetWrittenEnd(int64_t{s.tiles} + 1);
  o.final_map.SetWrittenEnd(s.final_map_end);
  o.partial_map.SetWrittenEnd(s.last_reduce);
  plan.derived.num_tiles = s.tiles;
}

}  // namespace

template <CellTracking kMode>
void RunSerial(const WalkParams& p, Plan& plan) {
  const bool checked = p.mutant != PlannerMutant::kNone || !SerialStoresFit(p, plan);
  using Run = void (*)(const WalkParams&, Plan&);
  static constexpr Run kRuns[2][2][2] = {
      {{RunSerialShaped<kMode, false, false, false>, RunSerialShaped<kMode, false, false, true>},
       {RunSerialShaped<kMode, false, true, false>, RunSerialShaped<kMode, false, true, true>}},
      {{RunSerialShaped<kMode, true, false, false>, RunSerialShaped<kMode, true, false, true>},
       {RunSerialShaped<kMode, true, true, false>, RunSerialShaped<kMode, true, true, true>}}};
  kRuns[p.page1][p.sparse][checked](p, plan);
}

template void RunSerial<CellTracking::kChecked>(const WalkParams&, Plan&);
template void RunSerial<CellTracking::kFast>(const WalkParams&, Plan&);

}  // namespace mlasim::ref::internal
