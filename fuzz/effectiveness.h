// File: fuzz/effectiveness.h
//
// The fuzzer's effectiveness, measured (issue 20 §3, in the spirit of FuzzBench and Magma): for
// every registered mutant (fuzz/mutants.h) and every known bug (sim/known_bugs.h
// KnownBugs, under the ATOM profiles atom-2026-03/-08/-11), over many seeds, how many
// generated cases and how much CPU time pass before the first case that shows it, with swarm
// generation on and off (fuzz/scenario_gen.h); and how many distinct failure signatures a campaign
// sees per CPU-minute. Cases are generated as a campaign generates them (seed index i of base
// seed s: RapidCheck seed s * 0x9E3779B97F4A7C15 + i, size 10 + i % 91). Before and after
// issue 20 §1, each target is measured under both shrink policies (fuzz/search.h ShrinkPolicy):
// a detection counts when a campaign of that policy reports it, its shrinking included. Which
// case reports a target is deterministic; the CPU seconds are measurements (CPU clocks) and are
// never asserted.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fuzz/search.h"
#include "ref/status.h"
#include "sim/known_bugs.h"

namespace mlasim::fuzz {

// A bug the benchmark looks for.
struct EffectTarget {
  std::string name;       // the mutant's name, or the known bug's
  std::string kind;       // "mutant" or "known bug"
  std::string bug_class;  // A..J
  // Simulator targets: generated cases (swarm is set per run), the injected mutant and the
  // property whose violations detect it.
  GenConfig config;
  sim::SimMutant mutant = sim::SimMutant::kNone;
  Property detects;
  // Mutants with a kill search of their own (planner, decode_update, numerics, semantics,
  // campaign, attribution: fuzz/mutants.h kill_case), not the scenario generator, so swarm does
  // not apply: whether case `index` from `seed` detects it.
  std::function<bool(uint64_t seed, int64_t index)> custom;
  // A known bug: the entry of sim::KnownBugs(); campaigns report it (RunPolicyCampaign).
  const sim::KnownBug* known = nullptr;
  bool UsesGenerator() const { return !custom; }
};

// Every registered mutant, then every known bug (its cases drawn from the three ATOM
// profiles, with B <= 64 and K <= 3 when `small`; every --generate family off).
std::vector<EffectTarget> EffectivenessTargets(bool small);

// One seed's search for one target: cases run up to and including the detecting one (or the
// whole budget), whether it detected, and the CPU seconds spent.
struct SeedSearch {
  bool detected = false;
  int64_t cases = 0;
  double cpu_seconds = 0;
};
// Errors: none; max_cases >= 1 (MLASIM_ASSERT).
SeedSearch SearchTarget(const EffectTarget& target, bool swarm, uint64_t seed, int64_t max_cases);

// The policies in the order the report gives them: per-signature (after §1), first-failure
// (before).
// A mutant's cells under a policy: SearchTarget's cases (a campaign reports its first failing
// case under either policy) and CPU seconds plus those of the shrinking a campaign of that policy
// does before it reports the case (ShrinkForPolicy for each of its PolicyTargets); kill-search
// mutants shrink nothing. A known bug's cells: the campaigns of RunPolicyCampaign.
inline constexpr std::array<ShrinkPolicy, 2> kReportPolicies = {ShrinkPolicy::kPerSignature,
                                                                ShrinkPolicy::kFirstFailure};

// One seed's campaign under one shrink policy (fuzz/campaign.h, one shard, one job, no --out):
// `cases` cases of the three ATOM profiles (B <= 64, K <= 3 when `small`), every violation a
// failure. `known` holds, per known bug (sim/known_bugs.h) that a finding was filed for, the
// cases up to the one whose finding first named it and the process CPU seconds until then.
struct PolicyCampaign {
  int64_t cases = 0;
  double cpu_seconds = 0;          // the whole campaign, shrinking included
  std::set<std::string> shown;     // every violation's signature of every case
  std::set<std::string> reported;  // the findings' signatures
  std::map<std::string, SeedSearch> known;
};
// Errors: none (the options are valid by construction; MLASIM_ASSERT on a failed campaign).
PolicyCampaign RunPolicyCampaign(bool small, bool swarm, ShrinkPolicy policy, uint64_t seed,
                                 int64_t cases);

// One seed's signature yield: `cases` cases of `config` (swarm as given), every violation's
// signature (fuzz/signature.h) counted once.
struct SignatureYield {
  int64_t cases = 0;
  int64_t distinct = 0;
  double cpu_seconds = 0;
  std::vector<std::string> signatures;  // sorted
};
SignatureYield MeasureSignatures(const GenConfig& config, uint64_t seed, int64_t cases);

struct EffectivenessOptions {
  int64_t seeds = 10;  // base seeds first_seed .. first_seed + seeds - 1; 1..1000
  uint64_t first_seed = 1;
  // Case budget per target, seed and swarm mode; 1..10^6. The known bugs' campaigns run this many
  // cases per seed, swarm mode and policy.
  int64_t max_cases = 200;
  int64_t signature_cases = 0;  // cases per seed of the signature yield (0: not measured); <= 10^6
  bool small = true;            // the known families' and the yield's cases: B <= 64, K <= 3
  std::vector<std::string> only;  // target names to run (empty: all); unknown names are errors
};

// The benchmark as a Markdown report: one table row per target and swarm mode (kill-search
// mutants: one row, swarm "n/a") with both policies side by side; when a known bug is among the
// targets, the campaigns' signatures seen against findings reported per swarm mode and policy;
// then the signature yield per swarm mode. Progress lines go to
// `progress` (may be null). Errors: InvalidArgument naming --seeds, --cases, --signature-cases
// or --only.
StatusOr<std::string> EffectivenessReport(const EffectivenessOptions& options,
                                          const std::function<void(const std::string&)>& progress);

// The median of `values` where a censored value (a seed that did not detect) is +infinity: the
// mean of the two middle values for an even count. +infinity when the median is censored; NaN
// for no values.
double CensoredMedian(std::vector<double> values);

}  // namespace mlasim::fuzz
