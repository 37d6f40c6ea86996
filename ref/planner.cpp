// The v1.2 planner. Variable names follow aiter-mla-metadata.md §4: v (virtual batch), tile (q
// tile of v), kb/ke (KV begin/end of v in the planner's KV space), kblk (blocks already emitted
// for this tile), nsplit (pieces already emitted for this tile).
#include "ref/planner.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "ref/mutant.h"
#include "ref/sizing.h"

namespace mlasim::ref {
namespace {

int32_t CeilDiv(int32_t a, int32_t b) {
  return (a + b - 1) / b;
}
bool IsPowerOfTwo(int32_t x) {
  return x > 0 && (x & (x - 1)) == 0;
}

Status CheckIndptr(const std::vector<int32_t>& v, const char* name, bool required) {
  if (v.empty()) {
    if (!required) return OkStatus();
    return InvalidArgumentError(name, "must hold at least one entry (B+1 for B requests)");
  }
  if (v[0] < 0) return InvalidArgumentError(std::string(name) + "[0]", "must be >= 0");
  for (size_t i = 1; i < v.size(); ++i) {
    if (v[i] < v[i - 1]) {
      return InvalidArgumentError(std::string(name) + "[" + std::to_string(i) + "]",
                                  "decreases (" + std::to_string(v[i - 1]) + " -> " +
                                      std::to_string(v[i]) + "): an indptr is cumulative");
    }
  }
  return OkStatus();
}

// Everything the walks need, fixed before they start.
struct WalkParams {
  const PlanRequest* req;
  const RevisionRules* rules;
  PlanDerived d;
  bool sparse;
  int32_t uni;   // q rows per virtual batch
  int32_t ori;   // tokens per request
  int32_t nb;    // virtual batches
  int32_t fold;  // R
  int32_t gran;
  int32_t page;
  int32_t ovh;
  int32_t thr;
  int32_t topk_p;
  bool lds_batch_info;
  PlannerMutant mutant;
};

int32_t RequestOf(const WalkParams& p, int32_t v) {
  return p.sparse ? v / p.ori / p.fold : v / p.fold;
}

// KV length of virtual batch v in pages (sparse: capped at top-k pages).
int32_t KvLen(const WalkParams& p, int32_t v) {
  const auto& kv = p.req->kv_indptr;
  const int32_t b = RequestOf(p, v);
  const int32_t len = kv[b + 1] - kv[b];
  return p.sparse ? std::min(len, p.topk_p) : len;
}

int32_t NumQoTiles(const WalkParams& p) {
  if (!p.d.qo_split) return 1;
  if (p.d.planner_heads * 2 > p.d.packed_qo_len_per_wg) return p.uni;
  return CeilDiv(p.uni * p.d.planner_heads, p.d.packed_qo_len_per_wg);
}

class SerialWalk {
 public:
  SerialWalk(const WalkParams& p, Plan& plan) : p_(p), plan_(plan) {}
  void Run();

 private:
  struct Piece {
    int32_t w[8];
  };
  Piece MakePiece(int32_t cap_blocks, bool is_final);
  void EmitFinal(int32_t rblk);
  void Advance();
  void StoreWork(const Piece& piece);

  const WalkParams& p_;
  Plan& plan_;
  int32_t v_ = 0, tile_ = 0, sub_ = 0, kblk_ = 0, nsplit_ = 0;
  int32_t kb_ = 0, ke_ = 0;
  bool tail_done_ = false;
  int32_t num_works_ = 0, partial_idx_ = 0, tiles_ = 0, last_reduce_ = 0;
  int32_t n_tiles_ = 1, qts_ = 1;
  bool pending_undefined_offset_ = false;
  InputViolation pending_violation_;
};

SerialWalk::Piece SerialWalk::MakePiece(int32_t cap_blocks, bool is_final) {
  const WalkParams& p = p_;
  const int32_t batch_kv = p.sparse ? v_ / p.ori / p.fold : v_;
  Piece piece{};
  int32_t* w = piece.w;
  w[kBatchIdx] = batch_kv;
  w[kQoStart] = p.uni * v_ + tile_ * qts_;
  w[kQoEnd] = std::min(w[kQoStart] + qts_, p.uni * v_ + p.uni);
  w[kKvStart] = kb_ + kblk_ * p.gran;
  pending_undefined_offset_ = false;
  if (p.page == 1) {
    int32_t bt = p.req->is_cp_round_robin ? 0 : n_tiles_ - 1 - tile_;
    if (!p.sparse && p.fold != 1) bt = n_tiles_ - (w[kQoStart] / p.fold) % p.ori - 1;
    bt = std::max(bt, 0);
    if (p.rules->causal_trim_needs_is_causal && !p.req->is_causal) bt = 0;
    int32_t k1 = std::min(w[kKvStart] + cap_blocks * p.gran, ke_ - bt);
    const bool tail_rule = !MLASIM_MUTANT(p.mutant, kNoTailRule);
    if (is_final) {
      const int32_t left = ke_ - k1;
      if ((tail_rule && left > 0 && left < p.thr) || tail_done_) k1 = std::min(ke_ - bt, ke_);
    } else if (tail_rule && ke_ - k1 < p.thr) {
      tail_done_ = true;
      k1 = std::min(ke_, ke_ - bt);
    }
    w[kKvEnd] = k1;
    w[kKvOffset] = ke_ - k1;
    if (p.sparse && p.fold == 1 && p.rules->sparse_kv_offset_adds_token_tail) {
      w[kBatchIdx] = v_ / p.ori;
      w[kKvOffset] += p.ori - 1 - v_ % p.ori;
    }
  } else {
    const int32_t k1 = std::min(w[kKvStart] + cap_blocks * p.gran, ke_);
    w[kKvEnd] = k1;
    if (k1 == ke_) {
      w[kKvOffset] = 0;
    } else {
      // HEAD indexes kv_last_page_lens by the request (sparse) or the virtual batch (dense);
      // with folding the virtual index can run past the array (§4.5).
      const int32_t idx = p.rules->sparse_batch_idx_is_request ? batch_kv : v_;
      const auto& lpl = p.req->kv_last_page_lens;
      if (idx >= 0 && idx < static_cast<int32_t>(lpl.size())) {
        w[kKvOffset] = (ke_ - k1 - 1) * p.page + lpl[idx];
      } else {
        w[kKvOffset] = 0;
        pending_undefined_offset_ = true;
        pending_violation_ = InputViolation{"kv_last_page_lens", idx,
                                            static_cast<int64_t>(lpl.size()), -1, kKvOffset};
      }
    }
  }
  if (p.sparse && !p.rules->sparse_batch_idx_is_request) w[kBatchIdx] = v_;
  // The mutant leaks host state into the plan (like reading uninitialised memory would): the
  // address of the buffer it fills, which differs between two plans of the same batch.
  w[kPad] =
      MLASIM_MUTANT(p.mutant, kNondeterministicPad)
          ? static_cast<int32_t>(reinterpret_cast<uintptr_t>(plan_.work_info.data.data()) >> 4)
          : 0;
  return piece;
}

void SerialWalk::StoreWork(const Piece& piece) {
  const int64_t base = int64_t{num_works_} * 8;
  for (int f = 0; f < 8; ++f) {
    const bool undefined = f == kKvOffset && pending_undefined_offset_;
    plan_.work_info.Store(base + f, piece.w[f], undefined ? Cell::kUndefined : Cell::kWritten);
  }
  if (pending_undefined_offset_) {
    InputViolation v = pending_violation_;
    v.work_row = num_works_;
    plan_.input_violations.push_back(v);
  }
}

void SerialWalk::EmitFinal(int32_t rblk) {
  Piece piece = MakePiece(rblk, /*is_final=*/true);
  const int32_t pieces = nsplit_ + 1;
  if (nsplit_ > 0) {
    piece.w[kPartialQoLoc] = partial_idx_;
    plan_.reduce_indptr.Store(tiles_ + 1, last_reduce_ + pieces);
    plan_.reduce_final_map.Store(int64_t{tiles_} * 2, piece.w[kQoStart]);
    plan_.reduce_final_map.Store(int64_t{tiles_} * 2 + 1, piece.w[kQoEnd]);
    const int32_t shift = MLASIM_MUTANT(p_.mutant, kPartialMapOffByOne) ? qts_ : 0;
    for (int32_t s = 0; s < pieces; ++s) {
      plan_.reduce_partial_map.Store(last_reduce_ + s, partial_idx_ - (nsplit_ - s) * qts_ + shift);
    }
    partial_idx_ += qts_;
    last_reduce_ += pieces;
  } else {
    piece.w[kPartialQoLoc] = -1;
    plan_.reduce_indptr.Store(tiles_ + 1, last_reduce_);
  }
  const bool drop = MLASIM_MUTANT(p_.mutant, kDropLastPiece) && nsplit_ > 0;
  if (!drop) {
    StoreWork(piece);
    ++num_works_;
  }
  ++tiles_;
}

void SerialWalk::Advance() {
  tile_ = tile_ == n_tiles_ - 1 ? 0 : tile_ + 1;
  if (!p_.d.qo_split || tile_ == 0) {
    ++v_;
    sub_ = sub_ == p_.fold - 1 ? 0 : sub_ + 1;
    if (v_ < p_.nb && sub_ == 0) {
      const int32_t len = KvLen(p_, v_);
      kb_ = p_.sparse ? kb_ + p_.topk_p : ke_;
      ke_ = kb_ + len;
    }
  }
  kblk_ = 0;
  nsplit_ = 0;
  tail_done_ = false;
}

void SerialWalk::Run() {
  const WalkParams& p = p_;
  n_tiles_ = NumQoTiles(p);
  qts_ = CeilDiv(p.uni, n_tiles_);
  plan_.work_indptr.Store(0, 0);
  plan_.reduce_indptr.Store(0, 0);
  if (p.nb > 0) {
    // With the LDS batch cache the first length is relative; without it aiter reads the raw
    // kv_indptr[1] (identical when kv_indptr[0] == 0).
    const int32_t first = p.lds_batch_info ? KvLen(p, 0)
                                           : (p.sparse ? std::min(p.req->kv_indptr[1], p.topk_p)
                                                       : p.req->kv_indptr[1]);
    ke_ = first;
  }
  // Bound: each inner iteration emits a final piece (advancing the tile), emits a non-final
  // piece and leaves the cluster, or sets tail_done (the next iteration is final).
  const int64_t max_iterations = int64_t{p.nb} * n_tiles_ * 2 + int64_t{p.d.num_clusters} * 2 + 8;
  int64_t iterations = 0;
  for (int32_t c = 0; c < p.d.num_clusters; ++c) {
    int32_t rem = p.d.payload;
    while (v_ < p.nb) {
      MLASIM_ASSERT(++iterations <= max_iterations, "serial planner walk did not terminate");
      const int32_t nkb = CeilDiv(ke_ - kb_, p.gran);
      const int32_t rblk = nkb - kblk_;
      if (rem >= rblk + p.ovh || tail_done_) {
        EmitFinal(rblk);
        rem -= rblk + p.ovh;
        Advance();
        continue;
      }
      if (rem > p.ovh) {
        const int32_t consuming = rem - p.ovh;
        Piece piece = MakePiece(consuming, /*is_final=*/false);
        if (!tail_done_) {
          piece.w[kPartialQoLoc] = partial_idx_;
          StoreWork(piece);
          partial_idx_ += qts_;
          ++num_works_;
          kblk_ += consuming;
          ++nsplit_;
        }
      }
      if (!tail_done_) break;
    }
    plan_.work_indptr.Store(c + 1, num_works_);
  }
  for (int64_t i = tiles_; i < plan_.reduce_indptr.size(); ++i)
    plan_.reduce_indptr.Store(i, last_reduce_);
  plan_.derived.num_tiles = tiles_;
}

// kn_get_mla_metadata_v1_2_parallel: a closed-form scan per batch, then every batch's fragments
// filled independently. Eligible only for qlen 1, no q split, dense, page 1, no folding, so one
// tile per batch and one q row per tile. A zero-KV batch that starts where the remaining payload
// is at most the overhead gets no work item at all (golden README, "parallel planner and empty
// requests").
void RunParallel(const WalkParams& p, Plan& plan) {
  const int32_t nb = p.nb;
  const int32_t ovh = p.ovh;
  const int32_t payload = p.d.payload;
  const int32_t bpc = payload - ovh;  // blocks per cluster
  const int32_t num_cu = p.d.num_clusters;
  const int32_t qts = p.uni;
  const int32_t kv0 = p.req->kv_indptr[0];

  struct BatchStart {
    int32_t cu, remain, works, reduce, partial;
  };
  std::vector<BatchStart> start(static_cast<size_t>(nb));
  int32_t cu = 0, remain = payload, works = 0, reduce = 0, partial = 0;
  for (int32_t b = 0; b < nb; ++b) {
    start[b] = {cu, remain, works, reduce, partial};
    const int32_t nkb = CeilDiv(KvLen(p, b), p.gran);
    if (nkb + ovh <= remain) {
      works += 1;
      remain -= nkb + ovh;
      continue;
    }
    int32_t fresh, frags;
    if (remain > ovh) {
      const int32_t left = nkb - (remain - ovh);
      fresh = CeilDiv(left, bpc);
      frags = fresh + 1;
      remain = payload - ((left - (fresh - 1) * bpc) + ovh);
    } else {
      fresh = CeilDiv(nkb, bpc);
      frags = fresh;
      remain = payload - ((nkb - (fresh - 1) * bpc) + ovh);
    }
    cu += fresh;
    works += frags;
    if (frags > 1) {
      reduce += frags;
      partial += frags * qts;
    }
  }
  const int32_t total_works = works;
  const int32_t total_reduce = reduce;

  plan.reduce_indptr.Store(0, 0);
  plan.work_indptr.Store(0, 0);
  for (int32_t c = 1; c <= num_cu; ++c) plan.work_indptr.Store(c, total_works);

  for (int32_t b = 0; b < nb; ++b) {
    const BatchStart& s = start[b];
    const int32_t kv_begin = p.req->kv_indptr[b] - kv0;
    const int32_t kv_end = p.req->kv_indptr[b + 1] - kv0;
    const int32_t nkb = CeilDiv(KvLen(p, b), p.gran);
    const int32_t q0 = p.uni * b, q1 = q0 + p.uni;
    const bool fits = nkb + ovh <= s.remain;
    int32_t fresh, frags;
    bool waste_start_cu = false;
    if (fits) {
      fresh = frags = 1;
    } else if (s.remain > ovh) {
      fresh = CeilDiv(nkb - (s.remain - ovh), bpc);
      frags = fresh + 1;
    } else {
      fresh = frags = CeilDiv(nkb, bpc);
      waste_start_cu = true;
    }
    const bool split = frags > 1;
    const int32_t first_blocks = s.remain - ovh;
    if (split) {
      plan.reduce_indptr.Store(b + 1, s.reduce + frags);
      plan.reduce_final_map.Store(int64_t{b} * 2, q0);
      plan.reduce_final_map.Store(int64_t{b} * 2 + 1, q1);
    } else {
      plan.reduce_indptr.Store(b + 1, s.reduce);
    }
    if (waste_start_cu && s.cu + 1 <= num_cu) plan.work_indptr.Store(s.cu + 1, s.works);
    for (int32_t f = 0; f < frags; ++f) {
      int32_t blk0, blk1, frag_cu;
      if (fits) {
        blk0 = 0, blk1 = nkb, frag_cu = s.cu;
      } else if (!waste_start_cu) {
        blk0 = f == 0 ? 0 : first_blocks + (f - 1) * bpc;
        blk1 = f < fresh ? first_blocks + f * bpc : nkb;
        frag_cu = s.cu + f;
      } else {
        blk0 = f * bpc;
        blk1 = f < fresh - 1 ? (f + 1) * bpc : nkb;
        frag_cu = s.cu + 1 + f;
      }
      const int32_t k0 = kv_begin + blk0 * p.gran;
      const int32_t k1 = std::min(kv_begin + blk1 * p.gran, kv_end);
      const int32_t work_idx = s.works + f;
      const int32_t ploc = split ? s.partial + f * qts : -1;
      const int32_t w[8] = {b, ploc, q0, q1, k0, k1, kv_end - k1, 0};
      for (int i = 0; i < 8; ++i) plan.work_info.Store(int64_t{work_idx} * 8 + i, w[i]);
      if (split) plan.reduce_partial_map.Store(s.reduce + f, ploc);
      if (f != frags - 1 && frag_cu + 1 <= num_cu)
        plan.work_indptr.Store(frag_cu + 1, work_idx + 1);
    }
  }
  for (int64_t i = nb; i < plan.reduce_indptr.size(); ++i)
    plan.reduce_indptr.Store(i, total_reduce);
  plan.derived.num_tiles = nb;
}

}  // namespace

const char* PlannerMutantName(PlannerMutant m) {
  switch (m) {
    case PlannerMutant::kNone: return "none";
    case PlannerMutant::kNoTailRule: return "planner-no-tail-rule";
    case PlannerMutant::kPartialMapOffByOne: return "planner-partial-map-off-by-one";
    case PlannerMutant::kUndersizedPartialMap: return "sizing-undersized-partial-map";
    case PlannerMutant::kDropLastPiece: return "planner-drop-last-piece";
    case PlannerMutant::kNondeterministicPad: return "planner-leaks-state-into-pad";
    case PlannerMutant::kCount: break;
  }
  return "?";
}

Status ValidatePlanRequest(const PlanRequest& r) {
  if (r.heads_per_head_k <= 0) return InvalidArgumentError("heads_per_head_k", "must be >= 1");
  if (r.num_heads_k <= 0) return InvalidArgumentError("num_heads_k", "must be >= 1");
  if (r.cu_count < 0) return InvalidArgumentError("cu_count", "must be >= 1 (0 = the target's)");
  if (!IsPowerOfTwo(r.page_size))
    return InvalidArgumentError("page_size",
                                "must be a power of 2 (aiter: \"page_size Must be "
                                "power of 2!\"), got " +
                                    std::to_string(r.page_size));
  if (!IsPowerOfTwo(r.kv_granularity))
    return InvalidArgumentError("kv_granularity",
                                "must be a power of 2 (aiter: \"kv_granularity "
                                "Must be power of 2!\"), got " +
                                    std::to_string(r.kv_granularity));
  if (r.max_seqlen_qo < 1)
    return InvalidArgumentError("max_seqlen_qo",
                                "unknown max q length (<= 0) is not modelled; pass the real value");
  if (r.uni_seqlen_qo < 1)
    return InvalidArgumentError("uni_seqlen_qo",
                                "non-uniform q lengths (uni_seqlen_qo <= 0) are not modelled");
  if (r.topk < -1) return InvalidArgumentError("topk", "must be -1 (dense) or >= 0 (sparse)");
  if (r.max_split_per_batch == 0 || r.max_split_per_batch < -1)
    return InvalidArgumentError("max_split_per_batch", "must be -1 (no budget) or >= 1");
  MLASIM_RETURN_IF_ERROR(CheckIndptr(r.kv_indptr, "kv_indptr", true));
  MLASIM_RETURN_IF_ERROR(CheckIndptr(r.qo_indptr, "qo_indptr", r.topk >= 0));
  if (r.topk >= 0 && r.qo_indptr.size() < 2)
    return InvalidArgumentError("qo_indptr",
                                "sparse mode reads qo_indptr[1]-qo_indptr[0]: needs "
                                "at least 2 entries");
  if (r.topk >= 0 && r.qo_indptr[1] - r.qo_indptr[0] < 1)
    return InvalidArgumentError("qo_indptr", "sparse mode needs >= 1 token in the first request");
  // Bounds that keep aiter's int32 arithmetic (kv_start + blocks * granularity, the sparse
  // top-k stride) from overflowing: far beyond any deployment.
  if (r.kv_indptr.back() > (1 << 30))
    return InvalidArgumentError("kv_indptr", "total KV pages above 2^30 are not modelled");
  if (r.kv_granularity > (1 << 16))
    return InvalidArgumentError("kv_granularity", "must be <= 65536 pages");
  if (r.topk > (1 << 24)) return InvalidArgumentError("topk", "must be <= 2^24");
  if (r.topk >= 0) {
    const int64_t tokens =
        int64_t{r.qo_indptr[1] - r.qo_indptr[0]} * (int64_t(r.kv_indptr.size()) - 1);
    const int64_t topk_p = (int64_t{r.topk} + r.page_size - 1) / r.page_size;
    if (tokens * topk_p > (int64_t{1} << 30))
      return InvalidArgumentError("topk", "tokens x top-k pages above 2^30 are not modelled");
  }
  for (size_t i = 0; i < r.kv_last_page_lens.size(); ++i) {
    if (r.kv_last_page_lens[i] < 0 || r.kv_last_page_lens[i] > r.page_size)
      return InvalidArgumentError("kv_last_page_lens[" + std::to_string(i) + "]",
                                  "must be in 0..page_size (" + std::to_string(r.page_size) + ")");
  }
  return OkStatus();
}

StatusOr<PlanDerived> DecidePlan(const PlanRequest& r, PlannerChoice choice) {
  const RevisionRules& rules = GetRevisionRules(r.revision);
  const TargetProfile& profile = GetTargetProfile(r.target);
  const bool sparse = r.topk >= 0;
  const int32_t heads = r.num_heads_k * r.heads_per_head_k;
  const ShapeKey native_key{profile.rules_arch, heads, r.max_seqlen_qo, r.q_dtype, r.kv_dtype};
  const bool native = AnyRuleMatches(rules.planner_native, native_key);

  PlanDerived d;
  d.fold_ratio = 1;
  d.planner_heads = heads;
  const int32_t requests = static_cast<int32_t>(r.kv_indptr.size()) - 1;
  int32_t nb = requests;
  if (!native && heads % 16 == 0) {
    d.fold_ratio = heads / 16;
    d.planner_heads = 16;
    nb *= d.fold_ratio;
  }
  const ShapeKey folded_key{profile.rules_arch, d.planner_heads, r.max_seqlen_qo, r.q_dtype,
                            r.kv_dtype};
  if (!native && !AnyRuleMatches(rules.planner_supported, folded_key)) {
    return InvalidArgumentError(
        "heads_per_head_k",
        "aiter's planner supports only #heads in [16, 64, 128], multiples of 16 (folded to 16), "
        "or the listed special shapes; got " +
            std::to_string(heads) + " heads, qlen " + std::to_string(r.max_seqlen_qo) + ", q " +
            DTypeName(r.q_dtype) + ", kv " + DTypeName(r.kv_dtype) + " on " + ArchName(r.target));
  }
  const int32_t cu = EffectiveCuCount(r);
  d.num_clusters = cu / r.num_heads_k;  // occupancy multiplier 1 (experimental HK off)
  d.num_splits = r.max_split_per_batch < 0 ? d.num_clusters
                                           : std::min(d.num_clusters, r.max_split_per_batch * nb);
  d.packed_qo_len_per_wg = AnyRuleMatches(rules.pack64, folded_key) ? 64 : 128;
  const int32_t packed_orig = r.max_seqlen_qo * r.heads_per_head_k;
  d.qo_split = !(packed_orig > 0 && packed_orig <= d.packed_qo_len_per_wg);
  d.topk_pages = r.topk < 0 ? r.topk : (r.topk + r.page_size - 1) / r.page_size;
  d.fixed_overhead_blocks = std::max(1, (16 + r.page_size - 1) / r.page_size);
  d.tail_done_threshold = r.max_seqlen_qo;
  d.ori_seqlen_qo = sparse ? r.qo_indptr[1] - r.qo_indptr[0] : r.uni_seqlen_qo;
  d.planner_batches = nb;  // host value; the sparse walk visits nb * ori virtual batches

  // Dispatch (dispatch_mla_metadata_v1_2_device): the parallel planner needs qlen 1, no q split,
  // dense, page 1, no folding and room in LDS for its scratch.
  const bool eligible = rules.has_parallel_planner && r.max_seqlen_qo == 1 && !d.qo_split &&
                        !sparse && r.page_size == 1 && d.fold_ratio == 1;
  const int64_t scratch = 4 * (3 + 5 * int64_t{nb});
  bool parallel = eligible && scratch <= profile.lds_bytes;
  if (choice == PlannerChoice::kSerial) parallel = false;
  if (choice == PlannerChoice::kParallel) {
    if (!eligible)
      return InvalidArgumentError("planner",
                                  "the parallel planner needs qlen 1, no q split, "
                                  "dense, page size 1 and no head folding");
    parallel = true;
  }
  d.parallel_planner_used = parallel;
  return d;
}

StatusOr<Plan> PlanMlaMetadataInto(const PlanRequest& r, const MetadataSizes& sizes,
                                   const PlannerOptions& options) {
  MLASIM_RETURN_IF_ERROR(ValidatePlanRequest(r));
  MLASIM_ASSIGN_OR_RETURN(PlanDerived d, DecidePlan(r, options.choice));
  Plan plan;
  plan.sizes = sizes;
  plan.work_indptr.Reset(sizes.work_indptr, 1);
  plan.work_info.Reset(sizes.work_info_rows * 8, 8);
  plan.reduce_indptr.Reset(sizes.reduce_indptr, 1);
  plan.reduce_final_map.Reset(sizes.reduce_final_map_rows * 2, 2);
  plan.reduce_partial_map.Reset(sizes.reduce_partial_map, 1);

  WalkParams p{};
  p.req = &r;
  p.rules = &GetRevisionRules(r.revision);
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
  p.mutant = options.mutant;
  const TargetProfile& profile = GetTargetProfile(r.target);
  p.lds_batch_info = int64_t{p.nb} * 4 <= profile.lds_bytes;

  // Payload (§4.4): the cost one cluster should absorb.
  const int32_t n_tiles = [&] {
    p.d = d;
    return NumQoTiles(p);
  }();
  int64_t sum_blocks = 0;
  for (int32_t v = 0; v < p.nb; ++v)
    sum_blocks += int64_t{CeilDiv(KvLen(p, v), p.gran) + p.ovh} * n_tiles;
  if (sum_blocks > INT32_MAX)
    return InvalidArgumentError("kv_indptr", "total planned KV blocks exceed 2^31");
  d.sum_blocks = static_cast<int32_t>(sum_blocks);
  d.payload = d.num_splits > 0 ? CeilDiv(d.sum_blocks, d.num_splits) + p.ovh : p.ovh;
  p.d = d;
  plan.derived = d;

  if (d.parallel_planner_used) {
    RunParallel(p, plan);
  } else {
    SerialWalk walk(p, plan);
    walk.Run();
  }
  plan.derived.num_works =
      d.num_clusters < plan.work_indptr.size() ? plan.work_indptr.data[d.num_clusters] : 0;
  return plan;
}

StatusOr<Plan> PlanMlaMetadata(const PlanRequest& r, const PlannerOptions& options) {
  MLASIM_RETURN_IF_ERROR(ValidatePlanRequest(r));
  const int32_t batch = static_cast<int32_t>(r.kv_indptr.size()) - 1;
  MLASIM_ASSIGN_OR_RETURN(MetadataSizes sizes, GetMlaMetadataInfoV1(r, batch));
  // The mutant forgets that splits add partial entries: one entry per q tile.
  if (MLASIM_MUTANT(options.mutant, kUndersizedPartialMap)) sizes = PartialMapOnePerTile(sizes);
  return PlanMlaMetadataInto(r, sizes, options);
}

}  // namespace mlasim::ref
