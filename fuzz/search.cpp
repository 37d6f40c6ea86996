#include "fuzz/search.h"

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
  rc::Shrinkable<sim::Scenario> current = ScenarioFromSeed(config, seed, size);
  std::vector<sim::Violation> broken = Evaluate(current.value(), property, mutant);
  if (broken.empty()) return std::nullopt;
  Failure f;
  f.seed = seed;
  f.size = size;
  bool progressed = true;
  while (progressed && f.shrink_steps < max_shrink_steps) {
    progressed = false;
    auto shrinks = current.shrinks();
    int index = 0;
    for (auto it = shrinks.next(); it; it = shrinks.next(), ++index) {
      std::vector<sim::Violation> b = Evaluate(it->value(), property, mutant);
      if (!b.empty()) {
        current = *it;
        broken = std::move(b);
        f.shrink_path.push_back(index);
        ++f.shrink_steps;
        progressed = true;
        break;
      }
    }
  }
  f.scenario = current.value();
  f.broken = std::move(broken);
  return f;
}

sim::Scenario ReplayShrinkPath(const GenConfig& config, uint64_t seed, int size,
                               const std::vector<int>& path) {
  rc::Shrinkable<sim::Scenario> current = ScenarioFromSeed(config, seed, size);
  for (int index : path) {
    auto shrinks = current.shrinks();
    int i = 0;
    for (auto it = shrinks.next(); it; it = shrinks.next(), ++i) {
      if (i == index) {
        current = *it;
        break;
      }
    }
  }
  return current.value();
}

}  // namespace mlasim::fuzz
