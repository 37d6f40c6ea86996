#include "fuzz/mutants.h"

#include <chrono>

#include "fuzz/properties.h"
#include "ref/numerics.h"
#include "ref/planner.h"
#include "sim/engine.h"

namespace mlasim::fuzz {
namespace {

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

MutantSpec Sim(std::string name, std::string cls, std::string desc, sim::SimMutant m,
               GenConfig config, std::string property_name, Property p) {
  MutantSpec s;
  s.name = std::move(name);
  s.bug_class = std::move(cls);
  s.description = std::move(desc);
  s.sim = m;
  s.config = std::move(config);
  s.property = std::move(property_name);
  s.killing = std::move(p);
  return s;
}

// A small random decode batch (deterministic from `seed`, no std distributions): splits through
// few clusters, MTP, folding, sparse top-k with invalid entries, zero-KV requests, short tails.
ref::PlanRequest SmallBatch(uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  auto next = [&x](uint32_t n) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return static_cast<int32_t>(x % n);
  };
  ref::PlanRequest r;
  r.target = ref::Arch::kGfx942;
  r.cu_count = 2 + next(14);
  const int32_t heads[] = {16, 16, 32, 64};
  r.heads_per_head_k = heads[next(4)];
  const bool sparse = next(4) == 0;
  const int32_t qlen = 1 + next(4);
  // The §11.6 edge in one case of four: pages > 1 with MTP, granularity 1 page, many clusters,
  // requests just past a page boundary: split tiles end with a piece shorter than qlen.
  const bool paged_tail = !sparse && qlen > 1 && next(4) == 0;
  if (paged_tail) {
    r.heads_per_head_k = 16;
    r.page_size = 4;
    r.kv_granularity = 1;
    r.cu_count = 8 + next(9);
  }
  r.qlen = qlen;
  r.max_seqlen_qo = r.uni_seqlen_qo = sparse ? 1 : qlen;
  if (sparse) r.topk = 64;
  const int32_t batch = 1 + next(6);
  r.qo_indptr = {0};
  r.kv_indptr = {0};
  for (int32_t b = 0; b < batch; ++b) {
    const int32_t kind = next(4);
    int32_t tokens = kind == 0 ? 0 : kind == 1 ? next(qlen + 1) : next(400);
    if (paged_tail) tokens = (2 + next(22)) * r.page_size + 1 + next(qlen - 1);
    const int32_t pages = (tokens + r.page_size - 1) / r.page_size;
    r.qo_indptr.push_back(r.qo_indptr.back() + qlen);
    r.kv_indptr.push_back(r.kv_indptr.back() + pages);
    r.kv_last_page_lens.push_back(tokens == 0 ? r.page_size : tokens - (pages - 1) * r.page_size);
  }
  return r;
}

std::optional<std::string> NumericsKill(ref::NumericsMutant mutant, uint64_t seed, int cases) {
  for (int i = 0; i < cases; ++i) {
    const uint64_t s = seed + static_cast<uint64_t>(i);
    const ref::PlanRequest r = SmallBatch(s);
    auto plan = ref::PlanMlaMetadata(r);
    if (!plan.ok()) continue;
    ref::NumericsOptions o;
    o.seed = s;
    o.head_dim_qk = 80;
    o.head_dim_v = 64;
    o.mutant = mutant;
    auto rep = ref::RunPlanNumerics(r, *plan, o);
    if (!rep.ok() || !plan->input_violations.empty()) continue;
    // Poison is expected only in never-written o rows of requests with no key (the parallel
    // planner's zero-KV requests); anything else is a wrong answer.
    bool unexpected_poison = false;
    const int32_t per = r.topk >= 0 ? r.qo_indptr[1] - r.qo_indptr[0] : r.uni_seqlen_qo;
    for (const ref::PoisonFinding& f : rep->poison) {
      bool expected = f.kind == ref::PoisonKind::kNeverWritten &&
                      f.output == ref::NumericsBuffer::kO && f.row_begin >= 0;
      for (int64_t row = f.row_begin; expected && row < f.row_end; ++row) {
        const int32_t b = static_cast<int32_t>(row / per);
        expected = r.kv_indptr[b + 1] == r.kv_indptr[b];
      }
      unexpected_poison |= !expected;
    }
    if (rep->monolithic_nan > 0 || rep->unexplained_nan > 0 || unexpected_poison ||
        !rep->o_unpoisoned.passed || !rep->lse_unpoisoned.passed) {
      std::string why;
      if (rep->monolithic_nan > 0)
        why = "NaN in the monolithic result";
      else if (rep->unexplained_nan > 0)
        why = std::to_string(rep->unexplained_nan) + " unexplained NaN";
      else if (unexpected_poison)
        why = "poison in rows of requests that have keys";
      else
        why = "max abs error " + std::to_string(rep->o_unpoisoned.max_abs) + " beyond tolerance";
      return "batch seed " + std::to_string(s) + ": " + std::to_string(r.kv_indptr.size() - 1) +
             " requests, heads " + std::to_string(r.heads_per_head_k) + ", qlen " +
             std::to_string(r.qlen) + (r.topk >= 0 ? ", sparse" : "") +
             ": plan-driven != monolithic (" + why + ")";
    }
  }
  return std::nullopt;
}

MutantSpec Numerics(std::string name, std::string cls, std::string desc, ref::NumericsMutant m) {
  MutantSpec s;
  s.name = std::move(name);
  s.bug_class = std::move(cls);
  s.description = std::move(desc);
  s.property = "plan-driven-equals-monolithic";
  s.custom = [m](uint64_t seed, int cases) { return NumericsKill(m, seed, cases); };
  return s;
}

std::vector<MutantSpec> Build() {
  std::vector<MutantSpec> r;
  const Property fixed_clean = FixedProfileViolations;
  const Property only_known = UnknownViolations;
  r.push_back(
      Sim("engine-sparse-plan-over-running-tokens", "A",
          "the founding fault: the sparse MTP plan covers the graph-padded tokens and draft "
          "step 0 reuses it with unpadded q/o (seed-fault.md, ATOM #2715)",
          sim::SimMutant::kFoundingFault, FixedSparse(), "fixed-profile-clean", fixed_clean));
  r.push_back(Sim("engine-draft-steps-at-scheduled-rows", "A",
                  "draft steps 1..K-1 run at B rows over plans covering R (pre-DraftGraph ATOM "
                  "with the incremental update; atom-mtp-flow.md §6 row Ds)",
                  sim::SimMutant::kDraftRowsScheduled, AnyProfile(), "only-known-families",
                  only_known));
  r.push_back(Sim("kernel-zero-kv-page-count-underflow", "J",
                  "a zero-KV work item's page count underflows (ATOM #1301): a near-infinite KV "
                  "loop, caught as a bounded-loop violation, never a hang",
                  sim::SimMutant::kZeroKvPageUnderflow, AnyProfile(true), "only-known-families",
                  only_known));
  r.push_back(Sim("kernel-zero-kv-reads-index-row", "E",
                  "the seed's wrong hypothesis: zero-KV padding items read the sparse index buffer "
                  "past what the step wrote",
                  sim::SimMutant::kZeroKvReadsIndexRow, AnyProfile(true), "only-known-families",
                  only_known));
  r.push_back(Sim("engine-stale-plan-after-lengths-grew", "E",
                  "a sparse draft plan reused after every KV length grew (vLLM #36611's stale "
                  "schedule)",
                  sim::SimMutant::kStalePlanAfterGrowth, AnyProfile(true), "only-known-families",
                  only_known));
  r.push_back(Sim("sizing-for-scheduled-batch", "D",
                  "metadata buffers sized for the scheduled batch while the graph plans the padded "
                  "one (sizing vs planner disagreement)",
                  sim::SimMutant::kSizingScheduledBatch, AnyProfile(), "only-known-families",
                  only_known));
  r.push_back(Sim(
      "sizing-partial-map-one-per-tile", "D",
      "reduce_partial_map under-allocated at one entry per q tile (the inverse of aiter "
      "#3855's over-allocation)",
      sim::SimMutant::kSizingPartialMapPerTile, AnyProfile(), "only-known-families", only_known));
  r.push_back(Sim("planner-reduce-map-off-by-one-tile", "F",
                  "reduce_partial_map entries shifted by one q tile: the reduce merges the wrong "
                  "partial rows",
                  sim::SimMutant::kReduceMapOffByOne, AnyProfile(), "only-known-families",
                  only_known));
  r.push_back(
      Sim("planner-drops-tail-rule", "B",
          "the planner without aiter #2106's tail rule: MTP pieces shorter than qlen, whose "
          "causal rows see no key",
          sim::SimMutant::kNoTailRule, AnyProfile(), "only-known-families", only_known));
  r.push_back(Sim("kernel-assumes-576-column-rows", "C",
                  "a kernel built for 576-column q rows run on a rope-free model (vLLM #56314): q "
                  "read past its end",
                  sim::SimMutant::kKernelAssumes576Rows, AnyProfile(), "only-known-families",
                  only_known));
  r.push_back(Numerics("reduce-merges-a-piece-twice", "F",
                       "the reduce merges the first piece of every split tile twice",
                       ref::NumericsMutant::kMergePieceTwice));
  r.push_back(Numerics("partial-row-offset-off-by-one", "F",
                       "split pieces write their partial rows one row too far",
                       ref::NumericsMutant::kPartialRowOffByOne));
  r.push_back(Numerics("empty-split-merged-with-garbage", "I",
                       "a split piece whose rows see no key writes 0/0 = NaN that the reduce "
                       "merges (aiter #4711)",
                       ref::NumericsMutant::kEmptySplitGarbage));
  r.push_back(Numerics("unnormalized-partial", "F",
                       "split pieces write sum p*v without dividing by sum p",
                       ref::NumericsMutant::kUnnormalizedPartial));
  r.push_back(Numerics("causal-rule-off-by-one", "H",
                       "the MTP causal rule lets a row see one key too many",
                       ref::NumericsMutant::kCausalOffByOne));
  r.push_back(Numerics("topk-minus-one-dereferenced", "G",
                       "a -1 top-k entry is read as KV row -1 instead of masked",
                       ref::NumericsMutant::kTopkMinusOneDereferenced));
  return r;
}

}  // namespace

std::optional<std::string> NumericsPropertyFailure(int mutant, uint64_t seed, int cases) {
  return NumericsKill(static_cast<ref::NumericsMutant>(mutant), seed, cases);
}

const std::vector<MutantSpec>& MutantRegistry() {
  static const std::vector<MutantSpec> kRegistry = Build();
  return kRegistry;
}

MutantResult RunMutant(const MutantSpec& m, uint64_t seed, double budget_seconds) {
  MutantResult res;
  res.name = m.name;
  res.bug_class = m.bug_class;
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  if (m.custom) {
    // Numerics mutants check in batches of cases until the budget runs out.
    for (int batch = 0; elapsed() < budget_seconds; ++batch) {
      auto found = m.custom(seed + static_cast<uint64_t>(batch) * 1000003u, 25);
      res.cases += 25;
      if (found) {
        res.killed = true;
        res.custom_counterexample = *found;
        break;
      }
    }
    res.seconds_to_kill = elapsed();
    return res;
  }
  for (uint64_t i = 0; elapsed() < budget_seconds; ++i) {
    const int size = static_cast<int>(10 + (i % 90));
    auto f = TestSeed(m.config, seed + i, size, m.killing, m.sim);
    ++res.cases;
    if (f) {
      res.killed = true;
      res.counterexample = std::move(f);
      break;
    }
  }
  res.seconds_to_kill = elapsed();
  return res;
}

}  // namespace mlasim::fuzz
