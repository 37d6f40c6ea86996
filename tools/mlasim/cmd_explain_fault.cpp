// File: tools/mlasim/cmd_explain_fault.cpp — `mlasim explain-fault`: name the buffer, bytes past
// its end, row, head and column of a fault address, from a layout written by `mlasim replay
// --layout-out`. Accepts a bare address or a log (ROCm fault line, compute-sanitizer output).
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/fault.h"
#include "sim/scenario_json.h"
#include "tools/mlasim/commands.h"

namespace mlasim::cli {
namespace {

constexpr const char* kName = "explain-fault";

class ExplainFaultCommand final : public Command {
 public:
  explicit ExplainFaultCommand(CLI::App& parent) {
    app_ = parent.add_subcommand(kName,
                                 "Attribute a GPU fault address to a buffer, row, head "
                                 "and column of a replayed layout");
    app_->footer(
        "Exit codes: 0 attributed, 2 bad input.\n"
        "Example: mlasim explain-fault --layout layout.json --address 0x7f1000200000\n");
    app_->add_option("--layout", layout_file_, "layout JSON from `mlasim replay --layout-out`")
        ->type_name("FILE")
        ->required();
    app_->add_option("--address", address_, "the fault address (0x...)")->type_name("0xADDR");
    app_->add_option("--log", log_file_,
                     "a log holding a ROCm 'Memory access fault ... on address 0x...' line or "
                     "compute-sanitizer memcheck output")
        ->type_name("FILE");
    app_->add_flag("--json", json_, "print the attribution as JSON");
  }

  CLI::App* app() const override { return app_; }

  int Run(const Streams& io) override {
    if (address_.empty() == log_file_.empty()) {
      PrintError(io.err, kName, "--address", "give exactly one of --address 0x... or --log FILE");
      return kExitBadInput;
    }
    std::string text = address_;
    std::string field = "--address";
    if (!log_file_.empty()) {
      field = "--log";
      StatusOr<std::string> log = sim::ReadTextFile(log_file_, "--log");
      if (!log.ok()) return Fail(io, log.status());
      text = *log;
    }
    auto fault = sim::ParseFaultText(text, field);
    if (!fault.ok()) return Fail(io, fault.status());
    StatusOr<std::string> layout_text = sim::ReadTextFile(layout_file_, "--layout");
    if (!layout_text.ok()) return Fail(io, layout_text.status());
    StatusOr<nlohmann::json> parsed = sim::ParseJsonStrict(*layout_text, "--layout");
    if (!parsed.ok()) {
      PrintError(io.err, kName, "--layout", layout_file_ + ": " + parsed.status().message());
      return kExitBadInput;
    }
    const nlohmann::json& layout = *parsed;
    if (fault->null_address) {
      PrintError(io.err, kName, field,
                 "the fault address is (nil): a null pointer, not an overrun of a buffer");
      return kExitBadInput;
    }
    auto at = sim::AttributeAddress(layout, fault->address, field);
    if (!at.ok()) return Fail(io, at.status());
    if (json_) {
      nlohmann::json j = {{"address", fmt::format("0x{:x}", fault->address)},
                          {"source", fault->source},
                          {"reason", fault->reason},
                          {"buffer", at->buffer},
                          {"inside", at->inside},
                          {"offset", at->offset},
                          {"bytes_past_end", at->bytes_past_end},
                          {"row", at->row},
                          {"head", at->head},
                          {"column", at->column},
                          {"buffer_rows", at->rows},
                          {"mapped", at->mapped},
                          {"next_buffer", at->next_buffer},
                          {"bytes_before_next", at->bytes_before_next},
                          {"hsa_status", fault->hsa_status},
                          {"text", at->text}};
      if (layout.contains("call_name")) j["call"] = layout["call_name"];
      if (layout.contains("step")) j["step"] = layout["step"];
      io.out << j.dump(2) << '\n';
    } else {
      io.out << at->text << '\n';
      if (layout.contains("step"))
        io.out << "layout of " << layout.value("step", std::string("?")) << " / "
               << layout.value("call_name", std::string("?")) << '\n';
      if (!fault->reason.empty()) io.out << "reported reason: " << fault->reason << '\n';
    }
    return kExitOk;
  }

 private:
  int Fail(const Streams& io, const Status& st) {
    PrintError(io.err, kName, st.field(), st.message());
    return ExitCodeFor(st);
  }
  CLI::App* app_ = nullptr;
  std::string layout_file_, address_, log_file_;
  bool json_ = false;
};

}  // namespace

std::unique_ptr<Command> RegisterExplainFault(CLI::App& app) {
  return std::make_unique<ExplainFaultCommand>(app);
}

}  // namespace mlasim::cli
