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
#include "sim/violation.h"

namespace mlasim::sim {

struct ExecutionResult {
  std::vector<Violation> violations;
  int64_t unwritten_pad_rows =
      0;                     // o rows of padding that no call wrote (EngineProfile::o_padding)
  int32_t layout_call = -1;  // call whose transient allocations `layout` shows
  nlohmann::json layout;     // address-space layout (persistent + that call's tensors)
  int64_t csr_skipped = 0;   // idle iterations of CSR walks skipped (ExecuteOptions::csr_walks)
  int64_t flat_iterations = 0;  // loop iterations whose body ran compiled (ExecuteOptions::flat)
};

// Every kernel call runs under its Call::contract (sim/contract.h), resolved by the engine.
struct ExecuteOptions {
  SimMutant mutant = SimMutant::kNone;  // sim/mutants.h; applied by ExpandStep (via Replay)
  bool capture_layout = true;           // build ExecutionResult::layout (fuzzing skips it)
  // Skip the idle iterations of CSR walks (sim/contract.h CsrWalk); false runs every iteration
  // as written. Same findings either way (tests compare the two).
  bool csr_walks = true;
  // Run loop bodies that have a compiled form (sim/flat.h, Statement::flat) as compiled; false
  // interprets every statement. Same findings either way (tests compare the two).
  bool flat = true;
};

ExecutionResult Execute(const Scenario& s, const Trace& trace, const ExecuteOptions& opt = {});

// Allocates the trace's persistent buffers (plan buffers, indptrs, KV cache: Trace::persistent)
// in `as`, in trace order, as every call of the step sees them.
void AllocatePersistent(const Trace& trace, AddressSpace& as);

}  // namespace mlasim::sim
