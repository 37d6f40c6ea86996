// File: fuzz/search.h
//
// Finding and shrinking failing scenarios outside rc::check, so that campaigns control seeds (for
// sharding) and keep the shrunk case: generate from a seed, test, and on failure walk RapidCheck's
// shrink tree greedily (first failing shrink, repeat) within a step bound.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fuzz/scenario_gen.h"
#include "sim/replay.h"

namespace mlasim::fuzz {

// A property over one replay: the violations that break it.
using Property = std::function<std::vector<sim::Violation>(const sim::ReplayReport&)>;

struct Failure {
  sim::Scenario scenario;              // shrunk
  std::vector<sim::Violation> broken;  // what breaks the property on the shrunk scenario
  uint64_t seed = 0;                   // the generating seed
  int size = 0;                        // RapidCheck size
  int shrink_steps = 0;
  std::vector<int> shrink_path;  // index of the accepted shrink at each step
};

// Replays `s` (with `mutant`) and applies `property`; scenarios the planner refuses hold vacuously.
std::vector<sim::Violation> Evaluate(const sim::Scenario& s, const Property& property,
                                     sim::SimMutant mutant);

// Tests the scenario of `seed`; on failure shrinks it (at most max_shrink_steps accepted steps).
std::optional<Failure> TestSeed(const GenConfig& config, uint64_t seed, int size,
                                const Property& property, sim::SimMutant mutant,
                                int max_shrink_steps = 200);

// Replays a recorded shrink path from a seed: the same scenario as the one found. Errors:
// InvalidArgument("--shrink-path") when step k names a shrink the scenario does not have.
StatusOr<sim::Scenario> ReplayShrinkPath(const GenConfig& config, uint64_t seed, int size,
                                         const std::vector<int>& path);

}  // namespace mlasim::fuzz
