#include "ref/decode_update.h"

#include <algorithm>
#include <string>

#include "ref/mutant.h"

namespace mlasim::ref {
namespace {

// Reads input[i], recording an out-of-range read (the GPU would read whatever lies there).
bool ReadInput(const std::vector<int32_t>& input, const char* name, int64_t i, int32_t work_row,
               Plan& plan, int32_t* out) {
  if (i >= 0 && i < static_cast<int64_t>(input.size())) {
    *out = input[i];
    return true;
  }
  plan.input_violations.push_back(
      InputViolation{name, i, static_cast<int64_t>(input.size()), work_row, -1});
  *out = 0;
  return false;
}

bool ReadPlan(const Int32Buffer& b, const char* name, int64_t i, int32_t work_row, Plan& plan,
              int32_t* out) {
  if (i >= 0 && i < b.size() && b.cells[i] == Cell::kWritten) {
    *out = b.data[i];
    return true;
  }
  plan.input_violations.push_back(InputViolation{name, i, b.size(), work_row, -1});
  *out = i >= 0 && i < b.size() ? b.data[i] : 0;
  return false;
}

}  // namespace

int32_t DecodeUpdateFoldRatio(const DecodeUpdateRequest& r) {
  const RevisionRules& rules = GetRevisionRules(r.revision);
  const ShapeKey key{GetTargetProfile(r.target).rules_arch, r.heads_per_head_k, r.max_seqlen_qo,
                     r.q_dtype, r.kv_dtype};
  const bool native = AnyRuleMatches(rules.update_native, key);
  return !native && r.heads_per_head_k % 16 == 0 ? r.heads_per_head_k / 16 : 1;
}

namespace {

// What aiter asserts, what the update's algorithm supports (unless permissive), and the write
// state it reads.
Status ValidateUpdate(const DecodeUpdateRequest& r, const Plan& plan) {
  if (r.page_size != 1)
    return InvalidArgumentError("page_size",
                                "decode_update_mla_metadata_v1 asserts page_size == 1");
  if (r.kv_granularity % r.page_size != 0)
    return InvalidArgumentError("kv_granularity", "must be a multiple of page_size");
  if (r.kv_granularity < 16)
    return InvalidArgumentError("kv_granularity", "decode_update asserts kv_granularity >= 16");
  if (r.num_heads_k != 1)
    return InvalidArgumentError("num_heads_k", "decode_update asserts num_heads_k == 1");
  if (r.kv_indptr.empty()) return InvalidArgumentError("kv_indptr", "needs B+1 >= 1 entries");
  if (r.has_num_reject_tokens) {
    for (size_t i = 0; i < r.num_reject_tokens.size(); ++i)
      if (r.num_reject_tokens[i] < 0)
        return InvalidArgumentError("num_reject_tokens[" + std::to_string(i) + "]", "must be >= 0");
  }
  if (!r.permissive) {
    if (plan.derived.topk_pages >= 0)
      return FailedPreconditionError("plan",
                                     "decode_update does not support sparse plans (the "
                                     "sparse kv_offset and top-k cap differ); rebuild");
    if (plan.derived.qo_split)
      return FailedPreconditionError("plan",
                                     "decode_update does not support plans with q-tile "
                                     "splits (it collapses q ranges to one row)");
  }
  if (!plan.work_indptr.tracked() || !plan.work_info.tracked() || !plan.reduce_indptr.tracked())
    return FailedPreconditionError("plan",
                                   "decode_update needs a plan made with CellTracking::kChecked "
                                   "(it records the entries it reads that no planner wrote)");
  return OkStatus();
}

// One work item's new fields (§9.3), computed from its old ones and its request's new end.
struct UpdatedWork {
  int32_t w[kWorkInfoWidth];
  bool defined;         // the inputs it depends on were in range
  int32_t ori_partial;  // partial_qo_loc before the update
  int32_t q_len;        // q rows before the update
  bool moves_to_end;    // the piece that moves with the request's end (every one, for the mutant)
};

UpdatedWork UpdateFields(const DecodeUpdateRequest& r, int32_t fold, int32_t work, Plan& plan) {
  const int32_t* info = &plan.work_info.data[int64_t{work} * kWorkInfoWidth];
  UpdatedWork u{};
  const int32_t batch_id = info[kBatchIdx];
  const int32_t real = batch_id / fold;
  int32_t seq_kv_end = 0, rejected = 0;
  u.defined = ReadInput(r.kv_indptr, "kv_indptr", int64_t{real} + 1, work, plan, &seq_kv_end);
  if (r.has_num_reject_tokens)
    u.defined &= ReadInput(r.num_reject_tokens, "num_reject_tokens", real, work, plan, &rejected);
  const int32_t delta = MLASIM_MUTANT(r.mutant, kIgnoreRejects) ? 1 : 1 - rejected;
  int32_t partial = info[kPartialQoLoc];
  int32_t q_start = info[kQoStart], q_end = info[kQoEnd];
  int32_t kv_start = info[kKvStart], kv_end = info[kKvEnd], kv_offset = info[kKvOffset];
  u.ori_partial = partial;
  int32_t len = kv_end - kv_start;
  u.moves_to_end = kv_offset == 0 || MLASIM_MUTANT(r.mutant, kMoveEveryPieceToEnd);
  if (u.moves_to_end) {
    // The last piece absorbs the change; a zero-length last piece is left where it is.
    if (len > 0) {
      kv_end = seq_kv_end;
      kv_start = len + delta > 0 ? kv_end - len - delta : kv_end - 1;
    }
  } else {
    // Earlier pieces keep their length and their distance from the request's end.
    kv_offset += delta;
    if (kv_offset <= 0) {
      len += kv_offset - 1;
      if (len < 1) len = 1;
      kv_offset = 1;
    }
    kv_end = seq_kv_end - kv_offset;
    kv_start = kv_end - len;
  }
  u.q_len = q_end - q_start;
  if (u.q_len > 1) {
    q_start = batch_id;
    q_end = batch_id + 1;
    if (partial >= 0) partial = partial / u.q_len;
  }
  const int32_t w[kWorkInfoWidth] = {batch_id, partial, q_start,   q_end,
                                     kv_start, kv_end,  kv_offset, 0};
  std::copy(w, w + kWorkInfoWidth, u.w);
  return u;
}

// A work item whose q range collapsed (it was a tile of q_len > 1 rows) moves its reduce
// bookkeeping too: the kernel assumes tile index == batch_idx (one q tile per batch).
void UpdateReduceMaps(const UpdatedWork& u, int32_t work, Plan& plan) {
  const int32_t tile = u.w[kBatchIdx];
  int32_t p0 = 0, p1 = 0;
  const bool ok0 = ReadPlan(plan.reduce_indptr, "reduce_indptr", tile, work, plan, &p0);
  const bool ok1 =
      ReadPlan(plan.reduce_indptr, "reduce_indptr", int64_t{tile} + 1, work, plan, &p1);
  if (u.moves_to_end) {
    const int64_t row = int64_t{tile} * kReduceFinalMapWidth;
    plan.reduce_final_map.Store(row + kFinalQoStart, u.w[kQoStart]);
    plan.reduce_final_map.Store(row + kFinalQoEnd, u.w[kQoEnd]);
  }
  if (!ok0 || !ok1) return;
  for (int32_t i = p0; i < p1; ++i) {
    if (i < 0 || i >= plan.reduce_partial_map.size()) break;
    if (plan.reduce_partial_map.data[i] == u.ori_partial) {
      plan.reduce_partial_map.Store(i, u.w[kPartialQoLoc]);
      break;
    }
  }
}

}  // namespace

Status DecodeUpdateMlaMetadataV1(const DecodeUpdateRequest& r, Plan& plan) {
  MLASIM_RETURN_IF_ERROR(ValidateUpdate(r, plan));
  const int32_t fold = DecodeUpdateFoldRatio(r);
  plan.update_fold_ratios.push_back(fold);

  const int32_t cu_num = static_cast<int32_t>(plan.work_indptr.size()) - 1;
  int32_t num_workers = 0;
  if (!ReadPlan(plan.work_indptr, "work_indptr", cu_num, -1, plan, &num_workers))
    return FailedPreconditionError(
        "work_indptr", "decode_update reads work_indptr[" + std::to_string(cu_num) +
                           "] (its last entry) but the planner never wrote it: the buffer has "
                           "more entries than clusters + 1");
  const int32_t max_work = static_cast<int32_t>(plan.work_info.rows());
  for (int32_t w = 0; w < num_workers && w < max_work; ++w) {
    const UpdatedWork u = UpdateFields(r, fold, w, plan);
    const int64_t base = int64_t{w} * kWorkInfoWidth;
    for (int f = kPartialQoLoc; f < kWorkInfoWidth; ++f) {
      const bool depends = f == kKvStart || f == kKvEnd;
      plan.work_info.Store(base + f, u.w[f],
                           (!u.defined && depends) ? Cell::kUndefined : Cell::kWritten);
    }
    if (u.q_len > 1 && u.ori_partial >= 0) UpdateReduceMaps(u, w, plan);
  }
  return OkStatus();
}

}  // namespace mlasim::ref
