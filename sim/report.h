// File: sim/report.h
//
// The reporter of `mlasim replay`: formats a ReplayReport (sim/replay.h) as the JSON report
// (docs/scenario.md, "Replay report") or the human text report. Replay orchestrates (expand,
// execute); this file only formats. Deterministic bytes: same report, same output.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "sim/replay.h"

namespace mlasim::sim {

// The JSON report: case, profile, verdict, scheduled_tokens, running_tokens, calls,
// violations[...], plus shape and the call list.
nlohmann::json ReportJson(const ReplayReport& r);
// The human report: the step's shape, the calls with their rows, each violation explained.
std::string ReportText(const ReplayReport& r);
// One violation of `r` as the text report explains it (ReportText prints one per violation, the
// JUnit report one per failing call, sim/junit.h): "\n  [kind] class X  step / call (kernel)
// access buffer", then lines indented six spaces: the rows, the work items, the consequence on
// hardware, the detail sentence, the cause and the known bug, when there are.
std::string ViolationText(const ReplayReport& r, const Violation& v);

}  // namespace mlasim::sim
