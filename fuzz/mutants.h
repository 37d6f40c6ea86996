// File: fuzz/mutants.h
//
// The mutant registry: named, deliberately injected bugs, one or more per fault class of
// bug-classes.md that the model can express, each with the property that must kill it. `mlasim
// mutants` runs every mutant's property within a time budget; `make verify` fails if one survives.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fuzz/search.h"
#include "sim/mutants.h"

namespace mlasim::fuzz {

struct MutantSpec {
  std::string name;
  std::string bug_class;    // A..J
  std::string description;  // the injected bug, and the real-world report it stands for
  std::string property;     // the property that must kill it
  // Simulator mutants: search scenarios from seeds with `config` until `killing` breaks.
  sim::SimMutant sim = sim::SimMutant::kNone;
  GenConfig config;
  Property killing;
  // Other mutants (numerics): a self-contained check; returns a description of the killing
  // counterexample, or nullopt if the mutant survived `budget_cases` cases.
  std::function<std::optional<std::string>(uint64_t seed, int budget_cases)> custom;
};

const std::vector<MutantSpec>& MutantRegistry();

// The numerics property over `cases` small random batches from `seed`, with `mutant` injected
// (ref::NumericsMutant as an integer; 0 = none): a description of the first batch where
// plan-driven split + reduce differs from monolithic attention, or nullopt.
std::optional<std::string> NumericsPropertyFailure(int mutant, uint64_t seed, int cases);

struct MutantResult {
  std::string name;
  std::string bug_class;
  bool killed = false;
  double seconds_to_kill = 0;
  int64_t cases = 0;
  std::optional<Failure> counterexample;  // simulator mutants
  std::string custom_counterexample;      // numerics mutants
};

// Runs one mutant's property from `seed` for at most `budget_seconds` (wall clock only bounds
// the search; which seeds are tried, and so the result for a given budget of cases, is
// deterministic).
MutantResult RunMutant(const MutantSpec& m, uint64_t seed, double budget_seconds);

}  // namespace mlasim::fuzz
