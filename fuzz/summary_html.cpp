#include "fuzz/summary_html.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "sim/html.h"

namespace mlasim::fuzz {
namespace {

namespace html = sim::html;
using html::Escape;

constexpr double kCharW = 6.6;  // 11 px DejaVu Sans
constexpr double kMonoW = 6.7;  // 11 px DejaVu Sans Mono
constexpr double kAxisW = 640;
constexpr size_t kMaxLabel = 60;  // signature characters shown before the dot rows

struct Dot {
  uint64_t index = 0;
  std::string signature;
  const CampaignFinding* f = nullptr;
};

std::vector<Dot> Dots(const CampaignSummary& s) {
  std::vector<Dot> out;
  for (const auto& [sig, f] : s.findings)
    if (f.seed_index) out.push_back({*f.seed_index, sig, &f});
  std::sort(out.begin(), out.end(), [](const Dot& a, const Dot& b) {
    return a.index != b.index ? a.index < b.index : a.signature < b.signature;
  });
  return out;
}

// The seed-index range the campaign covered: [0, X).
double IndexSpan(const CampaignOptions& o, const CampaignSummary& s, const std::vector<Dot>& d) {
  double x = static_cast<double>(s.next_index) * std::max(1, o.shards);
  for (const Dot& dot : d) x = std::max(x, static_cast<double>(dot.index) + 1);
  return std::max(x, 1.0);
}

// Tick values 0, step, 2 step, ... up to `max` (1-2-5 steps, about six of them).
std::vector<double> Ticks(double max) {
  const double raw = std::max(max / 6, 1.0);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double step = raw / mag < 2 ? 2 * mag : raw / mag < 5 ? 5 * mag : 10 * mag;
  std::vector<double> out;
  for (double v = 0; v <= max + 1e-9 && out.size() < 20; v += std::max(1.0, std::round(step)))
    out.push_back(v);
  return out;
}

std::string Label(const std::string& sig) {
  return sig.size() <= kMaxLabel ? sig : sig.substr(0, kMaxLabel - 1) + "\xE2\x80\xA6";
}

std::string Origin(const CampaignFinding& f) {
  std::string s = f.seed_index ? fmt::format("seed index {}", *f.seed_index) : "seed index unknown";
  s += fmt::format(", {} shrink step{}", f.shrink_steps, f.shrink_steps == 1 ? "" : "s");
  if (f.cut_short) s += ", cut short by the shrink step budget";
  return s + (f.earlier ? " (earlier)" : " (new)");
}

std::string FindingsTable(const CampaignSummary& s) {
  if (s.findings.empty()) return "<p class=\"note\">No findings.</p>\n";
  std::string t =
      "<table class=\"findings\">\n<tr><th>signature</th><th>seed index</th>"
      "<th>shrink steps</th><th>status</th><th>file</th><th>detail</th></tr>\n";
  for (const auto& [sig, f] : s.findings) {
    t += fmt::format(
        "<tr class=\"{}\"><td class=\"mono\">{}</td><td class=\"num\">{}</td><td "
        "class=\"num\">{}{}</td><td>{}</td><td class=\"mono\">{}</td><td>{}</td></tr>\n",
        f.earlier ? "ok" : "bad", Escape(sig),
        f.seed_index ? std::to_string(*f.seed_index) : "unknown", f.shrink_steps,
        f.cut_short ? " (cut short)" : "", f.earlier ? "earlier" : "new", Escape(f.file),
        Escape(f.detail));
  }
  return t + "</table>\n";
}

std::string Header(const CampaignOptions& o, const CampaignSummary& s, const std::string& seed) {
  std::string h = "<h1>mlasim fuzz: campaign summary</h1>\n<p class=\"meta\">";
  std::string profiles;
  for (size_t i = 0; i < o.profiles.size(); ++i) profiles += (i ? ", " : "") + o.profiles[i];
  const std::string seed_shown = seed.empty() || seed == std::to_string(o.seed)
                                     ? std::to_string(o.seed)
                                     : fmt::format("{} ({})", seed, o.seed);
  const bool first_failure = o.shrink == ShrinkPolicy::kFirstFailure;
  h += Escape(fmt::format("seed {} · shard {}/{} · profiles {}{}{}{} · {} job(s)", seed_shown,
                          o.shard, o.shards, profiles, o.small ? " · --small" : "",
                          o.ignore_known ? " · --ignore-known" : "",
                          first_failure ? " · --shrink first-failure" : "", o.jobs));
  h += "</p>\n<p class=\"meta\">";
  h += Escape(fmt::format(
      "budget: {} cases, {} · this run: {} cases in {:.1f} s ({:.0f} cases/s) · campaign: {} "
      "cases in {:.1f} s{}",
      o.max_cases >= 0 ? std::to_string(o.max_cases) : "no",
      std::isfinite(o.seconds) ? fmt::format("{} s", o.seconds) : "no time limit", s.cases,
      s.seconds, s.seconds > 0 ? static_cast<double>(s.cases) / s.seconds : 0.0, s.next_index,
      s.campaign_seconds,
      s.resumed_at >= 0 ? fmt::format(" (this run resumed at case {})", s.resumed_at) : ""));
  h += "</p>\n";
  const int64_t fresh = s.NewFindings();
  h += fmt::format("<p class=\"{}\">", fresh > 0 ? "verdict-bad" : "verdict-clean") +
       Escape(fmt::format(
           "distinct signatures {}{} · findings {}: {} new, {} earlier",
           first_failure ? s.shown.size() : s.signatures.size(),
           first_failure ? fmt::format(" ({} first-violation targets)", s.signatures.size()) : "",
           s.findings.size(), fresh, static_cast<int64_t>(s.findings.size()) - fresh)) +
       "</p>\n";
  if (s.cut_short)
    h += "<p class=\"verdict-bad\">" +
         Escape(fmt::format("--seconds ended the campaign after {} of its {} cases", s.next_index,
                            o.max_cases)) +
         "</p>\n";
  if (const std::string n = NotRunText(s.not_run, s.cases, "seed index"); !n.empty())
    h += "<p class=\"verdict-bad\">" + Escape(n) + "</p>\n";
  for (const std::string& n : s.notes) h += "<p class=\"note\">" + Escape(n) + "</p>\n";
  return h;
}

}  // namespace

std::string FindingsTimeSvg(const CampaignOptions& o, const CampaignSummary& s) {
  const std::vector<Dot> dots = Dots(s);
  if (dots.empty()) return "";
  size_t longest = 0;
  for (const Dot& d : dots) longest = std::max(longest, Label(d.signature).size());
  const double left = 16 + static_cast<double>(longest) * kMonoW, span = IndexSpan(o, s, dots);
  auto X = [&](double i) { return left + kAxisW * i / span; };
  const size_t rows = std::min(dots.size(), static_cast<size_t>(kMaxDrawnFindings));
  const double top = 44, cum_h = 90, rows_y = top + cum_h + 30, pitch = 15;
  std::string b = html::Text(8, 16,
                             "Findings over time: the seed index at which the campaign first "
                             "saw each signature (hollow: already in --out)",
                             "start", "class=\"note\"");
  // cumulative count: a step line over the seed index
  const double n = static_cast<double>(dots.size());
  std::string pts = fmt::format("{},{}", html::Num(X(0)), html::Num(top + cum_h));
  double count = 0;
  for (const Dot& d : dots) {
    const double x = X(static_cast<double>(d.index));
    pts += fmt::format(" {},{}", html::Num(x), html::Num(top + cum_h - cum_h * count / n));
    count += 1;
    pts += fmt::format(" {},{}", html::Num(x), html::Num(top + cum_h - cum_h * count / n));
  }
  pts += fmt::format(" {},{}", html::Num(X(span)), html::Num(top + cum_h - cum_h * count / n));
  b += html::Text(left - 8, top + 4, fmt::format("{} findings", dots.size()), "end",
                  "class=\"small\"");
  b += html::Text(left - 8, top + cum_h, "0", "end", "class=\"small\"");
  b += html::Rect(left, top, kAxisW, cum_h, "fill=\"#fafafa\" stroke=\"#ccc\"");
  b += "<polyline class=\"cumulative\" fill=\"none\" stroke=\"#4e79a7\" stroke-width=\"2\" "
       "points=\"" +
       pts + "\"/>\n";
  const double bottom = rows_y + static_cast<double>(rows) * pitch;
  for (double t : Ticks(span)) {
    b += html::Line(X(t), top, X(t), bottom, "stroke=\"#e6e6e6\"");
    b += html::Text(X(t), top + cum_h + 14, fmt::format("{}", static_cast<int64_t>(t)), "middle",
                    "class=\"small\"");
  }
  b += html::Text(left + kAxisW / 2, top + cum_h + 26, "seed index", "middle", "class=\"small\"");
  for (size_t i = 0; i < rows; ++i) {
    const Dot& d = dots[i];
    const double y = rows_y + static_cast<double>(i) * pitch + 8;
    b += html::Text(left - 8, y + 4, Label(d.signature), "end", "class=\"mono\"");
    b += html::Line(left, y, X(static_cast<double>(d.index)), y, "stroke=\"#eee\"");
    b += fmt::format(
        "<circle class=\"{}\" cx=\"{}\" cy=\"{}\" r=\"4.5\" fill=\"{}\" stroke=\"#b00020\" "
        "stroke-width=\"1.5\"><title>{}</title></circle>\n",
        d.f->earlier ? "finding earlier" : "finding", html::Num(X(static_cast<double>(d.index))),
        html::Num(y), d.f->earlier ? "#ffffff" : "#d62728",
        Escape(d.signature + ": " + Origin(*d.f)));
  }
  double h = bottom + 10;
  if (rows < dots.size()) {
    b += html::Text(8, h + 8,
                    fmt::format("{} more findings not drawn (see the table)", dots.size() - rows),
                    "start", "class=\"bad\"");
    h += 18;
  }
  return html::SvgOpen(left + kAxisW + 20, h, "findings over time", "findings-time") + b +
         "</svg>\n";
}

std::string CoverageSvg(const CampaignSummary& s) {
  if (s.coverage.empty()) return "";
  size_t longest = 0;
  for (const auto& [k, v] : s.coverage) longest = std::max(longest, k.size());
  longest = std::min<size_t>(longest, 40);
  const double left = 16 + static_cast<double>(longest) * kCharW, bar_w = 420, pitch = 16;
  std::string b;
  double y = 20;
  std::string group;
  int64_t groups = -1;  // colour of the group
  const double total = static_cast<double>(std::max<int64_t>(s.cases, 1));
  b += html::Text(8, 14, fmt::format("Cases of this run exercising each feature (of {})", s.cases),
                  "start", "class=\"note\"");
  for (const auto& [k, v] : s.coverage) {
    const std::string g = k.substr(0, k.find(':'));
    if (g != group) {
      group = g;
      ++groups;
      y += 6;
    }
    const std::string label = k.size() <= 40 ? k : k.substr(0, 39) + "\xE2\x80\xA6";
    const double w = bar_w * std::min(1.0, static_cast<double>(v) / total);
    b += html::Text(left - 8, y + 11, label, "end");
    b += html::Rect(left, y + 2, bar_w, 11, "fill=\"#f0f0f0\"");
    b += html::Rect(left, y + 2, w, 11,
                    fmt::format("class=\"cov\" fill=\"{}\"", html::PaletteColour(groups)),
                    fmt::format("{}: {} cases", k, v));
    b += html::Text(left + bar_w + 8, y + 11,
                    fmt::format("{} ({:.0f}%)", v, 100.0 * static_cast<double>(v) / total));
    y += pitch;
  }
  return html::SvgOpen(left + bar_w + 110, y + 10, "coverage", "coverage") + b + "</svg>\n";
}

std::string CampaignHtml(const CampaignOptions& o, const CampaignSummary& s,
                         const std::string& seed_text) {
  std::string body = "<section class=\"campaign\">\n" + Header(o, s, seed_text);
  body += "<h2>Findings over time</h2>\n";
  const std::string time = FindingsTimeSvg(o, s);
  body += time.empty() ? "<p class=\"note\">No finding with a known seed index.</p>\n" : time;
  body += "<h2>Findings</h2>\n" + FindingsTable(s);
  body += "<h2>Coverage</h2>\n";
  const std::string cov = CoverageSvg(s);
  body += cov.empty() ? "<p class=\"note\">No coverage counters (no case ran).</p>\n" : cov;
  return html::Page("mlasim fuzz: campaign summary", body + "</section>\n");
}

}  // namespace mlasim::fuzz
