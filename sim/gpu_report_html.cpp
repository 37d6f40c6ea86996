// The GPU part of the replay page (sim/report_html.h, GpuSectionHtml): renders the "gpu" object
// `mlasim replay --gpu --json` prints (tools/mlasim/cmd_replay.cpp, GpuJson).
#include <algorithm>

#include <fmt/format.h>

#include "sim/html.h"
#include "sim/report_html.h"

namespace mlasim::sim {
namespace {

using html::Escape;
using nlohmann::json;

constexpr double kLabelW = 250, kAxisW = 600, kTrackH = 22;
constexpr double kCharW = 6.6;

const json& Get(const json& j, const char* key) {
  static const json kNull;
  if (!j.is_object()) return kNull;
  const auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}
std::string Str(const json& j, const char* key) {
  const json& v = Get(j, key);
  return v.is_string() ? v.get<std::string>() : v.is_null() ? "" : v.dump();
}
int64_t Int(const json& j, const char* key, int64_t def = -1) {
  const json& v = Get(j, key);
  return v.is_number_integer() ? v.get<int64_t>() : def;
}
double Real(const json& j, const char* key) {
  const json& v = Get(j, key);
  return v.is_number() ? v.get<double>() : 0;
}
bool Bool(const json& j, const char* key, bool def = false) {
  const json& v = Get(j, key);
  return v.is_boolean() ? v.get<bool>() : def;
}

struct Range {
  int64_t first = -1, last = -1;
  bool any() const { return first >= 0 && last >= first; }
  std::string str() const { return any() ? fmt::format("{}..{}", first, last) : "none"; }
};
Range RangeOf(const json& j) {
  return {Int(j, "first"), Int(j, "last")};
}

bool Compared(const json& call) {
  return Bool(call, "run") && Get(call, "not_modelled").is_null() && Get(call, "error").is_null();
}

// One track: the buffer's rows, the simulator's predicted rows past its end (dashed outline)
// and the rows the GPU touched (filled).
std::string Track(double y, const std::string& label, int64_t rows, int64_t max_row, Range sim,
                  Range gpu, bool agree) {
  auto X = [&](int64_t r) {
    return kLabelW +
           kAxisW * static_cast<double>(r) / static_cast<double>(std::max<int64_t>(max_row, 1));
  };
  std::string s = html::Text(kLabelW - 8, y + 11, label, "end");
  s += html::Rect(X(0), y + 4, X(rows) - X(0), 10, "class=\"buffer\" fill=\"#a0cbe8\"",
                  fmt::format("{} rows", rows));
  if (sim.any())
    s += html::Rect(X(sim.first) - 1, y, std::max(3.0, X(sim.last + 1) - X(sim.first)) + 2, 18,
                    "class=\"predicted\" fill=\"none\" stroke=\"#333\" stroke-dasharray=\"3,2\"",
                    "simulator: rows " + sim.str());
  if (gpu.any())
    s += html::Rect(X(gpu.first), y + 6, std::max(3.0, X(gpu.last + 1) - X(gpu.first)), 6,
                    "class=\"observed\" fill=\"#d62728\"", "GPU: rows " + gpu.str());
  s += html::Text(
      kLabelW + kAxisW + 12, y + 11,
      fmt::format("gpu {}, simulator {}: {}", gpu.str(), sim.str(), agree ? "agree" : "DISAGREE"),
      "start", agree ? "" : "class=\"bad\"");
  return s;
}

std::string RowsSvg(const json& calls) {
  std::string body;
  double y = 40;
  for (const json& c : calls) {
    if (!Compared(c)) continue;
    const json& q = Get(c, "q_read_past_end");
    const json& o = Get(c, "o_written_past_end");
    const int64_t rows = Int(c, "q_rows", 0);
    const Range qs = RangeOf(Get(q, "simulator")), qg = RangeOf(Get(q, "gpu"));
    const Range os = RangeOf(Get(o, "simulator")), og = RangeOf(Get(o, "gpu"));
    int64_t max_row = std::max(rows, Int(c, "plan_rows", 0));
    for (const Range& r : {qs, qg, os, og}) max_row = std::max(max_row, r.last + 1);
    body += html::Text(
        8, y + 2, fmt::format("call {} {} {}", Int(c, "index"), Str(c, "step"), Str(c, "call")),
        "start", "class=\"title\"");
    y += 8;
    body += Track(y, fmt::format("q ({} rows): rows read", rows), rows, max_row, qs, qg,
                  Bool(q, "agree", true));
    body += Track(y + kTrackH, fmt::format("o ({} rows): rows written", rows), rows, max_row, os,
                  og, Bool(o, "agree", true));
    y += 2 * kTrackH + 22;
  }
  if (body.empty()) return "";
  std::string head = html::Text(8, 16,
                                "Rows past the end of q and o: the GPU (red) against the simulator "
                                "(dashed box); blue: the buffer as allocated",
                                "start", "class=\"note\"");
  const double w = kLabelW + kAxisW + 12 + 60 * kCharW;
  return html::SvgOpen(w, y, "GPU rows against simulator", "gpu-rows") + head + body + "</svg>\n";
}

std::string GuardText(const json& c) {
  std::string s;
  for (const json& g : Get(c, "guard")) {
    const Range pred = RangeOf(Get(g, "simulator"));
    s += fmt::format("{}{}: {} (simulator {}){}", s.empty() ? "" : "; ", Str(g, "buffer"),
                     Bool(g, "child_failed") ? "child failed: " + Str(g, "detail")
                     : Bool(g, "faulted")    ? "faulted"
                                             : "ran clean",
                     pred.str(), Bool(g, "agree") ? "" : " DISAGREE");
  }
  return s;
}

std::string NumericsText(const json& c) {
  if (!Bool(c, "run")) return "refused by the engine's guard: not run";
  if (!Get(c, "not_modelled").is_null()) return "not run: " + Str(c, "not_modelled");
  if (!Get(c, "error").is_null()) return Str(c, "error");
  const json& n = Get(c, "numerics");
  if (Bool(n, "undefined")) return "not compared: outputs undefined (poison with unknown rows)";
  const json& o = Get(n, "o");
  return fmt::format("{} rows: o max_abs {:.3g} (atol {:.3g}), lse max_abs {:.3g}: {}",
                     Int(n, "rows_compared", 0), Real(o, "max_abs"), Real(o, "atol"),
                     Real(Get(n, "lse"), "max_abs"),
                     Bool(n, "passed") ? "within tolerance" : "OUTSIDE TOLERANCE");
}

std::string CallsTable(const json& calls) {
  std::string s =
      "<table class=\"gpu-calls\">\n<tr><th>call</th><th>step / name</th><th>kernel</th>"
      "<th>q / plan rows</th><th>numerics (vs CPU plan-driven)</th><th>q read past end "
      "(gpu / sim)</th><th>o written past end (gpu / sim)</th><th>guard runs</th>"
      "<th>verdict</th></tr>\n";
  for (const json& c : calls) {
    const bool agree = Bool(c, "agree");
    const json& q = Get(c, "q_read_past_end");
    const json& o = Get(c, "o_written_past_end");
    auto td = [](const std::string& t) { return "<td>" + Escape(t) + "</td>"; };
    s += fmt::format("<tr class=\"{}\">", agree ? "ok" : "bad");
    s += td(fmt::format("{}", Int(c, "index"))) + td(Str(c, "step") + " / " + Str(c, "call")) +
         td(Str(c, "kernel")) +
         td(Compared(c) ? fmt::format("{} / {}", Int(c, "q_rows"), Int(c, "plan_rows")) : "") +
         td(NumericsText(c)) +
         td(Compared(c) ? RangeOf(Get(q, "gpu")).str() + " / " + RangeOf(Get(q, "simulator")).str()
                        : "") +
         td(Compared(c) ? RangeOf(Get(o, "gpu")).str() + " / " + RangeOf(Get(o, "simulator")).str()
                        : "") +
         td(GuardText(c));
    s += fmt::format("<td class=\"verdict\">{}</td></tr>\n", agree ? "agrees" : "DISAGREES");
  }
  return s + "</table>\n";
}

std::string PlansTable(const json& plans) {
  std::string s =
      "<table class=\"gpu-plans\">\n<tr><th>plan</th><th>GPU planner</th>"
      "<th>against the reference planner</th></tr>\n";
  for (const json& p : plans) {
    const bool compared = Bool(p, "compared");
    const int64_t bad = Int(p, "mismatches", 0);
    std::string result =
        !compared  ? Str(p, "note")
        : bad == 0 ? "bit-identical"
                   : fmt::format("{} mismatches, first {}", bad, Str(p, "first_mismatch"));
    s += fmt::format("<tr class=\"{}\"><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                     compared && bad > 0 ? "bad" : "ok", Escape(Str(p, "plan")),
                     Escape(Str(p, "kernel")), Escape(result));
  }
  return s + "</table>\n";
}

}  // namespace

std::string GpuSectionHtml(const json& gpu) {
  if (!gpu.is_object()) return "<p class=\"note\">The GPU report is not a JSON object.</p>\n";
  const bool agrees = Str(gpu, "verdict") == "agrees";
  std::string s =
      "<p class=\"meta\">" +
      Escape(fmt::format("device {} · mode {} · {} decode call(s) run", Str(gpu, "device"),
                         Str(gpu, "mode"), Int(gpu, "calls_run", 0))) +
      "</p>\n";
  s +=
      fmt::format("<p class=\"{}\">gpu verdict: {}</p>\n", agrees ? "verdict-clean" : "verdict-bad",
                  agrees ? "agrees with the simulator" : "DISAGREES with the simulator");
  if (!Get(gpu, "device_error").is_null())
    s += "<p class=\"verdict-bad\">device error: " + Escape(Str(gpu, "device_error")) + "</p>\n";
  const json& calls = Get(gpu, "calls");
  const json& plans = Get(gpu, "plans");
  if (plans.is_array() && !plans.empty()) s += "<h3>Plans</h3>\n" + PlansTable(plans);
  if (calls.is_array() && !calls.empty()) {
    s += "<h3>Decode calls</h3>\n" + RowsSvg(calls) + CallsTable(calls);
  }
  return s;
}

}  // namespace mlasim::sim
