#include "sim/replay.h"

#include <fmt/format.h>

#include "sim/contract.h"
#include "sim/engine.h"

namespace mlasim::sim {
namespace {

std::string Hex(uint64_t x) {
  return fmt::format("0x{:x}", x);
}

// Deterministic context lengths: a mix below and above top-k (a fixed LCG, no std distributions).
std::vector<RequestSpec> MakeRequests(int32_t n, int32_t k, uint32_t seed) {
  std::vector<RequestSpec> out;
  uint32_t x = seed;
  for (int32_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    RequestSpec r;
    r.context = 600 + static_cast<int32_t>((x >> 8) % 7000);
    r.rejected_prev = static_cast<int32_t>((x >> 4) % (k + 1));
    r.rejected = static_cast<int32_t>((x >> 12) % (k + 1));
    out.push_back(r);
  }
  return out;
}

Scenario SeedBase(int32_t requests) {
  Scenario s;
  s.model.name = "GLM-5.2-like";
  s.model.heads = 64;
  s.model.kv_dtype = ref::DType::kFp8;
  s.model.model_dtype = ref::DType::kBf16;
  s.model.sparse = true;
  s.model.topk = 2048;
  s.parallel.tp = 4;
  s.mtp_k = 3;
  s.requests = MakeRequests(requests, 3, 2748);
  s.graph.capture_sizes = {1, 2, 4, 8, 16, 24, 32, 40, 48, 64, 128, 256, 512};
  s.target = ref::Arch::kGfx950;
  s.kernel = "asm";
  s.engine = *GetEngineProfile("atom-2026-08", "engine");
  return s;
}

}  // namespace

std::vector<std::string> BuiltinNames() {
  return {"seed", "seed-b35", "dense-mtp"};
}

StatusOr<Scenario> BuiltinScenario(const std::string& name) {
  if (name == "seed") {
    Scenario s = SeedBase(39);
    s.name = "seed";
    s.description =
        "The founding fault (seed-fault.md): GLM-5.2-like sparse MLA (64 heads, TP 4, top-k "
        "2048, fp8 KV), MTP K = 3, 39 requests padded to a captured graph of 40, the asm kernel, "
        "exact allocator with guard pages.";
    s.allocator.model = AllocatorModel::kExact;
    return s;
  }
  if (name == "seed-b35") {
    Scenario s = SeedBase(35);
    s.name = "seed-b35";
    s.description =
        "35 real requests (q of 140 rows) padded to 40, caching allocator: q ends 22528 bytes "
        "before the end of its 2 MiB segment, so the overrun faults 20-24 KB past the end of q "
        "(seed-fault.md §5, the addresses seen on all four GPUs).";
    s.allocator.model = AllocatorModel::kCaching;
    s.allocator.live_before_call = {{"live_activations", 784384}};
    return s;
  }
  if (name == "dense-mtp") {
    Scenario s;
    s.name = "dense-mtp";
    s.description =
        "DeepSeek-V3-like dense MLA (128 heads, TP 8 -> 16 per rank), MTP K = 3, 5 requests "
        "padded to 8 (the worked example of atom-mtp-flow.md §6), ATOM#287-era engine.";
    s.model.name = "DeepSeek-V3-like";
    s.model.heads = 128;
    s.model.kv_dtype = ref::DType::kBf16;
    s.parallel.tp = 8;
    s.mtp_k = 3;
    const int32_t L[] = {100, 3000, 50, 2100, 7};
    const int32_t r[] = {0, 3, 1, 2, 0};
    for (int i = 0; i < 5; ++i) s.requests.push_back({L[i], 0, r[i], {}});
    s.target = ref::Arch::kGfx942;
    s.engine = *GetEngineProfile("atom-2026-03", "engine");
    return s;
  }
  std::string known;
  for (const std::string& n : BuiltinNames()) known += (known.empty() ? "" : ", ") + n;
  return InvalidArgumentError("--builtin",
                              "unknown built-in case '" + name + "' (known: " + known + ")");
}

StatusOr<ReplayReport> Replay(const Scenario& s, const ExecuteOptions& opt) {
  ReplayReport r;
  r.scenario = s;
  MLASIM_ASSIGN_OR_RETURN(r.trace, ExpandStep(s, opt.mutant));
  r.result = Execute(s, r.trace, opt);
  return r;
}

nlohmann::json ReportJson(const ReplayReport& r) {
  using nlohmann::json;
  const StepShape& sh = r.trace.shape;
  json calls = json::array();
  for (const Call& c : r.trace.calls) {
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
    calls.push_back(j);
  }
  json vs = json::array();
  for (const Violation& v : r.result.violations) {
    json j = {{"kind", ViolationKindName(v.kind)},
              {"class", v.bug_class},
              {"step", v.step},
              {"call", v.call},
              {"call_index", v.call_index},
              {"row", v.table_row},
              {"kernel", v.kernel},
              {"buffer", v.buffer},
              {"access", v.access},
              {"buffer_rows", v.rows},
              {"row_bytes", v.row_bytes},
              {"first_row", v.first_row},
              {"last_row", v.last_row},
              {"rows_past_end", v.rows_past_end},
              {"bytes_past_end", v.bytes_past_end},
              {"work_items", v.work_items},
              {"consequence", v.consequence},
              {"detail", v.detail}};
    if (v.first_bad_address) j["fault_address"] = Hex(v.first_bad_address);
    if (v.rows_before_start) {
      j["rows_before_start"] = v.rows_before_start;
      j["bytes_before_start"] = v.bytes_before_start;
    }
    if (!v.cause.empty()) j["cause"] = v.cause;
    vs.push_back(j);
  }
  return json{{"case", r.scenario.name},
              {"profile", r.scenario.engine.name},
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
              {"violations", vs}};
}

std::string ReportText(const ReplayReport& r) {
  const StepShape& sh = r.trace.shape;
  const Scenario& s = r.scenario;
  std::string out;
  out += fmt::format("case {}  profile {}  kernel {}  target {}  allocator {}\n", s.name,
                     s.engine.name, DecodeVariant(s), ref::ArchName(s.target),
                     s.allocator.model == AllocatorModel::kExact ? "exact" : "caching");
  out += fmt::format(
      "step: B = {} requests, Q = K+1 = {}, rung R = {} ({}), scheduled_tokens = {}, "
      "running_tokens = {}, kernel heads {}\n",
      sh.B, sh.Q, sh.R, sh.graph ? "graph replay" : "eager", sh.scheduled_tokens, sh.running_tokens,
      sh.kernel_heads);
  out += "\ncalls:\n";
  for (const Call& c : r.trace.calls) {
    std::string rows;
    if (c.kind == CallKind::kDecode || c.kind == CallKind::kReduce)
      rows = fmt::format("q/o {} rows, plan covers {} rows", c.q_rows, c.plan_rows);
    else if (c.kind == CallKind::kPlanBuild || c.kind == CallKind::kPlanUpdate)
      rows = fmt::format("{} batches, plan covers {} q rows",
                         r.trace.plans[c.plan].request.kv_indptr.size() - 1, c.plan_rows);
    else
      rows = c.note;
    out += fmt::format("  {:>3} {:<13} {:<6} {:<22} {:<30} {}\n", c.index, c.step, c.table_row,
                       c.name, c.kernel + (c.graph_replay ? " (graph)" : ""), rows);
  }
  if (r.clean()) {
    out += fmt::format("\nverdict: clean — no call touches memory outside its buffers");
    if (r.result.unwritten_pad_rows > 0)
      out += fmt::format(" ({} padding rows of o stay unwritten; the engine drops them)",
                         r.result.unwritten_pad_rows);
    out += "\n";
    return out;
  }
  out += fmt::format("\nverdict: {} violation(s)\n", r.result.violations.size());
  for (const Violation& v : r.result.violations) {
    out += fmt::format("\n  [{}] class {}  {} / {} ({})  {} {}\n", ViolationKindName(v.kind),
                       v.bug_class, v.step, v.call, v.kernel, v.access, v.buffer);
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
    out += fmt::format("      on hardware: {}{}\n", v.consequence,
                       v.first_bad_address ? " at " + Hex(v.first_bad_address) : "");
    out += fmt::format("      {}\n", v.detail);
    if (!v.cause.empty()) out += fmt::format("      cause: {}\n", v.cause);
  }
  return out;
}

}  // namespace mlasim::sim
