#include "fuzz/scenario_gen.h"

#include <algorithm>
#include <cstdint>

namespace mlasim::fuzz {
namespace {

using sim::Scenario;

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

// Request shapes the engine can be configured with (§3 of the round-2 model): the planner's
// split granularity and budget, and top-k counts below the indexer's default (an index pool).
void GenRequestShapes(Scenario& s) {
  s.kv_granularity = *rc::gen::weightedElement<int32_t>({{8, 16}, {1, 32}, {1, 64}, {1, 8}});
  s.max_split_per_batch = *rc::gen::weightedOneOf<int32_t>(
      {{8, rc::gen::just(16)}, {1, rc::gen::just(-1)}, {1, rc::gen::inRange<int32_t>(1, 33)}});
  if (!s.model.sparse || !*rc::gen::weightedElement<bool>({{6, false}, {1, true}})) return;
  const int32_t q = s.mtp_k + 1;
  for (sim::RequestSpec& r : s.requests) {
    const int32_t L = r.context - r.rejected_prev;
    for (int32_t j = 0; j < q; ++j) {
      const int32_t full = std::min(L - q + j + 1, s.model.topk);
      r.topk_lengths.push_back(*rc::gen::inRange<int32_t>(1, std::max(full, 1) + 1));
    }
  }
}

// Hostile values in the index buffer the verify step fills (kv_cache.index_values).
void GenHostileIndices(Scenario& s) {
  s.kv_cache.modelled = true;
  const int32_t q = s.mtp_k + 1;
  const int32_t tokens = s.model.sparse ? static_cast<int32_t>(s.requests.size()) * q
                                        : static_cast<int32_t>(s.requests.size());
  const int32_t n = *rc::gen::inRange<int32_t>(0, 4);
  for (int32_t i = 0; i < n; ++i) {
    sim::KvCacheSpec::IndexValue v;
    v.token = *rc::gen::inRange<int32_t>(0, tokens);
    v.position = *rc::gen::inRange<int32_t>(0, 64);
    v.value = *rc::gen::element<int64_t>(-1, 2147483647, 2147480000, -2147483648LL, 1 << 24);
    s.kv_cache.index_values.push_back(v);
  }
}

// One stated disagreement between what the engine allocates, sizes, plans and launches.
void GenDisagreement(Scenario& s) {
  const bool sparse = s.model.sparse;
  const std::string decode = sparse ? "verify.sparse_decode" : "verify.dense_decode";
  sim::CallOverride o;
  switch (*rc::gen::inRange<int>(0, 6)) {
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

}  // namespace

const std::vector<std::string>& GeneratorFamilies() {
  static const std::vector<std::string> k = {"hostile-indices", "disagreements", "paged"};
  return k;
}

Status EnableFamilies(const std::vector<std::string>& names, GenConfig* config) {
  for (const std::string& n : names) {
    if (n == "hostile-indices")
      config->hostile_indices = true;
    else if (n == "disagreements")
      config->disagreements = true;
    else if (n == "paged")
      config->paged = true;
    else
      return InvalidArgumentError("--generate", "unknown family \"" + n +
                                                    "\" (known: hostile-indices, disagreements, "
                                                    "paged)");
  }
  return OkStatus();
}

rc::Gen<Scenario> GenScenario(const GenConfig& cfg) {
  return rc::gen::exec([cfg] {
    Scenario s;
    s.name = "fuzz";
    s.mtp_k = *rc::gen::weightedOneOf<int32_t>(
        {{1, rc::gen::just(0)}, {6, rc::gen::inRange<int32_t>(1, cfg.small ? 4 : 8)}});
    const int32_t q = s.mtp_k + 1;
    s.model.sparse =
        cfg.sparse_only ? true : *rc::gen::weightedElement<bool>({{2, true}, {1, false}});
    s.model.topk = *rc::gen::element(2048, 64, 512);
    s.parallel.tp = *rc::gen::element(1, 2, 4, 8);
    // Heads per rank 16..128 (and below 16: repeated), including counts that fold or are refused.
    const int32_t per_rank = *rc::gen::weightedElement<int32_t>(
        {{6, 16}, {2, 32}, {2, 64}, {1, 128}, {1, 48}, {1, 8}, {1, 24}});
    s.model.heads = per_rank * s.parallel.tp;
    s.model.kv_dtype = *rc::gen::element(ref::DType::kFp8, ref::DType::kBf16);
    s.model.rope_dim = *rc::gen::weightedElement<int32_t>({{5, 64}, {1, 0}});
    const int32_t batch = *rc::gen::weightedOneOf<int32_t>(
        {{6, rc::gen::inRange<int32_t>(1, 9)},
         {3, rc::gen::inRange<int32_t>(1, std::min(cfg.max_batch, 65) + 1)},
         {1, rc::gen::inRange<int32_t>(1, cfg.max_batch + 1)}});
    const int32_t topk = s.model.topk;
    for (int32_t i = 0; i < batch; ++i) {
      sim::RequestSpec r;
      r.rejected_prev = *rc::gen::weightedOneOf<int32_t>(
          {{3, rc::gen::just(0)}, {1, rc::gen::inRange<int32_t>(0, q)}});
      r.context = *GenKvLen(q, topk) + r.rejected_prev;
      r.rejected = *rc::gen::weightedOneOf<int32_t>(
          {{2, rc::gen::just(0)}, {2, rc::gen::inRange<int32_t>(0, q)}});
      s.requests.push_back(r);
    }
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
    s.graph.capture_sizes = *GenCaptureSizes();
    s.graph.eager = *rc::gen::weightedElement<bool>({{9, false}, {1, true}});
    // Engines configured for small batches size every buffer for fewer sequences.
    const int32_t seqs = cfg.small ? 64 : *rc::gen::element(512, 256, 128, 64);
    s.graph.max_num_seqs = std::max(seqs, batch);
    s.graph.max_num_batched_tokens = std::max(16384, batch * q);
    if (cfg.allow_dcp && *rc::gen::weightedElement<bool>({{6, false}, {1, true}})) {
      s.parallel.dcp = *rc::gen::element(2, 4, 8);
      s.parallel.dcp_interleave = *rc::gen::element(1, 1, 16, 64);
    }
    if (cfg.allow_dp && *rc::gen::weightedElement<bool>({{5, false}, {1, true}})) {
      s.parallel.dp = *rc::gen::inRange<int32_t>(2, 5);
      s.parallel.dp_scheduled_tokens.push_back(batch * q);
      for (int32_t r = 1; r < s.parallel.dp; ++r)
        s.parallel.dp_scheduled_tokens.push_back(q * *rc::gen::inRange<int32_t>(0, batch + 40));
    }
    s.target = *rc::gen::element(ref::Arch::kGfx950, ref::Arch::kGfx942);
    s.revision = *rc::gen::weightedElement<ref::Revision>(
        {{5, ref::Revision::k2026_08}, {1, ref::Revision::k2026_03}});
    s.cu_count = *rc::gen::weightedOneOf<int32_t>(
        {{2, rc::gen::just(0)}, {3, rc::gen::inRange<int32_t>(2, 65)}});
    s.kernel = *rc::gen::element<std::string>("asm", "asm", "opus", "hk");
    // Shrinks toward the serial planner, which gives every padded request a work item (aiter's
    // parallel planner may drop trailing zero-KV pads, which would stall shrinking).
    s.serial_planner = *rc::gen::weightedElement<bool>({{1, true}, {3, false}});
    s.allocator.model =
        *rc::gen::element(sim::AllocatorModel::kExact, sim::AllocatorModel::kCaching);
    s.allocator.page_bytes = *rc::gen::element<int64_t>(4096, 65536);
    const std::string profile = *rc::gen::elementOf(cfg.profiles);
    s.engine = *sim::GetEngineProfile(profile, "engine");
    // Drawn last, so that every case of a seed keeps the shape it had before these knobs.
    GenRequestShapes(s);
    if (cfg.paged && !s.model.sparse && *rc::gen::weightedElement<bool>({{1, false}, {1, true}})) {
      s.kv_cache.modelled = true;
      s.kv_cache.page_size = *rc::gen::element(16, 64);
    }
    if (cfg.hostile_indices && *rc::gen::weightedElement<bool>({{1, false}, {2, true}}))
      GenHostileIndices(s);
    if (cfg.disagreements && *rc::gen::weightedElement<bool>({{1, false}, {2, true}}))
      GenDisagreement(s);
    s.contracts = cfg.contracts;
    return s;
  });
}

rc::Shrinkable<Scenario> ScenarioFromSeed(const GenConfig& config, uint64_t seed, int size) {
  return GenScenario(config)(rc::Random(seed), size);
}

std::mutex& GeneratorMutex() {
  static std::mutex mu;
  return mu;
}

}  // namespace mlasim::fuzz
