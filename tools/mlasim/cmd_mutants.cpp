// File: tools/mlasim/cmd_mutants.cpp — `mlasim mutants`: run every registered mutant's killing
// property within a time budget and print the table (fuzz/mutants.h). Exit 0 when every mutant
// is killed, 1 when one survives.
#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "fuzz/mutants.h"
#include "fuzz/properties.h"
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
    app_->add_option("--budget", budget_, "seconds per mutant")->capture_default_str();
    app_->add_option("--seed", seed_, "first seed")
        ->capture_default_str()
        ->check(UnsignedInteger());
    app_->add_option("--only", only_, "run only the mutant with this name")->type_name("NAME");
    app_->add_option("--out", out_dir_,
                     "write each shrunk counterexample as a replayable case JSON into DIR")
        ->type_name("DIR");
    app_->add_flag("--list", list_, "list the registry and exit");
  }
  CLI::App* app() const override { return app_; }

  int Run(const Streams& io) override {
    const auto& registry = fuzz::MutantRegistry();
    if (list_) {
      for (const auto& m : registry)
        io.out << fmt::format("{:<42} {}  {}\n", m.name, m.bug_class, m.description);
      return kExitOk;
    }
    if (!(budget_ > 0) || !std::isfinite(budget_) || budget_ > 86400) {
      PrintError(io.err, kName, "--budget", "must be a finite number of seconds in (0, 86400]");
      return kExitBadInput;
    }
    bool found_only = only_.empty();
    for (const auto& m : registry) found_only |= m.name == only_;
    if (!found_only) {
      PrintError(io.err, kName, "--only", "no mutant named '" + only_ + "' (see --list)");
      return kExitBadInput;
    }
    if (!out_dir_.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(out_dir_, ec);
      if (ec) {
        PrintError(io.err, kName, "--out", "cannot create " + out_dir_ + ": " + ec.message());
        return kExitBadInput;
      }
    }
    io.out << fmt::format("{:<42} {:<5} {:<8} {:>9} {:>7}  {}\n", "mutant", "class", "result",
                          "time (s)", "cases", "shrunk counterexample");
    int survived = 0;
    for (const auto& m : registry) {
      if (!only_.empty() && m.name != only_) continue;
      const fuzz::MutantResult r = fuzz::RunMutant(m, seed_, budget_);
      std::string example;
      if (r.counterexample) {
        const auto& f = *r.counterexample;
        example = fmt::format("B={} K={} {}", f.scenario.requests.size(), f.scenario.mtp_k,
                              fuzz::Signature(f.broken.front()));
        if (!out_dir_.empty()) {
          auto doc = sim::ScenarioToJson(f.scenario);
          doc["name"] = "mutant-" + m.name;
          doc["description"] = "Counterexample killing mutant " + m.name + " (" + m.description +
                               "); replay it with --mutant to see the violation";
          const auto path = std::filesystem::path(out_dir_) / (m.name + ".json");
          std::ofstream file(path);
          file << doc.dump(2) << '\n';
          example += file ? "  -> " + path.string() : "  (could not write " + path.string() + ")";
        }
      } else if (r.killed) {
        example = r.custom_counterexample;
      }
      if (!r.killed) ++survived;
      io.out << fmt::format("{:<42} {:<5} {:<8} {:>9.3f} {:>7}  {}\n", m.name, m.bug_class,
                            r.killed ? "killed" : "SURVIVED", r.seconds_to_kill, r.cases, example);
    }
    io.out << (survived ? fmt::format("{} mutant(s) survived\n", survived)
                        : std::string("every mutant killed\n"));
    return survived ? kExitCheckFailed : kExitOk;
  }

 private:
  CLI::App* app_ = nullptr;
  double budget_ = 5.0;
  uint64_t seed_ = 1;
  std::string only_, out_dir_;
  bool list_ = false;
};

}  // namespace

std::unique_ptr<Command> RegisterMutants(CLI::App& app) {
  return std::make_unique<MutantsCommand>(app);
}

}  // namespace mlasim::cli
