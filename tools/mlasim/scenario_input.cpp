#include "tools/mlasim/scenario_input.h"

#include "sim/replay.h"
#include "sim/scenario_json.h"

namespace mlasim::cli {

StatusOr<sim::Scenario> LoadScenarioArg(const std::string& case_file, const std::string& builtin,
                                        const std::string& profile, const std::string& kernel) {
  if (case_file.empty() == builtin.empty())
    return InvalidArgumentError("case", "give exactly one of CASE.json or --builtin NAME");
  StatusOr<sim::Scenario> s =
      builtin.empty() ? sim::LoadScenarioFile(case_file) : sim::BuiltinScenario(builtin);
  if (!s.ok()) return s;
  if (!profile.empty()) {
    MLASIM_ASSIGN_OR_RETURN(s->engine, sim::GetEngineProfile(profile, "--profile"));
  }
  if (!kernel.empty()) {
    if (kernel == "asm")
      s->kernel = sim::KernelVariant::kAsm;
    else if (kernel == "opus")
      s->kernel = sim::KernelVariant::kOpus;
    else if (kernel == "hk")
      s->kernel = sim::KernelVariant::kHk;
    else
      return InvalidArgumentError("--kernel", "must be asm, opus or hk");
  }
  return s;
}

}  // namespace mlasim::cli
