// File: tools/mlasim/plan_output.h
//
// Renderings of a plan for `mlasim plan` (and later subcommands that show plans): the readable
// table, the six buffers as .npy files, and one-line descriptions of input violations.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "ref/metadata.h"
#include "ref/plan_check.h"

namespace mlasim::cli {

// The readable report: decisions, request summary, work table (spec §6.1 columns), reduce maps,
// buffer sizes and input violations. Undefined values print as `?`. Deterministic.
void PrintPlanTable(std::ostream& out, const ref::PlanRequest& request, const ref::Plan& plan);

// The plan check after the table: "plan check (launch of N workgroups (...)): ok", or the
// error and warning counts, then one line per diagnostic ("  error CODE: message").
void PrintPlanCheck(std::ostream& out, const ref::PlanCheckReport& report,
                    const std::string& launch);

// "kv_last_page_lens[7] read past its end (5 entries) for work 3 kv_offset: value undefined".
std::string DescribeInputViolation(const ref::InputViolation& v);

// The .npy files WritePlanNpy writes, in order.
const std::vector<std::string>& NpyFileNames();

// Writes the six buffers at their full info_v1 sizes and aiter's dtypes into `dir` (created if
// missing): work_metadata_ptrs.npy (<u8, (2,)), work_indptr.npy (<i4, (n,)), work_info.npy (<i4,
// (rows, 8)), reduce_indptr.npy, reduce_final_map.npy (<i4, (rows, 2)), reduce_partial_map.npy.
// Unwritten and undefined cells hold ref::Plan::kPoison (0xA5A5A5A5). Errors name "--npy" and
// the cause (sim/os_error.h: a file of that name, a read-only file system, a full disk).
Status WritePlanNpy(const std::string& dir, const ref::Plan& plan);

}  // namespace mlasim::cli
