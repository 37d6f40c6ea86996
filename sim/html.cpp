#include "sim/html.h"

#include <cmath>

#include <fmt/format.h>

namespace mlasim::sim::html {
namespace {

constexpr const char* kStyle = R"(
body { font-family: "DejaVu Sans", Verdana, sans-serif; font-size: 14px; color: #222;
       background: #fff; margin: 16px 24px; max-width: 1400px; }
h1 { font-size: 20px; margin: 0 0 6px 0; }
h2 { font-size: 17px; margin: 22px 0 6px 0; border-bottom: 1px solid #ccc; }
h3 { font-size: 15px; margin: 14px 0 4px 0; }
p.note, p.meta { margin: 2px 0 6px 0; color: #444; }
code, td.mono, span.mono { font-family: "DejaVu Sans Mono", monospace; font-size: 12.5px; }
table { border-collapse: collapse; margin: 4px 0 10px 0; }
th, td { border: 1px solid #ccc; padding: 2px 7px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
td.num { text-align: right; }
table.violations td { max-width: 24em; overflow-wrap: break-word; }
tr.bad td { background: #fde2e2; }
tr.ok td.verdict { color: #1a7f37; }
tr.bad td.verdict { color: #b00020; font-weight: bold; }
.verdict-clean { color: #1a7f37; font-weight: bold; }
.verdict-bad { color: #b00020; font-weight: bold; }
svg { display: block; margin: 6px 0 12px 0; }
svg text { font-family: "DejaVu Sans", Verdana, sans-serif; font-size: 11px; fill: #222; }
svg text.mono { font-family: "DejaVu Sans Mono", monospace; }
svg text.small { font-size: 9.5px; fill: #555; }
svg text.inbar { font-size: 9.5px; fill: #111; }
svg text.bad { fill: #b00020; font-weight: bold; }
svg text.title { font-size: 13px; font-weight: bold; }
)";

}  // namespace

std::string Escape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + s.size() / 8);
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default:
        if (c < 0x20 && c != '\t' && c != '\n')
          out += "\xEF\xBF\xBD";  // U+FFFD: control bytes are not allowed in HTML text
        else
          out += ch;
    }
  }
  return out;
}

std::string Num(double x) {
  if (!std::isfinite(x)) x = 0;  // never write NaN into an attribute
  const double r = std::round(x * 10) / 10;
  if (r == std::floor(r)) return fmt::format("{}", static_cast<int64_t>(r));
  return fmt::format("{:.1f}", r);
}

std::string PatternDefs() {
  return "<defs>"
         "<pattern id=\"mlasim-hatch-zero\" width=\"4\" height=\"4\" "
         "patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
         "<rect width=\"4\" height=\"4\" fill=\"#ffffff\"/>"
         "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"4\" stroke=\"#333\" stroke-width=\"1.6\"/>"
         "</pattern>"
         "<pattern id=\"mlasim-hatch-red\" width=\"6\" height=\"6\" "
         "patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
         "<rect width=\"6\" height=\"6\" fill=\"#f8c4c4\"/>"
         "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#d62728\" stroke-width=\"3\"/>"
         "</pattern>"
         "<pattern id=\"mlasim-hatch-grey\" width=\"8\" height=\"8\" "
         "patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
         "<rect width=\"8\" height=\"8\" fill=\"#eeeeee\"/>"
         "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"8\" stroke=\"#bbbbbb\" stroke-width=\"2\"/>"
         "</pattern>"
         "</defs>";
}

std::string Page(std::string_view title, std::string_view body) {
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  out += "<title>" + Escape(title) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n";
  out += "<svg width=\"0\" height=\"0\" style=\"position:absolute\" aria-hidden=\"true\">" +
         PatternDefs() + "</svg>\n";
  out += body;
  out += "\n</body>\n</html>\n";
  return out;
}

std::string SvgDocument(double width, double height, std::string_view content) {
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" font-family=\"DejaVu Sans, Verdana, sans-serif\" "
      "font-size=\"11\">\n",
      Num(width), Num(height));
  out +=
      "<style>text.mono{font-family:'DejaVu Sans Mono',monospace}"
      "text.small{font-size:9.5px;fill:#555}text.inbar{font-size:9.5px;fill:#111}text.bad{fill:#"
      "b00020;font-weight:bold}"
      "text.title{font-size:13px;font-weight:bold}</style>\n";
  out += PatternDefs() + "\n";
  out += Rect(0, 0, width, height, "fill=\"#ffffff\"") + "\n";
  out += content;
  out += "</svg>\n";
  return out;
}

std::string SvgOpen(double width, double height, std::string_view label, std::string_view cls) {
  return fmt::format(
      "<svg width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" role=\"img\" aria-label=\"{2}\" "
      "class=\"{3}\">\n",
      Num(width), Num(height), Escape(label), Escape(cls));
}

std::string Rect(double x, double y, double w, double h, std::string_view attrs,
                 std::string_view tooltip) {
  std::string out = fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"", Num(x),
                                Num(y), Num(std::max(w, 0.0)), Num(std::max(h, 0.0)));
  if (!attrs.empty()) out += fmt::format(" {}", attrs);
  if (tooltip.empty()) return out + "/>";
  return out + "><title>" + Escape(tooltip) + "</title></rect>";
}

std::string Text(double x, double y, std::string_view text, std::string_view anchor,
                 std::string_view attrs) {
  std::string out = fmt::format("<text x=\"{}\" y=\"{}\"", Num(x), Num(y));
  if (anchor != "start") out += fmt::format(" text-anchor=\"{}\"", anchor);
  if (!attrs.empty()) out += fmt::format(" {}", attrs);
  return out + ">" + Escape(text) + "</text>";
}

std::string Line(double x1, double y1, double x2, double y2, std::string_view attrs) {
  return fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" {}/>", Num(x1), Num(y1),
                     Num(x2), Num(y2), attrs);
}

std::string Bytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes < 0) return fmt::format("{} B", bytes);
  if (bytes < 1024) return fmt::format("{} B", bytes);
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = b / 1024;
  int u = 0;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  if (v == std::floor(v)) return fmt::format("{} {}", static_cast<int64_t>(v), units[u]);
  return fmt::format("{:.1f} {}", v, units[u]);
}

const char* PaletteColour(int64_t i) {
  // Tableau-like hues without red, which marks out-of-bounds accesses.
  static constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#76b7b2", "#59a14f",
                                             "#edc948", "#b07aa1", "#9c755f", "#a0cbe8",
                                             "#8cd17d", "#ffbe7d", "#d4a6c8", "#bab0ac"};
  const int64_t n = 12;
  return kPalette[((i % n) + n) % n];
}

}  // namespace mlasim::sim::html
