#include "sim/plan_svg.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "ref/status.h"
#include "sim/html.h"

namespace mlasim::sim {
namespace {

using html::Num;
using ref::Cell;

constexpr double kLeft = 58;     // cluster labels
constexpr double kPlotW = 640;   // KV axis
constexpr double kZeroW = 6;     // a zero-KV (or undefined) item
constexpr double kLaneW = 7;     // one reduce lane
constexpr double kCharW = 6.6;   // average glyph width of 11 px DejaVu Sans (layout estimate)
constexpr double kTitleW = 8.4;  // 13 px bold
constexpr const char* kUnsplit = "#b9c7d6";
constexpr const char* kRed = "#d62728";
constexpr const char* kOrange = "#e07b00";  // items of findings other than out of bounds
constexpr int32_t kMaxLabels = 40;          // mark labels per picture

// One drawn item of a cluster row.
struct Item {
  int32_t work = 0;
  int32_t batch = 0, partial = -1, qs = 0, qe = 0, ks = 0, ke = 0, off = 0;
  bool defined = true, zero = false, padding = false;
  int32_t tile = -1;  // reduce tile merging this piece (-1: unsplit or not in any map)
  double x = 0, w = 0;
};

// A drawn row: a cluster with work, a run of clusters without any, or a run the picture leaves
// out (PlanPicture::only_clusters).
struct Row {
  int32_t c0 = 0, c1 = 0;  // clusters [c0, c1]
  bool empty = false, elided = false;
  std::vector<Item> items;
};

bool Shown(const PlanPicture& p, int32_t c) {
  if (p.only_clusters.empty()) return true;
  for (const auto& [a, b] : p.only_clusters)
    if (a <= c && c <= b) return true;
  return false;
}

int64_t Cells(const ref::Int32Buffer& b) {
  return b.size();
}

bool DefinedCell(const ref::Int32Buffer& b, int64_t i) {
  return i >= 0 && i < Cells(b) && b.cells[i] == Cell::kWritten;
}

// partial_qo_loc -> the reduce tile whose partial map lists it (written cells only).
std::map<int32_t, int32_t> TileOfPartial(const ref::Plan& p) {
  std::map<int32_t, int32_t> out;
  const ref::Int32Buffer& ri = p.reduce_indptr;
  const ref::Int32Buffer& pm = p.reduce_partial_map;
  for (int64_t t = 0; t + 1 < Cells(ri); ++t) {
    if (!DefinedCell(ri, t) || !DefinedCell(ri, t + 1)) continue;
    const int64_t b = std::max<int64_t>(ri.data[t], 0),
                  e = std::min<int64_t>(ri.data[t + 1], Cells(pm));
    for (int64_t i = b; i < e; ++i)
      if (DefinedCell(pm, i)) out.emplace(pm.data[i], static_cast<int32_t>(t));
  }
  return out;
}

// First q row of the padding requests, in the plan's (folded) q rows; INT64_MAX: none.
int64_t PaddingRow(const PlanPicture& p) {
  const ref::PlanRequest& r = *p.request;
  const int32_t batch = static_cast<int32_t>(r.qo_indptr.size()) - 1;
  if (p.real_requests < 0 || p.real_requests >= batch) return INT64_MAX;
  const int64_t fold = std::max(1, p.plan->derived.fold_ratio);
  const int64_t rows = r.uni_seqlen_qo > 0 ? int64_t{r.uni_seqlen_qo} * p.real_requests
                                           : r.qo_indptr[p.real_requests];
  return rows * fold;
}

Item ReadItem(const ref::Plan& p, int32_t w, const std::map<int32_t, int32_t>& tiles,
              int64_t padding_row) {
  Item it;
  it.work = w;
  const int32_t* f = &p.work_info.data[int64_t{w} * 8];
  for (int k = 0; k < 7; ++k)
    it.defined = it.defined && DefinedCell(p.work_info, int64_t{w} * 8 + k);
  it.batch = f[ref::kBatchIdx];
  it.partial = f[ref::kPartialQoLoc];
  it.qs = f[ref::kQoStart];
  it.qe = f[ref::kQoEnd];
  it.ks = f[ref::kKvStart];
  it.ke = f[ref::kKvEnd];
  it.off = f[ref::kKvOffset];
  it.zero = it.defined && it.ke <= it.ks;
  it.padding = it.defined && it.qs >= padding_row;
  if (it.defined && it.partial >= 0) {
    const auto t = tiles.find(it.partial);
    if (t != tiles.end()) it.tile = t->second;
  }
  return it;
}

// Rows of the picture, and the work items and rows left undrawn by the bounds.
struct Layout {
  std::vector<Row> rows;
  int32_t clusters = 0, busy_clusters = 0;
  int64_t undrawn_works = 0, undrawn_rows = 0;
  int64_t past_buffer = 0;  // num_works beyond the rows work_info holds (stores past its end)
  std::vector<std::pair<int32_t, int32_t>> empty_runs;
  double scale = 0;  // px per KV page
  int64_t max_pages = 0;
};

// Appends cluster c to the run of `kind` rows ending at c - 1, if there is one.
bool ExtendRun(std::vector<Row>& rows, int32_t c, bool empty, bool elided) {
  if ((!empty && !elided) || rows.empty() || rows.back().c1 != c - 1) return false;
  Row& r = rows.back();
  if (r.empty != empty || r.elided != elided || !r.items.empty()) return false;
  r.c1 = c;
  return true;
}

Layout BuildRows(const PlanPicture& pic) {
  const ref::Plan& p = *pic.plan;
  Layout L;
  const int64_t works = std::clamp<int64_t>(p.num_works(), 0, Cells(p.work_info) / 8);
  L.past_buffer = std::max<int64_t>(0, p.num_works() - works);
  L.clusters = static_cast<int32_t>(std::clamp<int64_t>(
      p.derived.num_clusters, 0, std::max<int64_t>(Cells(p.work_indptr) - 1, 0)));
  const auto tiles = TileOfPartial(p);
  const int64_t padding_row = PaddingRow(pic);
  int64_t drawn = 0;
  for (int32_t c = 0; c < L.clusters; ++c) {
    int64_t b = DefinedCell(p.work_indptr, c) ? p.work_indptr.data[c] : 0;
    int64_t e = DefinedCell(p.work_indptr, c + 1) ? p.work_indptr.data[c + 1] : 0;
    b = std::clamp<int64_t>(b, 0, works);
    e = std::clamp<int64_t>(e, b, works);
    if (b == e) {
      if (!L.empty_runs.empty() && L.empty_runs.back().second == c - 1)
        L.empty_runs.back().second = c;
      else
        L.empty_runs.push_back({c, c});
    } else {
      ++L.busy_clusters;
    }
    const bool shown = Shown(pic, c);
    if (ExtendRun(L.rows, c, shown && b == e, !shown)) continue;
    if (static_cast<int32_t>(L.rows.size()) >= kMaxDrawnRows) {
      ++L.undrawn_rows;
      L.undrawn_works += shown ? e - b : 0;
      continue;
    }
    Row r;
    r.c0 = r.c1 = c;
    r.elided = !shown;
    r.empty = shown && b == e;
    for (int64_t w = b; shown && w < e; ++w) {
      if (drawn >= kMaxDrawnWorks) {
        ++L.undrawn_works;
        continue;
      }
      r.items.push_back(ReadItem(p, static_cast<int32_t>(w), tiles, padding_row));
      ++drawn;
    }
    L.rows.push_back(std::move(r));
  }
  return L;
}

// KV scale so the busiest row fits kPlotW, then each item's x and width.
void PlaceItems(Layout& L) {
  double extra_max = 0;
  for (const Row& r : L.rows) {
    int64_t pages = 0;
    double extra = 0;
    for (const Item& it : r.items) {
      const bool fixed = !it.defined || it.zero;
      pages += fixed ? 0 : int64_t{it.ke} - it.ks;
      extra += fixed ? kZeroW : 1;
    }
    L.max_pages = std::max(L.max_pages, pages);
    extra_max = std::max(extra_max, extra);
  }
  L.scale =
      L.max_pages > 0 ? std::max(0.0, kPlotW - extra_max) / static_cast<double>(L.max_pages) : 0;
  for (Row& r : L.rows) {
    double x = 0;
    for (Item& it : r.items) {
      const bool fixed = !it.defined || it.zero;
      it.x = x;
      it.w = fixed ? kZeroW : std::max(1.0, static_cast<double>(int64_t{it.ke} - it.ks) * L.scale);
      x += it.w;
    }
  }
}

// Geometry of the rows.
struct Geometry {
  double top = 0, pitch = 18, bar = 14;
  int32_t label_every = 1;
  double lanes_x = 0, labels_x = 0, width = 0, height = 0;
  double RowY(size_t i) const { return top + static_cast<double>(i) * pitch; }
};

double RowPitch(size_t rows) {
  if (rows <= 40) return 18;
  if (rows <= 100) return 9;
  return std::max(4.0, std::min(9.0, std::floor(1400.0 / static_cast<double>(rows))));
}

// The drawing, in pieces (each a member so the geometry is shared).
class TimelineWriter {
 public:
  explicit TimelineWriter(const PlanPicture& p) : pic_(p), plan_(*p.plan) {}
  SvgPicture Write();

 private:
  std::string Header(double* y);
  std::string Legend(double* y);
  std::string Axis();
  std::string Rows();
  std::vector<bool> Labelled() const;
  std::string ItemRect(const Item& it, double y);
  std::string ReduceLanes(int32_t* lanes);
  struct MarkRun {
    int32_t w0 = 0, w1 = 0;                       // first and last work item
    int64_t items = 0;                            // marked items in it
    bool oob = false;                             // an out-of-bounds finding among them
    std::vector<std::string> labels;              // what the findings say
    std::vector<std::pair<size_t, double>> ends;  // (row, x where its marked items end)
  };
  std::vector<MarkRun> MarkRuns();
  std::string MarkRunText(const MarkRun& run, double y);
  std::string MarkLabels(double* bottom);

  const PlanPicture& pic_;
  const ref::Plan& plan_;
  Layout L_;
  Geometry g_;
  struct Marked {
    std::vector<std::string> labels;
    bool oob = false;  // any of its findings is out of bounds
  };
  std::map<int32_t, Marked> marks_;  // by work item
};

SvgPicture TimelineWriter::Write() {
  for (const PlanMark& m : pic_.marks) {
    Marked& k = marks_[m.work];
    if (std::find(k.labels.begin(), k.labels.end(), m.label) == k.labels.end())
      k.labels.push_back(m.label);
    k.oob = k.oob || m.out_of_bounds;
  }
  L_ = BuildRows(pic_);
  PlaceItems(L_);
  double y = 0;
  std::string head = Header(&y);
  head += Legend(&y);
  g_.top = y + 62;
  g_.pitch = RowPitch(L_.rows.size());
  g_.bar = g_.pitch >= 9 ? g_.pitch - 2 : g_.pitch - 1;
  g_.label_every = static_cast<int32_t>(std::ceil(13.0 / g_.pitch));
  g_.lanes_x = kLeft + kPlotW + 10;
  int32_t lanes = 0;
  std::string reduce = ReduceLanes(&lanes);
  g_.labels_x = g_.lanes_x + lanes * kLaneW + 14;
  double bottom = g_.RowY(L_.rows.size()) + 8;
  std::string labels = MarkLabels(&bottom);
  std::string body = head + Axis() + Rows() + reduce + labels;
  if (L_.undrawn_works > 0 || L_.undrawn_rows > 0) {
    body +=
        html::Text(kLeft, bottom + 12,
                   fmt::format("not drawn: {} more cluster row(s), {} more work item(s) (the "
                               "picture draws at most {} rows and {} items)",
                               L_.undrawn_rows, L_.undrawn_works, kMaxDrawnRows, kMaxDrawnWorks),
                   "start", "class=\"bad undrawn\"");
    bottom += 18;
  }
  SvgPicture out;
  out.content = std::move(body);
  out.width = std::max(g_.width, g_.labels_x + 10);
  out.height = bottom + 6;
  return out;
}

std::string TimelineWriter::Header(double* y) {
  const ref::PlanDerived& d = plan_.derived;
  std::string s = html::Text(8, 18, pic_.title, "start", "class=\"title\"");
  g_.width = std::max(g_.width, 16 + pic_.title.size() * kTitleW);
  *y = 18;
  std::vector<std::string> lines = pic_.notes;
  std::string empties;
  for (size_t i = 0; i < L_.empty_runs.size() && i < 8; ++i) {
    const auto& r = L_.empty_runs[i];
    empties += (i ? ", " : "") + (r.first == r.second ? fmt::format("{}", r.first)
                                                      : fmt::format("{}..{}", r.first, r.second));
  }
  if (L_.empty_runs.size() > 8) empties += ", ...";
  lines.push_back(fmt::format(
      "{} work items on {} clusters ({} with work{}), {} q tiles, {} batches, fold ratio {}, "
      "{} planner, payload {}",
      plan_.num_works(), L_.clusters, L_.busy_clusters,
      empties.empty() ? "" : "; no work: " + empties, d.num_tiles,
      pic_.request->kv_indptr.empty() ? 0 : pic_.request->kv_indptr.size() - 1, d.fold_ratio,
      d.parallel_planner_used ? "parallel" : "serial", d.payload));
  for (const std::string& l : lines) {
    g_.width = std::max(g_.width, 16 + l.size() * kCharW);
    *y += 15;
    s += html::Text(8, *y, l, "start", "class=\"note\"");
  }
  if (L_.past_buffer > 0) {
    *y += 15;
    s += html::Text(8, *y,
                    fmt::format("{} work items lie past the end of work_info ({} rows): the "
                                "planner stored them past the buffer; not drawn",
                                L_.past_buffer, Cells(plan_.work_info) / 8),
                    "start", "class=\"bad\"");
  }
  return s + "\n";
}

// Only the kinds of item the picture holds; wraps at 960 px.
std::string TimelineWriter::Legend(double* y) {
  bool split = false, zero = false, oob = false, other = false, padding = false, undefined = false;
  std::map<int32_t, std::set<size_t>> tile_rows;
  for (size_t i = 0; i < L_.rows.size(); ++i)
    for (const Item& it : L_.rows[i].items) {
      split = split || it.partial >= 0;
      zero = zero || it.zero;
      const auto m = marks_.find(it.work);
      const bool marked = m != marks_.end();
      oob = oob || (marked && m->second.oob);
      other = other || (marked && !m->second.oob);
      padding = padding || (it.padding && it.defined && !it.zero && !marked);  // drawn grey
      undefined = undefined || !it.defined;
      if (it.tile >= 0) tile_rows[it.tile].insert(i);
    }
  const bool lanes = std::any_of(tile_rows.begin(), tile_rows.end(),
                                 [](const auto& t) { return t.second.size() > 1; });
  struct Entry {
    bool shown;
    std::string fill, stroke, text;
  };
  const Entry entries[] = {
      {true, kUnsplit, "none", "work item (width = KV pages)"},
      {split, html::PaletteColour(1), "#333", "split piece (colour = its reduce tile)"},
      {zero, "url(#mlasim-hatch-zero)", "#333", "zero-KV item"},
      {oob, kRed, "none", "out of bounds (hatched: zero-KV)"},
      {other, "#ffffff", kOrange, "other finding (the label says which)"},
      {padding, "#e3e3e3", "none", "padding request"},
      {undefined, "url(#mlasim-hatch-grey)", "#777", "fields undefined"},
      {lanes, "", "", "reduce lane: clusters whose pieces one tile merges"},
  };
  std::string s;
  double x = 8;
  *y += 10;
  for (const Entry& e : entries) {
    if (!e.shown) continue;
    const double w = 18 + static_cast<double>(e.text.size()) * kCharW + 18;
    if (x > 8 && x + w > 960) x = 8, *y += 16;
    if (e.fill.empty())
      s += html::Line(x + 7, *y, x + 7, *y + 10, "stroke=\"#4e79a7\" stroke-width=\"2\"");
    else
      s += html::Rect(x, *y, 14, 10,
                      fmt::format("fill=\"{}\" stroke=\"{}\" stroke-width=\"{}\"", e.fill, e.stroke,
                                  e.stroke == kOrange ? "2" : "0.8"));
    s += html::Text(x + 18, *y + 9, e.text);
    g_.width = std::max(g_.width, x + w);
    x += w;
  }
  return s + "\n";
}

std::string TimelineWriter::Axis() {
  std::string s;
  const double y0 = g_.top - 6, y1 = g_.RowY(L_.rows.size());
  const char* unit = pic_.request->page_size == 1 ? "KV tokens" : "KV pages";
  s += html::Text(kLeft, g_.top - 24,
                  fmt::format("{} run by each cluster, in order (page size {}); max {} per cluster",
                              unit, pic_.request->page_size, L_.max_pages),
                  "start", "class=\"small\"");
  if (L_.max_pages > 0) {
    const double raw = static_cast<double>(L_.max_pages) / 6;
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    const double step = raw / mag < 2 ? 2 * mag : raw / mag < 5 ? 5 * mag : 10 * mag;
    for (double v = 0; v <= static_cast<double>(L_.max_pages); v += step) {
      const double x = kLeft + v * L_.scale;
      s += html::Line(x, y0, x, y1, "stroke=\"#e6e6e6\" stroke-width=\"1\"");
      s += html::Text(x, y0 - 4, fmt::format("{}", static_cast<int64_t>(v)), "middle",
                      "class=\"small\"");
    }
  }
  return s + "\n";
}

std::string TimelineWriter::ItemRect(const Item& it, double y) {
  const auto m = marks_.find(it.work);
  std::string cls = "work";
  std::string fill = it.tile >= 0 ? html::PaletteColour(it.tile) : kUnsplit;
  std::string stroke = it.partial >= 0 ? "#333" : "none";
  if (it.padding) fill = "#e3e3e3", cls += " padding";
  if (it.partial >= 0) cls += " split";
  if (it.zero) fill = "url(#mlasim-hatch-zero)", stroke = "#333", cls += " zero-kv";
  if (!it.defined) fill = "url(#mlasim-hatch-grey)", stroke = "#777", cls += " undefined";
  const bool marked = m != marks_.end(), oob = marked && m->second.oob;
  if (oob) {
    cls += " oob";
    fill = it.zero || !it.defined ? "url(#mlasim-hatch-red)" : kRed;
    stroke = kRed;
  } else if (marked) {
    cls += " finding";
    stroke = kOrange;
  }
  const std::string tip =
      !it.defined
          ? fmt::format("work {}: fields undefined (read past a planner input)", it.work)
          : fmt::format(
                "work {}: batch {}, q rows [{},{}), kv [{},{}){}, kv_offset {}, "
                "partial_qo_loc {}{}{}",
                it.work, it.batch, it.qs, it.qe, it.ks, it.ke, it.zero ? " (zero KV)" : "", it.off,
                it.partial, it.tile >= 0 ? fmt::format(", reduce tile {}", it.tile) : "",
                it.padding ? ", padding request" : "");
  std::string s = html::Rect(kLeft + it.x, y, it.w, g_.bar,
                             fmt::format("class=\"{}\" fill=\"{}\" stroke=\"{}\" "
                                         "stroke-width=\"{}\"",
                                         cls, fill, stroke,
                                         oob      ? "1.5"
                                         : marked ? "2"
                                                  : "0.5"),
                             tip);
  if (g_.pitch >= 18 && it.defined && it.w >= 30) {
    std::string label = fmt::format("b{}", it.batch);
    const std::string kv = fmt::format("b{} kv {}..{}", it.batch, it.ks, it.ke);
    if (static_cast<double>(kv.size()) * 5.8 + 8 <= it.w) label = kv;
    s += html::Text(kLeft + it.x + it.w / 2, y + g_.bar - 4, label, "middle",
                    "class=\"inbar\" stroke=\"#fff\" stroke-width=\"2.5\" paint-order=\"stroke\"");
  }
  return s;
}

// Rows whose cluster name is written left of them: every run of empty clusters, then every
// label_every-th row that keeps 13 px from the labels already placed.
std::vector<bool> TimelineWriter::Labelled() const {
  const size_t n = L_.rows.size();
  std::vector<bool> out(n, false);
  const size_t gap = static_cast<size_t>(g_.label_every);
  for (size_t i = 0; i < n; ++i) out[i] = L_.rows[i].empty;
  for (size_t i = 0; i < n; i += gap) {
    bool clear = true;
    for (size_t j = i >= gap - 1 ? i - (gap - 1) : 0; j < std::min(n, i + gap); ++j)
      clear = clear && !(out[j] && L_.rows[j].empty);
    out[i] = out[i] || (clear && !L_.rows[i].elided);
  }
  return out;
}

std::string TimelineWriter::Rows() {
  std::string s;
  const std::vector<bool> labelled = Labelled();
  for (size_t i = 0; i < L_.rows.size(); ++i) {
    const Row& r = L_.rows[i];
    const double y = g_.RowY(i);
    const std::string name =
        r.c0 == r.c1 ? fmt::format("c{}", r.c0) : fmt::format("c{}-{}", r.c0, r.c1);
    if (r.elided) {
      s += html::Line(kLeft, y + g_.bar / 2, kLeft + kPlotW, y + g_.bar / 2,
                      "class=\"elided\" stroke=\"#999\" stroke-dasharray=\"2,4\"");
      if (g_.pitch >= 9)
        s += html::Text(kLeft + kPlotW / 2, y + g_.bar - 1,
                        fmt::format("clusters {}..{} not shown", r.c0, r.c1), "middle",
                        "class=\"small\"");
      continue;
    }
    if (labelled[i]) s += html::Text(kLeft - 6, y + g_.bar - 0.5, name, "end", "class=\"small\"");
    if (r.empty) {
      s += html::Rect(kLeft, y, kPlotW, g_.bar,
                      "class=\"empty-run\" fill=\"url(#mlasim-hatch-grey)\" opacity=\"0.6\"",
                      fmt::format("clusters {}..{}: no work item", r.c0, r.c1));
      continue;
    }
    for (const Item& it : r.items) s += ItemRect(it, y);
    s += "\n";
  }
  return s;
}

// A bracket per reduce tile whose pieces lie in more than one drawn row, in greedy lanes.
std::string TimelineWriter::ReduceLanes(int32_t* lanes) {
  std::map<int32_t, std::vector<size_t>> rows_of;  // tile -> rows (ascending, distinct)
  for (size_t i = 0; i < L_.rows.size(); ++i)
    for (const Item& it : L_.rows[i].items) {
      if (it.tile < 0) continue;
      auto& v = rows_of[it.tile];
      if (v.empty() || v.back() != i) v.push_back(i);
    }
  std::vector<std::pair<size_t, int32_t>> spans;  // (first row, tile)
  for (const auto& [tile, v] : rows_of)
    if (v.size() > 1) spans.push_back({v.front(), tile});
  std::sort(spans.begin(), spans.end());
  std::vector<size_t> lane_end;  // last row used by each lane
  std::string s;
  for (const auto& [first, tile] : spans) {
    const std::vector<size_t>& v = rows_of[tile];
    size_t lane = 0;
    while (lane < lane_end.size() && lane_end[lane] >= first) ++lane;
    if (lane == lane_end.size()) lane_end.push_back(0);
    lane_end[lane] = v.back();
    const double x = g_.lanes_x + static_cast<double>(lane) * kLaneW + 2;
    const double mid = g_.bar / 2;
    const std::string col = html::PaletteColour(tile);
    s += fmt::format("<g class=\"reduce\" stroke=\"{}\" stroke-width=\"2\"><title>{}</title>", col,
                     html::Escape(fmt::format("reduce tile {}: {} pieces in {} clusters", tile,
                                              v.size(), v.size())));
    s += html::Line(x, g_.RowY(v.front()) + mid, x, g_.RowY(v.back()) + mid, "");
    for (size_t r : v) s += html::Line(x - 2, g_.RowY(r) + mid, x + 3, g_.RowY(r) + mid, "");
    s += "</g>";
  }
  *lanes = static_cast<int32_t>(lane_end.size());
  return s + "\n";
}

// Runs of consecutive marked items in one row; a run whose labels equal the previous run's joins
// it (a fault spread over many clusters reads as one label with a leader from each row).
std::vector<TimelineWriter::MarkRun> TimelineWriter::MarkRuns() {
  std::vector<MarkRun> runs;
  for (size_t i = 0; i < L_.rows.size(); ++i) {
    const std::vector<Item>& items = L_.rows[i].items;
    for (size_t a = 0; a < items.size();) {
      if (!marks_.count(items[a].work)) {
        ++a;
        continue;
      }
      MarkRun run;
      size_t b = a;
      for (; b < items.size() && marks_.count(items[b].work); ++b) {
        const Marked& m = marks_.at(items[b].work);
        run.oob = run.oob || m.oob;
        for (const std::string& l : m.labels)
          if (std::find(run.labels.begin(), run.labels.end(), l) == run.labels.end())
            run.labels.push_back(l);
      }
      run.w0 = items[a].work;
      run.w1 = items[b - 1].work;
      run.items = static_cast<int64_t>(b - a);
      run.ends.push_back({i, kLeft + items[b - 1].x + items[b - 1].w});
      if (!runs.empty() && runs.back().labels == run.labels && runs.back().oob == run.oob) {
        MarkRun& last = runs.back();
        last.w0 = std::min(last.w0, run.w0);
        last.w1 = std::max(last.w1, run.w1);
        last.items += run.items;
        last.ends.push_back(run.ends.front());
      } else {
        runs.push_back(std::move(run));
      }
      a = b;
    }
  }
  return runs;
}

std::string TimelineWriter::MarkRunText(const MarkRun& run, double y) {
  std::string head = run.w0 == run.w1 ? fmt::format("work {}:", run.w0)
                                      : fmt::format("work {}..{}", run.w0, run.w1);
  if (run.w0 != run.w1)
    head +=
        int64_t{run.w1} - run.w0 + 1 == run.items ? ":" : fmt::format(" ({} items):", run.items);
  std::vector<std::string> lines = {head};
  lines.insert(lines.end(), run.labels.begin(), run.labels.end());
  std::string s = fmt::format("<text class=\"{}\" x=\"{}\" y=\"{}\"{}>",
                              run.oob ? "bad mark" : "mark", Num(g_.labels_x), Num(y + 4),
                              run.oob ? "" : fmt::format(" style=\"fill:{}\"", kOrange));
  for (size_t k = 0; k < lines.size(); ++k) {
    const double x = g_.labels_x + (k == 0 ? 0 : 12);
    s += fmt::format("<tspan x=\"{}\" dy=\"{}\">{}</tspan>", Num(x), k == 0 ? "0" : "13",
                     html::Escape(lines[k]));
    g_.width = std::max(g_.width, x + lines[k].size() * kCharW + 12);
  }
  return s + "</text>";
}

// One label per run (at most kMaxLabels), right of the lanes, with a leader from each row.
std::string TimelineWriter::MarkLabels(double* bottom) {
  std::string s;
  double last_y = -1e9;
  const std::vector<MarkRun> runs = MarkRuns();
  for (size_t r = 0; r < runs.size() && r < static_cast<size_t>(kMaxLabels); ++r) {
    const MarkRun& run = runs[r];
    const double y = std::max(g_.RowY(run.ends.front().first) + g_.bar / 2, last_y + 14);
    last_y = y + 13.0 * static_cast<double>(run.labels.size());
    for (const auto& [row, x_end] : run.ends) {
      const double row_y = g_.RowY(row) + g_.bar / 2;
      s += fmt::format(
          "<polyline class=\"leader\" fill=\"none\" stroke=\"{}\" stroke-width=\"1\" "
          "points=\"{},{} {},{} {},{}\"/>",
          run.oob ? kRed : kOrange, Num(x_end + 1), Num(row_y), Num(g_.labels_x - 10), Num(row_y),
          Num(g_.labels_x - 3), Num(y));
    }
    s += MarkRunText(run, y);
  }
  if (runs.size() > static_cast<size_t>(kMaxLabels)) {
    last_y += 16;
    s += html::Text(g_.labels_x, last_y + 4,
                    fmt::format("{} more labelled runs not written (hover the items)",
                                runs.size() - kMaxLabels),
                    "start", "class=\"bad\"");
  }
  *bottom = std::max(*bottom, last_y + 12);
  return s + "\n";
}

}  // namespace

std::vector<std::pair<int32_t, int32_t>> ClustersAround(const ref::Plan& p,
                                                        const std::vector<int32_t>& works,
                                                        int32_t margin) {
  const int64_t clusters = std::clamp<int64_t>(p.derived.num_clusters, 0,
                                               std::max<int64_t>(Cells(p.work_indptr) - 1, 0));
  std::vector<int32_t> sorted = works;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::pair<int32_t, int32_t>> out;
  for (int32_t c = 0; c < clusters; ++c) {
    if (!DefinedCell(p.work_indptr, c) || !DefinedCell(p.work_indptr, c + 1)) continue;
    const int32_t b = p.work_indptr.data[c], e = p.work_indptr.data[c + 1];
    const auto it = std::lower_bound(sorted.begin(), sorted.end(), b);
    if (it == sorted.end() || *it >= e) continue;
    const int32_t lo = static_cast<int32_t>(std::max<int64_t>(0, int64_t{c} - margin));
    const int32_t hi = static_cast<int32_t>(std::min<int64_t>(clusters - 1, int64_t{c} + margin));
    if (!out.empty() && out.back().second + 1 >= lo)
      out.back().second = std::max(out.back().second, hi);
    else
      out.push_back({lo, hi});
  }
  return out;
}

SvgPicture PlanTimeline(const PlanPicture& p) {
  MLASIM_ASSERT(p.plan != nullptr && p.request != nullptr, "PlanTimeline needs a plan and request");
  return TimelineWriter(p).Write();
}

std::string PlanTimelineInline(const PlanPicture& p) {
  const SvgPicture pic = PlanTimeline(p);
  return html::SvgOpen(pic.width, pic.height, p.title, "plan-timeline") + pic.content + "</svg>\n";
}

std::string PlanTimelineFile(const PlanPicture& p) {
  const SvgPicture pic = PlanTimeline(p);
  return html::SvgDocument(pic.width, pic.height, pic.content);
}

}  // namespace mlasim::sim
