// File: tools/mlasim/cmd_effectiveness.cpp — `mlasim effectiveness`: the fuzzer effectiveness
// benchmark of issue 20 §3 (fuzz/effectiveness.h) as a Markdown report on stdout, progress on
// stderr. scripts/fuzz-effectiveness.sh runs it and writes docs/fuzzing-effectiveness.md.
#include "fuzz/effectiveness.h"
#include "tools/mlasim/commands.h"

namespace mlasim::cli {
namespace {

constexpr const char* kName = "effectiveness";

class EffectivenessCommand final : public Command {
 public:
  explicit EffectivenessCommand(CLI::App& parent) {
    app_ = parent.add_subcommand(kName,
                                 "Measure the fuzzer: cases and CPU seconds to the first report "
                                 "of each mutant and known bug family, swarm on and off, under "
                                 "both shrink policies (per-signature, first-failure)");
    app_->footer(
        "Exit codes: 0 measured, 2 bad input.\n"
        "Example: mlasim effectiveness --seeds 10 --cases 200 --signature-cases 300\n");
    app_->add_option("--seeds", o_.seeds, "base seeds per target (1..1000)")->capture_default_str();
    app_->add_option("--seed", o_.first_seed, "first base seed")
        ->capture_default_str()
        ->check(UnsignedInteger());
    app_->add_option("--cases", o_.max_cases,
                     "case budget per target, seed and swarm mode; the known bugs' campaigns run "
                     "this many cases (1..1000000)")
        ->capture_default_str();
    app_->add_option("--signature-cases", o_.signature_cases,
                     "cases per seed of the distinct-signature yield (0: not measured)")
        ->capture_default_str();
    app_->add_option("--only", o_.only, "only this target (repeatable)")->type_name("NAME");
    app_->add_option("--small", small_text_,
                     "on: known families and the yield generate B <= 64, K <= 3")
        ->type_name("on|off")
        ->capture_default_str();
  }
  CLI::App* app() const override { return app_; }

  int Run(const Streams& io) override {
    if (small_text_ != "on" && small_text_ != "off") {
      PrintError(io.err, kName, "--small", "must be on or off (got '" + small_text_ + "')");
      return kExitBadInput;
    }
    o_.small = small_text_ == "on";
    auto report = fuzz::EffectivenessReport(
        o_, [&io](const std::string& line) { io.err << "effectiveness: " << line << '\n'; });
    if (!report.ok()) {
      PrintError(io.err, kName, report.status().field(), report.status().message());
      return ExitCodeFor(report.status());
    }
    io.out << *report;
    return kExitOk;
  }

 private:
  CLI::App* app_ = nullptr;
  fuzz::EffectivenessOptions o_;
  std::string small_text_ = "on";
};

}  // namespace

std::unique_ptr<Command> RegisterEffectiveness(CLI::App& app) {
  return std::make_unique<EffectivenessCommand>(app);
}

}  // namespace mlasim::cli
