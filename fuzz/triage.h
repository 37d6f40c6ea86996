// File: fuzz/triage.h
//
// `mlasim triage` (issue 14, "Triage when the data is missing"): a fault report gives the model,
// TP / DP, MTP K, the batch size, the graph size, the target and the engine version; it does not
// give the batch contents, the rejected drafts, the kernel variant or the allocator layout. Triage
// holds what the report gives fixed (fuzz::ReportPins), draws what it does not with the fuzz
// generator (fuzz/scenario_gen.h), replays every case with the simulator (sim::Replay) and
// reports, per engine profile x kernel variant x allocator model, the share of cases that
// overrun a buffer, fault or corrupt another buffer, which known bug family (sim/known_bugs.h)
// explains each finding, and one example case per family, shrunk (fuzz/search.h) with the
// report's fields kept. Deterministic: the same options give the same result at any --jobs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fuzz/search.h"
#include "ref/status.h"
#include "sim/known_bugs.h"
#include "sim/scenario.h"

namespace mlasim::fuzz {

// A model a report can name: its attention shape as the simulator models it.
struct TriageModel {
  const char* name;  // "glm-5.2"
  int32_t heads;     // q heads (all ranks)
  bool sparse;       // DSA top-k
  int32_t topk;
  ref::DType kv_dtype;
  const char* note;  // where the shape comes from
};
const std::vector<TriageModel>& TriageModels();

struct TriageOptions {
  // What the report gives: every field but requests, kernel, allocator model and engine.
  sim::Scenario base;
  int32_t batch = 1;                            // requests on the faulting rank
  std::vector<std::string> profiles;            // engine presets (sim::GetEngineProfile)
  std::vector<std::string> kernels;             // decode variants: asm, opus, hk
  std::vector<sim::AllocatorModel> allocators;  // exact, caching
  int64_t cases = 360;                          // in all, spread over the combinations
  uint64_t seed = 1;
  int64_t jobs = 1;           // 64 bits: the CLI binds these, and the check sees 2^31 as it is
  int64_t shrink_steps = 20;  // per example (fuzz/search.h)
  std::optional<uint64_t> fault_address;  // from the report, optional
};

// Limits on the options (checked by ValidateTriage).
inline constexpr int64_t kMaxTriageCases = 100000;
inline constexpr int32_t kMaxTriageJobs = 64;
inline constexpr int32_t kMaxTriageShrinkSteps = 1000;

// One profile x kernel x allocator combination.
struct TriageCombo {
  std::string profile, kernel;
  sim::AllocatorModel allocator = sim::AllocatorModel::kExact;
  int64_t cases = 0;     // generated for it
  int64_t replayed = 0;  // ran (the rest: aiter refuses the shape, or over_limit)
  int64_t over_limit = 0;  // not run: over one of mlasim's limits (ref/limits.h)
  int64_t overrun = 0;   // an access past a buffer's end or before its start
  int64_t fault = 0;     // an access that reaches an unmapped page
  int64_t corrupt = 0;   // a stray write that lands in another live buffer
  int64_t refused = 0;   // the engine's plan-rows guard refused a call
};

// A family of findings: a known bug, or an unknown signature.
struct TriageFamily {
  std::string name;       // the known bug's name, or "unknown"
  std::string signature;  // unknown: the signature "step|call|buffer|access|class"
  const sim::KnownBug* known = nullptr;
  int64_t cases = 0;                 // cases showing it
  std::vector<int64_t> combo_cases;  // per combination (TriageResult::combos order)
  int64_t first_case = -1;           // the first case showing it
  std::string first_signature;       // the signature the example keeps while shrinking
  std::optional<Failure> example;    // shrunk
  std::string example_file;          // "<name>.json" (written by the command with --out)
};

struct TriageResult {
  std::vector<TriageCombo> combos;
  std::vector<TriageFamily> families;  // in order of first appearance
  int64_t cases = 0;
  NotRun not_run;  // cases whose step ran nothing, by why (never counted clean)
  // With a fault address: its offset in a page of each faulting case's page size, and how many
  // faulting cases' first faulting byte has the same offset.
  int64_t faulting_cases = 0;
  int64_t fault_offset_matches = 0;
  // Whether the fault address starts a page in every faulting case's page size: offset 0 is where
  // any overrun past a buffer ending on a page boundary faults, so such a match is weak evidence.
  bool fault_address_page_aligned = true;
};

// Errors: InvalidArgument naming the flag ("--batch", "--graph", "--profile", "--kernel",
// "--allocator", "--cases", "--jobs", "--shrink-steps", "--mtp-k", "--tp") for values out of
// range or combinations the simulator refuses ("--tp": heads not divisible).
Status ValidateTriage(const TriageOptions& o);

// Runs the sweep. Errors: those of ValidateTriage.
StatusOr<TriageResult> RunTriage(const TriageOptions& o);

// The scenario of case `index` (what RunTriage replayed), for tests and examples.
sim::Scenario TriageCase(const TriageOptions& o, int64_t index);

}  // namespace mlasim::fuzz
