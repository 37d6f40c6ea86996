#include "fuzz/mutants.h"

#include <fmt/format.h>

#include <limits>

#include "fuzz/campaign.h"
#include "fuzz/properties.h"
#include "ref/decode_update.h"
#include "ref/numerics.h"
#include "ref/plan_check.h"
#include "ref/planner.h"
#include "sim/fault.h"

namespace mlasim::fuzz {
namespace {

using sim::BugClass;
using sim::SimMutant;

// ---- deterministic case generators (SplitMix-style xorshift; no std distributions) ----------

struct Rng {
  uint64_t x;
  explicit Rng(uint64_t seed) : x(seed * 0x9E3779B97F4A7C15ull + 1) {}
  int32_t Below(uint32_t n) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return static_cast<int32_t>(x % n);
  }
};

// A small random decode batch: splits through few clusters, MTP, folding, sparse top-k with
// invalid entries, zero-KV requests, short tails; one case in four pages > 1 with MTP, where a
// split tile's final piece is shorter than qlen (§11.6) and the last page has an unused tail.
ref::PlanRequest SmallBatch(uint64_t seed) {
  Rng g(seed);
  ref::PlanRequest r;
  r.target = ref::Arch::kGfx942;
  r.cu_count = 2 + g.Below(14);
  const int32_t heads[] = {16, 16, 32, 64};
  r.heads_per_head_k = heads[g.Below(4)];
  const bool sparse = g.Below(4) == 0;
  const int32_t qlen = 1 + g.Below(4);
  const bool paged_tail = !sparse && qlen > 1 && g.Below(4) == 0;
  if (paged_tail) {
    r.heads_per_head_k = 16;
    r.page_size = 4;
    r.kv_granularity = 1;
    r.cu_count = 8 + g.Below(9);
  }
  r.qlen = qlen;
  r.max_seqlen_qo = r.uni_seqlen_qo = sparse ? 1 : qlen;
  if (sparse) r.topk = 64;
  const int32_t batch = 1 + g.Below(6);
  r.qo_indptr = {0};
  r.kv_indptr = {0};
  for (int32_t b = 0; b < batch; ++b) {
    const int32_t kind = g.Below(4);
    int32_t tokens = kind == 0 ? 0 : kind == 1 ? g.Below(qlen + 1) : g.Below(400);
    if (paged_tail) tokens = (2 + g.Below(22)) * r.page_size + 1 + g.Below(qlen - 1);
    const int32_t pages = (tokens + r.page_size - 1) / r.page_size;
    r.qo_indptr.push_back(r.qo_indptr.back() + qlen);
    r.kv_indptr.push_back(r.kv_indptr.back() + pages);
    r.kv_last_page_lens.push_back(tokens == 0 ? r.page_size : tokens - (pages - 1) * r.page_size);
  }
  return r;
}

// A small ragged dense batch on aiter's non-uniform path (uni_seqlen_qo = -1): 16 heads, q
// lengths 0..max_seqlen_qo (1..4) per request, few clusters (splits), page size 1.
ref::PlanRequest SmallRaggedBatch(uint64_t seed) {
  Rng g(seed);
  ref::PlanRequest r;
  r.target = ref::Arch::kGfx942;
  r.cu_count = 2 + g.Below(14);
  r.heads_per_head_k = 16;
  r.qlen = r.max_seqlen_qo = 1 + g.Below(4);
  r.uni_seqlen_qo = -1;
  const int32_t batch = 1 + g.Below(6);
  r.qo_indptr = {0};
  r.kv_indptr = {0};
  for (int32_t b = 0; b < batch; ++b) {
    const int32_t tokens = g.Below(4) == 0 ? g.Below(r.max_seqlen_qo + 1) : g.Below(400);
    r.qo_indptr.push_back(r.qo_indptr.back() + g.Below(r.max_seqlen_qo + 1));
    r.kv_indptr.push_back(r.kv_indptr.back() + tokens);
    r.kv_last_page_lens.push_back(1);
  }
  return r;
}

// `text` on one line: newlines become "; " (plan-check reports span lines).
std::string OneLine(std::string text) {
  while (!text.empty() && text.back() == '\n') text.pop_back();
  for (size_t at; (at = text.find('\n')) != std::string::npos;) text.replace(at, 1, "; ");
  return text;
}

std::string BatchText(const ref::PlanRequest& r, uint64_t seed) {
  return fmt::format("batch seed {}: {} requests, heads {}, qlen {}{}{}{}", seed,
                     r.kv_indptr.size() - 1, r.heads_per_head_k, r.qlen,
                     r.uni_seqlen_qo < 1 ? " (ragged)" : "", r.topk >= 0 ? ", sparse" : "",
                     r.page_size > 1 ? fmt::format(", page size {}", r.page_size) : "");
}

// ---- numerics: plan-driven == monolithic on small batches ----------------------------------

// Poison expected by the contract: o rows of zero-KV requests that no work item wrote (the
// parallel planner gives them none); with zero-KV items skipped (zero_kv = skips), any row that
// sees no key (also a row before the causal diagonal whose tile the planner trimmed to no key).
bool ExpectedPoison(const ref::PlanRequest& r, const ref::PoisonFinding& f, bool skip_zero_kv) {
  if (f.kind != ref::PoisonKind::kNeverWritten || f.output != ref::NumericsBuffer::kO ||
      f.row_begin < 0)
    return false;
  const int32_t per = r.topk >= 0 ? r.qo_indptr[1] - r.qo_indptr[0] : r.uni_seqlen_qo;
  for (int64_t row = f.row_begin; row < f.row_end; ++row) {
    // Non-uniform q lengths: the request whose qo_indptr rows hold `row`.
    const int32_t b =
        per >= 1
            ? static_cast<int32_t>(row / per)
            : static_cast<int32_t>(std::upper_bound(r.qo_indptr.begin(), r.qo_indptr.end(), row) -
                                   r.qo_indptr.begin() - 1);
    if (skip_zero_kv ? ref::RowSeesAKey(r, row) : r.kv_indptr[b + 1] != r.kv_indptr[b])
      return false;
  }
  return true;
}

// The numerics property on batch `s` under variant `v`, with inputs poisoned like FlashMLA's
// tests (hostile ids in unused page-table slots, page 0 all NaN and never used): a description
// of how plan-driven and monolithic disagree, or nullopt.
std::optional<std::string> NumericsCase(const NumericsVariant& v, uint64_t s, bool ragged = false) {
  const ref::PlanRequest r = ragged ? SmallRaggedBatch(s) : SmallBatch(s);
  auto plan = ref::PlanMlaMetadata(r);
  if (!plan.ok()) return std::nullopt;
  ref::NumericsOptions o;
  o.seed = s;
  o.head_dim_qk = 80;
  o.head_dim_v = 64;
  o.mutant = v.mutant;
  o.empty_rows = v.empty_rows;
  o.zero_kv = v.zero_kv;
  o.invalid_index = v.invalid_index;
  o.read_masked_keys = v.read_masked_keys;
  o.hostile_table_slots = 4;
  o.reserve_page_zero = true;
  auto rep = ref::RunPlanNumerics(r, *plan, o);
  if (!rep.ok() || !plan->input_violations.empty()) return std::nullopt;
  std::string why;
  for (const ref::PoisonFinding& f : rep->poison)
    if (why.empty() && !ExpectedPoison(r, f, v.zero_kv == ref::ZeroKvPolicy::kSkip))
      why = "poison in rows of requests that have keys: " + f.ToString();
  if (rep->monolithic_nan > 0) why = "NaN in the monolithic result";
  if (why.empty() && rep->unexplained_nan > 0)
    why = std::to_string(rep->unexplained_nan) + " unexplained NaN";
  if (why.empty() && (!rep->o_unpoisoned.passed || !rep->lse_unpoisoned.passed))
    why = "max abs error " + std::to_string(rep->o_unpoisoned.max_abs) + " beyond tolerance";
  if (why.empty()) return std::nullopt;
  return BatchText(r, s) + ": plan-driven != monolithic (" + why + ")";
}

// ---- planner and decode_update properties --------------------------------------------------

std::optional<std::string> PlannerCase(ref::PlannerMutant m, uint64_t s, const char* property,
                                       bool ragged = false) {
  const ref::PlanRequest r = ragged ? SmallRaggedBatch(s) : SmallBatch(s);
  auto plan = ref::PlanMlaMetadata(r, {ref::PlannerChoice::kAiterDispatch, m});
  if (!plan.ok() || !plan->input_violations.empty()) return std::nullopt;
  const std::string p = property;
  if (p == "plan-checker-passes") {
    const ref::PlanCheckReport c = ref::CheckPlan(r, *plan);
    if (!c.ok()) return BatchText(r, s) + ": " + OneLine(c.ToString().substr(0, 200));
  } else if (p == "planner-writes-within-sizes") {
    for (const ref::Int32Buffer* b : {&plan->work_indptr, &plan->work_info, &plan->reduce_indptr,
                                      &plan->reduce_final_map, &plan->reduce_partial_map})
      if (b->oob_writes > 0) return BatchText(r, s) + ": the planner stores past its sizing";
  } else {  // same-input-same-bytes
    auto again = ref::PlanMlaMetadata(r, {ref::PlannerChoice::kAiterDispatch, m});
    if (again.ok() && again->work_info.data != plan->work_info.data)
      return BatchText(r, s) + ": two plans of the same batch differ";
  }
  return std::nullopt;
}

// decode_update vs the tiling of the new lengths (§9): a dense page-1 plan without q splits,
// rejects on the first update, +1 token per request after (tests/ref/plan_properties_test.cpp).
std::optional<std::string> DecodeUpdateCase(ref::DecodeUpdateRequest::Mutant m, uint64_t s) {
  Rng g(s);
  const int32_t qlen = 1 + g.Below(4), batch = 1 + g.Below(12);
  ref::PlanRequest r;
  r.target = g.Below(2) ? ref::Arch::kGfx942 : ref::Arch::kGfx950;
  r.heads_per_head_k = 16;
  r.cu_count = 2 + g.Below(38);
  r.qlen = r.max_seqlen_qo = r.uni_seqlen_qo = qlen;
  std::vector<int32_t> lens;
  r.qo_indptr = {0};
  r.kv_indptr = {0};
  for (int32_t b = 0; b < batch; ++b) {
    lens.push_back(qlen + g.Below(3000));
    r.qo_indptr.push_back(r.qo_indptr.back() + qlen);
    r.kv_indptr.push_back(r.kv_indptr.back() + lens.back());
    r.kv_last_page_lens.push_back(1);
  }
  auto plan = ref::PlanMlaMetadata(r);
  if (!plan.ok() || plan->derived.qo_split) return std::nullopt;
  for (int32_t step = 0; step < 1 + g.Below(3); ++step) {
    ref::DecodeUpdateRequest u;
    u.target = r.target;
    u.heads_per_head_k = r.heads_per_head_k;
    u.max_seqlen_qo = qlen;
    u.qo_indptr = r.qo_indptr;
    u.mutant = m;
    u.has_num_reject_tokens = step == 0;
    u.kv_indptr = {0};
    for (int32_t b = 0; b < batch; ++b) {
      if (step == 0) u.num_reject_tokens.push_back(g.Below(qlen));
      lens[b] += 1 - (step == 0 ? u.num_reject_tokens[b] : 0);
      u.kv_indptr.push_back(u.kv_indptr.back() + lens[b]);
    }
    if (!ref::DecodeUpdateMlaMetadataV1(u, *plan).ok()) return std::nullopt;
  }
  ref::PlanRequest served = r;
  served.qlen = served.max_seqlen_qo = served.uni_seqlen_qo = 1;
  served.qo_indptr = {0};
  served.kv_indptr = {0};
  for (int32_t b = 0; b < batch; ++b) {
    served.qo_indptr.push_back(b + 1);
    served.kv_indptr.push_back(served.kv_indptr.back() + lens[b]);
  }
  const ref::PlanCheckReport c = ref::CheckPlan(served, *plan);
  if (c.ok()) return std::nullopt;
  return fmt::format(
      "update seed {}: {} requests, qlen {}: the updated plan does not tile the "
      "new lengths ({})",
      s, batch, qlen, OneLine(c.ToString().substr(0, 160)));
}

// ---- campaign: two independent bugs are both reported ------------------------------------

constexpr char kSigX[] = "verify|synthetic_decode|q|read|A";
constexpr char kSigY[] = "draft_step_1|synthetic_reduce|o|write|B";
std::vector<sim::Violation> TwoBugs(const sim::ReplayReport& r) {
  std::vector<sim::Violation> out;
  if (r.scenario.requests.size() >= 3) out.push_back(ViolationWithSignature(kSigX, "B >= 3"));
  if (r.scenario.mtp_k >= 2) out.push_back(ViolationWithSignature(kSigY, "K >= 2"));
  return out;
}

std::optional<std::string> CampaignCase(CampaignMutant m, uint64_t s) {
  CampaignOptions o;
  o.seconds = std::numeric_limits<double>::infinity();  // the one case, however long
  o.max_cases = 1;
  o.seed = s;
  o.shard = 60;
  o.shards = 100;
  o.small = true;
  o.property = TwoBugs;
  auto clean = RunCampaign(o, nullptr);
  if (!clean.ok() || clean->findings.size() != 2) return std::nullopt;  // not both bugs here
  o.mutant = m;
  auto got = RunCampaign(o, nullptr);
  if (got.ok() && got->findings.count(kSigX) && got->findings.count(kSigY)) return std::nullopt;
  return fmt::format("campaign seed {}: a case showing two bugs reports {} of them", s,
                     got.ok() ? got->findings.size() : 0);
}

// ---- fault attribution: an underflow is named after the buffer it precedes -----------------

std::optional<std::string> AttributionCase(sim::FaultMutant m, uint64_t s) {
  Rng g(s);
  // Two buffers on their own pages, far apart; an address up to 64 bytes before the second.
  const uint64_t base_a = 0x7f0000000000ull + uint64_t(g.Below(64)) * 0x10000;
  const uint64_t bytes_a = 4 + 4 * uint64_t(g.Below(4096));
  const uint64_t base_b = base_a + 0x1000000 + uint64_t(g.Below(64)) * 0x1000;
  const uint64_t back = 1 + uint64_t(g.Below(64));
  auto hex = [](uint64_t x) { return fmt::format("0x{:x}", x); };
  const nlohmann::json layout = {
      {"allocations",
       {{{"name", "a"}, {"base", hex(base_a)}, {"bytes", bytes_a}, {"row_bytes", 4}},
        {{"name", "kv_indices"}, {"base", hex(base_b)}, {"bytes", 4096}, {"row_bytes", 4}}}}};
  auto at = sim::AttributeAddress(layout, base_b - back, "--address", 0, m);
  if (at.ok() && at->buffer == "kv_indices" && at->before_start &&
      at->offset == -static_cast<int64_t>(back))
    return std::nullopt;
  return fmt::format("{} bytes before kv_indices (which starts on its own page) attributed to {}",
                     back, at.ok() ? at->buffer : at.status().ToString());
}

// ---- registry --------------------------------------------------------------------------------

GenConfig FixedSparse() {
  GenConfig c;
  c.profiles = {"atom-2026-11"};
  c.sparse_only = true;
  c.max_batch = 64;
  return c;
}

GenConfig AnyProfile(bool sparse_only = false) {
  GenConfig c;
  c.profiles = {"atom-2026-08", "atom-2026-11"};
  c.sparse_only = sparse_only;
  c.max_batch = 64;
  return c;
}

// Generated steps of both ATOM profiles with the `paged` generator family (dense steps over
// pages of 16 or 64 tokens).
GenConfig PagedSteps() {
  GenConfig c = AnyProfile();
  c.paged = true;
  return c;
}

MutantSpec Sim(SimMutant m, BugClass cls, std::string desc, GenConfig config,
               std::string property_name, Property p, MutantKind kind = MutantKind::kSimulator) {
  MutantSpec s;
  s.name = sim::SimMutantName(m);
  s.bug_class = cls;
  s.kind = kind;
  s.description = std::move(desc);
  s.sim = m;
  s.config = std::move(config);
  s.property = std::move(property_name);
  s.killing = std::move(p);
  s.site = "data: sim/mutants.cpp SimMutantSpec " + s.name;
  return s;
}

MutantSpec Custom(std::string name, BugClass cls, MutantKind kind, std::string desc,
                  std::string property, std::string site,
                  std::function<std::optional<std::string>(uint64_t)> one_case) {
  MutantSpec s;
  s.name = std::move(name);
  s.bug_class = cls;
  s.kind = kind;
  s.description = std::move(desc);
  s.property = std::move(property);
  s.site = std::move(site);
  // Case `index` from `seed` is case 0 from seed + index: the kill replays on its own.
  s.kill_case = [one_case, name = s.name](uint64_t seed, int64_t index) -> std::optional<Kill> {
    const uint64_t at = seed + static_cast<uint64_t>(index);
    auto why = one_case(at);
    if (!why) return std::nullopt;
    return Kill{
        fmt::format("{} (replay: mlasim mutants --only {} --seed {} --budget 1)", *why, name, at),
        std::nullopt};
  };
  return s;
}

MutantSpec Numerics(std::string name, BugClass cls, std::string desc, NumericsVariant v,
                    std::string site, MutantKind kind = MutantKind::kNumerics) {
  MutantSpec m =
      Custom(std::move(name), cls, kind, std::move(desc), "plan-driven-equals-monolithic",
             std::move(site), [v](uint64_t s) { return NumericsCase(v, s); });
  m.numerics = v;
  return m;
}

// The engine-step numerics property (fuzz/properties.h NumericsViolations).
constexpr const char* kStepNumerics = "engine-step-numerics";

// A semantics mutant on ATOM engine steps: generated steps in the world of the contract's
// invalid-index mutants (hostile index values in the slots a kernel reads, a contract that masks
// them: sim/mutants.cpp HostileIndices), checked by the engine-step numerics property with the
// variant's semantics in place of the contract's, on steps the contract's own semantics pass (a
// step that fails without the mutant kills nothing). The kill's case file is the step in that
// world (`mlasim numerics FILE --mutant NAME` reproduces it).
// `world`: the sim mutant whose setting (not its contract edits) every generated step is run in,
// with and without the semantics `v`: hostile index values by default.
MutantSpec StepNumerics(std::string name, BugClass cls, std::string desc, NumericsVariant v,
                        std::string site, GenConfig config,
                        SimMutant world = SimMutant::kContractInvalidIndexFault) {
  MutantSpec m;
  m.name = std::move(name);
  m.bug_class = cls;
  m.kind = MutantKind::kSemantics;
  m.description = std::move(desc);
  m.property = kStepNumerics;
  m.site = std::move(site);
  m.numerics = v;
  m.config = config;
  m.kill_case = [v, config, world](uint64_t seed, int64_t index) -> std::optional<Kill> {
    const sim::SemanticsOverride over = SemanticsOf(v);
    const Property in_world = [over, world](const sim::ReplayReport& r) {
      auto w = sim::MutantScenario(r.scenario, world, /*mutated=*/false);
      if (!w.ok()) return std::vector<sim::Violation>{};
      sim::ReplayReport step;
      step.scenario = std::move(*w);
      // Only a step the unmutated semantics pass can kill: the violations are the mutant's.
      if (!NumericsViolations(step).empty()) return std::vector<sim::Violation>{};
      return NumericsViolations(step, over);
    };
    const int size = static_cast<int>(10 + (index % 90));
    auto f =
        TestSeed(config, seed + static_cast<uint64_t>(index), size, in_world, SimMutant::kNone);
    if (!f) return std::nullopt;
    auto w = sim::MutantScenario(f->scenario, world, /*mutated=*/false);
    if (w.ok()) f->scenario = std::move(*w);
    return Kill{fmt::format("B={} K={} {}", f->scenario.requests.size(), f->scenario.mtp_k,
                            Signature(f->broken.front())),
                std::move(f)};
  };
  return m;
}

NumericsVariant Code(ref::NumericsMutant m) {
  NumericsVariant v;
  v.mutant = m;
  return v;
}

void AddSimulatorMutants(std::vector<MutantSpec>& r) {
  const Property fixed_clean = FixedProfileViolations;
  const Property only_known = UnknownViolations;
  const char* ok = "only-known-families";
  r.push_back(
      Sim(SimMutant::kFoundingFault, BugClass::kA,
          "the founding fault: the sparse MTP plan covers the graph-padded tokens and draft "
          "step 0 reuses it with unpadded q/o (seed-fault.md, ATOM #2715)",
          FixedSparse(), "fixed-profile-clean", fixed_clean));
  GenConfig ragged = FixedSparse();
  ragged.ragged_q = true;
  r.push_back(Sim(SimMutant::kPerTokenPlanIgnoresQLens, BugClass::kA,
                  "the engine ignores ragged q lengths: the sparse per-token MTP plan covers "
                  "B x Q tokens while q and o hold the T_s = sum(q_lens) ragged tokens (generated "
                  "with the ragged-q family; uniform batches cannot tell)",
                  ragged, "fixed-profile-clean", fixed_clean));
  r.push_back(Sim(SimMutant::kDraftRowsScheduled, BugClass::kA,
                  "draft steps 1..K-1 run at B rows over plans covering R (pre-DraftGraph ATOM "
                  "with the incremental update; atom-mtp-flow.md §6 row Ds)",
                  AnyProfile(), ok, only_known));
  r.push_back(Sim(SimMutant::kZeroKvPageUnderflow, BugClass::kJ,
                  "a zero-KV work item's page count underflows (ATOM #1301): a near-infinite KV "
                  "loop, caught as a bounded-loop violation, never a hang",
                  AnyProfile(true), ok, only_known));
  r.push_back(Sim(SimMutant::kZeroKvReadsIndexRow, BugClass::kE,
                  "the seed's wrong hypothesis: zero-KV padding items read the sparse index buffer "
                  "past what the step wrote",
                  AnyProfile(true), ok, only_known));
  r.push_back(Sim(SimMutant::kStalePlanAfterGrowth, BugClass::kE,
                  "a sparse draft plan reused after every KV length grew (vLLM #36611's stale "
                  "schedule)",
                  AnyProfile(true), ok, only_known));
  r.push_back(Sim(SimMutant::kSizingScheduledBatch, BugClass::kD,
                  "metadata buffers sized for the scheduled batch while the graph plans the padded "
                  "one (sizing vs planner disagreement)",
                  AnyProfile(), ok, only_known));
  r.push_back(
      Sim(SimMutant::kSizingPartialMapPerTile, BugClass::kD,
          "reduce_partial_map under-allocated at one entry per q tile (the inverse of aiter "
          "#3855's over-allocation; ref::PartialMapOnePerTile)",
          AnyProfile(), ok, only_known));
  r.push_back(Sim(SimMutant::kReduceMapOffByOne, BugClass::kF,
                  "reduce_partial_map entries shifted by one q tile: the reduce merges the wrong "
                  "partial rows (MLASIM_MUTANT(kPartialMapOffByOne) in ref/planner.cpp)",
                  AnyProfile(), ok, only_known));
  r.push_back(
      Sim(SimMutant::kNoTailRule, BugClass::kB,
          "the planner without aiter #2106's tail rule: MTP pieces shorter than qlen, whose "
          "causal rows see no key (MLASIM_MUTANT(kNoTailRule) in ref/planner.cpp)",
          AnyProfile(), ok, only_known));
  r.push_back(Sim(SimMutant::kKernelAssumes576Rows, BugClass::kC,
                  "a kernel built for 576-column q rows run on a rope-free model (vLLM #56314): q "
                  "read past its end",
                  AnyProfile(), ok, only_known));
  r.push_back(Sim(SimMutant::kCallLaunchGridCaptured, BugClass::kC,
                  "a per-call override: the decode launched with a grid captured for another "
                  "batch (4096 workgroups): work_indptr read past its end",
                  AnyProfile(), ok, only_known));
  r.push_back(Sim(SimMutant::kCallPlanFromCapture, BugClass::kE,
                  "plan_from: the decode consumes the plan built at graph capture over the capture "
                  "batch (vLLM #36611's shape)",
                  AnyProfile(), ok, only_known));
  r.push_back(Sim(SimMutant::kSizingForOneRequest, BugClass::kD,
                  "a sizing override: the main plan's buffers sized for one request", AnyProfile(),
                  ok, only_known));
}

void AddContractMutants(std::vector<MutantSpec>& r) {
  const Property only_known = UnknownViolations;
  const char* ok = "only-known-families";
  const MutantKind k = MutantKind::kContract;
  struct Row {
    SimMutant m;
    BugClass cls;
    const char* desc;
  };
  const Row rows[] = {
      {SimMutant::kContractReadPastTile, BugClass::kC,
       "read statement: q read one row past the work item's q rows"},
      {SimMutant::kContractDropsOutputWrite, BugClass::kB,
       "write statement removed: unsplit tiles never write their final o rows"},
      {SimMutant::kContractLetKvEndTooFar, BugClass::kE,
       "let statement: kv_end 64 positions too far, index entries nobody wrote are read"},
      {SimMutant::kContractGatherBeforeStart, BugClass::kC,
       "gather statement: the page list read from one position before the work's KV"},
      {SimMutant::kContractLoopOneMoreWork, BugClass::kE,
       "loop bound: each workgroup walks one work item past its cluster"},
      {SimMutant::kContractGridOneMore, BugClass::kC,
       "launch grid: one workgroup more than work_indptr describes"},
      {SimMutant::kContractReduceIfAnyTile, BugClass::kE,
       "if statement: the reduce also runs tiles without splits (reads their unwritten maps)"},
      {SimMutant::kContractKvLoopUnbounded, BugClass::kJ,
       "loop bound check: the KV block walk exceeds its bound (a hang on hardware)"},
      {SimMutant::kContractZeroKvSkips, BugClass::kI,
       "semantics zero_kv = skips on an engine that consumes padding rows: garbage reaches the "
       "next layer (vLLM #37442's shape)"},
      {SimMutant::kContractInvalidIndexFault, BugClass::kG,
       "semantics invalid_index = fault: hostile index values (-1, 2147480000, INT_MAX) "
       "dereferenced outside the KV cache (FlashMLA's invalid top-k entries)"},
      {SimMutant::kContractInvalidIndexClamp, BugClass::kG,
       "semantics invalid_index = clamp_to_zero: hostile index values read slot 0"},
      {SimMutant::kContractInvalidIndexWrap, BugClass::kG,
       "semantics invalid_index = wrap: hostile index values read a wrapped slot"},
      {SimMutant::kContractInvalidIndexMinusOne, BugClass::kG,
       "semantics invalid_index = minus_one_masked: -1 is skipped, the other hostile values "
       "(2147480000, INT_MAX) are dereferenced outside the KV cache (FlashMLA's sparse decode)"},
      {SimMutant::kContractWhenSkipsPartial0, BugClass::kE,
       "when clause off by one (partial_qo_loc > 0): the piece at partial row 0 writes no "
       "logits, the reduce reads partial rows nobody wrote"},
      {SimMutant::kContractExtendsWrongBase, BugClass::kI,
       "extends names the wrong base: a user's asm contract starts from hk and inherits its "
       "zero_kv (reads q only), so zero-KV padding rows an engine consumes stay garbage"},
      {SimMutant::kContractUnitRowsForHeadRows, BugClass::kC,
       "read statement's unit: q bounds counted in head rows (row x heads) read as rows, heads "
       "times past the work item's q rows"},
      {SimMutant::kContractEmptyRowsPosInf, BugClass::kI,
       "semantics empty_rows = zero_and_pos_inf_lse (FlashMLA's keyless rows) on an engine that "
       "consumes the padding rows' lse: the zero-KV padding rows' lse = +inf reaches it"},
  };
  for (const Row& x : rows) {
    const bool invalid_index = x.m == SimMutant::kContractInvalidIndexFault ||
                               x.m == SimMutant::kContractInvalidIndexClamp ||
                               x.m == SimMutant::kContractInvalidIndexWrap ||
                               x.m == SimMutant::kContractInvalidIndexMinusOne;
    // Killed where the kernel meets the index, or writes a keyless row: the engine-step numerics.
    if (invalid_index || x.m == SimMutant::kContractEmptyRowsPosInf)
      r.push_back(Sim(
          x.m, x.cls, x.desc, AnyProfile(), kStepNumerics,
          [](const sim::ReplayReport& rep) { return NumericsViolations(rep); }, k));
    else
      r.push_back(Sim(x.m, x.cls, x.desc, AnyProfile(), ok, only_known, k));
  }
}

// The planner's code mutants (MLASIM_MUTANT in ref/planner.cpp), each with the property that
// kills it.
void AddPlannerMutants(std::vector<MutantSpec>& r) {
  using PM = ref::PlannerMutant;
  struct Row {
    const char* name;
    BugClass cls;
    const char* desc;
    const char* property;
    PM mutant;
    const char* site;
    bool ragged = false;  // killed on generated ragged batches (uniform ones cannot tell)
  };
  const Row rows[] = {
      {"planner-drop-last-piece", BugClass::kF,
       "a split tile loses its final piece: its last KV is never attended", "plan-checker-passes",
       PM::kDropLastPiece, "kDropLastPiece"},
      {"planner-ragged-rows-by-max", BugClass::kA,
       "non-uniform q lengths: the planner places request b's rows at b x max_seqlen_qo (the "
       "uniform path's rows) instead of qo_indptr[b]",
       "plan-checker-passes", PM::kRaggedRowsByMax, "kRaggedRowsByMax", true},
      {"planner-undersized-partial-map", BugClass::kD,
       "get_mla_metadata_info_v1 sizes reduce_partial_map at one entry per q tile "
       "(ref::PartialMapOnePerTile)",
       "planner-writes-within-sizes", PM::kUndersizedPartialMap, "kUndersizedPartialMap"},
      {"planner-leaks-state-into-pad", BugClass::kE,
       "the planner writes host state (a buffer address) into the pad dword",
       "same-input-same-bytes", PM::kNondeterministicPad, "kNondeterministicPad"},
  };
  for (const Row& x : rows) {
    const PM mutant = x.mutant;
    const char* property = x.property;  // a literal of rows: lives as long as the program
    const bool ragged = x.ragged;
    r.push_back(Custom(x.name, x.cls, MutantKind::kPlanner, x.desc, x.property,
                       std::string("MLASIM_MUTANT in ref/planner.cpp: ") + x.site,
                       [mutant, property, ragged](uint64_t s) {
                         return PlannerCase(mutant, s, property, ragged);
                       }));
  }
}

// decode_update's code mutants (MLASIM_MUTANT in ref/decode_update.cpp).
void AddDecodeUpdateMutants(std::vector<MutantSpec>& r) {
  using UM = ref::DecodeUpdateRequest::Mutant;
  struct Row {
    const char* name;
    BugClass cls;
    const char* desc;
    UM mutant;
    const char* site;
  };
  const Row rows[] = {
      {"decode-update-ignores-rejects", BugClass::kE,
       "decode_update adds one token per request whatever num_reject_tokens says",
       UM::kIgnoreRejects, "kIgnoreRejects"},
      {"decode-update-moves-every-piece", BugClass::kF,
       "decode_update moves every piece of a split tile to the request's end",
       UM::kMoveEveryPieceToEnd, "kMoveEveryPieceToEnd"},
  };
  for (const Row& x : rows) {
    const UM mutant = x.mutant;
    r.push_back(Custom(x.name, x.cls, MutantKind::kDecodeUpdate, x.desc, "update-tiles-new-lengths",
                       std::string("MLASIM_MUTANT in ref/decode_update.cpp: ") + x.site,
                       [mutant](uint64_t s) { return DecodeUpdateCase(mutant, s); }));
  }
}

// The plan-driven numerics' code mutants (MLASIM_MUTANT in ref/attention_plan.cpp).
void AddNumericsCodeMutants(std::vector<MutantSpec>& r) {
  using NM = ref::NumericsMutant;
  const std::string plan = "MLASIM_MUTANT in ref/attention_plan.cpp: ";
  struct Row {
    const char* name;
    BugClass cls;
    const char* desc;
    NM mutant;
    const char* site;
  };
  const Row rows[] = {
      {"reduce-merges-a-piece-twice", BugClass::kF,
       "the reduce merges the first piece of every split tile twice", NM::kMergePieceTwice,
       "kMergePieceTwice"},
      {"partial-row-offset-off-by-one", BugClass::kF,
       "split pieces write their partial rows one row too far", NM::kPartialRowOffByOne,
       "kPartialRowOffByOne"},
      {"unnormalized-partial", BugClass::kF, "split pieces write sum p*v without dividing by sum p",
       NM::kUnnormalizedPartial, "kUnnormalizedPartial"},
      {"causal-rule-off-by-one", BugClass::kH,
       "the MTP causal rule lets a row see one key too many", NM::kCausalOffByOne,
       "kCausalOffByOne"},
  };
  for (const Row& x : rows)
    r.push_back(Numerics(x.name, x.cls, x.desc, Code(x.mutant), plan + x.site));
  {  // killed on generated ragged batches (uniform ones cannot tell)
    MutantSpec m = Custom(
        "numerics-ignores-q-lens", BugClass::kH, MutantKind::kNumerics,
        "the plan-driven numerics take every request's q length as max_seqlen_qo (the uniform "
        "view): on a ragged batch the causal diagonal of a shorter request shifts",
        "plan-driven-equals-monolithic", plan + "kIgnoreQLens",
        [](uint64_t s) { return NumericsCase(Code(NM::kIgnoreQLens), s, true); });
    m.numerics = Code(NM::kIgnoreQLens);
    r.push_back(std::move(m));
  }
  // OPUS's semantics (zero_kv = skips, empty_rows = zero_and_neg_inf_lse): with one policy for
  // both fields again, taken from zero_kv, the piece rows of a paged MTP tail that see no key
  // are skipped too and the reduce merges unwritten partial rows.
  NumericsVariant merged = Code(NM::kEmptyRowsFollowZeroKv);
  merged.zero_kv = ref::ZeroKvPolicy::kSkip;
  r.push_back(Numerics("empty-rows-follow-zero-kv", BugClass::kF,
                       "one policy for two contract fields: rows with no visible key follow "
                       "zero_kv, so a kernel that skips zero-KV items (OPUS) is modelled as "
                       "skipping the keyless rows of split pieces too (the CPU numerics before "
                       "issue 11's zero_kv knob)",
                       merged, plan + "kEmptyRowsFollowZeroKv"));
}

// Hostile top-k entries (-1, past the cache, 2147480000, INT_MAX) used instead of masked.
void AddInvalidIndexSemanticsMutants(std::vector<MutantSpec>& r) {
  struct Use {
    ref::InvalidIndexUse use;
    const char* name;   // in the mutant's name
    const char* value;  // the contract's value
  };
  const Use uses[] = {
      {ref::InvalidIndexUse::kFault, "fault", "fault"},
      {ref::InvalidIndexUse::kClampToZero, "clamp-to-zero", "clamp_to_zero"},
      {ref::InvalidIndexUse::kWrap, "wrap", "wrap"},
      {ref::InvalidIndexUse::kMinusOneMasked, "minus-one-masked", "minus_one_masked"}};
  for (const Use& u : uses) {
    NumericsVariant v;
    v.invalid_index = u.use;
    r.push_back(StepNumerics(std::string("semantics-invalid-index-") + u.name, BugClass::kG,
                             std::string("semantics invalid_index = ") + u.value +
                                 ": hostile index values (-1, past the cache, 2147480000, "
                                 "INT_MAX) in the slots an ATOM step's decode reads reach real o "
                                 "rows (FlashMLA's invalid indices)",
                             v, "data: the contract's semantics.invalid_index", AnyProfile()));
  }
}

// The semantics mutants: a contract's semantics value that lets a bug through, killed by the
// engine-step numerics of generated ATOM steps.
void AddSemanticsMutants(std::vector<MutantSpec>& r) {
  // Both die on generated ATOM steps in the hostile-index world (docs/fuzzing.md "Mutants"):
  // a row whose every key slot holds an invalid index (masked) has no key, which empty_rows =
  // nan writes as 0/0; a masked key that holds NaN exists only past a request's last token in
  // its last page, so read_then_mask needs dense steps over pages of more than one token (the
  // `paged` generator family), where that tail is poisoned.
  NumericsVariant nan_rows;
  nan_rows.empty_rows = ref::EmptyRowPolicy::kNan;
  r.push_back(StepNumerics("semantics-empty-rows-nan", BugClass::kF,
                           "semantics empty_rows = nan: a split piece whose rows see no key "
                           "writes 0/0 = NaN, which the reduce merges (aiter #4711)",
                           nan_rows, "data: the contract's semantics.empty_rows", AnyProfile()));
  // FlashMLA's keyless rows (lse = +inf) where an engine consumes the padding rows' lse: the
  // zero-KV padding requests the serial planner gives a work item run under asm's zero_kv.
  NumericsVariant pos_inf;
  pos_inf.empty_rows = ref::EmptyRowPolicy::kWriteZeroPosInfLse;
  r.push_back(StepNumerics("semantics-empty-rows-pos-inf", BugClass::kI,
                           "semantics empty_rows = zero_and_pos_inf_lse on an engine that "
                           "consumes the padding rows' lse: the keyless padding rows hold lse = "
                           "+inf (FlashMLA's value) where the engine reads them",
                           pos_inf, "data: the contract's semantics.empty_rows", AnyProfile(),
                           SimMutant::kContractEmptyRowsPosInf));
  NumericsVariant masked;
  masked.read_masked_keys = true;
  r.push_back(StepNumerics("semantics-masked-keys-read-then-mask", BugClass::kI,
                           "semantics masked_keys = read_then_mask: the NaN tail of a request's "
                           "last page is loaded and masked, 0 x NaN reaches o (FlashMLA's "
                           "poisoned tails)",
                           masked, "data: the contract's semantics.masked_keys", PagedSteps()));
  AddInvalidIndexSemanticsMutants(r);
}

// The campaign's and explain-fault's own code mutants.
void AddToolMutants(std::vector<MutantSpec>& r) {
  r.push_back(Custom(
      "campaign-slipping-shrink", BugClass::kA, MutantKind::kCampaign,
      "issue 20's slippage: a campaign ignores --shrink per-signature and runs first-failure "
      "(shrinks keeping any failure, files the case under its first violation), so a second "
      "bug of the case is lost",
      "two-bugs-reported-apart", "MLASIM_MUTANT in fuzz/campaign.cpp: kSlippingShrink",
      [](uint64_t s) { return CampaignCase(CampaignMutant::kSlippingShrink, 1 + s % 400); }));
  r.push_back(Custom("fault-attributed-to-buffer-below", BugClass::kC, MutantKind::kAttribution,
                     "explain-fault names the far end of the buffer below an address that lies "
                     "just before the start of another buffer (round 1's attribution)",
                     "underflow-attributed-to-its-buffer",
                     "MLASIM_MUTANT in sim/fault.cpp: kAttributeToBufferBelow", [](uint64_t s) {
                       return AttributionCase(sim::FaultMutant::kAttributeToBufferBelow, s);
                     }));
}

// Every code mutant, in the registry's order.
void AddCodeMutants(std::vector<MutantSpec>& r) {
  AddPlannerMutants(r);
  AddDecodeUpdateMutants(r);
  AddNumericsCodeMutants(r);
  AddSemanticsMutants(r);
  AddToolMutants(r);
}

// Budgets above kDefaultMutantBudget: about 4x the cases the kill takes from seed 1 (`mlasim
// mutants` prints the cases; docs/fuzzing.md "Mutants" has the figures).
struct Budget {
  const char* name;
  int64_t cases;
};
constexpr Budget kBudgets[] = {
    {"engine-draft-steps-at-scheduled-rows", 220},  // killed at case 54
    {"engine-stale-plan-after-lengths-grew", 90},   // 22
    {"sizing-for-scheduled-batch", 30},             // 7
    {"planner-drops-tail-rule", 270},               // 67
    {"kernel-assumes-576-column-rows", 60},         // 14
    {"engine-decode-plan-from-capture", 60},        // 15
    {"planner-undersized-partial-map", 40},         // 10
    {"campaign-slipping-shrink", 30},               // 7
    {"empty-rows-follow-zero-kv", 40},              // 10
};

std::vector<MutantSpec> Build() {
  std::vector<MutantSpec> r;
  AddSimulatorMutants(r);
  AddContractMutants(r);
  AddCodeMutants(r);
  for (const Budget& b : kBudgets) {
    bool found = false;
    for (MutantSpec& m : r)
      if (m.name == b.name) m.budget = b.cases, found = true;
    MLASIM_ASSERT(found, std::string("a budget for a mutant the registry lacks: ") + b.name);
  }
  return r;
}

}  // namespace

const char* MutantKindName(MutantKind k) {
  switch (k) {
    case MutantKind::kSimulator: return "simulator";
    case MutantKind::kContract: return "contract";
    case MutantKind::kSemantics: return "semantics";
    case MutantKind::kPlanner: return "planner";
    case MutantKind::kDecodeUpdate: return "decode_update";
    case MutantKind::kNumerics: return "numerics";
    case MutantKind::kCampaign: return "campaign";
    case MutantKind::kAttribution: return "attribution";
  }
  return "?";
}

sim::SemanticsOverride SemanticsOf(const NumericsVariant& v) {
  sim::SemanticsOverride o;
  if (v.invalid_index != ref::InvalidIndexUse::kMasked) o.invalid_index = v.invalid_index;
  if (v.read_masked_keys) o.read_masked_keys = true;
  if (v.empty_rows != ref::EmptyRowPolicy::kWriteZero) o.empty_rows = v.empty_rows;
  if (v.zero_kv != ref::ZeroKvPolicy::kRun) o.zero_kv = v.zero_kv;
  return o;
}

std::optional<std::string> NumericsPropertyFailure(int mutant, uint64_t seed, int cases,
                                                   bool ragged) {
  for (int i = 0; i < cases; ++i) {
    auto why = NumericsCase(Code(static_cast<ref::NumericsMutant>(mutant)),
                            seed + static_cast<uint64_t>(i), ragged);
    if (why) return why;
  }
  return std::nullopt;
}

std::optional<std::string> RaggedPlanCheckFailure(int mutant, uint64_t seed, int cases) {
  for (int i = 0; i < cases; ++i) {
    auto why = PlannerCase(static_cast<ref::PlannerMutant>(mutant), seed + static_cast<uint64_t>(i),
                           "plan-checker-passes", true);
    if (why) return why;
  }
  return std::nullopt;
}

const std::vector<MutantSpec>& MutantRegistry() {
  static const std::vector<MutantSpec> kRegistry = Build();
  return kRegistry;
}

const MutantSpec* FindMutant(const std::string& name) {
  for (const MutantSpec& m : MutantRegistry())
    if (m.name == name) return &m;
  return nullptr;
}

MutantResult RunMutant(const MutantSpec& m, uint64_t seed, int64_t max_cases) {
  MutantResult res;
  res.name = m.name;
  res.bug_class = m.bug_class;
  for (int64_t i = 0; i < max_cases; ++i) {
    ++res.cases;
    if (m.kill_case) {
      if (auto k = m.kill_case(seed, i)) {
        res.killed = true;
        res.kill = std::move(k);
        break;
      }
      continue;
    }
    const int size = static_cast<int>(10 + (i % 90));
    auto f = TestSeed(m.config, seed + static_cast<uint64_t>(i), size, m.killing, m.sim);
    if (f) {
      res.killed = true;
      res.kill = Kill{fmt::format("B={} K={} {}", f->scenario.requests.size(), f->scenario.mtp_k,
                                  Signature(f->broken.front())),
                      std::move(f)};
      break;
    }
  }
  return res;
}

}  // namespace mlasim::fuzz
