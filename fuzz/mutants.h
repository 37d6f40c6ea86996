// File: fuzz/mutants.h
//
// The mutant registry: every deliberately injected bug of mlasim in one table (fuzz/mutants.cpp),
// whatever layer it breaks -- the simulator's data mutants (call-table variables, contract edits
// and constants, scenario overrides, planner mutants through the engine; sim/mutants.h), the
// planner, decode_update and numerics code mutants (each injected at one MLASIM_MUTANT site,
// ref/mutant.h), kernel-contract semantics the numerics must catch, the campaign driver and the
// fault attribution. Each entry has a name, the bug class it stands for (docs/bug-classes.md),
// the property that must kill it and where it is injected. `mlasim mutants` runs every entry's
// property for a budget of cases (not seconds: the result is the same at any machine speed) and
// `make verify` fails if one survives (docs/fuzzing.md "Mutants").
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fuzz/search.h"
#include "ref/numerics.h"
#include "sim/mutants.h"
#include "sim/step_numerics.h"
#include "sim/violation.h"

namespace mlasim::fuzz {

enum class MutantKind : uint8_t {
  kSimulator,     // sim::SimMutant: engine, sizing, planner-through-the-engine, scenario overrides
  kContract,      // sim::SimMutant editing a kernel contract (a feature of docs/contracts.md)
  kSemantics,     // a kernel contract's semantics value the numerics property must catch
  kPlanner,       // ref::PlannerMutant
  kDecodeUpdate,  // ref::DecodeUpdateRequest::Mutant
  kNumerics,      // ref::NumericsMutant
  kCampaign,      // fuzz::CampaignMutant
  kAttribution,   // sim::FaultMutant
};
const char* MutantKindName(MutantKind k);

// What killed a mutant: the case (0-based) and a description; simulator mutants also give the
// shrunk scenario (a case file `mlasim replay FILE --mutant NAME` reproduces).
struct Kill {
  std::string description;
  std::optional<Failure> counterexample;
};

// What a numerics or semantics mutant does to the plan-driven path: a code mutant and/or kernel
// contract semantics (ref/attention.h PlanExecOptions). `mlasim numerics --mutant NAME` applies it.
struct NumericsVariant {
  ref::NumericsMutant mutant = ref::NumericsMutant::kNone;
  ref::EmptyRowPolicy empty_rows = ref::EmptyRowPolicy::kWriteZero;
  ref::InvalidIndexUse invalid_index = ref::InvalidIndexUse::kMasked;
  bool read_masked_keys = false;
  ref::ZeroKvPolicy zero_kv = ref::ZeroKvPolicy::kRun;
};

// The contract semantics `v` replaces (the fields it sets to other than their defaults); the
// code mutant is `v.mutant`.
sim::SemanticsOverride SemanticsOf(const NumericsVariant& v);

// Cases a mutant's property gets when its entry states no budget of its own (fuzz/mutants.cpp
// kBudgets lists the others): at least 4x the cases the kill takes from seed 1.
inline constexpr int64_t kDefaultMutantBudget = 20;

struct MutantSpec {
  std::string name;
  sim::BugClass bug_class = sim::BugClass::kA;
  MutantKind kind = MutantKind::kSimulator;
  std::string description;  // the injected bug, and the real-world report it stands for
  std::string property;     // the property that must kill it
  std::string site;         // where it is injected (an MLASIM_MUTANT site or the data it edits)
  // Simulator and contract mutants: scenarios from seeds with `config` until `killing` breaks.
  sim::SimMutant sim = sim::SimMutant::kNone;
  GenConfig config;
  Property killing;
  // Every other mutant: case `index` of its kill search from `seed`; a Kill when the property
  // breaks on it.
  std::function<std::optional<Kill>(uint64_t seed, int64_t index)> kill_case;
  // Numerics and semantics mutants: the variant (`mlasim numerics --mutant NAME`).
  std::optional<NumericsVariant> numerics;
  // Cases from seed 1 within which the property must kill it (`mlasim mutants` without --budget;
  // tests/fuzz/fuzz_test.cpp checks the kill fits). Measured kills are far below it.
  int64_t budget = kDefaultMutantBudget;
};

const std::vector<MutantSpec>& MutantRegistry();
// The entry named `name`, or nullptr.
const MutantSpec* FindMutant(const std::string& name);

struct MutantResult {
  std::string name;
  sim::BugClass bug_class = sim::BugClass::kA;
  bool killed = false;
  int64_t cases = 0;  // cases run (the killing case included)
  std::optional<Kill> kill;
};

// Runs `m`'s property on cases 0, 1, ... from `seed` until it breaks or `max_cases` cases ran.
// Deterministic: the same (seed, max_cases) gives the same result on any machine.
MutantResult RunMutant(const MutantSpec& m, uint64_t seed, int64_t max_cases);

// The numerics property over small random batches (docs/numerics.md "Properties"): a description
// of the first batch of cases [seed, seed + cases) where plan-driven split + reduce under `mutant`
// (ref::NumericsMutant as an integer) differs from monolithic attention, or nullopt. `ragged`:
// on small ragged batches of aiter's non-uniform planner path instead (SmallRaggedBatch).
std::optional<std::string> NumericsPropertyFailure(int mutant, uint64_t seed, int cases,
                                                   bool ragged = false);

// The plan checker over small ragged batches (non-uniform q lengths, 0..max_seqlen_qo per
// request) planned under `mutant` (ref::PlannerMutant as an integer): the first failure, or
// nullopt.
std::optional<std::string> RaggedPlanCheckFailure(int mutant, uint64_t seed, int cases);

}  // namespace mlasim::fuzz
