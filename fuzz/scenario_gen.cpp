#include "fuzz/scenario_gen.h"

#include <algorithm>
#include <cstdint>
#include <tuple>

#include "fuzz/draw.h"
#include "sim/call_table.h"
#include "sim/index_values.h"

namespace mlasim::fuzz {
namespace {

using sim::Scenario;

// The swarm knobs (SwarmKnobs), in draw order.
enum Knob : int {
  kProfile,
  kModel,
  kMtpK,
  kKvDtype,
  kGraph,
  kDcp,
  kDp,
  kKernel,
  kAllocator,
  kKvGranularity,
  kMaxSplit,
  kTopkLengths,
  kHostileIndices,
  kDisagreements,
  kPaged,
  kQLens,
  kKnobCount
};

struct KnobSpec {
  const char* name;
  std::vector<std::string> options;
};

// Every knob with every option it has in some config; KnobOptions narrows them to a config.
const std::vector<KnobSpec>& KnobSpecs() {
  static const std::vector<KnobSpec> k = {
      {"profile", {}},  // the config's profiles
      {"model", {"sparse", "dense"}},
      {"mtp_k", {"0", "1", "2+"}},
      {"kv_dtype", {"fp8", "bf16"}},
      {"graph", {"capture", "eager"}},
      {"dcp", {"off", "on"}},
      {"dp", {"off", "on"}},
      {"kernel", {"asm", "opus", "hk"}},
      {"allocator", {"exact", "caching"}},
      {"kv_granularity", {"16", "32", "64", "8"}},
      {"max_split", {"16", "none", "1-32"}},
      {"topk_lengths", {"off", "on"}},
      {"hostile_indices", {"off", "on"}},
      {"disagreements",
       {"off", "launch_grid", "o_rows", "kernel_heads", "planner_cu_count", "sizing", "plan_from"}},
      {"paged", {"off", "on"}},
      {"q_lens", {"uniform", "ragged"}},
  };
  return k;
}

// Whether knob `k` is left out of `cfg` altogether (its family or feature is off).
bool KnobAbsent(const GenConfig& cfg, int k) {
  return (k == kModel && cfg.sparse_only) || (k == kDcp && !cfg.allow_dcp) ||
         (k == kDp && !cfg.allow_dp) || (k == kHostileIndices && !cfg.hostile_indices) ||
         (k == kDisagreements && !cfg.disagreements) || (k == kPaged && !cfg.paged) ||
         (k == kQLens && !cfg.ragged_q);
}

// The options knob `k` has under `cfg`; fewer than two: the knob is not drawn.
std::vector<std::string> KnobOptions(const GenConfig& cfg, int k) {
  if (k == kProfile) return cfg.profiles;
  return KnobAbsent(cfg, k) ? std::vector<std::string>{} : KnobSpecs()[k].options;
}

// KnobOptions(cfg, k).size(), without copying the names (DrawSwarm runs in every case).
size_t KnobOptionCount(const GenConfig& cfg, int k) {
  if (k == kProfile) return cfg.profiles.size();
  return KnobAbsent(cfg, k) ? 0 : KnobSpecs()[k].options.size();
}

// One case's left-out options per knob (bit i: option i); all zero without swarm.
struct Swarm {
  uint32_t omitted[kKnobCount] = {};
};

// The swarm draws, first in every case: per drawn knob a uniform mask over its options (each
// option left out with probability 1/2); a mask leaving every option out leaves none out. Masks
// shrink towards 0: a shrunk case leaves nothing out. (elementOf, unlike inRange, ignores the
// RapidCheck size, which would leave nothing out in small cases.)
Swarm DrawSwarm(const GenConfig& cfg, Drawer& d) {
  Swarm sw;
  if (!cfg.swarm) return sw;
  for (int k = 0; k < kKnobCount; ++k) {
    const size_t n = KnobOptionCount(cfg, k);
    if (n < 2 || n > 16) continue;
    const uint32_t all = (1u << n) - 1;
    const uint32_t m = d(IndexBelow{all + 1});
    sw.omitted[k] = m == all ? 0 : m;
  }
  return sw;
}

// One knob's draw: with nothing left out, `today` (the draw of --swarm off, byte for byte);
// otherwise a weighted choice among the options left in (bit i of `omitted` = the dist at i of
// `options` out; each dist left in as often as its weight): the choice, then that dist's draw.
template <typename Today, typename T, typename... D>
T Choose(Drawer& d, uint32_t omitted, const Today& today, const OneOf<T, D...>& options) {
  static_assert(std::is_same_v<typename Today::Value, T>, "today draws what the options do");
  if (omitted == 0) return d(today);
  // Each option left in, as often as its weight (size-independent, shrinks to the first). The
  // list is the thread's, reused: it is drawn from before the option's own draw begins.
  thread_local std::vector<size_t> slots;
  slots.clear();
  for (size_t i = 0; i < options.weights.size(); ++i)
    if (!(omitted >> i & 1u)) slots.insert(slots.end(), options.weights[i], i);
  MLASIM_ASSERT(!slots.empty(), "a swarm mask leaves at least one option in");
  return DrawAlternative(d, options, d(ElementOf<size_t>{&slots}));
}

// An on/off feature: `on_weight` to `off_weight` today; swarm may force either side.
bool Feature(Drawer& d, uint32_t omitted, size_t off_weight, size_t on_weight) {
  return Choose(d, omitted, WeightedElement(off_weight, false, on_weight, true),
                WeightedOneOf<bool>({off_weight, on_weight}, Just<bool>{false}, Just<bool>{true}));
}

// L = KV tokens incl. this step's Q verify tokens: weight on the minimum (exactly Q), tails just
// above it, multiples of the split granularity (16) and page sizes, lengths around top-k.
int32_t DrawKvLen(Drawer& d, int32_t q, int32_t topk) {
  return d(WeightedOneOf<int32_t>(
      {3, 2, 2, 1, 2, 3, 1}, Just<int32_t>{q},
      Map(InRange<int32_t>{1, 16}, [q](int32_t x) { return q + x; }),
      Map(InRange<int32_t>{1, 128}, [q](int32_t k) { return std::max(q, 16 * k); }),
      Map(InRange<int32_t>{1, 64}, [q](int32_t k) { return std::max(q, 64 * k); }),
      Map(InRange<int32_t>{-8, 9}, [q, topk](int32_t x) { return std::max(q, topk + x); }),
      InRange<int32_t>{q, 8192}, InRange<int32_t>{q, 65536}));
}

std::vector<int32_t> DrawCaptureSizes(Drawer& d) {
  // The two fixed lists, built once (a Just holds its own copy).
  static const std::vector<int32_t> kPowers = {1, 2, 4, 8, 16, 32, 48, 64, 128, 256, 512};
  static const std::vector<int32_t> kSixteens = [] {
    std::vector<int32_t> v = {1, 2, 4, 8};
    for (int32_t x = 16; x <= 512; x += 16) v.push_back(x);
    return v;
  }();
  // Arbitrary lists come first so that shrinking ends on one small size: the founding fault
  // needs only one padded request.
  return d(WeightedOneOf<std::vector<int32_t>>(
      {3, 4, 2},
      Map(VectorOf<InRange<int32_t>>{{1, 80}},
          [](std::vector<int32_t> v) {
            std::sort(v.begin(), v.end());
            v.erase(std::unique(v.begin(), v.end()), v.end());
            if (v.empty()) v.push_back(2);
            return v;
          }),
      Just<std::vector<int32_t>>{kPowers}, Just<std::vector<int32_t>>{kSixteens}));
}

// The indexer's top-k count of every verify token of every request (sparse models), up to the
// engine's min(L - Q + j + 1, topk).
void GenTopkLengths(Drawer& d, Scenario& s) {
  const int32_t q = s.mtp_k + 1;
  for (sim::RequestSpec& r : s.requests) {
    const int32_t L = r.context - r.rejected_prev;
    for (int32_t j = 0; j < q; ++j) {
      const int32_t full = std::min(L - q + j + 1, s.model.topk);
      r.topk_lengths.push_back(d(InRange<int32_t>{1, std::max(full, 1) + 1}));
    }
  }
}

// One request of a step with Q = `q` tokens per request: drafts the previous verify rejected, the
// KV length (GenKvLen) and the drafts this verify rejects.
sim::RequestSpec GenRequest(Drawer& d, int32_t q, int32_t topk) {
  sim::RequestSpec r;
  r.rejected_prev = d(WeightedOneOf<int32_t>({3, 1}, Just<int32_t>{0}, InRange<int32_t>{0, q}));
  r.context = DrawKvLen(d, q, topk) + r.rejected_prev;
  r.rejected = d(WeightedOneOf<int32_t>({2, 2}, Just<int32_t>{0}, InRange<int32_t>{0, q}));
  return r;
}

// Triage (ReportPins): the report's step with the drawn batch contents and allocator layout.
Scenario GenPinned(const ReportPins& pins, Drawer& d) {
  Scenario s = pins.base;
  const int32_t q = s.mtp_k + 1;
  for (int32_t i = 0; i < pins.batch; ++i) s.requests.push_back(GenRequest(d, q, s.model.topk));
  if (s.model.sparse && d(WeightedElement(6, false, 1, true))) GenTopkLengths(d, s);
  s.allocator.page_bytes = d(Element<int64_t>(4096, 65536));
  if (s.allocator.model == sim::AllocatorModel::kCaching) {
    const int32_t n = d(InRange<int32_t>{0, 4});
    for (int32_t i = 0; i < n; ++i)
      s.allocator.live_before_call.push_back(
          {"live_" + std::to_string(i), 512 * d(InRange<int64_t>{1, 4097})});
  }
  return s;
}

// Request shapes the engine can be configured with (§3 of the round-2 model): the planner's
// split granularity and budget, and top-k counts below the indexer's default (an index pool).
void GenRequestShapes(Drawer& d, Scenario& s, const Swarm& sw) {
  s.kv_granularity =
      Choose(d, sw.omitted[kKvGranularity], WeightedElement<int32_t>(8, 16, 1, 32, 1, 64, 1, 8),
             WeightedOneOf<int32_t>({8, 1, 1, 1}, Just<int32_t>{16}, Just<int32_t>{32},
                                    Just<int32_t>{64}, Just<int32_t>{8}));
  const auto max_split = WeightedOneOf<int32_t>({8, 1, 1}, Just<int32_t>{16}, Just<int32_t>{-1},
                                                InRange<int32_t>{1, 33});
  s.max_split_per_batch = Choose(d, sw.omitted[kMaxSplit], max_split, max_split);
  if (!s.model.sparse || !Feature(d, sw.omitted[kTopkLengths], 6, 1)) return;
  GenTopkLengths(d, s);
}

// Hostile values in the index buffer the verify step fills (kv_cache.index_values).
void GenHostileIndices(Drawer& d, Scenario& s) {
  s.kv_cache.modelled = true;
  const int32_t tokens =
      s.model.sparse ? sim::ScheduledTokens(s) : static_cast<int32_t>(s.requests.size());
  if (tokens <= 0) return;  // a step that schedules no token (ragged q lengths all 0): no slot
  const int32_t n = d(InRange<int32_t>{0, 4});
  for (int32_t i = 0; i < n; ++i) {
    sim::KvCacheSpec::IndexValue v;
    v.token = d(InRange<int32_t>{0, tokens});
    v.position = d(InRange<int32_t>{0, 64});
    v.value = d(Element<int64_t>(-1, 2147483647, 2147480000, -2147483648LL, 1 << 24));
    s.kv_cache.index_values.push_back(v);
  }
}

// Ragged verify q lengths (batch.q_lens): each request's q_i = Q - d_i, d_i in 0..Q, so 0-length
// requests occur and every d_i shrinks to 0, i.e. towards the uniform Q (and a shrunk K makes
// them shorter). Per-token top-k counts and the DP rank's token count follow the new lengths.
void GenRaggedQ(Drawer& d, Scenario& s) {
  const int32_t q = s.mtp_k + 1;
  // inRange at the nominal size: the whole range whatever the case's RapidCheck size (small
  // cases would otherwise stay uniform), shrinking towards d = 0. (elementOf does not shrink.)
  const Resized<InRange<int32_t>> shorter{rc::kNominalSize, {0, q + 1}};
  for (sim::RequestSpec& r : s.requests) {
    r.q_len = q - d(shorter);
    r.rejected = std::min(r.rejected, std::max(r.q_len - 1, 0));  // it verifies q_len - 1 drafts
    if (!r.topk_lengths.empty()) r.topk_lengths.resize(static_cast<size_t>(r.q_len));
  }
  if (!s.parallel.dp_scheduled_tokens.empty())
    s.parallel.dp_scheduled_tokens[0] = sim::ScheduledTokens(s);
}

// One stated disagreement between what the engine allocates, sizes, plans and launches.
// kind: 0 launch grid, 1 o rows, 2 kernel heads, 3 planner CU count, 4 sizing batch, 5 plan from
// capture.
void GenDisagreement(Drawer& d, Scenario& s, int kind) {
  const bool sparse = s.model.sparse;
  const std::string decode = sparse ? "verify.sparse_decode" : "verify.dense_decode";
  sim::CallOverride o;
  switch (kind) {
    case 0:
      o.call = decode;
      o.launch_grid = d(Element(1, 16, 64, 305, 320, 1024));
      break;
    case 1:
      o.call = decode;
      o.o_rows = d(InRange<int64_t>{0, static_cast<int64_t>(s.requests.size()) + 1});
      break;
    case 2:
      o.call = decode;
      o.kernel_heads = d(Element(32, 64, 128));
      break;
    case 3:
      o.call = sparse ? "verify.sparse_mtp_plan" : "verify.main_plan";
      o.planner_cu_count = d(Element(80, 256, 304, 512));
      break;
    case 4: {
      sim::SizingOverride z;
      z.buffers = "main.";
      z.batch = d(InRange<int32_t>{1, static_cast<int32_t>(s.requests.size()) + 1});
      s.sizing.push_back(z);
      return;
    }
    default:
      o.call = sparse ? "verify.sparse_mtp_plan" : "verify.main_plan";
      o.plan_from = "capture";
      break;
  }
  s.calls.push_back(o);
}

// The --generate families, each drawn only when enabled: with nothing left out, the draws of
// --swarm off.
void GenFamilies(Drawer& d, const GenConfig& cfg, const Swarm& sw, Scenario& s) {
  // First, so that the hostile index values draw their tokens among the ragged ones.
  // Only for aiter engines: the vLLM / SGLang profiles' planners take one q length per batch
  // and replay refuses a stated batch.q_lens there (a refused case would check nothing).
  const std::string& backend = s.engine.attention_backend;
  if (cfg.ragged_q && (backend.empty() || backend == "aiter") &&
      Feature(d, sw.omitted[kQLens], 1, 1))
    GenRaggedQ(d, s);
  if (cfg.paged && !s.model.sparse && Feature(d, sw.omitted[kPaged], 1, 1)) {
    s.kv_cache.modelled = true;
    s.kv_cache.page_size = d(Element(16, 64));
  }
  if (cfg.hostile_indices && Feature(d, sw.omitted[kHostileIndices], 1, 2)) GenHostileIndices(d, s);
  if (!cfg.disagreements) return;
  if (sw.omitted[kDisagreements] == 0) {
    if (d(WeightedElement(1, false, 2, true))) GenDisagreement(d, s, d(InRange<int>{0, 6}));
    return;
  }
  // Options: off (weight 3), then the six kinds (weight 1 each): today's 1/3 off, 2/3 spread.
  const int kind =
      Choose(d, sw.omitted[kDisagreements], Just<int>{-1},
             WeightedOneOf<int>({3, 1, 1, 1, 1, 1, 1}, Just<int>{-1}, Just<int>{0}, Just<int>{1},
                                Just<int>{2}, Just<int>{3}, Just<int>{4}, Just<int>{5}));
  if (kind >= 0) GenDisagreement(d, s, kind);
}

// A dense case whose page size the kernel under test does not run gets the smallest one it runs
// (a modelled KV cache: page sizes above 1 live there). No draw: the case is otherwise the same.
void KeepPageSizeRunnable(const KernelLimits& k, Scenario& s) {
  const int32_t page = k.RunnablePageSize();
  if (s.model.sparse || k.RunsPageSize(s.kv_cache.page_size) || page == 0) return;
  s.kv_cache.modelled = true;
  s.kv_cache.page_size = page;
}

// Heads per rank the kernel under test runs: `drawn` when it runs it, else the smallest count it
// runs above it (else the largest below) among those the generator draws; `drawn` when it runs
// none of them. No draw: the case is otherwise the same.
int32_t RunnableHeads(const KernelLimits& k, int32_t drawn) {
  if (k.RunsHeads(drawn)) return drawn;
  int32_t above = 0, below = 0;
  for (int32_t h : {8, 16, 24, 32, 48, 64, 128}) {
    if (!k.RunsHeads(h)) continue;
    if (h > drawn && above == 0) above = h;
    if (h < drawn) below = h;
  }
  return above != 0 ? above : below != 0 ? below : drawn;
}

// One of the config's profiles, among those the swarm left in.
std::string PickProfile(Drawer& d, const GenConfig& cfg, uint32_t omitted) {
  if (omitted == 0) return d(ElementOf<std::string>{&cfg.profiles});
  std::vector<std::string> left;
  for (size_t i = 0; i < cfg.profiles.size(); ++i)
    if (!(omitted >> i & 1u)) left.push_back(cfg.profiles[i]);
  return d(ElementOf<std::string>{&left});
}

}  // namespace

std::vector<SwarmKnob> SwarmKnobs(const GenConfig& config) {
  std::vector<SwarmKnob> out;
  if (!config.swarm) return out;
  for (int k = 0; k < kKnobCount; ++k) {
    std::vector<std::string> options = KnobOptions(config, k);
    if (options.size() >= 2 && options.size() <= 16)
      out.push_back({KnobSpecs()[k].name, std::move(options)});
  }
  return out;
}

namespace {

// The drawn knobs' masks of `sw`, in knob order.
SwarmDraw DrawOf(const GenConfig& config, const Swarm& sw) {
  SwarmDraw d;
  if (!config.swarm) return d;
  for (int k = 0; k < kKnobCount; ++k) {
    const size_t n = KnobOptionCount(config, k);
    if (n >= 2 && n <= 16) d.omitted.push_back(sw.omitted[k]);
  }
  return d;
}

}  // namespace

SwarmDraw SwarmFromSeed(const GenConfig& config, uint64_t seed, int size) {
  if (!config.swarm || config.pins) return {};  // the pinned generator draws no swarm
  Drawer direct(rc::Random(seed), size);
  return DrawOf(config, DrawSwarm(config, direct));
}

std::vector<std::string> SwarmOmittedNames(const GenConfig& config, const SwarmDraw& draw) {
  std::vector<std::string> out;
  const std::vector<SwarmKnob> knobs = SwarmKnobs(config);
  for (size_t k = 0; k < knobs.size() && k < draw.omitted.size(); ++k)
    for (size_t i = 0; i < knobs[k].options.size(); ++i)
      if (draw.omitted[k] >> i & 1u) out.push_back(knobs[k].name + "." + knobs[k].options[i]);
  return out;
}

std::vector<std::vector<std::string>> SwarmOptionKeys(const GenConfig& config,
                                                      const std::string& prefix) {
  std::vector<std::vector<std::string>> keys;
  for (const SwarmKnob& knob : SwarmKnobs(config)) {
    keys.emplace_back();
    for (const std::string& option : knob.options)
      keys.back().push_back(prefix + knob.name + "." + option);
  }
  return keys;
}

const std::vector<std::string>& GeneratorFamilies() {
  static const std::vector<std::string> k = {"hostile-indices", "disagreements", "paged",
                                             "ragged-q"};
  return k;
}

Status EnableFamilies(const std::vector<std::string>& names, GenConfig* config) {
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& n = names[i];
    // A family twice generates the same cases, but a campaign's identity (--resume) holds the
    // list as given: refused rather than a second campaign of the same cases.
    if (std::find(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(i), n) !=
        names.begin() + static_cast<std::ptrdiff_t>(i))
      return InvalidArgumentError("--generate", "family \"" + n + "\" given twice");
    if (n == "hostile-indices")
      config->hostile_indices = true;
    else if (n == "disagreements")
      config->disagreements = true;
    else if (n == "paged")
      config->paged = true;
    else if (n == "ragged-q")
      config->ragged_q = true;
    else
      return InvalidArgumentError("--generate", "unknown family \"" + n +
                                                    "\" (known: hostile-indices, disagreements, "
                                                    "paged, ragged-q)");
  }
  return OkStatus();
}

namespace {

// GenScenario's draws, in its order (a seed's cases depend on it): the model (K, sparse, top-k,
// TP, heads, KV dtype, rope), the batch, graph and parallelism, then target, kernel, planner,
// allocator and engine.
void DrawModel(Drawer& d, const GenConfig& cfg, const Swarm& sw, Scenario& s) {
  const int32_t max_k = cfg.small ? 4 : 8;
  s.mtp_k = Choose(d, sw.omitted[kMtpK],
                   WeightedOneOf<int32_t>({1, 6}, Just<int32_t>{0}, InRange<int32_t>{1, max_k}),
                   WeightedOneOf<int32_t>({1, 2, 4}, Just<int32_t>{0}, Just<int32_t>{1},
                                          InRange<int32_t>{2, max_k}));
  s.model.sparse = cfg.sparse_only
                       ? true
                       : Choose(d, sw.omitted[kModel], WeightedElement(2, true, 1, false),
                                WeightedOneOf<bool>({2, 1}, Just<bool>{true}, Just<bool>{false}));
  if (!cfg.kernel.sparse) s.model.sparse = false;  // the kernel's limits: no extra draw
  if (!cfg.kernel.dense) s.model.sparse = true;
  s.model.topk = d(Element(2048, 64, 512));
  s.parallel.tp = d(Element(1, 2, 4, 8));
  // Heads per rank 16..128 (and below 16: repeated), including counts that fold or are refused.
  const int32_t per_rank = RunnableHeads(
      cfg.kernel, d(WeightedElement<int32_t>(6, 16, 2, 32, 2, 64, 1, 128, 1, 48, 1, 8, 1, 24)));
  s.model.heads = per_rank * s.parallel.tp;
  s.model.kv_dtype = Choose(d, sw.omitted[kKvDtype], Element(ref::DType::kFp8, ref::DType::kBf16),
                            WeightedOneOf<ref::DType>({1, 1}, Just<ref::DType>{ref::DType::kFp8},
                                                      Just<ref::DType>{ref::DType::kBf16}));
  if (s.model.kv_dtype == ref::DType::kFp8 && !cfg.kernel.fp8_kv)
    s.model.kv_dtype = ref::DType::kBf16;
  if (s.model.kv_dtype == ref::DType::kBf16 && !cfg.kernel.bf16_kv)
    s.model.kv_dtype = ref::DType::kFp8;
  s.model.rope_dim = d(WeightedElement<int32_t>(5, 64, 1, 0));
}

// The requests (Q tokens each) and, for kernel-input runs of sparse models, index values.
int32_t DrawBatch(Drawer& d, const GenConfig& cfg, Scenario& s) {
  const int32_t q = s.mtp_k + 1;
  const int32_t batch = d(WeightedOneOf<int32_t>(
      {6, 3, 1}, InRange<int32_t>{1, 9}, InRange<int32_t>{1, std::min(cfg.max_batch, 65) + 1},
      InRange<int32_t>{1, cfg.max_batch + 1}));
  s.requests.reserve(static_cast<size_t>(batch));
  for (int32_t i = 0; i < batch; ++i) s.requests.push_back(GenRequest(d, q, s.model.topk));
  if (cfg.kernel_inputs && s.model.sparse && d(WeightedElement(1, false, 2, true))) {
    s.kv_cache.modelled = true;
    const int32_t n = d(InRange<int32_t>{1, 5});
    for (int32_t i = 0; i < n; ++i) {
      sim::KvCacheSpec::IndexValue v;
      v.token = d(InRange<int32_t>{0, batch * q});
      v.position = d(InRange<int32_t>{0, 8});
      v.value = d(Element<int64_t>(-1, -2, INT32_MAX, INT32_MIN));
      s.kv_cache.index_values.push_back(v);
    }
  }
  return batch;
}

void DrawGraphAndParallelism(Drawer& d, const GenConfig& cfg, const Swarm& sw, int32_t batch,
                             Scenario& s) {
  const int32_t q = s.mtp_k + 1;
  s.graph.capture_sizes = DrawCaptureSizes(d);
  s.graph.eager = Feature(d, sw.omitted[kGraph], 9, 1);
  // Engines configured for small batches size every buffer for fewer sequences.
  const int32_t seqs = cfg.small ? 64 : d(Element(512, 256, 128, 64));
  s.graph.max_num_seqs = std::max(seqs, batch);
  s.graph.max_num_batched_tokens = std::max(16384, batch * q);
  if (cfg.allow_dcp && Feature(d, sw.omitted[kDcp], 6, 1)) {
    s.parallel.dcp = d(Element(2, 4, 8));
    s.parallel.dcp_interleave = d(Element(1, 1, 16, 64));
  }
  if (cfg.allow_dp && Feature(d, sw.omitted[kDp], 5, 1)) {
    s.parallel.dp = d(InRange<int32_t>{2, 5});
    s.parallel.dp_scheduled_tokens.push_back(batch * q);
    for (int32_t r = 1; r < s.parallel.dp; ++r)
      s.parallel.dp_scheduled_tokens.push_back(q * d(InRange<int32_t>{0, batch + 40}));
  }
}

void DrawTargetKernelAndEngine(Drawer& d, const GenConfig& cfg, const Swarm& sw, Scenario& s) {
  s.target = d(Element(ref::Arch::kGfx950, ref::Arch::kGfx942));
  s.revision = d(WeightedElement(5, ref::Revision::k2026_08, 1, ref::Revision::k2026_03));
  s.cu_count = d(WeightedOneOf<int32_t>({2, 3}, Just<int32_t>{0}, InRange<int32_t>{2, 65}));
  s.kernel = Choose(d, sw.omitted[kKernel], Element<std::string>("asm", "asm", "opus", "hk"),
                    WeightedOneOf<std::string>({2, 1, 1}, Just<std::string>{"asm"},
                                               Just<std::string>{"opus"}, Just<std::string>{"hk"}));
  // Shrinks toward the serial planner, which gives every padded request a work item (aiter's
  // parallel planner may drop trailing zero-KV pads, which would stall shrinking).
  s.serial_planner = d(WeightedElement(1, true, 3, false));
  s.allocator.model = Choose(d, sw.omitted[kAllocator],
                             Element(sim::AllocatorModel::kExact, sim::AllocatorModel::kCaching),
                             WeightedOneOf<sim::AllocatorModel>(
                                 {1, 1}, Just<sim::AllocatorModel>{sim::AllocatorModel::kExact},
                                 Just<sim::AllocatorModel>{sim::AllocatorModel::kCaching}));
  s.allocator.page_bytes = d(Element<int64_t>(4096, 65536));
  s.engine = *sim::GetEngineProfile(PickProfile(d, cfg, sw.omitted[kProfile]), "engine");
  // A profile whose call table has no sparse decode (vLLM's, SGLang's) models dense MLA only: its
  // cases are dense (no extra draw: the other profiles' cases keep their shapes), never sparse
  // cases the step would refuse.
  if (s.model.sparse && !sim::ProfileHasSparseDecode(s.engine)) s.model.sparse = false;
}

// One case: the swarm first (SwarmFromSeed replays these draws alone; *swarm gets it when not
// null), then the scenario, every draw from `d`.
Scenario Generate(const GenConfig& cfg, Drawer& d, Swarm* swarm) {
  if (cfg.pins) return GenPinned(*cfg.pins, d);
  const Swarm sw = DrawSwarm(cfg, d);
  if (swarm) *swarm = sw;
  Scenario s;
  s.name = "fuzz";
  DrawModel(d, cfg, sw, s);
  const int32_t batch = DrawBatch(d, cfg, s);
  DrawGraphAndParallelism(d, cfg, sw, batch, s);
  DrawTargetKernelAndEngine(d, cfg, sw, s);
  // Drawn last, so that every case of a seed keeps the shape it had before these knobs.
  GenRequestShapes(d, s, sw);
  GenFamilies(d, cfg, sw, s);
  KeepPageSizeRunnable(cfg.kernel, s);
  s.contracts = cfg.contracts;
  // Positions are drawn without the regions' lengths: keep the values a fill places, so that
  // the case's JSON replays (`mlasim replay` refuses the others, sim/index_values.h).
  sim::DropUnplacedIndexValues(s);
  return s;
}

}  // namespace

rc::Gen<Scenario> GenScenario(const GenConfig& cfg) {
  // Held by pointer: RapidCheck copies the generator's function several times per case.
  return rc::gen::exec([c = std::make_shared<const GenConfig>(cfg)] {
    Drawer through_rapidcheck;
    return Generate(*c, through_rapidcheck, nullptr);
  });
}

rc::Shrinkable<Scenario> ScenarioFromSeed(const GenConfig& config, uint64_t seed, int size) {
  return GenScenario(config)(rc::Random(seed), size);
}

Scenario ScenarioAndSwarmFromSeed(const GenConfig& config, uint64_t seed, int size,
                                  SwarmDraw* swarm) {
  Drawer direct(rc::Random(seed), size);
  Swarm sw;
  Scenario s = Generate(config, direct, &sw);
  *swarm = config.pins ? SwarmDraw{} : DrawOf(config, sw);  // the pinned generator draws none
  return s;
}

std::mutex& GeneratorMutex() {
  static std::mutex mu;
  return mu;
}

}  // namespace mlasim::fuzz
