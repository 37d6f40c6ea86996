#include "sim/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "sim/contract.h"
#include "sim/known_bugs.h"

namespace mlasim::sim {
namespace {

using nlohmann::json;

std::string Hex(uint64_t x) {
  return fmt::format("0x{:x}", x);
}

json CallJson(const ReplayReport& r, const Call& c) {
  json j = {{"index", c.index},
            {"step", c.step},
            {"call", c.name},
            {"row", c.table_row},
            {"kind", CallKindName(c.kind)},
            {"kernel", c.kernel},
            {"graph_replay", c.graph_replay}};
  if (c.kind == CallKind::kDecode || c.kind == CallKind::kReduce) {
    j["q_rows"] = c.q_rows;
    j["o_rows"] = c.o_rows;
    j["plan_rows"] = c.plan_rows;
  }
  if (c.kind == CallKind::kPlanBuild || c.kind == CallKind::kPlanUpdate) {
    j["plan"] = r.trace.plans[c.plan].name;
    j["plan_rows"] = c.plan_rows;
    j["batches"] = r.trace.plans[c.plan].request.kv_indptr.size() - 1;
  }
  if (c.launch_grid >= 0) j["launch_grid"] = c.launch_grid;
  if (!c.overrides.empty()) j["overrides"] = c.overrides;
  json args = json::array();
  for (const TensorArg& a : c.args)
    args.push_back({{"role", a.role},
                    {"buffer", a.buffer},
                    {"rows", a.rows},
                    {"row_bytes", a.row_bytes},
                    {"dtype", a.dtype}});
  if (!args.empty()) j["buffers"] = args;
  return j;
}

json ViolationJson(const ReplayReport& r, const Violation& v) {
  json j = {{"kind", ViolationKindName(v.kind)},
            {"class", ClassLabel(v)},
            {"step", v.step},
            {"call", v.call},
            {"call_index", v.call_index},
            {"row", v.table_row},
            {"kernel", v.kernel},
            {"buffer", v.buffer},
            {"access", AccessName(v.access)},
            {"buffer_rows", v.rows},
            {"row_bytes", v.row_bytes},
            {"first_row", v.first_row},
            {"last_row", v.last_row},
            {"rows_past_end", v.rows_past_end},
            {"bytes_past_end", v.bytes_past_end},
            {"work_items", v.work_items},
            {"consequence", ConsequenceText(v)},
            {"detail", v.detail}};
  if (v.first_bad_address) j["fault_address"] = Hex(v.first_bad_address);
  if (v.rows_before_start) {
    j["rows_before_start"] = v.rows_before_start;
    j["bytes_before_start"] = v.bytes_before_start;
  }
  if (!v.cause.empty()) j["cause"] = v.cause;
  if (const KnownBug* k = MatchKnownBug(v, r))
    j["known"] = {{"name", k->name},
                  {"upstream", k->upstream},
                  {"fixed_in", k->fixed_in.empty() ? json() : json(k->fixed_in)}};
  return j;
}

// The class letters of `vs` with their meanings (the one table, sim/violation.cpp).
json ClassesJson(const std::vector<Violation>& vs) {
  json out = json::object();
  for (const Violation& v : vs)
    out[ClassLabel(v)] = IsKernelKind(v.kind)
                             ? "observed on the kernel under test (docs/kernel-under-test.md)"
                             : BugClassMeaning(v.bug_class);
  return out;
}

std::string ClassLegend(const std::vector<Violation>& vs) {
  bool seen[kBugClassCount] = {};
  for (const Violation& v : vs) seen[static_cast<int>(v.bug_class)] = true;
  std::string out = "\nclasses (docs/bug-classes.md):\n";
  for (int c = 0; c < kBugClassCount; ++c)
    if (seen[c])
      out += fmt::format("  {}  {}\n", BugClassLetter(static_cast<BugClass>(c)),
                         BugClassMeaning(static_cast<BugClass>(c)));
  return out;
}

}  // namespace

std::string ViolationText(const ReplayReport& r, const Violation& v) {
  std::string out =
      fmt::format("\n  [{}] class {}  {} / {} ({})  {} {}\n", ViolationKindName(v.kind),
                  ClassLabel(v), v.step, v.call, v.kernel, AccessName(v.access), v.buffer);
  if (v.kind == ViolationKind::kOutOfBounds && v.rows_before_start > 0) {
    out += fmt::format(
        "      touches rows {}..{} of a buffer of {} rows: {} rows ({} bytes) before its start\n",
        v.first_row, v.last_row, v.rows, v.rows_before_start, v.bytes_before_start);
  } else if (v.kind == ViolationKind::kOutOfBounds) {
    out += fmt::format(
        "      touches rows {}..{} of a buffer of {} rows: {} rows ({} bytes) past the end\n",
        v.first_row, v.last_row, v.rows, v.rows_past_end, v.bytes_past_end);
  } else if (v.kind != ViolationKind::kPlanInvalid) {
    out += fmt::format("      rows {}..{}\n", v.first_row, v.last_row);
  }
  if (!v.work_items.empty()) {
    std::string w;
    for (size_t i = 0; i < v.work_items.size() && i < 12; ++i)
      w += (i ? "," : "") + std::to_string(v.work_items[i]);
    if (v.work_items.size() > 12) w += fmt::format(",... ({} in all)", v.work_items.size());
    out += fmt::format("      work items: {}\n", w);
  }
  out += fmt::format("      on hardware: {}{}\n", ConsequenceText(v),
                     v.first_bad_address ? " at " + Hex(v.first_bad_address) : "");
  out += fmt::format("      {}\n", v.detail);
  if (!v.cause.empty()) out += fmt::format("      cause: {}\n", v.cause);
  if (const KnownBug* k = MatchKnownBug(v, r)) out += "      " + KnownBugText(*k) + "\n";
  return out;
}

namespace {

std::string CallsText(const ReplayReport& r) {
  std::string out = "\ncalls:\n";
  for (const Call& c : r.trace.calls) {
    std::string rows;
    if (c.kind == CallKind::kDecode || c.kind == CallKind::kReduce)
      rows = fmt::format("q/o {} rows, plan covers {} rows", c.q_rows, c.plan_rows);
    else if (c.kind == CallKind::kPlanBuild || c.kind == CallKind::kPlanUpdate)
      rows = fmt::format("{} batches, plan covers {} q rows",
                         r.trace.plans[c.plan].request.kv_indptr.size() - 1, c.plan_rows);
    else
      rows = CallNote(r.trace, c);
    out += fmt::format("  {:>3} {:<13} {:<6} {:<22} {:<30} {}\n", c.index, c.step, c.table_row,
                       c.name, c.kernel + (c.graph_replay ? " (graph)" : ""), rows);
  }
  return out;
}

}  // namespace

nlohmann::json ReportJson(const ReplayReport& r) {
  const StepShape& sh = r.trace.shape;
  json calls = json::array();
  for (const Call& c : r.trace.calls) calls.push_back(CallJson(r, c));
  json vs = json::array();
  for (const Violation& v : r.result.violations) vs.push_back(ViolationJson(r, v));
  const EngineProfile& e = r.scenario.engine;
  json out = json{{"case", r.scenario.name},
              {"profile", e.name},
              {"kernel", DecodeVariant(r.scenario)},
              {"verdict", r.clean() ? "clean" : "violations"},
              {"scheduled_requests", sh.B},
              {"padded_requests", sh.R},
              {"q_per_request", sh.Q},
              {"scheduled_tokens", sh.scheduled_tokens},
              {"running_tokens", sh.running_tokens},
              {"graph", sh.graph},
              {"kernel_heads", sh.kernel_heads},
              {"sparse_plan_tokens", r.scenario.model.sparse ? sh.sparse_plan_tokens : 0},
              {"draft_rows", sh.draft_rows},
              {"calls", static_cast<int64_t>(r.trace.calls.size())},
              {"call_list", calls},
              {"unwritten_pad_rows", r.result.unwritten_pad_rows},
              {"padding", {{"o", PaddingName(e.o_padding)}, {"lse", PaddingName(e.lse_padding)}}},
              {"violations", vs},
              {"classes", ClassesJson(r.result.violations)}};
  if (StatesQLens(r.scenario)) out["q_lens"] = sh.q_lens;  // batch.q_lens, when stated
  return out;
}

// The decode kernel(s) the step's calls ran, in call order: the scenario's, unless an engine
// profile's call table runs a planner dialect's (vllm-flashmla: flashmla_dense).
std::string DecodeKernels(const ReplayReport& r) {
  std::vector<std::string> seen;
  for (const Call& c : r.trace.calls)
    if (c.kind == CallKind::kDecode && std::find(seen.begin(), seen.end(), c.kernel) == seen.end())
      seen.push_back(c.kernel);
  if (seen.empty()) return DecodeVariant(r.scenario);
  std::string out;
  for (const std::string& k : seen) out += (out.empty() ? "" : ",") + k;
  return out;
}

std::string ReportText(const ReplayReport& r) {
  const StepShape& sh = r.trace.shape;
  const Scenario& s = r.scenario;
  std::string out;
  out += fmt::format("case {}  profile {}  kernel {}  target {}  allocator {}\n", s.name,
                     s.engine.name, DecodeKernels(r), ref::ArchName(s.target),
                     s.allocator.model == AllocatorModel::kExact ? "exact" : "caching");
  out += fmt::format(
      "step: B = {} requests, Q = K+1 = {}, rung R = {} ({}), scheduled_tokens = {}, "
      "running_tokens = {}, kernel heads {}\n",
      sh.B, sh.Q, sh.R, sh.graph ? "graph replay" : "eager", sh.scheduled_tokens, sh.running_tokens,
      sh.kernel_heads);
  if (StatesQLens(s)) {
    std::string lens;
    for (const int32_t q : sh.q_lens) lens += (lens.empty() ? "" : ", ") + std::to_string(q);
    out += fmt::format("q lengths (batch.q_lens): [{}]\n", lens);
  }
  out += fmt::format("padding rows: o {}, lse {} (docs/numerics.md, padding policy)\n",
                     PaddingName(s.engine.o_padding), PaddingName(s.engine.lse_padding));
  out += CallsText(r);
  if (r.clean()) {
    out += fmt::format("\nverdict: clean — no call touches memory outside its buffers");
    if (r.result.unwritten_pad_rows > 0)
      out += fmt::format(" ({} padding rows of o stay unwritten; the engine drops them)",
                         r.result.unwritten_pad_rows);
    out += "\n";
    return out;
  }
  out += fmt::format("\nverdict: {} violation(s)\n", r.result.violations.size());
  for (const Violation& v : r.result.violations) out += ViolationText(r, v);
  out += ClassLegend(r.result.violations);
  return out;
}

}  // namespace mlasim::sim
