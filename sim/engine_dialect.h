// File: sim/engine_dialect.h
//
// The planner dialects an engine call table can run besides aiter's (CallRow::planner,
// docs/contracts.md "Call tables", docs/engines.md): FlashMLA's decode scheduler
// (ref/flashmla: get_mla_metadata -> tile_scheduler_metadata + num_splits) and FlashInfer's
// MLAPlan (ref/flashinfer). For each: the engine's buffers sized by the planner's own host
// sizing, the plan over the batch the engine hands it, and the plan checked as a decode launch
// consumes it, which may be another batch than the planned one (vLLM before #21691 planned the
// B real requests and launched the graph's R; a replayed graph may consume metadata built at
// capture for C requests).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ref/flashinfer/mla_plan.h"
#include "ref/flashmla/sizing.h"
#include "ref/planner.h"
#include "ref/status.h"
#include "sim/trace.h"

namespace mlasim::sim {

// SMs of the device a FlashMLA / FlashInfer plan is made for when the scenario gives no
// cu_count: an H200 (132 SMs).
inline constexpr int32_t kDefaultNumSms = 132;

// The buffers one plan-buffer set of a dialect holds, from the planner's host sizing.
struct DialectSizing {
  std::string planner;            // "flashmla" | "flashinfer"
  int32_t sizing_batch = 0;       // requests the buffers are sized for
  ref::flashmla::DecodeSizing flashmla;            // num_sm_parts, accumulators
  ref::flashinfer::MLAWorkspaceSizes flashinfer;   // int / float workspace bytes
};

// Shape facts a dialect plan needs besides the request arrays.
struct DialectShape {
  std::string flashmla_revision = "9241ae3";
  int32_t heads = 16;       // q heads per KV head (h_q; MQA: h_k = 1)
  int32_t num_sms = kDefaultNumSms;
  int32_t head_dim_o = 512;  // kv_lora_rank
};

// Sizes the set for `sizing_batch` requests of `qlen` query tokens. Errors: the sizing's own
// (InvalidArgument / OutOfRange naming the field: batch 0, an SM count the combine refuses).
StatusOr<DialectSizing> SizeDialect(const std::string& planner, int32_t sizing_batch,
                                    int32_t qlen, const DialectShape& shape);

// The persistent allocations of `z` under `prefix`: flashmla tile_scheduler_metadata
// [num_sm_parts] rows of 8 int32 and num_splits [sizing_batch + 1] int32; flashinfer
// int_workspace and float_workspace in bytes.
std::vector<PersistentBuffer> DialectBuffers(const std::string& prefix, const DialectSizing& z);

// KV tokens of each request of `r` (pages and last-page lengths at r.page_size).
std::vector<int32_t> RequestKvLens(const ref::PlanRequest& r);

// Runs the dialect's planner over the batch of `r` (qo_indptr, kv_indptr, kv_last_page_lens,
// page_size, qlen), with the workspace `z` provides. Errors: the planner's refusal (batch 0,
// an input it cannot take), with its field.
StatusOr<DialectPlan> PlanDialect(const DialectSizing& z, const ref::PlanRequest& r,
                                  const DialectShape& shape);

// What the plan writes beyond the buffers `z` sized (class D): num_splits entries past
// sizing_batch + 1, scheduler rows past num_sm_parts, FlashInfer lists past their regions.
std::vector<DialectFinding> CheckDialectCapacity(const DialectPlan& p, const DialectSizing& z);

// How a decode launch consumes a dialect plan: over `launch_lens.size()` requests of `qlen`
// query tokens with these KV lengths; num_splits extended from the planned batch by
// `num_splits_tail` (0 none, 1 zeros, 2 the last value) or cut to the launch; every diagnostic
// of the dialect's checker, labelled `cls`. Empty when the launch is empty (nothing runs).
std::vector<DialectFinding> CheckDialectLaunch(const DialectPlan& p,
                                               const std::vector<int32_t>& launch_lens,
                                               int32_t qlen, int32_t page_size,
                                               int32_t num_splits_tail, BugClass cls);

}  // namespace mlasim::sim
