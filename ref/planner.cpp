// get_mla_metadata_v1 (fast mode, v1.2): request validation, the host decisions, buffer
// preparation and the dispatch to the serial or parallel walk (ref/planner_serial.cpp,
// ref/planner_parallel.cpp), in checked or fast cell tracking.
#include "ref/planner.h"

#include <algorithm>
#include <string>

#include "ref/indptr.h"
#include "ref/mutant.h"
#include "ref/planner_walk.h"
#include "ref/sizing.h"

namespace mlasim::ref {
namespace {

int32_t CeilDiv(int32_t a, int32_t b) {
  return (a + b - 1) / b;
}
bool IsPowerOfTwo(int32_t x) {
  return x > 0 && (x & (x - 1)) == 0;
}

// Every entry in 0..page_size: a branch-free pass first (this runs on every plan), then one to
// name the first offender.
Status CheckLastPageLens(const std::vector<int32_t>& lpl, int32_t page_size) {
  bool bad = false;
  for (int32_t x : lpl) bad |= static_cast<uint32_t>(x) > static_cast<uint32_t>(page_size);
  if (!bad) return OkStatus();
  for (size_t i = 0; i < lpl.size(); ++i) {
    if (lpl[i] < 0 || lpl[i] > page_size)
      return InvalidArgumentError("kv_last_page_lens[" + std::to_string(i) + "]",
                                  "must be in 0..page_size (" + std::to_string(page_size) + ")");
  }
  return OkStatus();
}

}  // namespace

const char* PlannerMutantName(PlannerMutant m) {
  return NameOf(kPlannerMutantNames, m);
}

StatusOr<PlannerMutant> ParsePlannerMutant(std::string_view text, std::string_view field) {
  return ParseEnum(kPlannerMutantNames, text, field, "planner mutant");
}

const char* PlannerChoiceName(PlannerChoice choice) {
  return NameOf(kPlannerChoiceNames, choice);
}

StatusOr<PlannerChoice> ParsePlannerChoice(std::string_view text, std::string_view field) {
  return ParseEnum(kPlannerChoiceNames, text, field, "planner");
}

const char* CellTrackingName(CellTracking tracking) {
  return NameOf(kCellTrackingNames, tracking);
}

namespace {

// Non-uniform q lengths (uni_seqlen_qo <= 0): aiter reads request b's rows from qo_indptr[b],
// qo_indptr[b + 1]. Modelled for dense plans; the sparse walk's token batches assume uniform
// lengths (aiter-mla-metadata.md §4.3).
Status CheckRaggedRequest(const PlanRequest& r) {
  if (r.uni_seqlen_qo >= 1) return OkStatus();
  if (r.topk >= 0)
    return InvalidArgumentError("uni_seqlen_qo",
                                "non-uniform q lengths (uni_seqlen_qo <= 0) are modelled for dense "
                                "plans only (topk = -1)");
  if (r.qo_indptr.size() != r.kv_indptr.size())
    return InvalidArgumentError(
        "qo_indptr",
        "non-uniform q lengths (uni_seqlen_qo <= 0) need one entry per kv_indptr "
        "entry (" +
            std::to_string(r.kv_indptr.size()) + "), got " + std::to_string(r.qo_indptr.size()));
  if (r.qo_indptr.back() > (1 << 30))
    return InvalidArgumentError("qo_indptr", "total q rows above 2^30 are not modelled");
  return OkStatus();
}

// Host decisions that non-uniform q lengths add: no folding (aiter would read qo_indptr at the
// virtual batch index), both LDS arrays of the batches fit (aiter writes them unchecked), and no
// q-tile split (aiter's cost sum reads the q lengths' LDS before writing it).
Status CheckRaggedDecision(const PlanRequest& r, const PlanDerived& d) {
  if (r.uni_seqlen_qo >= 1) return OkStatus();
  const int32_t heads = r.num_heads_k * r.heads_per_head_k;
  if (d.fold_ratio != 1)
    return InvalidArgumentError(
        "uni_seqlen_qo", "non-uniform q lengths with folded heads (" + std::to_string(heads) +
                             " heads planned as 16) are not modelled: aiter reads qo_indptr at "
                             "the virtual batch index");
  const int64_t lds = GetTargetProfile(r.target).lds_bytes;
  if (int64_t{d.planner_batches} * 8 > lds)
    return InvalidArgumentError("kv_indptr", "non-uniform q lengths over more than " +
                                                 std::to_string(lds / 8) +
                                                 " requests are not modelled (aiter's planner "
                                                 "keeps two LDS ints per request)");
  if (d.qo_split)
    return InvalidArgumentError(
        "max_seqlen_qo",
        "non-uniform q lengths with q tiles split (max_seqlen_qo x heads per KV head = " +
            std::to_string(r.max_seqlen_qo * r.heads_per_head_k) + " > " +
            std::to_string(d.packed_qo_len_per_wg) +
            ") are not modelled: aiter's payload reads each request's q length from LDS before "
            "storing it (mla_v12_compute_sum_blocks), an uninitialised read");
  return OkStatus();
}

}  // namespace

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
  if (r.topk < -1) return InvalidArgumentError("topk", "must be -1 (dense) or >= 0 (sparse)");
  if (r.max_split_per_batch == 0 || r.max_split_per_batch < -1)
    return InvalidArgumentError("max_split_per_batch", "must be -1 (no budget) or >= 1");
  MLASIM_RETURN_IF_ERROR(CheckIndptr(r.kv_indptr, "kv_indptr"));
  IndptrRule qo_rule;
  qo_rule.required = r.topk >= 0;  // dense planning never reads it
  MLASIM_RETURN_IF_ERROR(CheckIndptr(r.qo_indptr, "qo_indptr", qo_rule));
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
  MLASIM_RETURN_IF_ERROR(CheckRaggedRequest(r));
  return CheckLastPageLens(r.kv_last_page_lens, r.page_size);
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
  // With no cluster (cu_count < num_heads_k) aiter's parallel kernel would divide its payload by
  // zero and cut requests with it; mlasim plans those as the serial kernel runs them (no
  // cluster, no work item) and the checker reports the zero clusters (docs/planner.md).
  const bool eligible = rules.has_parallel_planner && r.max_seqlen_qo == 1 && !d.qo_split &&
                        !sparse && r.page_size == 1 && d.fold_ratio == 1 && d.num_clusters > 0;
  MLASIM_RETURN_IF_ERROR(CheckRaggedDecision(r, d));
  // Non-uniform q lengths add the per-batch q lengths to the parallel planner's LDS.
  const int64_t scratch = 4 * (3 + 5 * int64_t{nb}) + (r.uni_seqlen_qo < 1 ? 4 * int64_t{nb} : 0);
  bool parallel = eligible && scratch <= profile.lds_bytes;
  if (choice == PlannerChoice::kSerial) parallel = false;
  if (choice == PlannerChoice::kParallel) {
    if (!eligible)
      return InvalidArgumentError("planner",
                                  "the parallel planner needs qlen 1, no q split, "
                                  "dense, page size 1, no head folding and >= 1 cluster");
    parallel = true;
  }
  d.parallel_planner_used = parallel;
  return d;
}

namespace {

using internal::WalkParams;

int32_t Log2(int32_t power_of_two) {
  int32_t n = 0;
  while ((1 << n) < power_of_two) ++n;
  return n;
}

// q tiles per virtual batch (§4.3).
int32_t NumQoTiles(const PlanDerived& d, int32_t uni) {
  if (!d.qo_split) return 1;
  if (d.planner_heads * 2 > d.packed_qo_len_per_wg) return uni;
  return CeilDiv(uni * d.planner_heads, d.packed_qo_len_per_wg);
}

WalkParams MakeWalkParams(const PlanRequest& r, const PlanDerived& d, PlannerMutant mutant) {
  const RevisionRules& rules = GetRevisionRules(r.revision);
  WalkParams p;
  p.req = &r;
  p.d = d;
  p.sparse = r.topk >= 0;
  p.uni = r.uni_seqlen_qo;
  p.ori = d.ori_seqlen_qo;
  p.fold = d.fold_ratio;
  p.nb = p.sparse ? d.planner_batches * d.ori_seqlen_qo : d.planner_batches;
  p.gran = r.kv_granularity;
  p.gran_log2 = Log2(r.kv_granularity);
  p.page = r.page_size;
  p.page1 = r.page_size == 1;
  p.ovh = d.fixed_overhead_blocks;
  p.thr = d.tail_done_threshold;
  p.topk_p = d.topk_pages;
  p.by_fold = internal::Divider(static_cast<uint32_t>(p.fold));
  p.by_ori = internal::Divider(static_cast<uint32_t>(p.ori));
  const bool ragged = r.uni_seqlen_qo < 1;  // per request in ref/planner_ragged.cpp
  p.n_tiles = ragged ? 1 : NumQoTiles(d, p.uni);
  p.qts = ragged ? 1 : CeilDiv(p.uni, p.n_tiles);
  p.lds_batch_info = int64_t{p.nb} * 4 <= GetTargetProfile(r.target).lds_bytes;
  p.causal_trim = !(rules.causal_trim_needs_is_causal && !r.is_causal);
  p.sparse_kv_offset_token_tail = p.sparse && p.fold == 1 && rules.sparse_kv_offset_adds_token_tail;
  p.batch_idx_is_request = rules.sparse_batch_idx_is_request;
  p.mutant = mutant;
  return p;
}

// Payload (§4.4): the cost one cluster should absorb. Every request is visited fold (sparse:
// fold x tokens) times, each time with n_tiles q tiles.
Status SetPayload(const WalkParams& p, PlanDerived& d) {
  const std::vector<int32_t>& kv = p.req->kv_indptr;
  const std::vector<int32_t>& qo = p.req->qo_indptr;
  const bool ragged = p.req->uni_seqlen_qo < 1;
  int64_t visits = int64_t{p.fold} * (p.sparse ? p.ori : 1) * p.n_tiles;
  const int32_t requests = static_cast<int32_t>(kv.size()) - 1;
  int64_t sum_blocks = 0;
  for (int32_t b = 0; b < requests; ++b) {
    if (ragged) visits = internal::QoTilesOf(p.d, qo[b + 1] - qo[b]);
    const int32_t len = kv[b + 1] - kv[b];
    const int32_t blocks = internal::Blocks(p, p.sparse ? std::min(len, p.topk_p) : len);
    sum_blocks += int64_t{blocks + p.ovh} * visits;
  }
  if (sum_blocks > INT32_MAX)
    return InvalidArgumentError("kv_indptr", "total planned KV blocks exceed 2^31");
  d.sum_blocks = static_cast<int32_t>(sum_blocks);
  d.payload = d.num_splits > 0 ? CeilDiv(d.sum_blocks, d.num_splits) + p.ovh : p.ovh;
  return OkStatus();
}

// Sizes every buffer (memory reused) and clears the plan's history. The walks store every
// element of a prefix of each buffer except reduce_final_map (rows of split tiles only), so
// those are rewritten in place and only their old tail restored afterwards (FinishPlan);
// reduce_final_map is restored first.
void PreparePlan(const MetadataSizes& sizes, CellTracking tracking, Plan& plan) {
  plan.sizes = sizes;
  plan.tracking = tracking;
  plan.work_metadata_ptrs[0] = plan.work_metadata_ptrs[1] = 0;
  for (PlanBufferId id : kInt32PlanBuffers) {
    const int64_t elements = sizes.Elements(id);
    MLASIM_ASSERT(elements <= INT32_MAX, "buffer sizes are checked by the sizing helper");
    const int32_t n = static_cast<int32_t>(elements), width = GetPlanBufferSpec(id).row_width;
    if (id == PlanBufferId::kReduceFinalMap)
      plan.buffer(id)->Prepare(n, width, tracking);
    else
      plan.buffer(id)->PrepareForRewrite(n, width, tracking);
  }
  plan.input_violations.clear();
  plan.update_fold_ratios.clear();
}

void FinishPlan(Plan& plan) {
  for (PlanBufferId id : kInt32PlanBuffers)
    if (id != PlanBufferId::kReduceFinalMap) plan.buffer(id)->FinishRewrite();
}

// Plans a validated request into `plan`.
Status PlanValidated(const PlanRequest& r, const MetadataSizes& sizes,
                     const PlannerOptions& options, Plan& plan) {
  MLASIM_ASSIGN_OR_RETURN(PlanDerived d, DecidePlan(r, options.choice));
  WalkParams p = MakeWalkParams(r, d, options.mutant);
  MLASIM_RETURN_IF_ERROR(SetPayload(p, d));
  p.d = d;
  PreparePlan(sizes, options.tracking, plan);
  plan.derived = d;
  const bool checked = options.tracking == CellTracking::kChecked;
  if (r.uni_seqlen_qo < 1) {
    if (d.parallel_planner_used)
      checked ? internal::RunRaggedParallel<CellTracking::kChecked>(p, plan)
              : internal::RunRaggedParallel<CellTracking::kFast>(p, plan);
    else
      checked ? internal::RunRaggedSerial<CellTracking::kChecked>(p, plan)
              : internal::RunRaggedSerial<CellTracking::kFast>(p, plan);
  } else if (d.parallel_planner_used) {
    checked ? internal::RunParallel<CellTracking::kChecked>(p, plan)
            : internal::RunParallel<CellTracking::kFast>(p, plan);
  } else {
    checked ? internal::RunSerial<CellTracking::kChecked>(p, plan)
            : internal::RunSerial<CellTracking::kFast>(p, plan);
  }
  FinishPlan(plan);
  plan.derived.num_works =
      d.num_clusters < plan.work_indptr.size() ? plan.work_indptr.data[d.num_clusters] : 0;
  return OkStatus();
}

}  // namespace

Status PlanMlaMetadataInto(const PlanRequest& r, const MetadataSizes& sizes,
                           const PlannerOptions& options, Plan* plan) {
  MLASIM_ASSERT(plan != nullptr, "PlanMlaMetadataInto needs a plan to fill");
  MLASIM_RETURN_IF_ERROR(ValidatePlanRequest(r));
  return PlanValidated(r, sizes, options, *plan);
}

StatusOr<Plan> PlanMlaMetadataInto(const PlanRequest& r, const MetadataSizes& sizes,
                                   const PlannerOptions& options) {
  MLASIM_RETURN_IF_ERROR(ValidatePlanRequest(r));
  Plan plan;
  MLASIM_RETURN_IF_ERROR(PlanValidated(r, sizes, options, plan));
  return plan;
}

StatusOr<Plan> PlanMlaMetadata(const PlanRequest& r, const PlannerOptions& options) {
  MLASIM_RETURN_IF_ERROR(ValidatePlanRequest(r));
  const int32_t batch = static_cast<int32_t>(r.kv_indptr.size()) - 1;
  MLASIM_ASSIGN_OR_RETURN(MetadataSizes sizes, GetMlaMetadataInfoV1(r, batch));
  // The mutant forgets that splits add partial entries: one entry per q tile.
  if (MLASIM_MUTANT(options.mutant, kUndersizedPartialMap)) sizes = PartialMapOnePerTile(sizes);
  Plan plan;
  MLASIM_RETURN_IF_ERROR(PlanValidated(r, sizes, options, plan));
  return plan;
}

}  // namespace mlasim::ref
