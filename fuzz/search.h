// File: fuzz/search.h
//
// Finding and shrinking failing scenarios outside rc::check, so that campaigns control seeds (for
// sharding) and keep the shrunk case: generate from a seed, test, and on failure walk RapidCheck's
// shrink tree greedily (first kept shrink, repeat) within a step bound. Campaigns shrink towards
// one target signature at a time (a shrink is kept only if it still shows that signature), so a
// finding is the smallest case of its own bug and never slips to another one. ShrinkPolicy names
// that rule and round 1's (first failure only, keep any failure), kept as a measurement and
// compatibility mode (docs/fuzzing.md "Shrink policies").
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fuzz/scenario_gen.h"
#include "ref/status.h"
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
  // The signature the case was shrunk for ("" = any failure: TestSeed); under
  // ShrinkPolicy::kFirstFailure the shrink kept any failure, so the case may no longer show it.
  std::string target;
  // The step budget ended the shrink while a further step would still have been kept: the case
  // is smaller than the one found, but not the smallest this greedy walk reaches.
  bool cut_short = false;
};

// The cases of a sweep (`fuzz`, `triage`) whose step ran nothing, by why: a report counts them
// apart and never calls them clean. Add them in seed-index order (the first kept is the lowest).
struct NotRun {
  int64_t over_limit = 0;  // over one of mlasim's limits (StatusCode::kResourceExhausted)
  int64_t refused = 0;     // a shape the step refuses, as aiter or the engine does (other errors)
  // The lowest index of each kind and its error, "field: reason" ("" when none).
  uint64_t first_over_limit_index = 0, first_refused_index = 0;
  std::string first_over_limit, first_refused;
  void Add(const Status& why, uint64_t index);
  int64_t Total() const { return over_limit + refused; }
};

// "N of C cases not run: K over mlasim's limits (the first, INDEX_NAME I: FIELD: REASON); P
// refused by the step (shapes aiter or the engine refuses; the first, ...)", or "" when every
// case ran. `cases` is
// the sweep's count; `index_name` what its indices are called ("seed index", "case").
std::string NotRunText(const NotRun& n, int64_t cases, const char* index_name);
// The text after "N of C cases not run: " alone ("" when every case ran).
std::string NotRunReasons(const NotRun& n, const char* index_name);

// Replays `s` (with `mutant`) and applies `property`. A scenario the step refuses (a shape aiter
// refuses, or one over mlasim's limits: StatusCode::kResourceExhausted) runs nothing and shows no
// violation; `refusal`, when given, receives why (ok when it ran), so that a sweep can count the
// cases it did not run instead of counting them clean.
std::vector<sim::Violation> Evaluate(const sim::Scenario& s, const Property& property,
                                     sim::SimMutant mutant, Status* refusal = nullptr);

// Tests the scenario of `seed`; if it shows a violation with signature `target`
// (fuzz/signature.h), shrinks it, keeping a step only when the smaller scenario still shows
// `target` (other violations may come and go), for at most `max_shrink_steps` accepted steps.
// nullopt when the scenario does not show `target`. `target` "" keeps any failure of `property`
// (the mutant registry's kill search; for campaigns, ShrinkPolicy::kFirstFailure).
std::optional<Failure> ShrinkToSignature(const GenConfig& config, uint64_t seed, int size,
                                         const Property& property, sim::SimMutant mutant,
                                         const std::string& target,
                                         int max_shrink_steps = kDefaultShrinkSteps);

// Tests the scenario of `seed`; on failure shrinks it keeping any failure of `property`
// (ShrinkToSignature with target "").
std::optional<Failure> TestSeed(const GenConfig& config, uint64_t seed, int size,
                                const Property& property, sim::SimMutant mutant,
                                int max_shrink_steps = kDefaultShrinkSteps);

// How a campaign turns a failing case into findings (issue 20 §1, docs/fuzzing.md "Shrink
// policies"). `mlasim fuzz --shrink per-signature|first-failure`.
enum class ShrinkPolicy {
  // Every signature any violation of the case shows is a target; each is shrunk keeping a step
  // only if the smaller case still shows that signature, and filed under it (the default).
  kPerSignature,
  // Round 1's rule, for measurement and compatibility: the case's first violation is its only
  // target; a step is kept whenever the smaller case still fails in any way, and the finding is
  // filed under the shrunk case's first violation, which may be another bug (slippage).
  kFirstFailure,
};

// "per-signature" or "first-failure".
const char* ShrinkPolicyName(ShrinkPolicy policy);
// Parses a ShrinkPolicyName. Errors: InvalidArgument("--shrink", ...) naming the two values.
StatusOr<ShrinkPolicy> ParseShrinkPolicy(const std::string& text);

// The targets of a case whose property broke with `broken` (non-empty), under `policy`: every
// distinct signature, sorted (per-signature), or the first violation's (first-failure).
std::vector<std::string> PolicyTargets(const std::vector<sim::Violation>& broken,
                                       ShrinkPolicy policy);

// Shrinks the case of `seed` for `target` (one of PolicyTargets of its violations) under
// `policy`: ShrinkToSignature keeping `target` (per-signature) or keeping any failure
// (first-failure). nullopt when the case does not show what the policy keeps.
std::optional<Failure> ShrinkForPolicy(const GenConfig& config, uint64_t seed, int size,
                                       const Property& property, sim::SimMutant mutant,
                                       const std::string& target, ShrinkPolicy policy,
                                       int max_shrink_steps = kDefaultShrinkSteps);

// The signature a shrunk failure is filed (reported) under: its target (per-signature), or the
// first violation of the shrunk case (first-failure: the shrink may have slipped to another bug).
std::string FiledSignature(const Failure& f, ShrinkPolicy policy);

// Replays a recorded shrink path from a seed: the same scenario as the one found. Errors:
// InvalidArgument("--shrink-path") when step k names a shrink the scenario does not have.
StatusOr<sim::Scenario> ReplayShrinkPath(const GenConfig& config, uint64_t seed, int size,
                                         const std::vector<int>& path);

}  // namespace mlasim::fuzz
