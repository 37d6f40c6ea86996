// File: tools/io/request_json.h
//
// JSON <-> planner types. The request format is the `input` object of the golden corpus
// (docs/golden.md); parsing is strict: unknown keys, wrong types and impossible
// values are errors naming the JSON path of the field.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "ref/metadata.h"
#include "ref/plan_check.h"

namespace mlasim::io {

// Parses a golden-corpus `input` object. `path` prefixes field names in errors ("input").
// Required: target, cu_count, heads_per_head_k, q_dtype, kv_dtype, kv_indptr. Optional, with
// the defaults of get_mla_metadata_v1: num_heads_k 1, page_size 1, kv_granularity 16, qlen
// (= max_seqlen_qo), max_seqlen_qo 1, uni_seqlen_qo (= max_seqlen_qo), is_causal true, topk -1,
// max_split_per_batch -1, qo_indptr (uniform qlen), kv_last_page_lens (1 per request when
// page_size is 1, else required), revision "2026-08", is_cp_round_robin false.
// Also accepts, and ignores, the decode_update keys (num_reject_tokens, new_kv_indptr, steps,
// update_max_seqlen_qo) when `allow_update_keys` is set.
StatusOr<ref::PlanRequest> ParsePlanRequest(const nlohmann::json& input, const std::string& path,
                                            bool allow_update_keys = false);

// The request as a golden-style `input` object.
nlohmann::json PlanRequestToJson(const ref::PlanRequest& request);

// The plan as the `--json` output of `mlasim plan`: work_indptr, work_info (rows of 8),
// reduce_indptr, reduce_final_map (written tiles only: [{"tile": t, "pair": [q_start, q_end]}]),
// reduce_partial_map (written prefix), sizes, derived, input_violations. Cells whose value is
// undefined (Cell::kUndefined) are null.
nlohmann::json PlanToJson(const ref::Plan& plan);

// {"work_metadata_ptrs": 2, "work_indptr": n, "work_info_rows": n, ...}: one key per buffer of
// ref::kPlanBuffers, its name plus "_rows" when its rows are wider than one element.
// A plan check as `mlasim plan --json` prints it: {"ok": bool, "launch_grid": N,
// "launch_grid_given": bool (false: aiter's grid, work_indptr entries - 1), "diagnostics":
// [{"severity", "code", "buffer", "index", "tile", "work", "message"}]} (-1 = not applicable).
nlohmann::json PlanCheckToJson(const ref::PlanCheckReport& report, int64_t launch_grid,
                               bool launch_grid_given);

nlohmann::json SizesToJson(const ref::MetadataSizes& sizes);
std::string SizeKey(const ref::PlanBufferSpec& spec);

}  // namespace mlasim::io
