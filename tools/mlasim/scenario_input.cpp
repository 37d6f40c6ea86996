#include "tools/mlasim/scenario_input.h"

#include <algorithm>
#include <limits>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sim/contract.h"
#include "sim/engine.h"
#include "sim/index_values.h"
#include "sim/replay.h"
#include "sim/scenario_json.h"

namespace mlasim::cli {

Status AddContractFiles(const std::vector<std::string>& files, sim::Scenario* s) {
  for (const std::string& f : files) {
    MLASIM_ASSIGN_OR_RETURN(sim::Contract c, sim::LoadContractFile(f));
    auto& list = s->contracts;
    list.erase(
        std::remove_if(list.begin(), list.end(), [&](const auto& x) { return x->call == c.call; }),
        list.end());
    list.push_back(std::make_shared<const sim::Contract>(std::move(c)));
  }
  return OkStatus();
}

Status CheckKernelMatchesContract(const std::string& kernel,
                                  const std::vector<std::string>& contract_files,
                                  const sim::Scenario& s) {
  if (kernel.empty()) return OkStatus();
  for (const auto& c : s.contracts) {
    if (c->call != sim::CallKind::kDecode || c->variant == kernel) continue;
    const bool flag =
        std::find(contract_files.begin(), contract_files.end(), c->file) != contract_files.end();
    const std::string from = (flag ? "--contract " : "the scenario's ") + c->file;
    return InvalidArgumentError(
        "--kernel", "--kernel " + kernel + " and " + from + " (decode contract " + c->name +
                        ", variant " + c->variant +
                        ") both choose the decode kernel and disagree; the contract would win "
                        "and --kernel do nothing: give one of them, or a contract of variant " +
                        kernel);
  }
  return OkStatus();
}

StatusOr<sim::Scenario> LoadScenarioArg(const std::string& case_file, const std::string& builtin,
                                        const std::string& profile, const std::string& kernel,
                                        const std::vector<std::string>& contracts) {
  if (case_file.empty() == builtin.empty())
    return InvalidArgumentError("case", "give exactly one of CASE.json or --builtin NAME");
  StatusOr<sim::Scenario> s =
      builtin.empty() ? sim::LoadScenarioFile(case_file) : sim::BuiltinScenario(builtin);
  if (!s.ok()) return s;
  if (!profile.empty()) {
    MLASIM_ASSIGN_OR_RETURN(s->engine, sim::GetEngineProfile(profile, "--profile"));
  }
  MLASIM_RETURN_IF_ERROR(AddContractFiles(contracts, &*s));
  MLASIM_RETURN_IF_ERROR(CheckKernelMatchesContract(kernel, contracts, *s));
  const bool decode_contract =
      std::any_of(s->contracts.begin(), s->contracts.end(),
                  [](const auto& c) { return c->call == sim::CallKind::kDecode; });
  if (!kernel.empty() && !decode_contract) {  // with one, --kernel names its variant: nothing to do
    MLASIM_RETURN_IF_ERROR(
        sim::BuiltinContract(sim::CallKind::kDecode, kernel, "--kernel").status());
    s->kernel = kernel;
  }
  // The step's expansion refuses what the parser cannot judge alone (an override naming no call
  // of the step or a key its call does not read, a plan the planner refuses, a ragged batch on a
  // dialect profile): expanded here, where the file is known, so that its errors name it.
  StatusOr<sim::Trace> t = sim::ExpandStep(*s);
  if (!t.ok()) return sim::InScenarioFile(case_file, t.status());
  // A value no fill places would be dropped silently.
  if (!s->kv_cache.index_values.empty())
    MLASIM_RETURN_IF_ERROR(sim::InScenarioFile(case_file, sim::CheckIndexValuesPlaced(*s, *t)));
  return s;
}

Status ScenarioArgs::InFile(const Status& st, const std::string& with) const {
  if (st.code() != StatusCode::kInvalidArgument && st.code() != StatusCode::kResourceExhausted)
    return st;
  const Status named = sim::InScenarioFile(case_file, st);
  if (with.empty()) return named;
  return Status(named.code(), named.field(), named.message() + " (with " + with + ")");
}

void ScenarioArgs::Add(CLI::App& app) {
  app.add_option("case", case_file, "scenario JSON (schema: docs/scenario.md)")
      ->type_name("CASE.json");
  app.add_option("--builtin", builtin,
                 "a built-in case instead of a file: seed, seed-b35, dense-mtp")
      ->type_name("NAME");
  // The lists come from the engine tables (sim/engines/*.json) and the built-in contracts, the
  // same ones the parsers accept.
  app.add_option("--profile", profile,
                 fmt::format("override the engine profile: {} (atom-2026-08 is before the #2715 "
                             "fix, atom-2026-11 after)",
                             fmt::join(sim::EngineProfileNames(), ", ")))
      ->type_name("NAME");
  app.add_option("--kernel", kernel,
                 fmt::format("override the decode kernel variant: {}",
                             fmt::join(sim::BuiltinVariants(sim::CallKind::kDecode), ", ")))
      ->type_name("NAME");
  app.add_option("--contract", contracts,
                 "a kernel contract file (docs/contracts.md) in place of the built-in one of its "
                 "call kind; repeatable")
      ->type_name("FILE");
}

}  // namespace mlasim::cli
