// File: tools/mlasim/cmd_explain_fault.cpp — `mlasim explain-fault`: name the buffer, bytes past
// its end (or before its start), row, head and column of a fault address (the range of rows of a
// ROCm fault page), and the replay's calls and work items touching them, from a layout written by
// `mlasim replay --layout-out` or by hand (docs/cli.md "Layout JSON"). Accepts a bare address or a
// log (ROCm fault line, compute-sanitizer output).
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
    page_opt_ =
        app_->add_option(
                "--page-bytes", page_bytes_,
                "the address names a page of this many bytes (the fault is somewhere in "
                "it): rows are reported as the range the page covers. Default: the layout's "
                "page_bytes (4096) for a page-aligned ROCm fault address, 0 (exact) "
                "otherwise")
            ->type_name("N");
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
    if (!fault.ok() && log_file_.empty()) {
      // Neither a log line nor a bare address the log reader knows: say what is wrong with the
      // text as an address (empty, negative, not hex, trailing text, above 64 bits).
      StatusOr<uint64_t> address = sim::ParseAddressText(address_, "--address");
      if (!address.ok()) return Fail(io, address.status());
      fault = sim::FaultReport{*address, false, "address", "", {}};
    }
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
    // ROCm prints the faulting page, not the byte: a page-aligned address from a ROCm log is
    // one of the page's bytes.
    if (page_opt_->count() > 0 && (page_bytes_ < 0 || page_bytes_ > (int64_t{1} << 30))) {
      PrintError(io.err, kName, "--page-bytes", "must be in 0..1073741824 (0: an exact address)");
      return kExitBadInput;
    }
    int64_t page = page_bytes_;
    if (page_opt_->count() == 0) {
      const int64_t layout_page =
          layout.contains("page_bytes") && layout["page_bytes"].is_number_integer()
              ? layout["page_bytes"].get<int64_t>()
              : 4096;
      page = fault->source == "rocm" && layout_page > 0 &&
                     fault->address % static_cast<uint64_t>(layout_page) == 0
                 ? layout_page
                 : 0;
    }
    auto at = sim::AttributeAddress(layout, fault->address, field, page);
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
                          {"before_start", at->before_start},
                          {"page_bytes", at->page_bytes},
                          {"first_row", at->first_row},
                          {"last_row", at->last_row},
                          {"alternative", at->alternative},
                          {"accesses", AccessesJson(*at)},
                          {"text", at->text}};
      if (layout.contains("call_name")) j["call"] = layout["call_name"];
      if (layout.contains("step")) j["step"] = layout["step"];
      io.out << j.dump(2) << '\n';
    } else {
      io.out << at->text << '\n';
      if (!at->alternative.empty()) io.out << "(" << at->alternative << ")\n";
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
  static nlohmann::json AccessesJson(const sim::Attribution& at) {
    nlohmann::json out = nlohmann::json::array();
    for (const sim::LayoutAccess& a : at.accesses)
      out.push_back({{"call_index", a.call_index},
                     {"step", a.step},
                     {"call", a.call},
                     {"access", a.access},
                     {"first_row", a.first_row},
                     {"last_row", a.last_row},
                     {"work_items", a.work_items}});
    return out;
  }
  CLI::App* app_ = nullptr;
  CLI::Option* page_opt_ = nullptr;
  int64_t page_bytes_ = -1;
  std::string layout_file_, address_, log_file_;
  bool json_ = false;
};

}  // namespace

std::unique_ptr<Command> RegisterExplainFault(CLI::App& app) {
  return std::make_unique<ExplainFaultCommand>(app);
}

}  // namespace mlasim::cli
