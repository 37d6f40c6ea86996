#include "ref/decode_update.h"

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

Status DecodeUpdateMlaMetadataV1(const DecodeUpdateRequest& r, Plan& plan) {
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
  const int32_t fold = DecodeUpdateFoldRatio(r);
  plan.update_fold_ratios.push_back(fold);

  const int32_t cu_num = static_cast<int32_t>(plan.work_indptr.size()) - 1;
  int32_t num_workers = 0;
  if (!ReadPlan(plan.work_indptr, "work_indptr", cu_num, -1, plan, &num_workers))
    return FailedPreconditionError(
        "work_indptr", "decode_update reads work_indptr[" + std::to_string(cu_num) +
                           "] (its last entry) but the planner never wrote it: the buffer has "
                           "more entries than clusters + 1");
  const int32_t max_work = static_cast<int32_t>(plan.work_info.size() / 8);
  for (int32_t w = 0; w < num_workers && w < max_work; ++w) {
    const int64_t base = int64_t{w} * 8;
    int32_t* info = &plan.work_info.data[base];
    const int32_t batch_id = info[kBatchIdx];
    const int32_t real = batch_id / fold;
    int32_t seq_kv_end = 0, rejected = 0;
    bool defined = ReadInput(r.kv_indptr, "kv_indptr", int64_t{real} + 1, w, plan, &seq_kv_end);
    if (r.has_num_reject_tokens)
      defined &= ReadInput(r.num_reject_tokens, "num_reject_tokens", real, w, plan, &rejected);
    const int32_t delta = MLASIM_MUTANT(r.mutant, kIgnoreRejects) ? 1 : 1 - rejected;

    int32_t partial = info[kPartialQoLoc];
    int32_t q_start = info[kQoStart], q_end = info[kQoEnd];
    int32_t kv_start = info[kKvStart], kv_end = info[kKvEnd], kv_offset = info[kKvOffset];
    const int32_t ori_partial = partial;
    int32_t len = kv_end - kv_start;
    // The piece that moves with the request's end: its last one (every one, for the mutant).
    const bool moves_to_end = kv_offset == 0 || MLASIM_MUTANT(r.mutant, kMoveEveryPieceToEnd);
    if (moves_to_end) {
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
    const int32_t q_len = q_end - q_start;
    if (q_len > 1) {
      q_start = batch_id;
      q_end = batch_id + 1;
      if (partial >= 0) partial = partial / q_len;
    }
    const int32_t values[8] = {batch_id, partial, q_start, q_end, kv_start, kv_end, kv_offset, 0};
    for (int f = 1; f < 8; ++f) {
      const bool depends = f == kKvStart || f == kKvEnd;
      plan.work_info.Store(base + f, values[f],
                           (!defined && depends) ? Cell::kUndefined : Cell::kWritten);
    }
    if (q_len > 1 && ori_partial >= 0) {
      // The kernel assumes tile index == batch_idx (one q tile per batch).
      const int32_t tile = batch_id;
      int32_t p0 = 0, p1 = 0;
      const bool ok0 = ReadPlan(plan.reduce_indptr, "reduce_indptr", tile, w, plan, &p0);
      const bool ok1 =
          ReadPlan(plan.reduce_indptr, "reduce_indptr", int64_t{tile} + 1, w, plan, &p1);
      if (moves_to_end) {
        plan.reduce_final_map.Store(int64_t{tile} * 2, q_start);
        plan.reduce_final_map.Store(int64_t{tile} * 2 + 1, q_end);
      }
      if (ok0 && ok1) {
        for (int32_t i = p0; i < p1; ++i) {
          if (i < 0 || i >= plan.reduce_partial_map.size()) break;
          if (plan.reduce_partial_map.data[i] == ori_partial) {
            plan.reduce_partial_map.Store(i, partial);
            break;
          }
        }
      }
    }
  }
  return OkStatus();
}

}  // namespace mlasim::ref
