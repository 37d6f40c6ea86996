// File: tools/mlasim/scenario_input.h — the scenario a subcommand works on: a CASE.json file or
// a --builtin name, with the --profile and --kernel overrides replay and numerics share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "ref/planner.h"
#include "sim/kernel_request.h"
#include "sim/scenario.h"

namespace mlasim::cli {

// Exactly one of `case_file` / `builtin` must be given (field "case" otherwise). `contracts`:
// contract files (docs/contracts.md) that replace the built-in contract of their call kind; the
// last one of a kind wins. Errors name the JSON path, --builtin, --profile, --kernel or the
// contract file and its JSON path; --kernel NAME beside a decode contract (from `contracts` or the
// scenario's own "contracts") of another variant is refused (field "--kernel", naming both), as
// the contract would decide the kernel and --kernel do nothing; beside one of its variant NAME
// need not be a built-in one. The step is expanded once (sim::ExpandStep) to refuse what only the
// expansion can judge (an override naming no call of the step, an index value no fill places);
// every error whose field is a JSON path names CASE.json first ("case.json: $.calls[0].call"),
// --builtin cases not.
StatusOr<sim::Scenario> LoadScenarioArg(const std::string& case_file, const std::string& builtin,
                                        const std::string& profile, const std::string& kernel,
                                        const std::vector<std::string>& contracts = {});

// OK unless `kernel` is given and s has a decode contract of another variant. `contract_files`:
// the --contract paths, to name where that contract came from.
Status CheckKernelMatchesContract(const std::string& kernel,
                                  const std::vector<std::string>& contract_files,
                                  const sim::Scenario& s);

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
  // An error of a later expansion of the loaded scenario (replay --gpu with the kernel under
  // test's contracts, --mutant, numerics' reduced scenario), named in CASE.json as Load()'s are
  // ("case.json: $.capture.contexts"; sim::InScenarioFile), `with` (what changed the scenario
  // since the load: "simulator mutant X") added to the message. Errors other than
  // InvalidArgument (internal ones) are left as they are.
  Status InFile(const Status& st, const std::string& with = "") const;
};

// The request as the decode kernel addresses q (sim/kernel_request.h).
using sim::FirstPaddingRow;
using sim::KernelRequest;

}  // namespace mlasim::cli
