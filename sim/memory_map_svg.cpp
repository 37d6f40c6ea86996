#include "sim/memory_map_svg.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "ref/status.h"
#include "sim/html.h"

namespace mlasim::sim {
namespace {

using html::Num;

constexpr double kX0 = 12;
constexpr double kBarY = 84, kBarH = 40;
constexpr double kCharW = 6.6;
constexpr double kTitleW = 8.4;  // 13 px bold
constexpr double kMonoW = 5.8;   // 9.5 px DejaVu Sans Mono

std::string Hex(uint64_t x) {
  return fmt::format("0x{:x}", x);
}

struct Region {
  uint64_t begin = 0, end = 0;
  enum Kind { kBuffer, kSlack, kUnmapped } kind = kSlack;
  std::string name;  // buffer name
  double x = 0, w = 0;
};

const Allocation* Holding(const AddressSpace& as, uint64_t a) {
  for (const Allocation& x : as.allocations())
    if (x.bytes > 0 && x.base <= a && a < x.base + static_cast<uint64_t>(x.bytes)) return &x;
  return nullptr;
}

// The region that starts at `at`: the buffer holding it, mapped slack up to the next buffer or
// the mapping's end, or an unmapped gap up to the next mapping (`far` bounds a gap with none).
Region RegionAt(const AddressSpace& as, uint64_t at, uint64_t far) {
  Region r;
  r.begin = at;
  if (const Allocation* a = Holding(as, at)) {
    r.kind = Region::kBuffer;
    r.name = a->name;
    r.end = a->base + static_cast<uint64_t>(a->bytes);
    return r;
  }
  uint64_t map_end = 0, next_map = UINT64_MAX, next_base = UINT64_MAX;
  for (const Allocation& x : as.allocations()) {
    if (x.mapped_begin <= at && at < x.mapped_end) map_end = std::max(map_end, x.mapped_end);
    if (x.mapped_begin > at) next_map = std::min(next_map, x.mapped_begin);
    if (x.bytes > 0 && x.base > at) next_base = std::min(next_base, x.base);
  }
  if (map_end > at) {
    r.kind = Region::kSlack;
    r.end = std::min(map_end, next_base);
  } else {
    r.kind = Region::kUnmapped;
    r.end = next_map != UINT64_MAX ? next_map : std::max(far, at + as.spec().page_bytes);
  }
  return r;
}

// Regions from `from` until one past the region holding the last bad byte (b1 - 1).
std::vector<Region> Regions(const AddressSpace& as, uint64_t from, uint64_t b1, bool* cut) {
  std::vector<Region> out;
  bool past = false;
  *cut = false;
  for (uint64_t at = from; static_cast<int32_t>(out.size()) < kMaxMapRegions;) {
    Region r = RegionAt(as, at, b1);
    if (r.end <= at) break;  // cannot happen with a consistent address space; never loop forever
    out.push_back(r);
    at = r.end;
    if (past) return out;
    past = at >= b1;
  }
  *cut = !past;
  return out;
}

double RegionWidth(uint64_t bytes) {
  const double lg = std::log2(std::max(1.0, static_cast<double>(bytes)));
  return std::clamp(30 + 9 * lg, 110.0, 250.0);
}

// x of address `a` (clamped to the drawn regions), linear inside each region.
double XOf(const std::vector<Region>& rs, uint64_t a) {
  if (rs.empty()) return kX0;
  if (a <= rs.front().begin) return rs.front().x;
  for (const Region& r : rs)
    if (a < r.end)
      return r.x + r.w * static_cast<double>(a - r.begin) / static_cast<double>(r.end - r.begin);
  return rs.back().x + rs.back().w;
}

std::string Fit(const std::string& s, double width, double char_w) {
  const size_t n = static_cast<size_t>(std::max(1.0, (width - 6) / char_w));
  if (s.size() <= n) return s;
  return s.substr(0, n > 1 ? n - 1 : 0) + "\xE2\x80\xA6";  // U+2026
}

std::string DrawRegion(const Region& r, const std::string& culprit, bool exact) {
  const uint64_t bytes = r.end - r.begin;
  std::string name, fill, cls;
  switch (r.kind) {
    case Region::kBuffer:
      name = r.name;
      fill = r.name == culprit ? "#a0cbe8" : "#cfe8c8";
      cls = "region buffer";
      break;
    case Region::kSlack:
      name = "slack (mapped, unused)";
      fill = "#ffffff";
      cls = "region slack";
      break;
    case Region::kUnmapped:
      name = exact ? "unmapped (guard)" : "unmapped gap";
      fill = "url(#mlasim-hatch-grey)";
      cls = "region unmapped";
      break;
  }
  const std::string tip =
      fmt::format("{}: {}..{} ({} bytes)", name, Hex(r.begin), Hex(r.end - 1), bytes);
  std::string s = html::Rect(
      r.x, kBarY, r.w, kBarH,
      fmt::format("class=\"{}\" fill=\"{}\" stroke=\"#555\" stroke-width=\"1\"", cls, fill), tip);
  s += html::Text(r.x + 3, kBarY - 8, Fit(name, r.w, kCharW), "start",
                  r.name == culprit && r.kind == Region::kBuffer ? "class=\"title\"" : "");
  s += html::Text(r.x + 3, kBarY + kBarH + 14,
                  Fit(html::Bytes(static_cast<int64_t>(bytes)), r.w, kCharW));
  s += html::Text(r.x + 3, kBarY + kBarH + 27, Fit(Hex(r.begin), r.w, kMonoW), "start",
                  "class=\"small mono\"");
  return s;
}

std::string Headline(const Violation& v) {
  return fmt::format("call {} {} / {}: {} {} rows {}..{} of {} ({} rows, {} bytes past the end)",
                     v.call_index, v.step, v.call, v.access == Access::kWrite ? "writes" : "reads",
                     v.buffer, v.first_row, v.last_row, v.rows, v.rows_past_end, v.bytes_past_end);
}

std::string HardwareConsequence(const Violation& v) {
  if (v.consequence == Consequence::kFault)
    return fmt::format("on hardware: fault at {} (the first bad byte that is not mapped)",
                       Hex(v.first_bad_address));
  if (v.consequence == Consequence::kCorrupts)
    return "on hardware: the write lands in " + v.consequence_of + " and corrupts it";
  if (v.consequence == Consequence::kReads)
    return "on hardware: the read returns bytes of " + v.consequence_of;
  if (v.consequence == Consequence::kUnobserved)
    return "on hardware: unobserved (the bytes land in slack)";
  return "on hardware: " + ConsequenceText(v);
}

SvgPicture Message(const Violation& v, const std::string& why) {
  SvgPicture p;
  p.content = html::Text(8, 18, Headline(v), "start", "class=\"title\"") +
              html::Text(8, 36, why, "start", "class=\"note\"");
  p.width = std::max(Headline(v).size() * kTitleW, why.size() * kCharW) + 24;
  p.height = 46;
  return p;
}

}  // namespace

AddressSpace CallAddressSpace(const Scenario& s, const Trace& trace, int32_t call) {
  MLASIM_ASSERT(call >= 0 && call < static_cast<int32_t>(trace.calls.size()), "call index");
  AddressSpace as(s.allocator);
  AllocatePersistent(trace, as);
  // Only decode calls allocate (CallExecutor::AllocateTensors): a reduce, an index fill or a
  // plan call sees the transients of the latest decode call before it, if any.
  int32_t d = call;
  while (d >= 0 && trace.calls[d].kind != CallKind::kDecode) --d;
  if (d < 0) return as;
  as.BeginCall();
  for (const ExtraAllocation& x : s.allocator.live_before_call) {
    TensorShape sh;
    sh.rows = x.bytes;
    sh.row_bytes = 1;
    sh.dtype = "bytes";
    as.AllocateTransient(x.name, sh);
  }
  for (const TensorArg& a : trace.calls[d].args) {
    if (!a.transient) continue;
    TensorShape sh;
    sh.rows = a.alloc_bytes >= 0 ? a.alloc_bytes : a.rows;
    sh.row_bytes = a.alloc_bytes >= 0 ? 1 : a.row_bytes;
    sh.heads = a.heads;
    sh.cols = a.cols;
    sh.elem_bytes = a.elem_bytes;
    sh.dtype = a.dtype;
    as.AllocateTransient(a.buffer, sh);
  }
  return as;
}

SvgPicture MemoryMap(const AddressSpace& as, const Violation& v) {
  const Allocation* a = as.Find(v.buffer);
  if (!a) return Message(v, "the address-space model holds no buffer named " + v.buffer);
  if (v.first_row < 0 || v.last_row < v.first_row || v.row_bytes <= 0)
    return Message(v, "no bad rows to draw");
  const uint64_t b0 = a->base + static_cast<uint64_t>(v.first_row * v.row_bytes);
  const uint64_t b1 = a->base + static_cast<uint64_t>((v.last_row + 1) * v.row_bytes);
  bool cut = false;
  std::vector<Region> rs = Regions(as, a->base, b1, &cut);
  double x = kX0;
  for (Region& r : rs) {
    r.x = x;
    r.w = RegionWidth(r.end - r.begin);
    x += r.w;
  }
  const bool exact = as.spec().model == AllocatorModel::kExact;
  std::string s = html::Text(8, 18, Headline(v), "start", "class=\"title\"");
  s += html::Text(8, 35, HardwareConsequence(v), "start",
                  v.consequence == Consequence::kUnobserved ? "class=\"note\"" : "class=\"bad\"");
  for (const Region& r : rs) s += DrawRegion(r, v.buffer, exact);
  const double ox0 = XOf(rs, b0), ox1 = std::max(XOf(rs, b1), ox0 + 2);
  s += html::Rect(
      ox0, kBarY + kBarH * 0.25, ox1 - ox0, kBarH * 0.5,
      "class=\"overrun\" fill=\"url(#mlasim-hatch-red)\" stroke=\"#d62728\" stroke-width=\"1.5\"",
      fmt::format("bad bytes {}..{}", Hex(b0), Hex(b1 - 1)));
  const double by = kBarY + kBarH + 40;
  s += html::Line(ox0, by, ox1, by, "stroke=\"#d62728\" stroke-width=\"2\"");
  s += html::Line(ox0, by - 5, ox0, by + 5, "stroke=\"#d62728\" stroke-width=\"2\"");
  s += html::Line(ox1, by - 5, ox1, by + 5, "stroke=\"#d62728\" stroke-width=\"2\"");
  const int64_t off0 = static_cast<int64_t>(b0 - (a->base + static_cast<uint64_t>(a->bytes)));
  const std::string what =
      fmt::format("{} rows {}..{}: bytes {}..{} past the end of {}", v.buffer, v.first_row,
                  v.last_row, off0, off0 + static_cast<int64_t>(b1 - b0) - 1, v.buffer);
  s += html::Text(ox0, by + 16, what, "start", "class=\"bad\"");
  if (v.consequence == Consequence::kFault && v.first_bad_address >= b0 &&
      v.first_bad_address < b1) {
    const double fx = XOf(rs, v.first_bad_address);
    s += html::Line(fx, kBarY - 22, fx, kBarY + kBarH + 4,
                    "class=\"fault\" stroke=\"#d62728\" stroke-width=\"2\"");
    s += html::Text(fx + 3, kBarY - 24, "fault " + Hex(v.first_bad_address), "start",
                    "class=\"bad\"");
  }
  double bottom = by + 24;
  if (cut) {
    s += html::Text(8, bottom + 12,
                    fmt::format("the bad bytes reach past the {} regions drawn", kMaxMapRegions),
                    "start", "class=\"bad\"");
    bottom += 18;
  }
  SvgPicture p;
  p.content = std::move(s);
  p.width = std::max({x + 12, Headline(v).size() * kTitleW + 24, ox0 + what.size() * kCharW + 24,
                      HardwareConsequence(v).size() * kCharW + 24});
  p.height = bottom + 4;
  return p;
}

std::string MemoryMapInline(const AddressSpace& as, const Violation& v) {
  const SvgPicture p = MemoryMap(as, v);
  return html::SvgOpen(p.width, p.height, Headline(v), "memory-map") + p.content + "</svg>\n";
}

}  // namespace mlasim::sim
