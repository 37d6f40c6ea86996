// aiter's v1.2 planner kernels on non-uniform q lengths (uni_seqlen_qo <= 0: the dispatcher's
// kUniSeqlenQo = -1 instantiation, aiter-mla-metadata.md §4.3): request v's q rows are
// [qo_indptr[v], qo_indptr[v + 1]) and its q-tile count and tile size are its own. Dense, no head
// folding (ValidatePlanRequest refuses the rest). A plain walk, one step per piece, written next
// to aiter's kn_get_mla_metadata_v1_2 and kn_get_mla_metadata_v1_2_parallel and compared with
// them by tests/bench (docs/planner.md "Non-uniform q lengths").
#include <algorithm>
#include <cstdint>

#include "ref/mutant.h"
#include "ref/planner_walk.h"

namespace mlasim::ref::internal {
namespace {

// One request's q rows as the planner sees them: QoState::get_begin/get_end/get_seqlen.
struct RaggedQ {
  int32_t q0 = 0, q1 = 0;  // rows [q0, q1) (q1 = q0 + sq)
  int32_t n_tiles = 1;     // q tiles (§4.3 n_tiles(v))
  int32_t qts = 0;         // rows per tile
};

RaggedQ QOf(const WalkParams& p, int32_t v) {
  const std::vector<int32_t>& qo = p.req->qo_indptr;
  RaggedQ q;
  const int32_t sq = qo[v + 1] - qo[v];
  q.n_tiles = QoTilesOf(p.d, sq);
  q.qts = CeilDivPos(sq, q.n_tiles);
  // The mutant places the rows as the uniform path would: v x max_seqlen_qo.
  q.q0 = MLASIM_MUTANT(p.mutant, kRaggedRowsByMax) ? v * p.req->max_seqlen_qo : qo[v];
  q.q1 = q.q0 + sq;
  return q;
}

struct RaggedOut {
  explicit RaggedOut(Plan& plan)
      : work_indptr(plan.work_indptr),
        work_info(plan.work_info),
        reduce_indptr(plan.reduce_indptr),
        final_map(plan.reduce_final_map),
        partial_map(plan.reduce_partial_map) {}
  Int32Buffer &work_indptr, &work_info, &reduce_indptr, &final_map, &partial_map;
};

// The serial walk's state (names of §4.5).
struct RaggedState {
  int32_t v = 0, tile = 0, kblk = 0, nsplit = 0, kb = 0, ke = 0;
  bool tail_done = false;
  int32_t num_works = 0, partial_idx = 0, tiles = 0, last_reduce = 0;
  int64_t final_map_end = 0;
};

int32_t KvLen(const WalkParams& p, int32_t v) {
  return p.req->kv_indptr[v + 1] - p.req->kv_indptr[v];
}

// A piece of the current tile covering at most `cap` blocks: its work_info row in w[]. Sets
// tail_done when a non-final piece leaves fewer than max_seqlen_qo tokens (page size 1). Returns
// the kv_last_page_lens index read past its end, or -1.
int32_t MakeRaggedPiece(const WalkParams& p, const RaggedQ& q, RaggedState& s, int32_t cap,
                        bool is_final, int32_t* w) {
  int32_t undefined_index = -1;
  w[kBatchIdx] = s.v;
  w[kPartialQoLoc] = 0;
  w[kQoStart] = q.q0 + s.tile * q.qts;
  w[kQoEnd] = std::min(w[kQoStart] + q.qts, q.q1);
  w[kKvStart] = s.kb + s.kblk * p.gran;
  w[kPad] = 0;
  if (p.page1) {
    int32_t bt = p.req->is_cp_round_robin ? 0 : q.n_tiles - 1 - s.tile;
    bt = p.causal_trim ? std::max(bt, 0) : 0;
    int32_t k1 = std::min(w[kKvStart] + cap * p.gran, s.ke - bt);
    if (is_final) {
      if ((s.ke - k1 < p.thr && s.ke - k1 > 0) || s.tail_done) k1 = s.ke - bt;
    } else if (s.ke - k1 < p.thr) {
      s.tail_done = true;
      k1 = s.ke - bt;
    }
    w[kKvEnd] = k1;
    w[kKvOffset] = s.ke - k1;
    return undefined_index;
  }
  const int32_t k1 = std::min(w[kKvStart] + cap * p.gran, s.ke);
  w[kKvEnd] = k1;
  w[kKvOffset] = 0;
  if (k1 != s.ke) {
    const std::vector<int32_t>& lpl = p.req->kv_last_page_lens;
    if (s.v < static_cast<int32_t>(lpl.size()))
      w[kKvOffset] = (s.ke - k1 - 1) * p.page + lpl[s.v];
    else
      undefined_index = s.v;
  }
  return undefined_index;
}

template <CellTracking kMode>
void PutRaggedWork(const WalkParams& p, const RaggedOut& o, Plan& plan, int32_t row,
                   const int32_t* w, int32_t undefined_index) {
  Sink<kMode>(o.work_info).PutWork(row, w, undefined_index >= 0 ? kKvOffset : -1);
  if (undefined_index >= 0)
    plan.input_violations.push_back(
        InputViolation{"kv_last_page_lens", undefined_index,
                       static_cast<int64_t>(p.req->kv_last_page_lens.size()), row, kKvOffset});
}

// The final piece of the current tile and the tile's reduce bookkeeping.
template <CellTracking kMode>
void EmitRaggedFinal(const WalkParams& p, const RaggedQ& q, RaggedState& s, const RaggedOut& o,
                     Plan& plan, int32_t rblk) {
  int32_t w[kWorkInfoWidth];
  const int32_t undefined_index = MakeRaggedPiece(p, q, s, rblk, /*is_final=*/true, w);
  const int32_t pieces = s.nsplit + 1;
  if (s.nsplit > 0) {
    w[kPartialQoLoc] = s.partial_idx;
    Sink<kMode>(o.reduce_indptr).Put(s.tiles + 1, s.last_reduce + pieces);
    const int64_t row = int64_t{s.tiles} * kReduceFinalMapWidth;
    Sink<kMode>(o.final_map).Put(row + kFinalQoStart, w[kQoStart]);
    Sink<kMode>(o.final_map).Put(row + kFinalQoEnd, w[kQoEnd]);
    s.final_map_end = row + kReduceFinalMapWidth;
    for (int32_t i = 0; i < pieces; ++i)
      Sink<kMode>(o.partial_map).Put(s.last_reduce + i, s.partial_idx - (s.nsplit - i) * q.qts);
    s.partial_idx += q.qts;
    s.last_reduce += pieces;
  } else {
    w[kPartialQoLoc] = -1;
    Sink<kMode>(o.reduce_indptr).Put(s.tiles + 1, s.last_reduce);
  }
  PutRaggedWork<kMode>(p, o, plan, s.num_works, w, undefined_index);
  ++s.num_works;
  ++s.tiles;
}

// The next tile, or the next request (whose KV follows the previous one's).
void AdvanceRagged(const WalkParams& p, const RaggedQ& q, RaggedState& s) {
  s.tile = s.tile == q.n_tiles - 1 ? 0 : s.tile + 1;
  if (!p.d.qo_split || s.tile == 0) {
    ++s.v;
    if (s.v < p.nb) {
      s.kb = s.ke;
      s.ke = s.kb + KvLen(p, s.v);
    }
  }
  s.kblk = 0;
  s.nsplit = 0;
  s.tail_done = false;
}

// One cluster of kn_get_mla_metadata_v1_2 (its `while (curr_batch < num_batches)` loop).
template <CellTracking kMode>
void FillRaggedCluster(const WalkParams& p, RaggedState& s, const RaggedOut& o, Plan& plan) {
  int32_t rem = p.d.payload;
  while (s.v < p.nb) {
    const RaggedQ q = QOf(p, s.v);
    const int32_t rblk = Blocks(p, s.ke - s.kb) - s.kblk;
    if (rem >= rblk + p.ovh || s.tail_done) {
      EmitRaggedFinal<kMode>(p, q, s, o, plan, rblk);
      rem -= rblk + p.ovh;
      AdvanceRagged(p, q, s);
      continue;
    }
    if (rem > p.ovh) {
      const int32_t consuming = rem - p.ovh;
      int32_t w[kWorkInfoWidth];
      const int32_t undefined_index = MakeRaggedPiece(p, q, s, consuming, false, w);
      if (!s.tail_done) {
        w[kPartialQoLoc] = s.partial_idx;
        PutRaggedWork<kMode>(p, o, plan, s.num_works, w, undefined_index);
        s.partial_idx += q.qts;
        ++s.num_works;
        s.kblk += consuming;
        ++s.nsplit;
      }
    }
    if (!s.tail_done) break;
  }
}

}  // namespace

template <CellTracking kMode>
void RunRaggedSerial(const WalkParams& p, Plan& plan) {
  const RaggedOut o(plan);
  RaggedState s;
  Sink<kMode>(o.work_indptr).Put(0, 0);
  Sink<kMode>(o.reduce_indptr).Put(0, 0);
  if (p.nb > 0) s.ke = KvLen(p, 0);  // the LDS batch cache (ValidatePlanRequest ensures it)
  for (int32_t c = 0; c < p.d.num_clusters; ++c) {
    FillRaggedCluster<kMode>(p, s, o, plan);
    Sink<kMode>(o.work_indptr).Put(c + 1, s.num_works);
  }
  const Sink<kMode> reduce_indptr(o.reduce_indptr);
  reduce_indptr.Fill(s.tiles, reduce_indptr.size(), s.last_reduce);
  Sink<kMode>(o.work_indptr).SetWrittenEnd(int64_t{p.d.num_clusters} + 1);
  Sink<kMode>(o.work_info).SetWrittenEnd(int64_t{s.num_works} * kWorkInfoWidth);
  reduce_indptr.SetWrittenEnd(reduce_indptr.size());
  Sink<kMode>(o.final_map).SetWrittenEnd(s.final_map_end);
  Sink<kMode>(o.partial_map).SetWrittenEnd(s.last_reduce);
  plan.derived.num_tiles = s.tiles;
}

namespace {

// Phase 1 of kn_get_mla_metadata_v1_2_parallel for one request: where it starts and how many
// fragments it takes (§4.6), advancing the scan.
struct ParallelScan {
  int32_t cu = 0, remain = 0, works = 0, reduce = 0, partial = 0;
};

struct Fragments {
  int32_t fresh = 1, frags = 1;
  bool fits = true, waste = false;
};

Fragments FragmentsOf(int32_t nkb, int32_t remain, int32_t ovh, int32_t bpc) {
  Fragments f;
  if (nkb + ovh <= remain) return f;
  f.fits = false;
  if (remain > ovh) {
    f.fresh = CeilDivPos(nkb - (remain - ovh), bpc);
    f.frags = f.fresh + 1;
  } else {
    f.fresh = CeilDivPos(nkb, bpc);
    f.frags = f.fresh;
    f.waste = true;
  }
  return f;
}

void ScanStep(ParallelScan& s, const Fragments& f, int32_t nkb, int32_t ovh, int32_t payload,
              int32_t bpc, int32_t sq) {
  s.works += f.frags;
  if (f.fits) {
    s.remain -= nkb + ovh;
    return;
  }
  const int32_t left = f.waste ? nkb : nkb - (s.remain - ovh);
  s.cu += f.fresh;
  s.remain = payload - ((left - (f.fresh - 1) * bpc) + ovh);
  if (f.frags > 1) {
    s.reduce += f.frags;
    s.partial += f.frags * sq;
  }
}

// Phase 2 for one request: its reduce rows, its fragments' work rows and the work_indptr
// entries of the clusters they close.
template <CellTracking kMode>
void FillRaggedBatch(const WalkParams& p, const RaggedOut& o, int32_t b, const ParallelScan& at,
                     int32_t bpc) {
  const std::vector<int32_t>& kv = p.req->kv_indptr;
  const RaggedQ q = QOf(p, b);
  const int32_t kv_begin = kv[b] - kv[0], kv_end = kv[b + 1] - kv[0];
  const int32_t nkb = Blocks(p, kv_end - kv_begin), K = p.d.num_clusters;
  const Fragments f = FragmentsOf(nkb, at.remain, p.ovh, bpc);
  const bool split = f.frags > 1;
  const Sink<kMode> reduce_indptr(o.reduce_indptr), final_map(o.final_map),
      work_indptr(o.work_indptr), partial_map(o.partial_map), work_info(o.work_info);
  reduce_indptr.Put(b + 1, split ? at.reduce + f.frags : at.reduce);
  if (split) {
    final_map.Put(int64_t{b} * kReduceFinalMapWidth + kFinalQoStart, q.q0);
    final_map.Put(int64_t{b} * kReduceFinalMapWidth + kFinalQoEnd, q.q1);
  }
  if (f.waste && at.cu + 1 <= K) work_indptr.Put(at.cu + 1, at.works);
  const int32_t first = at.remain - p.ovh;
  for (int32_t i = 0; i < f.frags; ++i) {
    int32_t b0 = 0, b1 = nkb, cu = at.cu;
    if (!f.fits && !f.waste) {
      b0 = i == 0 ? 0 : first + (i - 1) * bpc;
      b1 = i < f.fresh ? first + i * bpc : nkb;
      cu = at.cu + i;
    } else if (f.waste) {
      b0 = i * bpc;
      b1 = i < f.fresh - 1 ? (i + 1) * bpc : nkb;
      cu = at.cu + 1 + i;
    }
    const int32_t k0 = kv_begin + b0 * p.gran, k1 = std::min(kv_begin + b1 * p.gran, kv_end);
    const int32_t ploc = split ? at.partial + i * q.qts : -1;
    const int32_t w[kWorkInfoWidth] = {b, ploc, q.q0, q.q1, k0, k1, kv_end - k1, 0};
    work_info.PutWork(at.works + i, w, -1);
    if (split) partial_map.Put(at.reduce + i, at.partial + i * q.qts);
    if (i != f.frags - 1 && cu + 1 <= K) work_indptr.Put(cu + 1, at.works + i + 1);
  }
}

}  // namespace

// kn_get_mla_metadata_v1_2_parallel (qlen <= 1, page 1, no split, dense, no folding): with
// max_seqlen_qo 1 a request holds 0 or 1 q rows, so its tile is its whole row range.
template <CellTracking kMode>
void RunRaggedParallel(const WalkParams& p, Plan& plan) {
  const RaggedOut o(plan);
  const std::vector<int32_t>& kv = p.req->kv_indptr;
  const int32_t payload = p.d.payload, bpc = payload - p.ovh, K = p.d.num_clusters;
  Sink<kMode>(o.reduce_indptr).Put(0, 0);
  Sink<kMode>(o.work_indptr).Put(0, 0);
  std::vector<ParallelScan> before(static_cast<size_t>(std::max(p.nb, 0)));
  ParallelScan s;
  s.remain = payload;
  for (int32_t b = 0; b < p.nb; ++b) {
    before[b] = s;
    const int32_t nkb = Blocks(p, kv[b + 1] - kv[b]);
    ScanStep(s, FragmentsOf(nkb, s.remain, p.ovh, bpc), nkb, p.ovh, payload, bpc,
             QOf(p, b).q1 - QOf(p, b).q0);
  }
  Sink<kMode>(o.work_indptr).Fill(1, int64_t{K} + 1, s.works);
  int64_t final_map_end = 0;
  for (int32_t b = 0; b < p.nb; ++b) {
    FillRaggedBatch<kMode>(p, o, b, before[b], bpc);
    if (FragmentsOf(Blocks(p, kv[b + 1] - kv[b]), before[b].remain, p.ovh, bpc).frags > 1)
      final_map_end = int64_t{b + 1} * kReduceFinalMapWidth;
  }
  const Sink<kMode> reduce_indptr(o.reduce_indptr);
  reduce_indptr.Fill(p.nb, reduce_indptr.size(), s.reduce);
  Sink<kMode>(o.work_indptr).SetWrittenEnd(int64_t{K} + 1);
  Sink<kMode>(o.work_info).SetWrittenEnd(int64_t{s.works} * kWorkInfoWidth);
  reduce_indptr.SetWrittenEnd(reduce_indptr.size());
  Sink<kMode>(o.final_map).SetWrittenEnd(final_map_end);
  Sink<kMode>(o.partial_map).SetWrittenEnd(s.reduce);
  plan.derived.num_tiles = p.nb;
}

template void RunRaggedSerial<CellTracking::kChecked>(const WalkParams&, Plan&);
template void RunRaggedSerial<CellTracking::kFast>(const WalkParams&, Plan&);
template void RunRaggedParallel<CellTracking::kChecked>(const WalkParams&, Plan&);
template void RunRaggedParallel<CellTracking::kFast>(const WalkParams&, Plan&);

}  // namespace mlasim::ref::internal
