// File: tools/mlasim/scenario_input.h — the scenario a subcommand works on: a CASE.json file or
// a --builtin name, with the --profile and --kernel overrides replay and numerics share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "ref/planner.h"
#include "sim/scenario.h"

namespace mlasim::cli {

// Exactly one of `case_file` / `builtin` must be given (field "case" otherwise). `contracts`:
// contract files (docs/contracts.md) that replace the built-in contract of their call kind; the
// last one of a kind wins. Errors name the JSON path, --builtin, --profile, --kernel or the
// contract file and its JSON path.
StatusOr<sim::Scenario> LoadScenarioArg(const std::string& case_file, const std::string& builtin,
                                        const std::string& profile, const std::string& kernel,
                                        const std::vector<std::string>& contracts = {});

// Puts the contracts of `files` into s->contracts (replacing any of the same call kind).
Status AddContractFiles(const std::vector<std::string>& files, sim::Scenario* s);

// The scenario flags shared by replay and numerics: CASE.json | --builtin NAME, --profile,
// --kernel, --contract. Add() registers them on a subcommand; Load() is LoadScenarioArg on
// their values.
struct ScenarioArgs {
  std::string case_file, builtin, profile, kernel;
  std::vector<std::string> contracts;
  void Add(CLI::App& app);
  StatusOr<sim::Scenario> Load() const {
    return LoadScenarioArg(case_file, builtin, profile, kernel, contracts);
  }
};

// The request as the decode kernel addresses q: dense plans tile uni_seqlen_qo rows per request,
// padding included, so qo_indptr is made uniform (the engine's T1 request lists 0 rows for
// padding, which the planner ignores); per-token (sparse) requests are returned unchanged. Used
// by `numerics` and `replay --gpu` to build inputs in the kernel's layout.
ref::PlanRequest KernelRequest(const ref::PlanRequest& request);

// First q row of the padding requests (requests >= real_requests) of `request` (in the layout
// of KernelRequest); INT64_MAX when every request is real. Rows from there on are discarded by
// the engine: their outputs are not compared.
int64_t FirstPaddingRow(const ref::PlanRequest& request, int32_t real_requests);

}  // namespace mlasim::cli
