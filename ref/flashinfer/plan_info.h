// File: ref/flashinfer/plan_info.h
//
// MLAPlanInfo: the 18 int64 values FlashInfer's MLAPlan returns (flashinfer-ai/flashinfer
// fb28d72, include/flashinfer/attention/scheduler.cuh:1511, `struct MLAPlanInfo`): the launch
// shape and the byte offsets of every list in the int and float workspaces. It crosses into
// Python as a flat int64 vector (ToVector / FromVector, csrc/batch_mla_plan.cu).
//
// FlashInfer writes the field order twice (struct and ToVector/FromVector) and hard-codes 18;
// here the order is written once, in MLASIM_FLASHINFER_MLA_PLAN_INFO_FIELDS, and the struct,
// the name table and both conversions are generated from it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ref/status.h"

namespace mlasim::ref::flashinfer {

// X(name): one int64 field, in FlashInfer's order. *_offset fields are byte offsets into the
// int workspace (q_indptr .. work_indptr) or the float workspace (partial_o, partial_lse).
#define MLASIM_FLASHINFER_MLA_PLAN_INFO_FIELDS(X)                                     \
  X(num_blks_x)                               /* CTAs per cluster: 1 or 2 */          \
  X(num_blks_y)                               /* clusters: num_sm / num_blks_x */     \
  X(q_indptr_offset)                          /* int ws: [works] q token offset */    \
  X(kv_indptr_offset)                         /* int ws: [works] page offset */       \
  X(partial_indptr_offset)                    /* int ws: [works] partial row or -1 */ \
  X(merge_packed_offset_start_offset)         /* int ws: [num_sm] */                  \
  X(merge_packed_offset_end_offset)           /* int ws: [num_sm] */                  \
  X(merge_partial_packed_offset_start_offset) /* int ws: [num_sm] */                  \
  X(merge_partial_packed_offset_end_offset)   /* int ws: [num_sm] */                  \
  X(merge_partial_stride_offset)              /* int ws: [num_sm] */                  \
  X(q_len_offset)                             /* int ws: [works] q tokens */          \
  X(kv_len_offset)                            /* int ws: [works] KV tokens */         \
  X(q_start_offset)                           /* int ws: [works] packed q row */      \
  X(kv_start_offset)                          /* int ws: [works] KV token, incl. */   \
  X(kv_end_offset)                            /* int ws: [works] KV token, excl. */   \
  X(work_indptr_offset)                       /* int ws: [num_clusters + 1] */        \
  X(partial_o_offset)                         /* float ws: partial o (16-bit) */      \
  X(partial_lse_offset)                       /* float ws: partial lse (fp32) */

struct MLAPlanInfo {
#define MLASIM_FI_FIELD(name) int64_t name = 0;
  MLASIM_FLASHINFER_MLA_PLAN_INFO_FIELDS(MLASIM_FI_FIELD)
#undef MLASIM_FI_FIELD
  bool operator==(const MLAPlanInfo& o) const;
};

struct PlanInfoField {
  const char* name;
  int64_t MLAPlanInfo::*member;
};

inline constexpr PlanInfoField kMLAPlanInfoFields[] = {
#define MLASIM_FI_ENTRY(name) {#name, &MLAPlanInfo::name},
    MLASIM_FLASHINFER_MLA_PLAN_INFO_FIELDS(MLASIM_FI_ENTRY)
#undef MLASIM_FI_ENTRY
};
inline constexpr size_t kMLAPlanInfoNumFields = 18;  // FlashInfer's FromVector length
static_assert(std::size(kMLAPlanInfoFields) == kMLAPlanInfoNumFields,
              "MLAPlanInfo has 18 fields in FlashInfer fb28d72");
static_assert(sizeof(MLAPlanInfo) == kMLAPlanInfoNumFields * sizeof(int64_t),
              "every MLAPlanInfo member must come from the field table");

// [18] int64 in field order (FlashInfer's ToVector).
std::vector<int64_t> ToVector(const MLAPlanInfo& info);
// FlashInfer's FromVector: InvalidArgument("plan_info") naming MLAPlanInfo when the length is
// not 18.
StatusOr<MLAPlanInfo> FromVector(const std::vector<int64_t>& vec);

}  // namespace mlasim::ref::flashinfer
