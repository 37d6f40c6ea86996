#include "tools/mlasim/scenario_input.h"

#include <algorithm>
#include <limits>
#include <memory>

#include "sim/contract.h"
#include "sim/replay.h"
#include "sim/scenario_json.h"

namespace mlasim::cli {

Status AddContractFiles(const std::vector<std::string>& files, sim::Scenario* s) {
  for (const std::string& f : files) {
    MLASIM_ASSIGN_OR_RETURN(sim::Contract c, sim::LoadContractFile(f));
    auto& list = s->contracts;
    list.erase(std::remove_if(list.begin(), list.end(),
                              [&](const auto& x) { return x->call == c.call; }),
               list.end());
    list.push_back(std::make_shared<const sim::Contract>(std::move(c)));
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
  if (!kernel.empty()) {
    MLASIM_RETURN_IF_ERROR(
        sim::BuiltinContract(sim::CallKind::kDecode, kernel, "--kernel").status());
    s->kernel = kernel;
  }
  MLASIM_RETURN_IF_ERROR(AddContractFiles(contracts, &*s));
  return s;
}

void ScenarioArgs::Add(CLI::App& app) {
  app.add_option("case", case_file, "scenario JSON (schema: docs/scenario.md)")
      ->type_name("CASE.json");
  app.add_option("--builtin", builtin,
                 "a built-in case instead of a file: seed, seed-b35, dense-mtp")
      ->type_name("NAME");
  app.add_option("--profile", profile,
                 "override the engine profile: atom-2026-03, atom-2026-08 (before the #2715 "
                 "fix), atom-2026-11 (after)")
      ->type_name("NAME");
  app.add_option("--kernel", kernel, "override the kernel variant: asm, opus, hk")
      ->type_name("NAME");
  app.add_option("--contract", contracts,
                 "a kernel contract file (docs/contracts.md) in place of the built-in one of its "
                 "call kind; repeatable")
      ->type_name("FILE");
}


}  // namespace mlasim::cli
