// File: fuzz/search.h
//
// Finding and shrinking failing scenarios outside rc::check, so that campaigns control seeds (for
// sharding) and keep the shrunk case: generate from a seed, test, and on failure walk RapidCheck's
// shrink tree greedily (first kept shrink, repeat) within a step bound. Campaigns shrink towards
// one target signature at a time (a shrink is kept only if it still shows that signature), so a
// finding is the smallest case of its own bug and never slips to another one.
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

// Accepted shrink steps per finding unless a caller says otherwise.
inline constexpr int kDefaultShrinkSteps = 200;

struct Failure {
  sim::Scenario scenario;              // shrunk
  std::vector<sim::Violation> broken;  // what breaks the property on the shrunk scenario
  uint64_t seed = 0;                   // the generating seed
  int size = 0;                        // RapidCheck size
  int shrink_steps = 0;
  std::vector<int> shrink_path;  // index of the accepted shrink at each step
  std::string target;            // the signature kept while shrinking ("" = any failure)
  // The step budget ended the shrink while a further step would still have been kept: the case
  // is smaller than the one found, but not the smallest this greedy walk reaches.
  bool cut_short = false;
};

// Replays `s` (with `mutant`) and applies `property`; scenarios the planner refuses hold vacuously.
std::vector<sim::Violation> Evaluate(const sim::Scenario& s, const Property& property,
                                     sim::SimMutant mutant);

// Tests the scenario of `seed`; if it shows a violation with signature `target`
// (fuzz/signature.h), shrinks it, keeping a step only when the smaller scenario still shows
// `target` (other violations may come and go), for at most `max_shrink_steps` accepted steps.
// nullopt when the scenario does not show `target`. `target` "" keeps any failure of `property`
// (the mutant registry's kill search; for campaigns it is the slipping rule of issue 20, kept
// only as a test mutant).
std::optional<Failure> ShrinkToSignature(const GenConfig& config, uint64_t seed, int size,
                                         const Property& property, sim::SimMutant mutant,
                                         const std::string& target,
                                         int max_shrink_steps = kDefaultShrinkSteps);

// Tests the scenario of `seed`; on failure shrinks it keeping any failure of `property`
// (ShrinkToSignature with target "").
std::optional<Failure> TestSeed(const GenConfig& config, uint64_t seed, int size,
                                const Property& property, sim::SimMutant mutant,
                                int max_shrink_steps = kDefaultShrinkSteps);

// Replays a recorded shrink path from a seed: the same scenario as the one found. Errors:
// InvalidArgument("--shrink-path") when step k names a shrink the scenario does not have.
StatusOr<sim::Scenario> ReplayShrinkPath(const GenConfig& config, uint64_t seed, int size,
                                         const std::vector<int>& path);

}  // namespace mlasim::fuzz
