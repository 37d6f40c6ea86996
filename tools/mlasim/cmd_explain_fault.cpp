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
    if (address_.empty() == log_file_.empty())
      return Fail(io, InvalidArgumentError("--address",
                                           "give exactly one of --address 0x... or --log FILE"));
    const std::string field = log_file_.empty() ? "--address" : "--log";
    StatusOr<sim::FaultReport> fault = ReadFault(field);
    if (!fault.ok()) return Fail(io, fault.status());
    StatusOr<std::string> layout_text = sim::ReadTextFile(layout_file_, "--layout");
    if (!layout_text.ok()) return Fail(io, layout_text.status());
    StatusOr<nlohmann::json> parsed = sim::ParseJsonStrict(*layout_text, "--layout");
    if (!parsed.ok())
      return Fail(
          io, InvalidArgumentError("--layout", layout_file_ + ": " + parsed.status().message()));
    const nlohmann::json& layout = *parsed;
    // Every malformed or inconsistent key is refused naming the file and its JSON path
    // ("lay.json: $.allocations[20].row_bytes: ..."), as scenario files are.
    if (Status valid = sim::ValidateLayout(layout); !valid.ok())
      return Fail(io, Status(valid.code(), layout_file_ + ": " + valid.field(), valid.message()));
    if (fault->null_address)
      return Fail(io, InvalidArgumentError(field,
                                           "the fault address is (nil): a null pointer, "
                                           "not an overrun of a buffer"));
    // A page is a power of 2: with 3 the rows "the page covers" were the rows of 3 bytes
    // from the address, whatever page the fault was in (round 8). "got" the text as typed:
    // 2^63 .. 2^64 - 1 reach page_bytes_ as INT64_MAX.
    if (page_opt_->count() > 0 && (page_bytes_ < 0 || page_bytes_ > (int64_t{1} << 30) ||
                                   (page_bytes_ & (page_bytes_ - 1)) != 0))
      return Fail(io, InvalidArgumentError("--page-bytes",
                                           "must be in 0..1073741824 (0: an exact address) and "
                                           "a power of 2 (got " +
                                               page_opt_->results().back() + ")"));
    auto at = sim::AttributeAddress(layout, fault->address, field, PageBytes(layout, *fault));
    if (!at.ok()) return Fail(io, at.status());
    if (json_)
      io.out << AttributionJson(layout, *fault, *at).dump(2) << '\n';
    else
      io.out << AttributionText(layout, *fault, *at);
    return kExitOk;
  }

 private:
  // The fault of --address or --log (`field`). Errors: the file's, or what is wrong with the text
  // as a log or an address (empty, negative, not hex, trailing text, above 64 bits).
  StatusOr<sim::FaultReport> ReadFault(const std::string& field) const {
    std::string text = address_;
    if (!log_file_.empty()) {
      MLASIM_ASSIGN_OR_RETURN(text, sim::ReadTextFile(log_file_, "--log"));
    }
    auto fault = sim::ParseFaultText(text, field);
    if (!fault.ok() && log_file_.empty()) {
      // Neither a log line nor a bare address the log reader knows: say what is wrong with the
      // text as an address.
      MLASIM_ASSIGN_OR_RETURN(const uint64_t address, sim::ParseAddressText(address_, "--address"));
      fault = sim::FaultReport{address, false, "address", "", {}, {}};
    }
    return fault;
  }

  // The page the address names: --page-bytes, else (ROCm prints the faulting page, not the byte)
  // the layout's page_bytes (4096) for a page-aligned ROCm address, else 0 (exact).
  int64_t PageBytes(const nlohmann::json& layout, const sim::FaultReport& fault) const {
    if (page_opt_->count() > 0) return page_bytes_;
    const int64_t layout_page =
        layout.contains("page_bytes") && layout["page_bytes"].is_number_integer()
            ? layout["page_bytes"].get<int64_t>()
            : 4096;
    return fault.source == "rocm" && layout_page > 0 &&
                   fault.address % static_cast<uint64_t>(layout_page) == 0
               ? layout_page
               : 0;
  }

  static nlohmann::json AttributionJson(const nlohmann::json& layout, const sim::FaultReport& fault,
                                        const sim::Attribution& at) {
    nlohmann::json j = {{"address", fmt::format("0x{:x}", fault.address)},
                        {"source", fault.source},
                        {"reason", fault.reason},
                        {"buffer", at.buffer},
                        {"inside", at.inside},
                        {"offset", at.offset},
                        {"bytes_past_end", at.bytes_past_end},
                        {"row", at.row},
                        {"head", at.head},
                        {"column", at.column},
                        {"buffer_rows", at.rows},
                        {"mapped", at.mapped},
                        {"next_buffer", at.next_buffer},
                        {"bytes_before_next", at.bytes_before_next},
                        {"hsa_status", fault.hsa_status},
                        {"before_start", at.before_start},
                        {"page_bytes", at.page_bytes},
                        {"first_row", at.first_row},
                        {"last_row", at.last_row},
                        {"alternative", at.alternative},
                        {"accesses", AccessesJson(at)},
                        {"text", at.text}};
    if (!fault.other_addresses.empty()) {
      nlohmann::json others = nlohmann::json::array();
      for (uint64_t a : fault.other_addresses) others.push_back(fmt::format("0x{:x}", a));
      j["other_addresses"] = others;
    }
    if (layout.contains("call_name")) j["call"] = layout["call_name"];
    if (layout.contains("step")) j["step"] = layout["step"];
    return j;
  }

  // "the log names 2 more fault addresses, not explained here: 0x..., 0x... (explain each with
  // --address)": the first one is explained, the others are said.
  static std::string OtherAddressesText(const sim::FaultReport& fault) {
    std::string list;
    for (uint64_t a : fault.other_addresses)
      list += (list.empty() ? "" : ", ") + fmt::format("0x{:x}", a);
    const size_t n = fault.other_addresses.size();
    return "the log names " + std::to_string(n) + " more fault address" + (n == 1 ? "" : "es") +
           (n == sim::kMaxOtherFaultAddresses ? " (or more)" : "") +
           ", not explained here: " + list + " (explain each with --address)";
  }

  static std::string AttributionText(const nlohmann::json& layout, const sim::FaultReport& fault,
                                     const sim::Attribution& at) {
    std::ostringstream o;
    o << at.text << '\n';
    if (!at.alternative.empty()) o << "(" << at.alternative << ")\n";
    if (layout.contains("step"))
      o << "(in the layout of call " << layout.value("step", std::string("?")) << " / "
        << layout.value("call_name", std::string("?")) << ")\n";
    if (!fault.reason.empty()) o << "reported reason: " << fault.reason << '\n';
    if (!fault.other_addresses.empty()) o << OtherAddressesText(fault) << '\n';
    return o.str();
  }

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
