// kn_get_mla_metadata_v1_2_parallel (aiter-mla-metadata.md §4.6): a closed-form scan per batch,
// then every batch's fragments filled independently. Eligible only for qlen 1, no q split, dense,
// page 1, no folding, so one q tile per batch. A zero-KV batch that starts where the remaining
// payload is at most the overhead gets no work item at all (golden README, "parallel planner
// and empty requests").
//
// The GPU kernel's phase 1 records every batch's start state in LDS; here the scan runs twice
// instead (once for the totals that phase 2a stores, once fused with the fill), so a plan needs
// no scratch memory. Stores happen in the kernel's order: work_indptr[1..num_cu] = total, then
// every batch in order, then the reduce_indptr tail (the model is race-free: batches write
// disjoint cells except a wasted cluster's work_indptr entry, where every writer stores the
// same value).
#include <algorithm>

#include "ref/planner_walk.h"

#define MLASIM_INLINE [[gnu::always_inline]] inline

namespace mlasim::ref::internal {
namespace {

// The scan state at the start of a batch (phase 1's per-batch LDS record) and the scalars.
struct Scan {
  int32_t payload, ovh, bpc;  // bpc: blocks per cluster
  Divider by_bpc;
  int32_t cu = 0, remain = 0, works = 0, reduce = 0, partial = 0;
};

// Phase 1's step for a batch of `nkb` KV blocks: how many fragments it takes (fresh of them
// opening a new cluster), and the state after it. Returns the fragments; `fresh` and `waste`
// (no room left in the current cluster: it is closed empty-handed) describe the cut.
MLASIM_INLINE int32_t Step(Scan& s, int32_t nkb, int32_t uni, int32_t* fresh, bool* waste) {
  *waste = false;
  if (nkb + s.ovh <= s.remain) {
    *fresh = 1;
    s.works += 1;
    s.remain -= nkb + s.ovh;
    return 1;
  }
  int32_t left, frags;
  if (s.remain > s.ovh) {
    left = nkb - (s.remain - s.ovh);
    *fresh = s.by_bpc.CeilDiv(left);  // left > 0: the batch does not fit
    frags = *fresh + 1;
  } else {
    left = nkb;
    *fresh = s.by_bpc.CeilDiv(nkb);
    frags = *fresh;
    *waste = true;
  }
  s.remain = s.payload - ((left - (*fresh - 1) * s.bpc) + s.ovh);
  s.cu += *fresh;
  s.works += frags;
  if (frags > 1) {
    s.reduce += frags;
    s.partial += frags * uni;
  }
  return frags;
}

template <CellTracking kMode, bool kBounded = true>
struct ParallelOut {
  explicit ParallelOut(Plan& p)
      : work_indptr(p.work_indptr),
        work_info(p.work_info),
        reduce_indptr(p.reduce_indptr),
        final_map(p.reduce_final_map),
        partial_map(p.reduce_partial_map) {}
  Sink<kMode, kBounded> work_indptr, work_info, reduce_indptr, final_map, partial_map;
};

// What every fragment of one batch shares.
struct BatchFill {
  int32_t b, q0, q1, kv_begin, kv_end, nkb;
  bool split;
};

// Fragment f: KV blocks [blk, end) in cluster cu. A non-final fragment closes its cluster.
template <class Out>
MLASIM_INLINE void EmitFragment(const WalkParams& p, const Out& o, const Scan& before,
                                const BatchFill& g, int32_t f, int32_t blk, int32_t end, int32_t cu,
                                bool last) {
  const int32_t k0 = g.kv_begin + blk * p.gran;
  const int32_t k1 = std::min(g.kv_begin + end * p.gran, g.kv_end);
  const int32_t work_idx = before.works + f;
  const int32_t ploc = g.split ? before.partial + f * p.uni : -1;
  const int32_t w[kWorkInfoWidth] = {g.b, ploc, g.q0, g.q1, k0, k1, g.kv_end - k1, 0};
  o.work_info.PutWork(work_idx, w, -1);
  if (g.split) o.partial_map.Put(before.reduce + f, ploc);
  if (!last && cu + 1 <= p.d.num_clusters) o.work_indptr.Put(cu + 1, work_idx + 1);
}

// Fragments [f0, f0 + n) of a split batch, none of them the last: whole clusters of bpc blocks
// from block blk0 in cluster cu0 on, so every field moves by a constant step. Stores directly
// when every element is in range (else returns false and the caller emits them one by one).
template <class Out>
MLASIM_INLINE bool FillWholeClusters(const WalkParams& p, const Out& o, const Scan& before,
                                     const BatchFill& g, int32_t f0, int32_t n, int32_t blk0,
                                     int32_t cu0) {
  const int64_t row0 = int64_t{before.works} + f0;
  int32_t* rows = o.work_info.Span(row0 * kWorkInfoWidth, int64_t{n} * kWorkInfoWidth);
  int32_t* partial = o.partial_map.Span(int64_t{before.reduce} + f0, n);
  // work_indptr[cu + 1] for the clusters that exist (cu + 1 <= num_clusters).
  const int32_t closes = std::max(0, std::min(n, p.d.num_clusters - cu0));
  int32_t* indptr = o.work_indptr.Span(int64_t{cu0} + 1, closes);
  if (rows == nullptr || partial == nullptr || indptr == nullptr) return false;
  // End of a non-final fragment: before the last block, so before kv_end (no min needed).
  const int32_t step = before.bpc * p.gran;
  int32_t k0 = g.kv_begin + blk0 * p.gran;
  int32_t ploc = before.partial + f0 * p.uni;
  for (int32_t i = 0; i < n; ++i, k0 += step, ploc += p.uni) {
    int32_t* r = rows + int64_t{i} * kWorkInfoWidth;
    r[kBatchIdx] = g.b;
    r[kPartialQoLoc] = ploc;
    r[kQoStart] = g.q0;
    r[kQoEnd] = g.q1;
    r[kKvStart] = k0;
    r[kKvEnd] = k0 + step;
    r[kKvOffset] = g.kv_end - (k0 + step);
    r[kPad] = 0;
    partial[i] = ploc;
  }
  for (int32_t i = 0; i < closes; ++i) indptr[i] = static_cast<int32_t>(row0) + i + 1;
  o.work_info.MarkWritten(row0 * kWorkInfoWidth, int64_t{n} * kWorkInfoWidth);
  o.partial_map.MarkWritten(int64_t{before.reduce} + f0, n);
  o.work_indptr.MarkWritten(int64_t{cu0} + 1, closes);
  return true;
}

// Phase 2b for batch b: its reduce bookkeeping, the wasted cluster's close and one work per
// fragment; `before` is the scan state at the batch's start. Fragment f covers blocks
// [blk, end): the rest of the current cluster first (or, after a wasted cluster, a whole fresh
// one), then whole clusters, the last one up to nkb.
template <class Out>
MLASIM_INLINE void FillBatch(const WalkParams& p, const Out& o, const Scan& before,
                             const BatchFill& g, int32_t frags, bool waste) {
  const int32_t num_cu = p.d.num_clusters;
  o.reduce_indptr.Put(g.b + 1, before.reduce + (g.split ? frags : 0));
  if (g.split) {
    const int64_t row = int64_t{g.b} * kReduceFinalMapWidth;
    o.final_map.Put(row + kFinalQoStart, g.q0);
    o.final_map.Put(row + kFinalQoEnd, g.q1);
  }
  if (waste && before.cu + 1 <= num_cu) o.work_indptr.Put(before.cu + 1, before.works);
  if (frags == 0) return;
  const int32_t cu0 = waste ? before.cu + 1 : before.cu;
  const int32_t first_end = frags == 1 ? g.nkb : (waste ? before.bpc : before.remain - before.ovh);
  EmitFragment(p, o, before, g, 0, 0, first_end, cu0, frags == 1);
  if (frags == 1) return;
  // Fragments 1 .. frags-2 take whole clusters; the last one ends the batch.
  const int32_t middle = frags - 2;
  if (middle > 0 && !FillWholeClusters(p, o, before, g, 1, middle, first_end, cu0 + 1)) {
    for (int32_t f = 1; f <= middle; ++f) {
      const int32_t blk = first_end + (f - 1) * before.bpc;
      EmitFragment(p, o, before, g, f, blk, blk + before.bpc, cu0 + f, false);
    }
  }
  const int32_t last_blk = first_end + middle * before.bpc;
  EmitFragment(p, o, before, g, frags - 1, last_blk, g.nkb, cu0 + frags - 1, true);
}

// The common batches (no wasted cluster), stored straight: one whole fragment (it fits the
// current cluster: KV
// [kv_begin, kv_end), kv_offset 0, final rows), or two (the rest of the current cluster, then the
// rest of the batch in the next one). The caller has checked that every store is in range.
template <CellTracking kMode>
MLASIM_INLINE void FillSimpleBatch(const WalkParams& p, Plan& plan, const Scan& before,
                                   const BatchFill& g, int32_t frags) {
  int32_t* wi = plan.work_info.data.data() + int64_t{before.works} * kWorkInfoWidth;
  plan.reduce_indptr.data[g.b + 1] = before.reduce + (frags == 2 ? 2 : 0);
  if (frags == 1) {
    const int32_t w[kWorkInfoWidth] = {g.b, -1, g.q0, g.q1, g.kv_begin, g.kv_end, 0, 0};
    for (int32_t f = 0; f < kWorkInfoWidth; ++f) wi[f] = w[f];
  } else {
    const int32_t k1 = g.kv_begin + (before.remain - before.ovh) * p.gran;
    const int32_t p0 = before.partial, p1 = before.partial + p.uni;
    const int32_t w0[kWorkInfoWidth] = {g.b, p0, g.q0, g.q1, g.kv_begin, k1, g.kv_end - k1, 0};
    const int32_t w1[kWorkInfoWidth] = {g.b, p1, g.q0, g.q1, k1, g.kv_end, 0, 0};
    for (int32_t f = 0; f < kWorkInfoWidth; ++f) wi[f] = w0[f];
    for (int32_t f = 0; f < kWorkInfoWidth; ++f) wi[kWorkInfoWidth + f] = w1[f];
    int32_t* fm = plan.reduce_final_map.data.data() + int64_t{g.b} * kReduceFinalMapWidth;
    fm[kFinalQoStart] = g.q0;
    fm[kFinalQoEnd] = g.q1;
    plan.reduce_partial_map.data[before.reduce] = p0;
    plan.reduce_partial_map.data[before.reduce + 1] = p1;
    if (before.cu + 1 <= p.d.num_clusters) plan.work_indptr.data[before.cu + 1] = before.works + 1;
  }
  if constexpr (kMode == CellTracking::kChecked) {
    const auto mark = [](Int32Buffer& b, int64_t i, int64_t n) {
      std::fill(b.cells.begin() + i, b.cells.begin() + i + n, Cell::kWritten);
    };
    mark(plan.reduce_indptr, g.b + 1, 1);
    mark(plan.work_info, int64_t{before.works} * kWorkInfoWidth, int64_t{frags} * kWorkInfoWidth);
    if (frags == 2) {
      mark(plan.reduce_final_map, int64_t{g.b} * kReduceFinalMapWidth, kReduceFinalMapWidth);
      mark(plan.reduce_partial_map, before.reduce, 2);
      if (before.cu + 1 <= p.d.num_clusters) mark(plan.work_indptr, before.cu + 1, 1);
    }
  }
}

// Phase 2b over every batch, fused with the phase-1 scan. Sets *end to the scan's end state,
// *last_split_out to the last split batch and *hi_out to the highest work_indptr index a fill
// stored (clusters are closed in order, so the fills store exactly [1, hi]). The state stays in
// locals until the end: written through `end` it could alias the int32 stores.
// A batch's stores skip their range checks when all of them are in range: reduce_indptr[b + 1],
// reduce_final_map row b, work rows and reduce_partial_map entries [before + 0, before + frags)
// and work_indptr up to index before.cu + max(frags, 1) (a wasted cluster's close, before.cu + 1,
// is stored even by a batch of no fragment).
template <CellTracking kMode>
void FillAll(const WalkParams& p, const int32_t* kv, Plan& plan, const Scan& start, Scan* end,
             int32_t* last_split_out, int32_t* hi_out) {
  const ParallelOut<kMode, true> checked(plan);
  const ParallelOut<kMode, false> unchecked(plan);
  const int64_t rows = plan.work_info.rows(), partial = plan.reduce_partial_map.size();
  const int64_t reduce = plan.reduce_indptr.size(), final_rows = plan.reduce_final_map.rows();
  const int64_t indptr = plan.work_indptr.size();
  Scan s = start;
  int32_t last_split = -1, hi = 0;
  for (int32_t b = 0; b < p.nb; ++b) {
    const int32_t kv_begin = kv[b] - kv[0], kv_end = kv[b + 1] - kv[0];
    const int32_t nkb = Blocks(p, kv_end - kv_begin);
    const Scan before = s;
    int32_t fresh;
    bool waste;
    const int32_t frags = Step(s, nkb, p.uni, &fresh, &waste);
    const int32_t q0 = p.uni * b;
    const BatchFill fill{b, q0, q0 + p.uni, kv_begin, kv_end, nkb, frags > 1};
    // work_indptr: up to before.cu + frags, and before.cu + 1 for a wasted cluster even when the
    // batch takes no fragment (a zero-KV batch at a cluster's end: frags = 0, waste), so the
    // bound counts at least one store.
    const bool fits = int64_t{before.works} + frags <= rows &&
                      int64_t{before.reduce} + frags <= partial && int64_t{b} + 1 < reduce &&
                      b < final_rows && int64_t{before.cu} + std::max(frags, 1) < indptr;
    if (fits && !waste && frags <= 2)
      FillSimpleBatch<kMode>(p, plan, before, fill, frags);
    else if (fits)
      FillBatch(p, unchecked, before, fill, frags, waste);
    else
      FillBatch(p, checked, before, fill, frags, waste);
    if (frags > 1) last_split = b;
    // Clusters closed by this batch: its non-final fragments' and a wasted start cluster.
    const int32_t closed = std::max(frags - 1, 0) + (waste ? 1 : 0);
    if (closed > 0) hi = std::max(hi, before.cu + closed);
  }
  *end = s;
  *last_split_out = last_split;
  *hi_out = hi;
}

}  // namespace

// The kernel's store order is: work_indptr[1..num_cu] = total works, then the fills, which
// overwrite exactly [1, hi]. When work_indptr holds num_cu + 1 entries no store of either can
// fall outside it, so the fills run first and the total goes to (hi, num_cu] afterwards: same
// bytes, one scan instead of two. A shorter work_indptr (a sizing disagreement) keeps the
// kernel's order, so that the stores past its end are counted exactly as the kernel makes them.
template <CellTracking kMode>
void RunParallel(const WalkParams& params, Plan& plan) {
  const WalkParams p = params;  // a local copy: no int32 store can alias it
  const int32_t* kv = p.req->kv_indptr.data();
  const int32_t num_cu = p.d.num_clusters;
  Scan start;
  start.payload = p.d.payload;
  start.ovh = p.ovh;
  start.bpc = p.d.payload - p.ovh;  // >= 1: the payload counts every batch's overhead
  start.by_bpc = Divider(static_cast<uint32_t>(start.bpc));
  start.remain = p.d.payload;

  const ParallelOut<kMode> o(plan);
  o.reduce_indptr.Put(0, 0);
  o.work_indptr.Put(0, 0);
  int32_t last_split = -1, hi = 0;
  Scan total;
  if (o.work_indptr.size() >= int64_t{num_cu} + 1) {
    FillAll<kMode>(p, kv, plan, start, &total, &last_split, &hi);
    o.work_indptr.Fill(std::min(hi, num_cu) + 1, int64_t{num_cu} + 1, total.works);
  } else {
    total = start;
    for (int32_t b = 0; b < p.nb; ++b) {
      int32_t fresh;
      bool waste;
      Step(total, Blocks(p, kv[b + 1] - kv[b]), p.uni, &fresh, &waste);
    }
    o.work_indptr.Fill(1, int64_t{num_cu} + 1, total.works);
    Scan end;
    FillAll<kMode>(p, kv, plan, start, &end, &last_split, &hi);
  }
  o.reduce_indptr.Fill(p.nb, o.reduce_indptr.size(), total.reduce);
  o.work_indptr.SetWrittenEnd(int64_t{num_cu} + 1);
  o.work_info.SetWrittenEnd(int64_t{total.works} * kWorkInfoWidth);
  o.final_map.SetWrittenEnd((int64_t{last_split} + 1) * kReduceFinalMapWidth);
  o.partial_map.SetWrittenEnd(total.reduce);
  o.reduce_indptr.SetWrittenEnd(int64_t{p.nb} + 1);
  plan.derived.num_tiles = p.nb;
}

template void RunParallel<CellTracking::kChecked>(const WalkParams&, Plan&);
template void RunParallel<CellTracking::kFast>(const WalkParams&, Plan&);

}  // namespace mlasim::ref::internal
