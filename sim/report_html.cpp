#include "sim/report_html.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "sim/contract.h"
#include "sim/html.h"
#include "sim/memory_map_svg.h"

namespace mlasim::sim {
namespace {

using html::Escape;

std::string Hex(uint64_t x) {
  return fmt::format("0x{:x}", x);
}

std::vector<const Violation*> ViolationsOf(const ReplayReport& r, int32_t call) {
  std::vector<const Violation*> out;
  for (const Violation& v : r.result.violations)
    if (v.call_index == call) out.push_back(&v);
  return out;
}

std::string CallVerdict(const ReplayReport& r, const Call& c) {
  const auto vs = ViolationsOf(r, c.index);
  if (vs.empty()) return c.guard_refused ? "refused" : "clean";
  std::vector<std::string> what;
  for (const Violation* v : vs) {
    const std::string w = ConsequenceText(*v);
    if (std::find(what.begin(), what.end(), w) == what.end()) what.push_back(w);
  }
  std::string s = fmt::format("{} violation{}: ", vs.size(), vs.size() == 1 ? "" : "s");
  for (size_t i = 0; i < what.size(); ++i) s += (i ? ", " : "") + what[i];
  return s;
}

std::string Td(const std::string& text, const char* cls = nullptr) {
  return cls ? fmt::format("<td class=\"{}\">{}</td>", cls, Escape(text))
             : "<td>" + Escape(text) + "</td>";
}

// Work items of `plan` that reduce tile `t` merges (pieces whose partial_qo_loc it lists).
std::vector<int32_t> PiecesOfTile(const ref::Plan& p, int32_t t) {
  std::vector<int32_t> out;
  const auto& ri = p.reduce_indptr;
  const auto& pm = p.reduce_partial_map;
  if (t < 0 || int64_t{t} + 1 >= ri.size() || !ri.written(t) || !ri.written(t + 1)) return out;
  std::set<int32_t> locs;
  for (int64_t i = std::max(0, ri.data[t]); i < std::min<int64_t>(ri.data[t + 1], pm.size()); ++i)
    if (pm.written(i)) locs.insert(pm.data[i]);
  const int64_t works = std::min<int64_t>(p.num_works(), p.work_info.size() / 8);
  for (int32_t w = 0; w < works; ++w)
    if (p.work_info.written(int64_t{w} * 8 + 1) && locs.count(p.work(w, ref::kPartialQoLoc)))
      out.push_back(w);
  return out;
}

std::string MarkLabel(const Violation& v) {
  std::string rows = v.first_row == v.last_row
                         ? fmt::format("row {}", v.first_row)
                         : fmt::format("rows {}..{}", v.first_row, v.last_row);
  std::string what;
  switch (v.kind) {
    case ViolationKind::kOutOfBounds:
      what =
          fmt::format("{} {} {}", v.access == Access::kWrite ? "writes" : "reads", v.buffer, rows);
      break;
    case ViolationKind::kUninitializedRead:
      what = fmt::format("reads unwritten {} {}", v.buffer, rows);
      break;
    case ViolationKind::kPlannerInputRead:
      what = fmt::format("value from {}[{}..{}] past its end", v.buffer, v.first_row, v.last_row);
      break;
    case ViolationKind::kUnwrittenOutput:
      what = fmt::format("leaves {} {} unwritten", v.buffer, rows);
      break;
    default: what = ConsequenceText(v);
  }
  return fmt::format("call {} {}", v.call_index, what);
}

}  // namespace

std::string CallTableHtml(const ReplayReport& r) {
  std::string s =
      "<table class=\"calls\">\n<tr><th>call</th><th>step</th><th>row</th><th>name</th>"
      "<th>kind</th><th>kernel</th><th>q / o rows</th><th>plan</th><th>plan rows</th>"
      "<th>verdict</th></tr>\n";
  for (const Call& c : r.trace.calls) {
    const bool bad = !ViolationsOf(r, c.index).empty();
    std::string plan = c.plan >= 0 && c.plan < static_cast<int32_t>(r.trace.plans.size())
                           ? fmt::format("#{} {}", c.plan, r.trace.plans[c.plan].name)
                           : "";
    std::string qrows = c.kind == CallKind::kDecode || c.kind == CallKind::kReduce
                            ? fmt::format("{}", c.q_rows)
                        : c.kind == CallKind::kIndexFill ? fmt::format("{} tokens", c.fill_tokens)
                                                         : "";
    std::string prow = c.plan >= 0 ? fmt::format("{}", c.plan_rows) : "";
    s += fmt::format("<tr class=\"{}\">", bad ? "bad" : "ok");
    s += Td(fmt::format("{}", c.index), "num") + Td(c.step) + Td(c.table_row) + Td(c.name) +
         Td(CallKindName(c.kind)) + Td(c.kernel + (c.graph_replay ? " (graph)" : "")) +
         Td(qrows, "num") + Td(plan) + Td(prow, "num") + Td(CallVerdict(r, c), "verdict");
    s += "</tr>\n";
  }
  return s + "</table>\n";
}

std::string ViolationTableHtml(const ReplayReport& r) {
  const auto& vs = r.result.violations;
  if (vs.empty()) return "<p class=\"note\">No violation.</p>\n";
  std::string s =
      "<table class=\"violations\">\n<tr><th>#</th><th>kind</th><th>class</th><th>call</th>"
      "<th>buffer</th><th>access</th><th>rows</th><th>past the end</th><th>work items</th>"
      "<th>on hardware</th><th>detail</th></tr>\n";
  for (size_t i = 0; i < vs.size() && i < static_cast<size_t>(kMaxViolationRows); ++i) {
    const Violation& v = vs[i];
    std::string works;
    for (size_t k = 0; k < v.work_items.size() && k < 12; ++k)
      works += (k ? ", " : "") + std::to_string(v.work_items[k]);
    if (v.work_items.size() > 12) works += fmt::format(", ... ({} in all)", v.work_items.size());
    s += "<tr class=\"bad\">" + Td(fmt::format("{}", i), "num") + Td(ViolationKindName(v.kind)) +
         Td(BugClassLetter(v.bug_class)) +
         Td(fmt::format("{} {} / {}", v.call_index, v.step, v.call)) + Td(v.buffer, "mono") +
         Td(AccessName(v.access)) +
         Td(fmt::format("{}..{} of {}", v.first_row, v.last_row, v.rows), "num") +
         Td(fmt::format("{} rows, {} B", v.rows_past_end, v.bytes_past_end), "num") +
         Td(works, "mono") +
         Td(ConsequenceText(v) + (v.first_bad_address ? " at " + Hex(v.first_bad_address) : ""),
            "mono") +
         Td(v.detail) + "</tr>\n";
  }
  s += "</table>\n";
  if (vs.size() > static_cast<size_t>(kMaxViolationRows))
    s += fmt::format("<p class=\"note\">{} more violations not listed.</p>\n",
                     vs.size() - kMaxViolationRows);
  return s;
}

std::string MemoryMapsHtml(const ReplayReport& r) {
  std::string s;
  std::map<int32_t, AddressSpace> spaces;  // by call index
  int32_t drawn = 0, more = 0;
  for (const Violation& v : r.result.violations) {
    if (v.kind != ViolationKind::kOutOfBounds) continue;
    if (v.call_index < 0 || v.call_index >= static_cast<int32_t>(r.trace.calls.size())) continue;
    if (drawn >= kMaxMemoryMaps) {
      ++more;
      continue;
    }
    auto it = spaces.find(v.call_index);
    if (it == spaces.end())
      it = spaces.emplace(v.call_index, CallAddressSpace(r.scenario, r.trace, v.call_index)).first;
    s += MemoryMapInline(it->second, v);
    ++drawn;
  }
  if (drawn == 0) return "<p class=\"note\">No out-of-bounds access: no memory map.</p>\n";
  if (more > 0) s += fmt::format("<p class=\"note\">{} more memory maps not drawn.</p>\n", more);
  return s;
}

std::vector<PlanPicture> ReplayPlanPictures(const ReplayReport& r) {
  const auto& plans = r.trace.plans;
  std::vector<std::vector<const Call*>> users(plans.size());
  std::vector<const Call*> builder(plans.size(), nullptr);
  std::vector<bool> named(plans.size(), false);
  for (const Call& c : r.trace.calls) {
    if (c.plan < 0 || c.plan >= static_cast<int32_t>(plans.size())) continue;
    if (c.kind == CallKind::kDecode || c.kind == CallKind::kReduce) users[c.plan].push_back(&c);
    if (c.kind == CallKind::kPlanBuild || c.kind == CallKind::kPlanUpdate) builder[c.plan] = &c;
    named[c.plan] = named[c.plan] || !ViolationsOf(r, c.index).empty();
  }
  std::vector<PlanPicture> out;
  for (size_t i = 0; i < plans.size(); ++i) {
    if (users[i].empty() && !named[i]) continue;
    const PlanSnapshot& snap = plans[i];
    PlanPicture p;
    p.title = fmt::format("plan snapshot {}: {} (buffers {}*)", i, snap.name, snap.buffer_prefix);
    p.request = &snap.request;
    p.plan = &snap.plan;
    p.real_requests = snap.real_requests;
    if (builder[i])
      p.notes.push_back(
          fmt::format("made by call {} {} {} ({}); covers {} q rows; {} of {} requests real",
                      builder[i]->index, builder[i]->step, builder[i]->name, builder[i]->table_row,
                      snap.q_rows_covered, snap.real_requests,
                      snap.request.kv_indptr.empty() ? 0 : snap.request.kv_indptr.size() - 1));
    for (const Call* c : users[i])
      p.notes.push_back(fmt::format("used by call {} {} {} ({}), q/o {} rows: {}", c->index,
                                    c->step, c->name, c->kernel, c->q_rows, CallVerdict(r, *c)));
    for (const Violation& v : r.result.violations) {
      if (v.call_index < 0 || v.call_index >= static_cast<int32_t>(r.trace.calls.size())) continue;
      const Call& c = r.trace.calls[v.call_index];
      if (c.plan != static_cast<int32_t>(i) || c.kind == CallKind::kIndexFill) continue;
      std::vector<int32_t> works;
      if (c.kind == CallKind::kReduce) {
        for (int32_t t : v.work_items)
          for (int32_t w : PiecesOfTile(snap.plan, t)) works.push_back(w);
      } else {
        works = v.work_items;
      }
      for (int32_t w : works)
        p.marks.push_back({w, MarkLabel(v), v.kind == ViolationKind::kOutOfBounds});
    }
    if (!p.marks.empty()) {  // first the clusters around the marked items, large
      std::vector<int32_t> works;
      for (const PlanMark& m : p.marks) works.push_back(m.work);
      PlanPicture detail = p;
      detail.title += ": the clusters around the flagged items";
      detail.only_clusters = ClustersAround(snap.plan, works, 2);
      p.title += ": all clusters";
      p.notes.clear();
      out.push_back(std::move(detail));
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::string PlanTimelinesHtml(const ReplayReport& r) {
  std::string s;
  for (const PlanPicture& p : ReplayPlanPictures(r)) s += PlanTimelineInline(p);
  if (s.empty()) return "<p class=\"note\">No kernel call consumes a plan.</p>\n";
  return s;
}

std::string ReplaySectionHtml(const ReplayReport& r, const ReplayHtmlOptions& o) {
  const StepShape& sh = r.trace.shape;
  const Scenario& sc = r.scenario;
  std::string s = "<section class=\"replay\">\n";
  s += "<h1>mlasim replay: " + Escape(sc.name) + "</h1>\n";
  if (!o.command.empty()) s += "<p class=\"meta\"><code>" + Escape(o.command) + "</code></p>\n";
  if (!sc.description.empty()) s += "<p class=\"meta\">" + Escape(sc.description) + "</p>\n";
  s += "<p class=\"meta\">" +
       Escape(fmt::format("profile {} · kernel {} · target {} · allocator {} · B = {} requests, "
                          "Q = K+1 = {}, rung R = {} ({}), scheduled_tokens {}, running_tokens {}, "
                          "kernel heads {}",
                          sc.engine.name, DecodeVariant(sc), ref::ArchName(sc.target),
                          sc.allocator.model == AllocatorModel::kExact ? "exact" : "caching", sh.B,
                          sh.Q, sh.R, sh.graph ? "graph replay" : "eager", sh.scheduled_tokens,
                          sh.running_tokens, sh.kernel_heads)) +
       "</p>\n";
  if (r.clean())
    s += "<p class=\"verdict-clean\">verdict: clean: no call touches memory outside its "
         "buffers</p>\n";
  else
    s += fmt::format("<p class=\"verdict-bad\">verdict: {} violation(s)</p>\n",
                     r.result.violations.size());
  auto h2 = [&](const char* id, const char* text) {
    return fmt::format("<h2 id=\"{}{}\">{}</h2>\n", Escape(o.id_prefix), id, text);
  };
  s += h2("calls", "Calls of the step") + CallTableHtml(r);
  s += h2("violations", "Violations") + ViolationTableHtml(r);
  if (o.gpu) s += h2("gpu", "GPU: observed against predicted") + GpuSectionHtml(*o.gpu);
  s += h2("memory", "Memory around each out-of-bounds access") + MemoryMapsHtml(r);
  s += h2("plans", "Plan timelines") +
       "<p class=\"note\">One row per cluster, its work items in the order it runs them, as long "
       "as their KV range; hover an item for its fields.</p>\n" +
       PlanTimelinesHtml(r);
  return s + "</section>\n";
}

std::string ReplayHtml(const ReplayReport& r, const ReplayHtmlOptions& o) {
  return html::Page("mlasim replay: " + r.scenario.name, ReplaySectionHtml(r, o));
}

}  // namespace mlasim::sim
