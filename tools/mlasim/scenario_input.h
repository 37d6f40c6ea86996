// File: tools/mlasim/scenario_input.h — the scenario a subcommand works on: a CASE.json file or
// a --builtin name, with the --profile and --kernel overrides replay and numerics share.
#pragma once

#include <string>

#include "sim/scenario.h"

namespace mlasim::cli {

// Exactly one of `case_file` / `builtin` must be given (field "case" otherwise). Errors name the
// JSON path, --builtin, --profile or --kernel.
StatusOr<sim::Scenario> LoadScenarioArg(const std::string& case_file, const std::string& builtin,
                                        const std::string& profile, const std::string& kernel);

}  // namespace mlasim::cli
