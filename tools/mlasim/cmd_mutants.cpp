// File: tools/mlasim/cmd_mutants.cpp — `mlasim mutants`: run every registered mutant's killing
// property for a budget of cases and print the table (fuzz/mutants.h). Exit 0 when every mutant
// is killed, 1 when one survives. The budget counts cases, so the result is the same bytes on any
// machine.
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "fuzz/mutants.h"
#include "fuzz/properties.h"
#include "sim/os_error.h"
#include "sim/scenario_json.h"
#include "tools/mlasim/commands.h"

namespace mlasim::cli {
namespace {

constexpr const char* kName = "mutants";

class MutantsCommand final : public Command {
 public:
  explicit MutantsCommand(CLI::App& parent) {
    app_ = parent.add_subcommand(kName,
                                 "Run the property suite against every registered mutant "
                                 "(deliberately injected bug) and report which it kills");
    app_->footer("Exit codes: 0 every mutant killed, 1 a mutant survived, 2 bad input.\n");
    budget_opt_ = app_->add_option("--budget", budget_,
                                   "cases per mutant (default: each mutant's own budget, see "
                                   "--list): a mutant its property does not kill within them "
                                   "survives");
    app_->add_option("--seed", seed_, "first seed")
        ->capture_default_str()
        ->check(UnsignedInteger());
    app_->add_option("--only", only_, "run only the mutant with this name")->type_name("NAME");
    app_->add_option(
            "--out", out_dir_,
            "write each shrunk simulator counterexample as a replayable case JSON into DIR")
        ->type_name("DIR");
    app_->add_flag("--list", list_,
                   "list the registry (name, class, kind, killing property, injection site)");
  }
  CLI::App* app() const override { return app_; }

  int Run(const Streams& io) override {
    const auto& registry = fuzz::MutantRegistry();
    if (!only_.empty() && !fuzz::FindMutant(only_)) {  // with --list too: never a silent "all"
      PrintError(io.err, kName, "--only", "no mutant named '" + only_ + "' (see --list)");
      return kExitBadInput;
    }
    if (list_) {  // with --only: that one
      for (const auto& m : registry)
        if (only_.empty() || m.name == only_)
          io.out << fmt::format("{:<42} {}  {:<13} {:<30} budget {:<5} {}\n    {}\n", m.name,
                              sim::BugClassLetter(m.bug_class), fuzz::MutantKindName(m.kind),
                              m.property, m.budget, m.site, m.description);
      return kExitOk;
    }
    if (budget_opt_->count() > 0 && (budget_ < 1 || budget_ > 1000000)) {
      PrintError(io.err, kName, "--budget", "must be a number of cases in 1..1000000");
      return kExitBadInput;
    }
    if (!out_dir_.empty()) {  // created; a folder that takes no files is refused now
      if (Status st = sim::PrepareOutputFolder("--out", out_dir_, /*create=*/true); !st.ok()) {
        PrintError(io.err, kName, st.field(), st.message());
        return kExitBadInput;
      }
    }
    io.out << fmt::format("{:<42} {:<5} {:<13} {:<8} {:>7} {:>7}  {}\n", "mutant", "class", "kind",
                          "result", "cases", "budget", "counterexample");
    int survived = 0;
    for (const auto& m : registry) {
      if (!only_.empty() && m.name != only_) continue;
      const int64_t budget = budget_opt_->count() > 0 ? budget_ : m.budget;
      const fuzz::MutantResult r = fuzz::RunMutant(m, seed_, budget);
      std::string example = r.killed ? r.kill->description : "";
      if (r.killed && r.kill->counterexample && !out_dir_.empty())
        example += WriteCase(m, *r.kill->counterexample);
      if (!r.killed) ++survived;
      io.out << fmt::format("{:<42} {:<5} {:<13} {:<8} {:>7} {:>7}  {}\n", m.name,
                            sim::BugClassLetter(m.bug_class), fuzz::MutantKindName(m.kind),
                            r.killed ? "killed" : "SURVIVED", r.cases, budget, example);
    }
    io.out << (survived ? fmt::format("{} mutant(s) survived\n", survived)
                        : std::string("every mutant killed\n"));
    return survived ? kExitCheckFailed : kExitOk;
  }

 private:
  // The shrunk scenario as a case file; `mlasim replay|numerics FILE --mutant NAME` shows it.
  std::string WriteCase(const fuzz::MutantSpec& m, const fuzz::Failure& f) const {
    auto doc = sim::ScenarioToJson(f.scenario);
    doc["name"] = "mutant-" + m.name;
    // Semantics and numerics mutants live in the numerics (`mlasim numerics --mutant`); the
    // others in the simulator (`mlasim replay --mutant`).
    const bool numerics =
        m.kind == fuzz::MutantKind::kSemantics || m.kind == fuzz::MutantKind::kNumerics;
    doc["description"] = "Counterexample killing mutant " + m.name + " (" + m.description + "); " +
                         (numerics ? "mlasim numerics FILE" : "mlasim replay FILE") +
                         " --mutant " + m.name + " shows the violation";
    const auto path = std::filesystem::path(out_dir_) / (m.name + ".json");
    const Status st = sim::WriteTextFile("--out", path.string(), doc.dump(2) + "\n");
    return st.ok() ? "  -> " + path.string() : "  (" + st.message() + ")";
  }

  CLI::App* app_ = nullptr;
  CLI::Option* budget_opt_ = nullptr;
  int64_t budget_ = 0;
  uint64_t seed_ = 1;
  std::string only_, out_dir_;
  bool list_ = false;
};

}  // namespace

std::unique_ptr<Command> RegisterMutants(CLI::App& app) {
  return std::make_unique<MutantsCommand>(app);
}

}  // namespace mlasim::cli
