#include "fuzz/search.h"

#include <mutex>

#include <fmt/format.h>

#include "fuzz/signature.h"
#include "sim/engine.h"

namespace mlasim::fuzz {

void NotRun::Add(const Status& why, uint64_t index) {
  const bool limit = why.code() == StatusCode::kResourceExhausted;
  if ((limit ? over_limit : refused)++ > 0) return;
  (limit ? first_over_limit_index : first_refused_index) = index;
  (limit ? first_over_limit : first_refused) = why.ToString();
}

std::string NotRunReasons(const NotRun& n, const char* index_name) {
  std::string parts;
  if (n.over_limit > 0)
    parts = fmt::format("{} over mlasim's limits (the first, {} {}: {})", n.over_limit, index_name,
                        n.first_over_limit_index, n.first_over_limit);
  if (n.refused > 0)
    parts += fmt::format(
        "{}{} refused by the step (shapes aiter or the engine refuses; the first, {} {}: {})",
        parts.empty() ? "" : "; ", n.refused, index_name, n.first_refused_index, n.first_refused);
  return parts;
}

std::string NotRunText(const NotRun& n, int64_t cases, const char* index_name) {
  if (n.Total() == 0) return "";
  return fmt::format("{} of {} cases not run: {}", n.Total(), cases, NotRunReasons(n, index_name));
}

std::vector<sim::Violation> Evaluate(const sim::Scenario& s, const Property& property,
                                     sim::SimMutant mutant, Status* refusal) {
  sim::ExecuteOptions opt;
  opt.mutant = mutant;
  opt.capture_layout = false;  // properties look at violations only
  auto r = sim::Replay(s, opt);
  if (refusal) *refusal = r.ok() ? OkStatus() : r.status();
  if (!r.ok()) return {};  // refused: nothing runs
  std::vector<sim::Violation> broken = property(*r);
  sim::RecyclePlans(r->trace);  // the next case plans into this one's buffers
  return broken;
}

namespace {

// Whether the violations of a candidate keep the shrink going: `target` among them, or (target
// "") any violation at all.
bool Keeps(const std::vector<sim::Violation>& broken, const std::string& target) {
  return target.empty() ? !broken.empty() : FindSignature(broken, target) != nullptr;
}

// The first shrink of `current` that keeps `target`: its index, the shrinkable and what breaks.
// Generator code (shrinks, next, value) runs under GeneratorMutex; the replays do not.
struct Step {
  int index = -1;
  std::optional<rc::Shrinkable<sim::Scenario>> next;
  std::vector<sim::Violation> broken;
};
Step FirstKeptShrink(const rc::Shrinkable<sim::Scenario>& current, const Property& property,
                     sim::SimMutant mutant, const std::string& target) {
  std::unique_lock<std::mutex> gen_lock(GeneratorMutex());
  auto shrinks = current.shrinks();
  gen_lock.unlock();
  for (int index = 0;; ++index) {
    gen_lock.lock();
    auto it = shrinks.next();
    sim::Scenario value;
    if (it) value = it->value();
    gen_lock.unlock();
    if (!it) return {};
    std::vector<sim::Violation> b = Evaluate(value, property, mutant);
    if (Keeps(b, target)) return {index, std::move(*it), std::move(b)};
  }
}

}  // namespace

std::optional<Failure> ShrinkToSignature(const GenConfig& config, uint64_t seed, int size,
                                         const Property& property, sim::SimMutant mutant,
                                         const std::string& target, int max_shrink_steps) {
  std::unique_lock<std::mutex> gen_lock(GeneratorMutex());
  std::optional<rc::Shrinkable<sim::Scenario>> current = ScenarioFromSeed(config, seed, size);
  sim::Scenario value = current->value();
  gen_lock.unlock();
  Failure f;
  f.broken = Evaluate(value, property, mutant);
  if (!Keeps(f.broken, target)) return std::nullopt;
  f.seed = seed;
  f.size = size;
  f.target = target;
  while (true) {
    Step step = FirstKeptShrink(*current, property, mutant, target);
    if (!step.next) break;
    if (f.shrink_steps == max_shrink_steps) {  // a step is left that the budget does not take
      f.cut_short = true;
      gen_lock.lock();
      step.next.reset();  // destroyed under the lock: its lazy state is generator state
      gen_lock.unlock();
      break;
    }
    gen_lock.lock();
    current = std::move(step.next);
    gen_lock.unlock();
    f.broken = std::move(step.broken);
    f.shrink_path.push_back(step.index);
    ++f.shrink_steps;
  }
  gen_lock.lock();
  f.scenario = current->value();
  current.reset();
  gen_lock.unlock();
  return f;
}

std::optional<Failure> TestSeed(const GenConfig& config, uint64_t seed, int size,
                                const Property& property, sim::SimMutant mutant,
                                int max_shrink_steps) {
  return ShrinkToSignature(config, seed, size, property, mutant, "", max_shrink_steps);
}

namespace {

// The two policies as data: what a case's targets are, what a shrink step keeps, and what a
// finding is filed under.
struct PolicyRule {
  ShrinkPolicy policy;
  const char* name;
  bool every_violation;     // targets: every violation's signature, or the first violation's
  bool keeps_target;        // a step is kept when it shows the target, or on any failure
  bool filed_under_target;  // filed under its target, or the shrunk case's first violation
};
constexpr PolicyRule kPolicies[] = {
    {ShrinkPolicy::kPerSignature, "per-signature", true, true, true},
    {ShrinkPolicy::kFirstFailure, "first-failure", false, false, false},
};

const PolicyRule& Rule(ShrinkPolicy policy) {
  for (const PolicyRule& r : kPolicies)
    if (r.policy == policy) return r;
  MLASIM_ASSERT(false, "every ShrinkPolicy has a row in kPolicies");
  return kPolicies[0];
}

}  // namespace

const char* ShrinkPolicyName(ShrinkPolicy policy) {
  return Rule(policy).name;
}

StatusOr<ShrinkPolicy> ParseShrinkPolicy(const std::string& text) {
  for (const PolicyRule& r : kPolicies)
    if (text == r.name) return r.policy;
  return InvalidArgumentError("--shrink",
                              "must be per-signature or first-failure (got '" + text + "')");
}

std::vector<std::string> PolicyTargets(const std::vector<sim::Violation>& broken,
                                       ShrinkPolicy policy) {
  MLASIM_ASSERT(!broken.empty(), "only a failing case has targets");
  if (Rule(policy).every_violation) return Signatures(broken);
  return {Signature(broken.front())};
}

std::optional<Failure> ShrinkForPolicy(const GenConfig& config, uint64_t seed, int size,
                                       const Property& property, sim::SimMutant mutant,
                                       const std::string& target, ShrinkPolicy policy,
                                       int max_shrink_steps) {
  std::optional<Failure> f =
      ShrinkToSignature(config, seed, size, property, mutant,
                        Rule(policy).keeps_target ? target : "", max_shrink_steps);
  if (f) f->target = target;  // what the case was shrunk for, whatever the step rule kept
  return f;
}

std::string FiledSignature(const Failure& f, ShrinkPolicy policy) {
  if (Rule(policy).filed_under_target) return f.target;
  MLASIM_ASSERT(!f.broken.empty(), "a shrunk failure still fails");
  return Signature(f.broken.front());
}

StatusOr<sim::Scenario> ReplayShrinkPath(const GenConfig& config, uint64_t seed, int size,
                                         const std::vector<int>& path) {
  std::lock_guard<std::mutex> gen_lock(GeneratorMutex());
  rc::Shrinkable<sim::Scenario> current = ScenarioFromSeed(config, seed, size);
  for (size_t step = 0; step < path.size(); ++step) {
    auto shrinks = current.shrinks();
    int i = 0;
    bool found = false;
    for (auto it = shrinks.next(); it; it = shrinks.next(), ++i) {
      if (i == path[step]) {
        current = *it;
        found = true;
        break;
      }
    }
    if (!found)
      return InvalidArgumentError("--shrink-path",
                                  "step " + std::to_string(step) + " names shrink " +
                                      std::to_string(path[step]) + " but the case has only " +
                                      std::to_string(i) + " (wrong seed, size or profiles?)");
  }
  return current.value();
}

}  // namespace mlasim::fuzz
