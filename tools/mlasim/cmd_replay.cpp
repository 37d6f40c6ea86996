// File: tools/mlasim/cmd_replay.cpp — `mlasim replay`: expand one engine step of a scenario, run
// every call's access contract over the simulated address space, report. docs/cli.md, docs/scenario.md.
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/replay.h"
#include "sim/scenario_json.h"
#include "tools/mlasim/commands.h"

namespace mlasim::cli {
namespace {

constexpr const char* kName = "replay";

class ReplayCommand final : public Command {
 public:
  explicit ReplayCommand(CLI::App& parent) {
    app_ = parent.add_subcommand(kName, "Replay one engine step (verify + MTP drafts) of a "
                                        "scenario and report every access outside a buffer");
    app_->footer(
        "Exit codes: 0 clean, 1 violations, 2 bad input (the message names the JSON path).\n"
        "Examples: mlasim replay --builtin seed\n"
        "          mlasim replay case.json --profile atom-2026-11 --json\n");
    app_->add_option("case", case_file_, "scenario JSON (schema: docs/scenario.md)")
        ->type_name("CASE.json");
    app_->add_option("--builtin", builtin_,
                     "a built-in case instead of a file: seed, seed-b35, dense-mtp")
        ->type_name("NAME");
    app_->add_option("--profile", profile_,
                     "override the engine profile: atom-2026-03, atom-2026-08 (before the "
                     "#2715 fix), atom-2026-11 (after)")
        ->type_name("NAME");
    app_->add_option("--kernel", kernel_, "override the kernel variant: asm, opus, hk")
        ->type_name("NAME");
    app_->add_flag("--json", json_, "print the report as JSON");
    app_->add_option("--layout-out", layout_out_,
                     "write the address-space layout (persistent buffers + the tensors of the "
                     "first call with a violation) as JSON, for `mlasim explain-fault`")
        ->type_name("FILE");
    app_->add_option("--scenario-out", scenario_out_,
                     "write the scenario as canonical JSON (every field spelled out)")
        ->type_name("FILE");
  }

  CLI::App* app() const override { return app_; }

  int Run(const Streams& io) override {
    if (case_file_.empty() == builtin_.empty()) {
      PrintError(io.err, kName, "case", "give exactly one of CASE.json or --builtin NAME");
      return kExitBadInput;
    }
    StatusOr<sim::Scenario> s =
        builtin_.empty() ? sim::LoadScenarioFile(case_file_) : sim::BuiltinScenario(builtin_);
    if (!s.ok()) return Fail(io, s.status());
    if (!profile_.empty()) {
      auto e = sim::GetEngineProfile(profile_, "--profile");
      if (!e.ok()) return Fail(io, e.status());
      s->engine = *e;
    }
    if (!kernel_.empty()) {
      if (kernel_ == "asm") s->kernel = sim::KernelVariant::kAsm;
      else if (kernel_ == "opus") s->kernel = sim::KernelVariant::kOpus;
      else if (kernel_ == "hk") s->kernel = sim::KernelVariant::kHk;
      else return Fail(io, InvalidArgumentError("--kernel", "must be asm, opus or hk"));
    }
    auto report = sim::Replay(*s);
    if (!report.ok()) return Fail(io, report.status());
    if (!layout_out_.empty() && !WriteJson(io, layout_out_, report->result.layout))
      return kExitBadInput;
    if (!scenario_out_.empty() && !WriteJson(io, scenario_out_, sim::ScenarioToJson(*s)))
      return kExitBadInput;
    if (json_)
      io.out << sim::ReportJson(*report).dump(2) << '\n';
    else
      io.out << sim::ReportText(*report);
    return report->clean() ? kExitOk : kExitCheckFailed;
  }

 private:
  int Fail(const Streams& io, const Status& st) {
    PrintError(io.err, kName, st.field(), st.message());
    return ExitCodeFor(st);
  }
  bool WriteJson(const Streams& io, const std::string& path, const nlohmann::json& j) {
    std::ofstream f(path);
    if (!f) {
      PrintError(io.err, kName, path, "cannot write this file");
      return false;
    }
    f << j.dump(2) << '\n';
    return true;
  }

  CLI::App* app_ = nullptr;
  std::string case_file_, builtin_, profile_, kernel_, layout_out_, scenario_out_;
  bool json_ = false;
};

}  // namespace

std::unique_ptr<Command> RegisterReplay(CLI::App& app) {
  return std::make_unique<ReplayCommand>(app);
}

}  // namespace mlasim::cli
