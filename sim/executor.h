// File: sim/executor.h
//
// Applies every call's access contract (sim/contract.h) to every work item over the simulated
// address space and reports each read or write outside a buffer, each read of bytes no call wrote
// this step, each invalid plan, and output rows no call wrote, with what it would do on hardware.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/memory.h"
#include "sim/mutants.h"
#include "sim/scenario.h"
#include "sim/trace.h"

namespace mlasim::sim {

// What one finding is.
enum class ViolationKind : uint8_t {
  kOutOfBounds,        // rows touched past a buffer's end (classes A, C)
  kUninitializedRead,  // bytes of a buffer that no call wrote this step (class E)
  kPlanInvalid,        // the plan checker rejects a plan a call consumes (classes D, F)
  kPlannerInputRead,   // a planner/update read its own input past the end (class G)
  kUnwrittenOutput,    // output rows of real tokens that no call wrote (classes B, I)
  kGuardRefused,       // the engine's plan-rows guard refused a call (no memory access)
  kUnboundedLoop,      // a work item's loop bound underflows: a hang on hardware (class J)
  kInvalidIndex,       // an index outside the KV cache that the kernel clamps or wraps (class G)
  // Observed on a kernel under test (fuzz/kut_check.h, docs/kernel-under-test.md), not predicted by a contract:
  kKernelContract,  // the kernel touched memory its declared contract does not allow (or did not
                    // touch what it predicts)
  kKernelNumerics,  // the kernel's outputs differ from the numerics reference
  kKernelFault,     // the kernel crashed, hung or returned an error
};
const char* ViolationKindName(ViolationKind k);

struct Violation {
  ViolationKind kind = ViolationKind::kOutOfBounds;
  std::string bug_class;  // A..J of bug-classes.md
  std::string step;       // "verify", "draft_step_0", ...
  std::string call;       // call name, "sparse_decode"
  int32_t call_index = -1;
  std::string table_row;  // atom-mtp-flow.md §6 row
  std::string kernel;
  std::string buffer;
  std::string access;  // "read" | "write"
  int64_t rows = 0;    // rows the buffer holds
  int64_t row_bytes = 0;
  int64_t first_row = -1;  // first and last row touched out of bounds / unwritten
  int64_t last_row = -1;
  int64_t rows_past_end = 0;
  int64_t bytes_past_end = 0;
  int64_t rows_before_start = 0;   // an access below row 0 (an underflow): rows / bytes before
  int64_t bytes_before_start = 0;  // the buffer's start
  // The scenario's overrides of this call (docs/scenario.md "calls"): the disagreement that
  // causes the finding, in words. Empty for calls the engine makes as it is.
  std::string cause;
  std::vector<int32_t> work_items;  // responsible work items (or tiles for the reduce)
  std::string consequence;          // fault | corrupts:<buffer> | reads:<buffer> | unobserved | ...
  uint64_t first_bad_address = 0;
  std::string detail;  // one sentence
};

struct ExecutionResult {
  std::vector<Violation> violations;
  int64_t unwritten_pad_rows = 0;  // o rows of padding that no call wrote (dropped by the engine)
  int32_t layout_call = -1;        // call whose transient allocations `layout` shows
  nlohmann::json layout;           // address-space layout (persistent + that call's tensors)
};

// Every kernel call runs under its Call::contract (sim/contract.h), resolved by the engine.
struct ExecuteOptions {
  SimMutant mutant = SimMutant::kNone;  // sim/mutants.h; applied by ExpandStep (via Replay)
  bool capture_layout = true;           // build ExecutionResult::layout (fuzzing skips it)
};

ExecutionResult Execute(const Scenario& s, const Trace& trace, const ExecuteOptions& opt = {});

}  // namespace mlasim::sim
