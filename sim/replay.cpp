#include "sim/replay.h"

#include <fmt/format.h>

#include "sim/contract.h"
#include "sim/engine.h"

namespace mlasim::sim {
namespace {

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

namespace {

// The layout's "accesses" (docs/cli.md, "Layout JSON"): every out-of-bounds access of the layout's
// call, and of any call to a persistent buffer (those addresses are the same at every call), so
// `explain-fault` names the call and work items behind a fault address.
void AddLayoutAccesses(ReplayReport& r) {
  if (!r.result.layout.is_object()) return;
  nlohmann::json acc = nlohmann::json::array();
  for (const Violation& v : r.result.violations) {
    if (v.kind != ViolationKind::kOutOfBounds) continue;
    bool persistent = false;
    for (const PersistentBuffer& p : r.trace.persistent) persistent |= p.name == v.buffer;
    if (!persistent && v.call_index != r.result.layout_call) continue;
    acc.push_back({{"call_index", v.call_index},
                   {"step", v.step},
                   {"call", v.call},
                   {"buffer", v.buffer},
                   {"access", AccessName(v.access)},
                   {"first_row", v.first_row},
                   {"last_row", v.last_row},
                   {"work_items", v.work_items}});
  }
  r.result.layout["accesses"] = std::move(acc);
}

}  // namespace

StatusOr<ReplayReport> Replay(const Scenario& s, const ExecuteOptions& opt) {
  ReplayReport r;
  r.scenario = s;
  // A mutant's world and its scenario-level changes (sim/mutants.h); ExpandStep applies the rest.
  if (opt.mutant != SimMutant::kNone) {
    MLASIM_ASSIGN_OR_RETURN(r.scenario, MutantScenario(s, opt.mutant));
  }
  MLASIM_ASSIGN_OR_RETURN(r.trace, ExpandStep(r.scenario, opt.mutant));
  r.result = Execute(r.scenario, r.trace, opt);
  AddLayoutAccesses(r);
  return r;
}

}  // namespace mlasim::sim
