// File: tools/io/case_plan.h
//
// The planner's part of a case directory (tools/io/case_dir.h): the request get_mla_metadata_v1
// was called with (the scalars in config.planner, the arrays from the captured tensors), the
// captured plan buffers, and the address layout of every captured tensor for fault attribution
// (sim/fault.h's layout format, built from the manifest's data_ptr, shape and strides).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ref/metadata.h"
#include "tools/io/case_dir.h"
#include "tools/io/plan_buffers.h"

namespace mlasim::io {

// A planner array or buffer's canonical tensor name and the names aiter's Python API gives it
// (get_mla_metadata_v1's argument names), either of which a capture may use.
struct PlannerTensorName {
  const char* name;   // "work_info"
  const char* alias;  // "work_info_set", or nullptr
  const char* role;   // what it is, for messages
};
const std::vector<PlannerTensorName>& PlannerTensorNames();

// The captured tensor for a canonical name (or its alias); nullptr when absent. Errors when both
// the name and its alias are present (field "...manifest.json:tensors.ALIAS").
StatusOr<const CaseTensor*> FindPlannerTensor(const CaseManifest& manifest, const CaseFiles& files,
                                              const std::string& name);

// What a case holds for the planner. `request` is set when config.planner and kv_indptr are
// present (`missing_request` says what is absent otherwise); `buffers` holds the five captured
// plan buffers when all are present (`missing_buffers` otherwise).
struct CasePlanner {
  std::optional<ref::PlanRequest> request;
  std::string missing_request;
  std::optional<std::vector<std::vector<int32_t>>> buffers;  // PlanBufferNames() order
  std::string missing_buffers;
  std::optional<std::vector<uint64_t>> work_metadata_ptrs;  // when captured: 2 entries
  PlanBufferViews views() const;  // over `buffers` (valid while this object lives)
};

// Builds the request from config.planner (a golden `input` object without its arrays:
// tools/io/request_json.h's keys and defaults) and the tensors qo_indptr, kv_indptr and
// kv_last_page_lens (1-D int32), and reads the plan buffers (int32; work_info [rows, 8],
// reduce_final_map [rows, 2], the others 1-D; work_metadata_ptrs uint64 or int64 [2]).
// Errors name the manifest field ("CASE/manifest.json:config.planner.cu_count") or the tensor
// ("...:tensors.kv_indptr.dtype"); arrays are given by tensors, not by config.planner.
StatusOr<CasePlanner> ReadCasePlanner(const CaseFiles& files, const CaseManifest& manifest,
                                      const CaseLimits& limits = {});

// The layout of the captured tensors in the capturing process's address space, in the format of
// `mlasim replay --layout-out` (sim/fault.h ValidateLayout): one allocation per tensor with
// nbytes > 0 and a non-zero data_ptr; base = data_ptr + span_begin, bytes = span_end -
// span_begin, row_bytes = |stride[0]| * itemsize (the element size for 0-d and 1-d tensors),
// and heads / cols / elem_bytes for row-contiguous 3-d tensors ([rows, heads, cols]: q, o).
nlohmann::json CaseLayout(const CaseManifest& manifest);

}  // namespace mlasim::io
