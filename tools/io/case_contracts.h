// File: tools/io/case_contracts.h
//
// Kernel contracts in `mlasim check` (issue 14: "checks every call against the captured tensor
// sizes with its contract"). A case directory records one engine call (its name, its tensors
// with shapes, the plan buffers it consumed). CheckCaseContracts looks up the contract of that
// call (its kind from config.call_kind or the call's name, its kernel variant from
// config.kernel, or a user's contract file) and runs it with the simulator's executor over the
// captured plan buffers and tensor extents (sim/call_check.h: the same entry point as Python's
// mlasim.check_call), one finding per tensor accessed outside its captured rows.
//
// A case that captures none of the call's tensors (q, o, logits, attn_lse, lse, kv_indices) and
// names no kernel or contract is reported `checked = false` with the reason ("contracts: not
// checked: ..."), never as passed.
#pragma once
#include <string>
#include <vector>

#include "ref/status.h"
#include "tools/io/case_dir.h"
#include "tools/io/case_plan.h"

namespace mlasim::io {

// One access outside a captured tensor.
struct ContractFinding {
  std::string tensor;                  // captured tensor name ("o")
  std::string access;                  // "read" or "write"
  int64_t first_row = 0, end_row = 0;  // rows [first_row, end_row) outside the tensor
  int64_t rows = 0;                    // rows the tensor holds (in the kernel's view)
  int64_t rows_past_end = 0;           // rows past its end (0 for an underflow)
  int64_t rows_before_start = 0;       // rows before its start (an underflow)
  std::vector<int32_t> work_items;     // work items (reduce: tiles) that make it, first 8
  int64_t work_item_count = 0;         // how many in all
  std::string text;                    // one sentence
};

struct ContractCheckResult {
  bool checked = false;  // a contract ran over the call
  std::string reason;    // why not, when !checked
  std::string contract;  // the contract applied (name and source), when checked
  std::vector<ContractFinding> findings;
  // Why the KV rows the gathers read were not checked although the case holds the KV cache and
  // kv_indices (an int64 table, a cache that is not [..., D], above 2^26 rows or not whole
  // pages); "" when they were, or when the case lacks either.
  std::string kv_rows_unchecked;
};

struct CaseContractOptions {
  std::string contract;  // `--contract FILE`: a contract file (or built-in variant) to apply
};

// The contract a case's call is checked with, as ResolveCallContract takes it, and the field it
// came from: options.contract ("--contract", relative to the working directory), else
// config.contract (a contract file relative to the case directory, CaseFiles::Directory: the case
// travels as a folder; a built-in name as is), else config.kernel; spec "" when none names one.
struct CaseContractSpec {
  std::string spec, field;
};
CaseContractSpec CaseContractSpecOf(const CaseFiles& files, const CaseManifest& manifest,
                                    const CaseContractOptions& options);

// Applies the kernel contract of the captured call (manifest.call) to the captured tensors.
// Which contract: options.contract, else config.contract (a file or variant name), else the
// built-in of config.kernel (decode: "asm" by default; reduce: "mla_reduce_v1"); the call kind
// is config.call_kind ("decode" | "reduce") or follows from manifest.call (sim::CallKindOf).
// Tensor extents (sim::CallTensorFromShape): q and o fold by the plan's fold_ratio
// (DecidePlan on the captured planner request; 1 without one); max_seqlen_q and page_size come
// from config.planner (1 without one). Plan buffers and qo/kv indptrs come from `planner`.
// Findings: one per (tensor, read/write, past the end / before the start), rows in the kernel's
// view, with the first work items (at most 8). Errors (InvalidArgument, exit 2), each naming
// "CASE/manifest.json:FIELD": an unknown call kind (field "call"), an unknown kernel variant
// ("config.kernel"), a bad contract file ("--contract" / "config.contract"), a missing tensor
// the contract needs ("tensors.q", "tensors.work_info", ...), a wrong dtype of a captured plan
// buffer (from ReadCasePlanner).
StatusOr<ContractCheckResult> CheckCaseContracts(const CaseFiles& files,
                                                 const CaseManifest& manifest,
                                                 const CasePlanner& planner,
                                                 const CaseContractOptions& options = {});

}  // namespace mlasim::io
