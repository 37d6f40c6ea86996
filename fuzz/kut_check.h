// File: fuzz/kut_check.h
//
// One engine step through a kernel under test (docs/kernel-under-test.md): the step is replayed with the
// kernel's declared contracts in place, and every decode call (with the reduce call after it on
// the same plan) runs through the kernel on buffers with sentinel bytes or guard pages
// (fuzz/kut_memory.h), inputs built as `mlasim numerics` builds them (ref::BuildMlaInputs, NaN in
// every unused KV row). Then:
//   - damage: each damaged sentinel region against the out-of-bounds accesses the simulator
//     predicts for that call under the kernel's contract (same buffer, same rows), and every
//     input buffer against what was uploaded;
//   - numerics: o and lse of the real rows against ref::RunPlanDriven (the CPU reference, at the
//     campaign's head dims) or, with a device kernel, against a plain fp32 GPU kernel (gpu::
//     reference_attention) where a head-dim-16 CPU run says the plan defines the output;
//   - plans (a GPU is visible): the GPU planner against the reference planner, cell for cell.
// Each disagreement is a sim::Violation (a finding, fuzz/signature.h):
//   - an access outside a buffer the contract predicts, observed: the simulator's violation
//     itself (its class and signature, e.g. `draft_step_0|sparse_decode|o|write|A`), its detail
//     saying how it was observed;
//   - an observation the contract does not predict, or a prediction not observed (writes in
//     sentinel mode, every access in guard mode): kind kernel_contract, class KUT-contract;
//   - numerics outside tolerance: kernel_numerics, KUT-numerics (buffer o or lse);
//   - the kernel's error return: kernel_fault, KUT-fault; a GPU plan mismatch: GPU-plan.
// Faults and hangs end the worker process; fuzz/kut_pool.h turns them into findings.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz/kut_library.h"
#include "sim/replay.h"

namespace mlasim::fuzz {

struct KutCheckOptions {
  bool guard = false;         // guard pages instead of sentinel bytes around the buffers
  int32_t head_dim_qk = 576;  // the inputs' head dims (--head-dims)
  int32_t head_dim_v = 512;
  std::string reference = "auto";  // "cpu", "gpu" or "auto" (gpu for a device kernel with a GPU)
  bool gpu_plans = true;    // compare the GPU planner with the reference when a GPU is visible
  int32_t start_call = 0;   // calls with a lower index are not run (a replaced worker resumes)
  int32_t end_call = -1;    // >= 0: calls from this index on are not run
  std::string guard_only;   // device guard mode: guard this buffer alone ("" = every one)
  uint64_t input_seed = 7;  // ref::NumericsOptions::seed (the seed `replay --gpu` uses)
  // A device kernel with a GPU: q and the KV cache are generated on the device (kernels/
  // gpu_api.h fill_generated), the same bytes the host would build, never built on the host
  // unless a CPU reference needs them. false: built on the host and uploaded.
  bool device_inputs = true;
  int64_t max_tensor_values = int64_t{1} << 27;  // calls with a larger q or KV are not run
  // The CPU reference's work bound in multiply-adds (q rows x keys x heads x (D + Dv), summed
  // over requests): a call above it is run and checked for memory, but its numerics are not
  // compared (a full-size step would keep the single-threaded CPU reference busy for minutes; the
  // summary counts such calls). 0 = no bound. kCpuReferenceOverBound's text names the default.
  int64_t max_cpu_reference_macs = int64_t{1} << 31;
  // Guard mode with --ignore-known: a decode call is not run when the contract predicts an
  // access on a guarded side of its buffers (decode or reduce) and every such access is a known
  // family's (fuzz/properties.h IsKnownFamily): the kernel would fault on the guard page, the
  // fault's finding would be the known family's and dropped, and the fault would cost a new
  // worker process and GPU context. The call's report says kSkippedKnownFault. Not in the
  // attribution reruns of a fault (guard_only set). Sentinel mode runs such calls.
  bool skip_known_faults = false;
};

// Why a call was not run under KutCheckOptions::skip_known_faults (its report's "skipped").
inline constexpr const char* kSkippedKnownFault =
    "predicted to fault on a guard page through known families' accesses only (guard mode, "
    "--ignore-known)";

// What a worker streams to its parent before each kernel call (for attributing a fault to it):
// {"call", "op", "step", "name", "predicted": [...]}.
using KutCallHook = std::function<void(const nlohmann::json& running)>;

struct KutCallReport {
  nlohmann::json json;  // docs/kernel-under-test.md "Report": what ran, was seen, was predicted
  std::vector<sim::Violation> findings;
};

struct KutStepReport {
  std::string device;                 // gpu::device_name() or "host"
  std::vector<nlohmann::json> plans;  // GPU planner checks
  std::vector<KutCallReport> calls;
  std::vector<sim::Violation> plan_findings;  // the GPU planner's
  std::vector<sim::Violation> findings;       // the plans', then every call's
  std::string error;                          // a replay or input error (the step was not checked)
  // Seconds by part: replay, plans, inputs, reference, kernel, checks (reports only).
  std::map<std::string, double> seconds;
};

// The scenario with the kernel's decode and reduce contracts in place of its own of those call
// kinds (the predictions use them); its contracts of other call kinds (index fills, plans) kept.
sim::Scenario WithKutContracts(const sim::Scenario& s, const KutDescription& d);

// Runs the step of `s` through `lib`. `before` is called before each kernel call, `after` after
// each call's report is complete. A device error (a fault) throws std::runtime_error; the worker
// reports it and ends.
KutStepReport CheckStep(const KutLibrary& lib, const sim::Scenario& s, const KutCheckOptions& o,
                        const KutCallHook& before = nullptr,
                        const std::function<void(const KutCallReport&)>& after = nullptr);

// The prediction list of a `running` hook record and a fault in it, as the finding: the
// simulator's violation when the contract predicts an access of that buffer on that side, else a
// KUT-contract violation. A device fault that names no buffer is the call's first predicted
// violation when it has one (the fault is what that access does on hardware), else KUT-fault.
// `fault`: the `F` record of fuzz/kut_memory.h (host) or {"device":
// error, "buffer": guarded buffer or ""} (device), or {"hang": seconds}.
sim::Violation FaultFinding(const nlohmann::json& running, const nlohmann::json& fault,
                            const std::string& kernel);

// Violations through JSON (worker -> parent), every field.
nlohmann::json ViolationToJson(const sim::Violation& v);
StatusOr<sim::Violation> ViolationFromJson(const nlohmann::json& j);

}  // namespace mlasim::fuzz
