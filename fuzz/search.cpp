#include "fuzz/search.h"

#include <mutex>

namespace mlasim::fuzz {

std::vector<sim::Violation> Evaluate(const sim::Scenario& s, const Property& property,
                                     sim::SimMutant mutant) {
  sim::ExecuteOptions opt;
  opt.mutant = mutant;
  opt.capture_layout = false;  // properties look at violations only
  auto r = sim::Replay(s, opt);
  if (!r.ok()) return {};  // a refused shape: aiter refuses it too, nothing runs
  return property(*r);
}

std::optional<Failure> TestSeed(const GenConfig& config, uint64_t seed, int size,
                                const Property& property, sim::SimMutant mutant,
                                int max_shrink_steps) {
  // Generator code (value, shrinks, next) runs under GeneratorMutex; the replays do not.
  std::unique_lock<std::mutex> gen_lock(GeneratorMutex());
  rc::Shrinkable<sim::Scenario> current = ScenarioFromSeed(config, seed, size);
  sim::Scenario value = current.value();
  gen_lock.unlock();
  std::vector<sim::Violation> broken = Evaluate(value, property, mutant);
  if (broken.empty()) return std::nullopt;
  Failure f;
  f.seed = seed;
  f.size = size;
  bool progressed = true;
  while (progressed && f.shrink_steps < max_shrink_steps) {
    progressed = false;
    gen_lock.lock();
    auto shrinks = current.shrinks();
    gen_lock.unlock();
    for (int index = 0;; ++index) {
      gen_lock.lock();
      auto it = shrinks.next();
      if (it) value = it->value();
      gen_lock.unlock();
      if (!it) break;
      std::vector<sim::Violation> b = Evaluate(value, property, mutant);
      if (!b.empty()) {
        gen_lock.lock();
        current = *it;
        gen_lock.unlock();
        broken = std::move(b);
        f.shrink_path.push_back(index);
        ++f.shrink_steps;
        progressed = true;
        break;
      }
    }
  }
  gen_lock.lock();
  f.scenario = current.value();
  gen_lock.unlock();
  f.broken = std::move(broken);
  return f;
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
