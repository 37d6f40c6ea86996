// File: sim/replay.h
//
// `mlasim replay`: expand a scenario's step and execute it (the reporter, sim/report.h, formats
// the result). Also the built-in cases.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/executor.h"
#include "sim/scenario.h"
#include "sim/trace.h"

namespace mlasim::sim {

struct ReplayReport {
  Scenario scenario;
  Trace trace;
  ExecutionResult result;
  bool clean() const { return result.violations.empty(); }
};

// Expands and executes. Errors: those of ExpandStep.
StatusOr<ReplayReport> Replay(const Scenario& s, const ExecuteOptions& opt = {});

// Built-in cases: "seed" (the founding fault: 39 requests padded to 40, MTP K = 3, GLM-5.2-like
// sparse MLA), "seed-b35" (35 requests, q of 140 rows, a caching-allocator layout whose fault
// lands 20-24 KB past the end of q), "dense-mtp" (DeepSeek-like dense MTP, ATOM#287 era).
StatusOr<Scenario> BuiltinScenario(const std::string& name);
std::vector<std::string> BuiltinNames();

}  // namespace mlasim::sim
