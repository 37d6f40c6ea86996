#include "fuzz/scenario_gen.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <tuple>

#include "sim/index_values.h"

namespace mlasim::fuzz {
namespace {

using sim::Scenario;

// A generator built once per thread and key: RapidCheck generators are immutable values, so
// drawing from a kept one draws exactly what drawing from a fresh one does, without building
// (and freeing) its parts for every request of every case.
template <typename Key, typename G, typename Make>
const G& Kept(const Key& key, Make&& make) {
  thread_local std::map<Key, G> kept;
  auto it = kept.find(key);
  if (it == kept.end()) it = kept.emplace(key, make()).first;
  return it->second;
}

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

// Where GenScenario's generator puts the swarm it draws first (ScenarioAndSwarmFromSeed), once;
// null: nowhere.
thread_local Swarm* swarm_out = nullptr;

// The swarm draws, first in every case: per drawn knob a uniform mask over its options (each
// option left out with probability 1/2); a mask leaving every option out leaves none out. Masks
// shrink towards 0: a shrunk case leaves nothing out. (elementOf, unlike inRange, ignores the
// RapidCheck size, which would leave nothing out in small cases.)
Swarm DrawSwarm(const GenConfig& cfg) {
  Swarm sw;
  if (!cfg.swarm) return sw;
  for (int k = 0; k < kKnobCount; ++k) {
    const size_t n = KnobOptionCount(cfg, k);
    if (n < 2 || n > 16) continue;
    const uint32_t all = (1u << n) - 1;
    const uint32_t m = *Kept<size_t, rc::Gen<uint32_t>>(n, [&] {
      std::vector<uint32_t> masks(all + 1);
      for (uint32_t x = 0; x <= all; ++x) masks[x] = x;
      return rc::gen::elementOf(masks);
    });
    sw.omitted[k] = m == all ? 0 : m;
  }
  return sw;
}

// A weighted option and its generator.
template <typename T>
using Options = std::vector<std::pair<int, rc::Gen<T>>>;

// One knob's draw: with nothing left out, `today` (the draw of --swarm off, byte for byte);
// otherwise a weighted choice among the options left in (bit i of `omitted` = options[i] out).
template <typename T>
T Choose(uint32_t omitted, const rc::Gen<T>& today, const Options<T>& options) {
  if (omitted == 0) return *today;
  // Each option left in, as often as its weight (size-independent, shrinks to the first).
  std::vector<size_t> slots;
  for (size_t i = 0; i < options.size(); ++i)
    if (!(omitted >> i & 1u)) slots.insert(slots.end(), static_cast<size_t>(options[i].first), i);
  MLASIM_ASSERT(!slots.empty(), "a swarm mask leaves at least one option in");
  return *options[*rc::gen::elementOf(slots)].second;
}

// An on/off feature: `on_weight` to `off_weight` today; swarm may force either side.
bool Feature(uint32_t omitted, int off_weight, int on_weight) {
  struct Gens {
    rc::Gen<bool> today;
    Options<bool> options;
  };
  const Gens& g = Kept<std::pair<int, int>, Gens>(std::make_pair(off_weight, on_weight), [&] {
    return Gens{rc::gen::weightedElement<bool>({{static_cast<size_t>(off_weight), false},
                                                {static_cast<size_t>(on_weight), true}}),
                {{off_weight, rc::gen::just(false)}, {on_weight, rc::gen::just(true)}}};
  });
  return Choose<bool>(omitted, g.today, g.options);
}

// L = KV tokens incl. this step's Q verify tokens: weight on the minimum (exactly Q), tails just
// above it, multiples of the split granularity (16) and page sizes, lengths around top-k.
rc::Gen<int32_t> GenKvLen(int32_t q, int32_t topk) {
  return rc::gen::weightedOneOf<int32_t>({
      {3, rc::gen::just(q)},
      {2, rc::gen::map(rc::gen::inRange<int32_t>(1, 16), [q](int32_t d) { return q + d; })},
      {2, rc::gen::map(rc::gen::inRange<int32_t>(1, 128),
                       [q](int32_t k) { return std::max(q, 16 * k); })},
      {1, rc::gen::map(rc::gen::inRange<int32_t>(1, 64),
                       [q](int32_t k) { return std::max(q, 64 * k); })},
      {2, rc::gen::map(rc::gen::inRange<int32_t>(-8, 9),
                       [q, topk](int32_t d) { return std::max(q, topk + d); })},
      {3, rc::gen::inRange<int32_t>(q, 8192)},
      {1, rc::gen::inRange<int32_t>(q, 65536)},
  });
}

rc::Gen<std::vector<int32_t>> GenCaptureSizes() {
  // Arbitrary lists come first so that shrinking ends on one small size: the founding fault
  // needs only one padded request.
  return rc::gen::weightedOneOf<std::vector<int32_t>>({
      {3, rc::gen::map(rc::gen::container<std::vector<int32_t>>(rc::gen::inRange<int32_t>(1, 80)),
                       [](std::vector<int32_t> v) {
                         std::sort(v.begin(), v.end());
                         v.erase(std::unique(v.begin(), v.end()), v.end());
                         if (v.empty()) v.push_back(2);
                         return v;
                       })},
      {4, rc::gen::just(std::vector<int32_t>{1, 2, 4, 8, 16, 32, 48, 64, 128, 256, 512})},
      {2, rc::gen::just([] {
         std::vector<int32_t> v = {1, 2, 4, 8};
         for (int32_t x = 16; x <= 512; x += 16) v.push_back(x);
         return v;
       }())},
  });
}

// The indexer's top-k count of every verify token of every request (sparse models), up to the
// engine's min(L - Q + j + 1, topk).
void GenTopkLengths(Scenario& s) {
  const int32_t q = s.mtp_k + 1;
  for (sim::RequestSpec& r : s.requests) {
    const int32_t L = r.context - r.rejected_prev;
    for (int32_t j = 0; j < q; ++j) {
      const int32_t full = std::min(L - q + j + 1, s.model.topk);
      r.topk_lengths.push_back(*rc::gen::inRange<int32_t>(1, std::max(full, 1) + 1));
    }
  }
}

// One request of a step with Q = `q` tokens per request: drafts the previous verify rejected, the
// KV length (GenKvLen) and the drafts this verify rejects.
sim::RequestSpec GenRequest(int32_t q, int32_t topk) {
  struct Gens {
    rc::Gen<int32_t> rejected_prev, context, rejected;
  };
  const Gens& g = Kept<std::pair<int32_t, int32_t>, Gens>(std::make_pair(q, topk), [&] {
    return Gens{rc::gen::weightedOneOf<int32_t>(
                    {{3, rc::gen::just(0)}, {1, rc::gen::inRange<int32_t>(0, q)}}),
                GenKvLen(q, topk),
                rc::gen::weightedOneOf<int32_t>(
                    {{2, rc::gen::just(0)}, {2, rc::gen::inRange<int32_t>(0, q)}})};
  });
  sim::RequestSpec r;
  r.rejected_prev = *g.rejected_prev;
  r.context = *g.context + r.rejected_prev;
  r.rejected = *g.rejected;
  return r;
}

// Triage (ReportPins): the report's step with the drawn batch contents and allocator layout.
Scenario GenPinned(const ReportPins& pins) {
  Scenario s = pins.base;
  const int32_t q = s.mtp_k + 1;
  for (int32_t i = 0; i < pins.batch; ++i) s.requests.push_back(GenRequest(q, s.model.topk));
  if (s.model.sparse && *rc::gen::weightedElement<bool>({{6, false}, {1, true}})) GenTopkLengths(s);
  s.allocator.page_bytes = *rc::gen::element<int64_t>(4096, 65536);
  if (s.allocator.model == sim::AllocatorModel::kCaching) {
    const int32_t n = *rc::gen::inRange<int32_t>(0, 4);
    for (int32_t i = 0; i < n; ++i)
      s.allocator.live_before_call.push_back(
          {"live_" + std::to_string(i), 512 * *rc::gen::inRange<int64_t>(1, 4097)});
  }
  return s;
}

// Request shapes the engine can be configured with (§3 of the round-2 model): the planner's
// split granularity and budget, and top-k counts below the indexer's default (an index pool).
void GenRequestShapes(Scenario& s, const Swarm& sw) {
  s.kv_granularity =
      Choose<int32_t>(sw.omitted[kKvGranularity],
                      rc::gen::weightedElement<int32_t>({{8, 16}, {1, 32}, {1, 64}, {1, 8}}),
                      {{8, rc::gen::just(16)},
                       {1, rc::gen::just(32)},
                       {1, rc::gen::just(64)},
                       {1, rc::gen::just(8)}});
  s.max_split_per_batch = Choose<int32_t>(
      sw.omitted[kMaxSplit],
      rc::gen::weightedOneOf<int32_t>(
          {{8, rc::gen::just(16)}, {1, rc::gen::just(-1)}, {1, rc::gen::inRange<int32_t>(1, 33)}}),
      {{8, rc::gen::just(16)}, {1, rc::gen::just(-1)}, {1, rc::gen::inRange<int32_t>(1, 33)}});
  if (!s.model.sparse || !Feature(sw.omitted[kTopkLengths], 6, 1)) return;
  GenTopkLengths(s);
}

// Hostile values in the index buffer the verify step fills (kv_cache.index_values).
void GenHostileIndices(Scenario& s) {
  s.kv_cache.modelled = true;
  const int32_t tokens =
      s.model.sparse ? sim::ScheduledTokens(s) : static_cast<int32_t>(s.requests.size());
  if (tokens <= 0) return;  // a step that schedules no token (ragged q lengths all 0): no slot
  const int32_t n = *rc::gen::inRange<int32_t>(0, 4);
  for (int32_t i = 0; i < n; ++i) {
    sim::KvCacheSpec::IndexValue v;
    v.token = *rc::gen::inRange<int32_t>(0, tokens);
    v.position = *rc::gen::inRange<int32_t>(0, 64);
    v.value = *rc::gen::element<int64_t>(-1, 2147483647, 2147480000, -2147483648LL, 1 << 24);
    s.kv_cache.index_values.push_back(v);
  }
}

// Ragged verify q lengths (batch.q_lens): each request's q_i = Q - d_i, d_i in 0..Q, so 0-length
// requests occur and every d_i shrinks to 0, i.e. towards the uniform Q (and a shrunk K makes
// them shorter). Per-token top-k counts and the DP rank's token count follow the new lengths.
void GenRaggedQ(Scenario& s) {
  const int32_t q = s.mtp_k + 1;
  // inRange at the nominal size: the whole range whatever the case's RapidCheck size (small
  // cases would otherwise stay uniform), shrinking towards d = 0. (elementOf does not shrink.)
  const rc::Gen<int32_t> d = rc::gen::resize(rc::kNominalSize, rc::gen::inRange<int32_t>(0, q + 1));
  for (sim::RequestSpec& r : s.requests) {
    r.q_len = q - *d;
    r.rejected = std::min(r.rejected, std::max(r.q_len - 1, 0));  // it verifies q_len - 1 drafts
    if (!r.topk_lengths.empty()) r.topk_lengths.resize(static_cast<size_t>(r.q_len));
  }
  if (!s.parallel.dp_scheduled_tokens.empty())
    s.parallel.dp_scheduled_tokens[0] = sim::ScheduledTokens(s);
}

// One stated disagreement between what the engine allocates, sizes, plans and launches.
// kind: 0 launch grid, 1 o rows, 2 kernel heads, 3 planner CU count, 4 sizing batch, 5 plan from
// capture.
void GenDisagreement(Scenario& s, int kind) {
  const bool sparse = s.model.sparse;
  const std::string decode = sparse ? "verify.sparse_decode" : "verify.dense_decode";
  sim::CallOverride o;
  switch (kind) {
    case 0:
      o.call = decode;
      o.launch_grid = *rc::gen::element(1, 16, 64, 305, 320, 1024);
      break;
    case 1:
      o.call = decode;
      o.o_rows = *rc::gen::inRange<int64_t>(0, static_cast<int64_t>(s.requests.size()) + 1);
      break;
    case 2:
      o.call = decode;
      o.kernel_heads = *rc::gen::element(32, 64, 128);
      break;
    case 3:
      o.call = sparse ? "verify.sparse_mtp_plan" : "verify.main_plan";
      o.planner_cu_count = *rc::gen::element(80, 256, 304, 512);
      break;
    case 4: {
      sim::SizingOverride z;
      z.buffers = "main.";
      z.batch = *rc::gen::inRange<int32_t>(1, static_cast<int32_t>(s.requests.size()) + 1);
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
void GenFamilies(const GenConfig& cfg, const Swarm& sw, Scenario& s) {
  // First, so that the hostile index values draw their tokens among the ragged ones.
  // Only for aiter engines: the vLLM / SGLang profiles' planners take one q length per batch
  // and replay refuses a stated batch.q_lens there (a refused case would check nothing).
  const std::string& backend = s.engine.attention_backend;
  if (cfg.ragged_q && (backend.empty() || backend == "aiter") && Feature(sw.omitted[kQLens], 1, 1))
    GenRaggedQ(s);
  if (cfg.paged && !s.model.sparse && Feature(sw.omitted[kPaged], 1, 1)) {
    s.kv_cache.modelled = true;
    s.kv_cache.page_size = *rc::gen::element(16, 64);
  }
  if (cfg.hostile_indices && Feature(sw.omitted[kHostileIndices], 1, 2)) GenHostileIndices(s);
  if (!cfg.disagreements) return;
  if (sw.omitted[kDisagreements] == 0) {
    if (*rc::gen::weightedElement<bool>({{1, false}, {2, true}}))
      GenDisagreement(s, *rc::gen::inRange<int>(0, 6));
    return;
  }
  // Options: off (weight 3), then the six kinds (weight 1 each): today's 1/3 off, 2/3 spread.
  Options<int> kinds = {{3, rc::gen::just(-1)}};
  for (int kind = 0; kind < 6; ++kind) kinds.push_back({1, rc::gen::just(kind)});
  const int kind = Choose<int>(sw.omitted[kDisagreements], rc::gen::just(-1), kinds);
  if (kind >= 0) GenDisagreement(s, kind);
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
std::string PickProfile(const GenConfig& cfg, uint32_t omitted) {
  if (omitted == 0) return *rc::gen::elementOf(cfg.profiles);
  std::vector<std::string> left;
  for (size_t i = 0; i < cfg.profiles.size(); ++i)
    if (!(omitted >> i & 1u)) left.push_back(cfg.profiles[i]);
  return *rc::gen::elementOf(left);
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
  if (!config.swarm) return {};
  const auto c = std::make_shared<const GenConfig>(config);
  return DrawOf(config,
                rc::gen::exec([c] { return DrawSwarm(*c); })(rc::Random(seed), size).value());
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
void DrawModel(const GenConfig& cfg, const Swarm& sw, Scenario& s) {
  const int32_t max_k = cfg.small ? 4 : 8;
  s.mtp_k = Choose<int32_t>(
      sw.omitted[kMtpK],
      rc::gen::weightedOneOf<int32_t>(
          {{1, rc::gen::just(0)}, {6, rc::gen::inRange<int32_t>(1, max_k)}}),
      {{1, rc::gen::just(0)}, {2, rc::gen::just(1)}, {4, rc::gen::inRange<int32_t>(2, max_k)}});
  s.model.sparse = cfg.sparse_only
                       ? true
                       : Choose<bool>(sw.omitted[kModel],
                                      rc::gen::weightedElement<bool>({{2, true}, {1, false}}),
                                      {{2, rc::gen::just(true)}, {1, rc::gen::just(false)}});
  if (!cfg.kernel.sparse) s.model.sparse = false;  // the kernel's limits: no extra draw
  if (!cfg.kernel.dense) s.model.sparse = true;
  s.model.topk = *rc::gen::element(2048, 64, 512);
  s.parallel.tp = *rc::gen::element(1, 2, 4, 8);
  // Heads per rank 16..128 (and below 16: repeated), including counts that fold or are refused.
  const int32_t per_rank = RunnableHeads(
      cfg.kernel, *rc::gen::weightedElement<int32_t>(
                      {{6, 16}, {2, 32}, {2, 64}, {1, 128}, {1, 48}, {1, 8}, {1, 24}}));
  s.model.heads = per_rank * s.parallel.tp;
  s.model.kv_dtype = Choose<ref::DType>(
      sw.omitted[kKvDtype], rc::gen::element(ref::DType::kFp8, ref::DType::kBf16),
      {{1, rc::gen::just(ref::DType::kFp8)}, {1, rc::gen::just(ref::DType::kBf16)}});
  if (s.model.kv_dtype == ref::DType::kFp8 && !cfg.kernel.fp8_kv)
    s.model.kv_dtype = ref::DType::kBf16;
  if (s.model.kv_dtype == ref::DType::kBf16 && !cfg.kernel.bf16_kv)
    s.model.kv_dtype = ref::DType::kFp8;
  s.model.rope_dim = *rc::gen::weightedElement<int32_t>({{5, 64}, {1, 0}});
}

// The requests (Q tokens each) and, for kernel-input runs of sparse models, index values.
int32_t DrawBatch(const GenConfig& cfg, Scenario& s) {
  const int32_t q = s.mtp_k + 1;
  const int32_t batch = *rc::gen::weightedOneOf<int32_t>(
      {{6, rc::gen::inRange<int32_t>(1, 9)},
       {3, rc::gen::inRange<int32_t>(1, std::min(cfg.max_batch, 65) + 1)},
       {1, rc::gen::inRange<int32_t>(1, cfg.max_batch + 1)}});
  for (int32_t i = 0; i < batch; ++i) s.requests.push_back(GenRequest(q, s.model.topk));
  if (cfg.kernel_inputs && s.model.sparse &&
      *rc::gen::weightedElement<bool>({{1, false}, {2, true}})) {
    s.kv_cache.modelled = true;
    const int32_t n = *rc::gen::inRange<int32_t>(1, 5);
    for (int32_t i = 0; i < n; ++i) {
      sim::KvCacheSpec::IndexValue v;
      v.token = *rc::gen::inRange<int32_t>(0, batch * q);
      v.position = *rc::gen::inRange<int32_t>(0, 8);
      v.value = *rc::gen::element<int64_t>(-1, -2, INT32_MAX, INT32_MIN);
      s.kv_cache.index_values.push_back(v);
    }
  }
  return batch;
}

void DrawGraphAndParallelism(const GenConfig& cfg, const Swarm& sw, int32_t batch, Scenario& s) {
  const int32_t q = s.mtp_k + 1;
  s.graph.capture_sizes = *GenCaptureSizes();
  s.graph.eager = Feature(sw.omitted[kGraph], 9, 1);
  // Engines configured for small batches size every buffer for fewer sequences.
  const int32_t seqs = cfg.small ? 64 : *rc::gen::element(512, 256, 128, 64);
  s.graph.max_num_seqs = std::max(seqs, batch);
  s.graph.max_num_batched_tokens = std::max(16384, batch * q);
  if (cfg.allow_dcp && Feature(sw.omitted[kDcp], 6, 1)) {
    s.parallel.dcp = *rc::gen::element(2, 4, 8);
    s.parallel.dcp_interleave = *rc::gen::element(1, 1, 16, 64);
  }
  if (cfg.allow_dp && Feature(sw.omitted[kDp], 5, 1)) {
    s.parallel.dp = *rc::gen::inRange<int32_t>(2, 5);
    s.parallel.dp_scheduled_tokens.push_back(batch * q);
    for (int32_t r = 1; r < s.parallel.dp; ++r)
      s.parallel.dp_scheduled_tokens.push_back(q * *rc::gen::inRange<int32_t>(0, batch + 40));
  }
}

void DrawTargetKernelAndEngine(const GenConfig& cfg, const Swarm& sw, Scenario& s) {
  s.target = *rc::gen::element(ref::Arch::kGfx950, ref::Arch::kGfx942);
  s.revision = *rc::gen::weightedElement<ref::Revision>(
      {{5, ref::Revision::k2026_08}, {1, ref::Revision::k2026_03}});
  s.cu_count = *rc::gen::weightedOneOf<int32_t>(
      {{2, rc::gen::just(0)}, {3, rc::gen::inRange<int32_t>(2, 65)}});
  s.kernel = Choose<std::string>(sw.omitted[kKernel],
                                 rc::gen::element<std::string>("asm", "asm", "opus", "hk"),
                                 {{2, rc::gen::just<std::string>("asm")},
                                  {1, rc::gen::just<std::string>("opus")},
                                  {1, rc::gen::just<std::string>("hk")}});
  // Shrinks toward the serial planner, which gives every padded request a work item (aiter's
  // parallel planner may drop trailing zero-KV pads, which would stall shrinking).
  s.serial_planner = *rc::gen::weightedElement<bool>({{1, true}, {3, false}});
  s.allocator.model = Choose<sim::AllocatorModel>(
      sw.omitted[kAllocator],
      rc::gen::element(sim::AllocatorModel::kExact, sim::AllocatorModel::kCaching),
      {{1, rc::gen::just(sim::AllocatorModel::kExact)},
       {1, rc::gen::just(sim::AllocatorModel::kCaching)}});
  s.allocator.page_bytes = *rc::gen::element<int64_t>(4096, 65536);
  s.engine = *sim::GetEngineProfile(PickProfile(cfg, sw.omitted[kProfile]), "engine");
}

}  // namespace

rc::Gen<Scenario> GenScenario(const GenConfig& cfg) {
  if (cfg.pins) return rc::gen::exec([pins = cfg.pins] { return GenPinned(*pins); });
  // Held by pointer: RapidCheck copies the generator's function several times per case.
  return rc::gen::exec([c = std::make_shared<const GenConfig>(cfg)] {
    const GenConfig& cfg = *c;
    const Swarm sw = DrawSwarm(cfg);  // first: SwarmFromSeed replays these draws alone
    if (swarm_out) {
      *swarm_out = sw;
      swarm_out = nullptr;
    }
    Scenario s;
    s.name = "fuzz";
    DrawModel(cfg, sw, s);
    const int32_t batch = DrawBatch(cfg, s);
    DrawGraphAndParallelism(cfg, sw, batch, s);
    DrawTargetKernelAndEngine(cfg, sw, s);
    // Drawn last, so that every case of a seed keeps the shape it had before these knobs.
    GenRequestShapes(s, sw);
    GenFamilies(cfg, sw, s);
    KeepPageSizeRunnable(cfg.kernel, s);
    s.contracts = cfg.contracts;
    // Positions are drawn without the regions' lengths: keep the values a fill places, so that
    // the case's JSON replays (`mlasim replay` refuses the others, sim/index_values.h).
    sim::DropUnplacedIndexValues(s);
    return s;
  });
}

rc::Shrinkable<Scenario> ScenarioFromSeed(const GenConfig& config, uint64_t seed, int size) {
  return GenScenario(config)(rc::Random(seed), size);
}

Scenario ScenarioAndSwarmFromSeed(const GenConfig& config, uint64_t seed, int size,
                                  SwarmDraw* swarm) {
  const rc::Shrinkable<Scenario> sh = ScenarioFromSeed(config, seed, size);
  if (config.pins || !config.swarm) {  // the pinned generator draws no swarm
    Scenario s = sh.value();
    *swarm = SwarmFromSeed(config, seed, size);
    return s;
  }
  Swarm sw;
  struct Reset {  // also when the generator throws
    ~Reset() { swarm_out = nullptr; }
  } reset;
  swarm_out = &sw;
  Scenario s = sh.value();
  *swarm = DrawOf(config, sw);
  return s;
}

std::mutex& GeneratorMutex() {
  static std::mutex mu;
  return mu;
}

}  // namespace mlasim::fuzz
