// File: tools/io/case_contracts.h
//
// THE SEAM for kernel contracts in `mlasim check` (issue 14: "checks every call against the
// captured tensor sizes with its contract"). A case directory records one engine call (its
// name, its tensors with shapes and byte sizes, the plan buffers it consumed). The kernel access
// contracts that say which rows of which tensors that call touches per work item live in sim/
// (sim/contracts.h; their format is being built). This is where they plug in:
//
//   CheckCaseContracts(case)  -> look up the contract for manifest.call (and config: kernel
//                                variant, ...), apply it to the captured plan buffers and tensor
//                                shapes, return one finding per row range read or written past
//                                a captured tensor's end.
//
// Until a contract is wired in, the result is `checked = false` with the reason, which `check`
// prints as "contracts: not checked: ..." and never counts as passed. `mlasim check` and its
// tests read only this header; filling case_contracts.cpp changes no other file.
#pragma once

#include <string>
#include <vector>

#include "tools/io/case_dir.h"
#include "tools/io/case_plan.h"

namespace mlasim::io {

// One access outside a captured tensor.
struct ContractFinding {
  std::string tensor;                  // captured tensor name ("o")
  std::string access;                  // "read" or "write"
  int64_t first_row = 0, end_row = 0;  // rows [first_row, end_row) past the tensor's end
  int64_t rows = 0;                    // rows the tensor holds
  std::vector<int32_t> work_items;     // work items that make the access (first few)
  std::string text;                    // one sentence
};

struct ContractCheckResult {
  bool checked = false;  // a contract ran over the call
  std::string reason;    // why not, when !checked
  std::string contract;  // the contract applied (name and source), when checked
  std::vector<ContractFinding> findings;
};

// Applies the kernel contract of the captured call (manifest.call) to the captured tensors.
ContractCheckResult CheckCaseContracts(const CaseManifest& manifest, const CasePlanner& planner);

}  // namespace mlasim::io
