#include "sim/engine_dialect.h"

#include <algorithm>

#include "ref/flashinfer/check.h"
#include "ref/flashmla/check.h"

namespace mlasim::sim {
namespace {

namespace fm = ref::flashmla;
namespace fi = ref::flashinfer;

StatusOr<fm::DecodeSizing> FlashMlaSizing(int32_t batch, int32_t qlen, const DialectShape& s) {
  MLASIM_ASSIGN_OR_RETURN(const fm::Revision rev, fm::ParseRevision(s.flashmla_revision));
  fm::DenseDecodeShape shape;
  shape.batch_size = batch;
  shape.seqlen_q = qlen;
  shape.num_heads_q = s.heads;
  shape.num_heads_k = 1;  // MLA decode is MQA over the latent cache
  shape.num_sms = s.num_sms;
  return fm::SizeDenseDecode(rev, shape);
}

// The buffer a FlashMLA diagnostic is about: the scheduler rows, num_splits, or the
// accumulators.
const char* FlashMlaBuffer(fm::SchedDiag d) {
  switch (d) {
    case fm::SchedDiag::kNumSplitsShape:
    case fm::SchedDiag::kNumSplitsNotIncreasing:
    case fm::SchedDiag::kSplitsExceedCombine: return "num_splits";
    case fm::SchedDiag::kSplitsExceedAccum: return "lse_accum";
    default: return "tile_scheduler_metadata";
  }
}

std::vector<int32_t> PagesIndptr(const std::vector<int32_t>& lens, int32_t page) {
  std::vector<int32_t> indptr = {0};
  for (const int32_t len : lens) indptr.push_back(indptr.back() + (len + page - 1) / page);
  return indptr;
}

}  // namespace

int32_t DialectPlan::batch() const {
  return planner == "flashmla" ? flashmla_input.batch_size
                               : static_cast<int32_t>(flashinfer_input.kv_len.size());
}

StatusOr<DialectSizing> SizeDialect(const std::string& planner, int32_t sizing_batch,
                                    int32_t qlen, const DialectShape& shape) {
  DialectSizing z;
  z.planner = planner;
  z.sizing_batch = sizing_batch;
  if (planner == "flashmla") {
    MLASIM_ASSIGN_OR_RETURN(z.flashmla, FlashMlaSizing(sizing_batch, qlen, shape));
    return z;
  }
  MLASIM_ASSERT(planner == "flashinfer", "unknown planner " + planner);
  // The engine hands MLAPlan one workspace for every batch: large enough for either cluster
  // size the batch may choose.
  MLASIM_ASSIGN_OR_RETURN(const fi::MLAWorkspaceSizes one,
                          fi::MLAPlanWorkspaceSize(shape.num_sms, 1, shape.head_dim_o));
  MLASIM_ASSIGN_OR_RETURN(z.flashinfer,
                          fi::MLAPlanWorkspaceSize(shape.num_sms, 2, shape.head_dim_o));
  z.flashinfer.int_bytes = std::max(z.flashinfer.int_bytes, one.int_bytes);
  z.flashinfer.float_bytes = std::max(z.flashinfer.float_bytes, one.float_bytes);
  return z;
}

std::vector<PersistentBuffer> DialectBuffers(const std::string& prefix, const DialectSizing& z) {
  if (z.planner == "flashmla")
    return {{prefix + "tile_scheduler_metadata", z.flashmla.num_sm_parts, 4 * fm::kRowWords,
             "int32"},
            {prefix + "num_splits", int64_t{z.sizing_batch} + 1, 4, "int32"}};
  return {{prefix + "int_workspace", z.flashinfer.int_bytes, 1, "bytes"},
          {prefix + "float_workspace", z.flashinfer.float_bytes, 1, "bytes"}};
}

std::vector<int32_t> RequestKvLens(const ref::PlanRequest& r) {
  std::vector<int32_t> lens;
  for (size_t i = 0; i + 1 < r.kv_indptr.size(); ++i) {
    const int32_t pages = r.kv_indptr[i + 1] - r.kv_indptr[i];
    const int32_t last = i < r.kv_last_page_lens.size() ? r.kv_last_page_lens[i] : 0;
    lens.push_back(pages > 0 ? (pages - 1) * r.page_size + last : 0);
  }
  return lens;
}

StatusOr<DialectPlan> PlanDialect(const DialectSizing& z, const ref::PlanRequest& r,
                                  const DialectShape& shape) {
  DialectPlan p;
  p.planner = z.planner;
  std::vector<int32_t> lens = RequestKvLens(r);
  const int32_t batch = static_cast<int32_t>(lens.size());
  if (z.planner == "flashmla") {
    // get_mla_metadata sizes its outputs for the batch it is given (b + 1 num_splits).
    MLASIM_ASSIGN_OR_RETURN(const fm::DecodeSizing sizing, FlashMlaSizing(batch, r.qlen, shape));
    p.flashmla_input = fm::DenseSchedInput(sizing, std::move(lens));
    MLASIM_ASSIGN_OR_RETURN(p.flashmla, fm::GetDecodingSchedMeta(p.flashmla_input));
    p.flashmla_accum_rows = sizing.total_num_splits;
    return p;
  }
  fi::MLAPlanInput& in = p.flashinfer_input;
  in.qo_indptr = r.qo_indptr;
  in.kv_indptr = r.kv_indptr;
  in.kv_len = std::move(lens);
  in.num_heads = shape.heads;
  in.head_dim_o = shape.head_dim_o;
  in.causal = false;  // decode plans are not causal (one query token per request)
  in.num_sm = shape.num_sms;
  in.int_workspace_bytes = static_cast<uint64_t>(z.flashinfer.int_bytes);
  in.float_workspace_bytes = static_cast<uint64_t>(z.flashinfer.float_bytes);
  MLASIM_ASSIGN_OR_RETURN(p.flashinfer, fi::MLAPlan(in));
  return p;
}

std::vector<DialectFinding> CheckDialectCapacity(const DialectPlan& p, const DialectSizing& z) {
  std::vector<DialectFinding> out;
  if (p.planner == "flashmla") {
    const int64_t entries = static_cast<int64_t>(p.flashmla.num_splits.size());
    if (entries > int64_t{z.sizing_batch} + 1)
      out.push_back({"NumSplitsExceedBuffer", "num_splits", int64_t{z.sizing_batch} + 1, -1,
                     "get_mla_metadata writes " + std::to_string(entries) +
                         " num_splits entries into a buffer of " +
                         std::to_string(z.sizing_batch + 1),
                     BugClass::kD});
    return out;
  }
  for (const fi::ListOverflow& o : p.flashinfer.overflows)
    out.push_back({"ListExceedsRegion", "int_workspace", o.capacity_entries, -1,
                   "MLAPlan writes " + std::to_string(o.entries) + " entries of " + o.region +
                       " into a region of " + std::to_string(o.capacity_entries),
                   BugClass::kD});
  return out;
}

namespace {

std::vector<DialectFinding> FlashMlaLaunch(const DialectPlan& p, const std::vector<int32_t>& lens,
                                           int32_t num_splits_tail, BugClass cls) {
  fm::SchedInput launch = p.flashmla_input;
  launch.batch_size = static_cast<int32_t>(lens.size());
  launch.seqlens_k = lens;
  if (!fm::ValidateSchedInput(launch).ok()) return {};
  // num_splits as the kernel reads it: the launch's b + 1 entries of the engine's buffer.
  fm::SchedMeta consumed = p.flashmla;
  const size_t want = lens.size() + 1, have = consumed.num_splits.size();
  if (want < have) consumed.num_splits.resize(want);
  if (want > have && num_splits_tail != 0) {
    const int32_t fill = num_splits_tail == 1 ? 0 : consumed.num_splits.back();
    consumed.num_splits.resize(want, fill);
  }
  std::vector<DialectFinding> out;
  for (const fm::SchedDiagnostic& d : fm::CheckSchedMeta(launch, consumed).diagnostics)
    out.push_back({fm::SchedDiagName(d.code), FlashMlaBuffer(d.code),
                   d.row >= 0 ? d.row : d.request, d.request, d.message, cls});
  return out;
}

std::vector<DialectFinding> FlashInferLaunch(const DialectPlan& p,
                                             const std::vector<int32_t>& lens, int32_t qlen,
                                             int32_t page_size, BugClass cls) {
  fi::MLAPlanInput launch = p.flashinfer_input;
  launch.kv_len = lens;
  launch.kv_indptr = PagesIndptr(lens, page_size);
  launch.qo_indptr.assign(lens.size() + 1, 0);
  for (size_t i = 0; i < lens.size(); ++i) launch.qo_indptr[i + 1] = launch.qo_indptr[i] + qlen;
  if (!fi::ValidateMLAPlanInput(launch).ok()) return {};
  fi::MLAPlanCheckOptions options;
  options.page_size = page_size;
  std::vector<DialectFinding> out;
  for (const fi::MLAPlanDiagnostic& d : fi::CheckMLAPlan(launch, p.flashinfer, options).diagnostics)
    out.push_back({fi::MLAPlanDiagName(d.code), "int_workspace",
                   d.index >= 0 ? d.index : d.request, d.request, d.message, cls});
  return out;
}

}  // namespace

std::vector<DialectFinding> CheckDialectLaunch(const DialectPlan& p,
                                               const std::vector<int32_t>& launch_lens,
                                               int32_t qlen, int32_t page_size,
                                               int32_t num_splits_tail, BugClass cls) {
  if (launch_lens.empty()) return {};
  if (p.planner == "flashmla") return FlashMlaLaunch(p, launch_lens, num_splits_tail, cls);
  return FlashInferLaunch(p, launch_lens, qlen, page_size, cls);
}

}  // namespace mlasim::sim
