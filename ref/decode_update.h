// File: ref/decode_update.h
//
// decode_update_mla_metadata_v1: aiter's Triton kernel that rewrites an existing v1.2 plan in
// place for the next MTP draft step (aiter-mla-metadata.md §9). Bit-exact with aiter HEAD,
// including its narrower native-head list (§9.3), whose mismatch with the planner makes the
// update read other requests' kv_indptr entries (golden decode-update corpus, fold_mismatch).
#pragma once

#include <vector>

#include "ref/metadata.h"

namespace mlasim::ref {

struct DecodeUpdateRequest {
  Arch target = Arch::kGfx942;
  Revision revision = Revision::k2026_08;
  int32_t heads_per_head_k = 16;
  int32_t num_heads_k = 1;
  DType q_dtype = DType::kBf16;
  DType kv_dtype = DType::kBf16;
  int32_t page_size = 1;
  int32_t kv_granularity = 16;
  int32_t max_seqlen_qo = 1;               // used only for the native/fold decision
  std::vector<int32_t> qo_indptr;          // [B+1]; only its length is used (batch size)
  std::vector<int32_t> kv_indptr;          // [B+1] the NEW cumulative KV lengths (pages = tokens)
  std::vector<int32_t> num_reject_tokens;  // [B] rejected drafts per request
  bool has_num_reject_tokens = false;      // false = aiter's None: +1 KV token per request
  // Strict (default): refuse plans outside what the update supports (q-split or sparse plans).
  // Permissive: apply the update anyway, as aiter would, and let the plan checker judge.
  bool permissive = false;
  // Deliberately broken variants for mutation testing (kNone is aiter's kernel).
  enum class Mutant : uint8_t {
    kNone,
    kIgnoreRejects,
    kMoveEveryPieceToEnd
  } mutant = Mutant::kNone;
};

// Applies one update to `plan` in place. Refuses (InvalidArgument) what aiter asserts:
// kv_granularity % page_size != 0, num_heads_k != 1, kv_granularity < 16, page_size != 1; and,
// unless permissive, plans with q splits or sparse plans (FailedPrecondition); plans made with
// CellTracking::kFast (FailedPrecondition: the update reads the write state). Reads of its
// inputs past their ends (kv_indptr, num_reject_tokens, reduce_indptr) are recorded in
// plan.input_violations with the dependent cells marked Cell::kUndefined. Appends the fold
// ratio the update decided to plan.update_fold_ratios.
Status DecodeUpdateMlaMetadataV1(const DecodeUpdateRequest& request, Plan& plan);

// The update's own fold ratio (its Python native list, §9.3).
int32_t DecodeUpdateFoldRatio(const DecodeUpdateRequest& request);

}  // namespace mlasim::ref
