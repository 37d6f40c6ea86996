// File: sim/html.h
//
// Building blocks of mlasim's self-contained HTML pictures (docs/pictures.md): escaping, the page
// shell (one inline <style>, shared SVG patterns, no script, no external asset), and small SVG
// element writers. Every writer is a pure function: the same arguments give the same bytes.
// Coordinates are written with at most one decimal, so output never depends on float printing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mlasim::sim::html {

// `s` with & < > " ' replaced by entities: safe as element text and as a quoted attribute value.
// Bytes >= 0x80 pass through (the page is UTF-8); other control bytes but \t \n become U+FFFD.
std::string Escape(std::string_view s);

// A coordinate or length in SVG user units (pixels): "12", "12.5", "-3.2" (one decimal).
std::string Num(double x);

// The whole page: <!DOCTYPE html>, UTF-8, the title (escaped), the stylesheet, the shared SVG
// definitions (PatternDefs) and `body` (already HTML).
std::string Page(std::string_view title, std::string_view body);

// <defs> with the patterns every picture references by id: "mlasim-hatch-zero" (zero-KV work
// items), "mlasim-hatch-red" (out-of-bounds bytes), "mlasim-hatch-grey" (unmapped memory).
// Page() puts them into the page once; a standalone SVG file includes them itself.
std::string PatternDefs();

// Standalone SVG document (for `plan --svg`): XML declaration, the SVG namespace, the patterns,
// a white background and the font, around `content` (SVG elements), of the given size in pixels.
std::string SvgDocument(double width, double height, std::string_view content);

// <svg> start tag of an inline picture of the given size (role="img" and an escaped aria-label).
std::string SvgOpen(double width, double height, std::string_view label, std::string_view cls);

// <rect>: `attrs` are extra attributes written as given (e.g. `class="work"`), `tooltip` becomes
// an escaped <title> child (hover text) when not empty.
std::string Rect(double x, double y, double w, double h, std::string_view attrs,
                 std::string_view tooltip = {});
// <text> with escaped content; anchor is "start", "middle" or "end".
std::string Text(double x, double y, std::string_view text, std::string_view anchor = "start",
                 std::string_view attrs = {});
// <line>.
std::string Line(double x1, double y1, double x2, double y2, std::string_view attrs);

// "1.5 KiB" / "2 MiB" / "512 B" for byte counts (exact below 1 KiB, one decimal above).
std::string Bytes(int64_t bytes);

// One fill colour of a cycling 12-colour palette (colour-blind friendly hues), "#rrggbb".
const char* PaletteColour(int64_t i);

}  // namespace mlasim::sim::html
