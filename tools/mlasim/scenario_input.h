// File: tools/mlasim/scenario_input.h — the scenario a subcommand works on: a CASE.json file or
// a --builtin name, with the --profile and --kernel overrides replay and numerics share.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "sim/scenario.h"

namespace mlasim::cli {

// Exactly one of `case_file` / `builtin` must be given (field "case" otherwise). Errors name the
// JSON path, --builtin, --profile or --kernel.
StatusOr<sim::Scenario> LoadScenarioArg(const std::string& case_file, const std::string& builtin,
                                        const std::string& profile, const std::string& kernel);

// The scenario flags shared by replay and numerics: CASE.json | --builtin NAME, --profile,
// --kernel. Add() registers them on a subcommand; Load() is LoadScenarioArg on their values.
struct ScenarioArgs {
  std::string case_file, builtin, profile, kernel;
  void Add(CLI::App& app);
  StatusOr<sim::Scenario> Load() const {
    return LoadScenarioArg(case_file, builtin, profile, kernel);
  }
};

}  // namespace mlasim::cli
