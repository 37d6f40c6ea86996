#include "fuzz/effectiveness.h"

#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <mutex>
#include <set>

#include "fuzz/mutants.h"
#include "fuzz/properties.h"
#include "fuzz/signature.h"
#include "sim/known_bugs.h"

namespace mlasim::fuzz {
namespace {

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Seed index i of base seed s, as a campaign of one shard draws it (fuzz/campaign.cpp RunCase).
uint64_t CaseSeed(uint64_t base, int64_t i) {
  return base * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(i);
}
int CaseSize(int64_t i) {
  return static_cast<int>(10 + (i % 91));
}

sim::Scenario Generate(const GenConfig& config, uint64_t seed, int size) {
  std::lock_guard<std::mutex> lock(GeneratorMutex());
  return ScenarioFromSeed(config, seed, size).value();
}

// The violations a replay shows that known bug `bug` names (sim::MatchKnownBug: the first
// matching entry of the table names a violation).
Property KnownBugProperty(const sim::KnownBug* bug) {
  return [bug](const sim::ReplayReport& r) {
    std::vector<sim::Violation> out;
    for (const sim::Violation& v : r.result.violations)
      if (sim::MatchKnownBug(v, r) == bug) out.push_back(v);
    return out;
  };
}

GenConfig AtomProfiles(bool small) {
  GenConfig c;
  c.profiles = {"atom-2026-03", "atom-2026-08", "atom-2026-11"};
  c.small = small;
  if (small) c.max_batch = 64;
  return c;
}

std::string Cases(double v, int64_t budget) {
  if (std::isnan(v)) return "-";
  if (std::isinf(v)) return fmt::format("> {}", budget);
  return v == std::floor(v) ? fmt::format("{:.0f}", v) : fmt::format("{:.1f}", v);
}

std::string Seconds(double v) {
  if (std::isnan(v)) return "-";
  if (std::isinf(v)) return "not found";
  return fmt::format("{:.3f}", v);
}

// One table row: a target under one swarm mode over every seed.
std::string TargetRow(const EffectTarget& t, const std::string& swarm,
                      const std::vector<SeedSearch>& runs, int64_t budget) {
  std::vector<double> cases, cpu;
  int detected = 0;
  double spent = 0;
  for (const SeedSearch& r : runs) {
    const double inf = std::numeric_limits<double>::infinity();
    cases.push_back(r.detected ? static_cast<double>(r.cases) : inf);
    cpu.push_back(r.detected ? r.cpu_seconds : inf);
    detected += r.detected ? 1 : 0;
    spent += r.cpu_seconds;
  }
  const std::string verdict = detected == 0 ? " **not found within the budget**" : "";
  return fmt::format("| {} | {} | {} | {} | {}/{}{} | {} | {} | {:.2f} |\n", t.name, t.kind,
                     t.bug_class, swarm, detected, runs.size(), verdict,
                     Cases(CensoredMedian(cases), budget), Seconds(CensoredMedian(cpu)), spent);
}

Status CheckOptions(const EffectivenessOptions& o, const std::vector<EffectTarget>& targets) {
  if (o.seeds < 1 || o.seeds > 1000) return InvalidArgumentError("--seeds", "must be in 1..1000");
  if (o.max_cases < 1 || o.max_cases > 1000000)
    return InvalidArgumentError("--cases", "must be in 1..1000000");
  if (o.signature_cases < 0 || o.signature_cases > 1000000)
    return InvalidArgumentError("--signature-cases", "must be in 0..1000000");
  for (const std::string& name : o.only) {
    bool found = false;
    for (const EffectTarget& t : targets) found |= t.name == name;
    if (!found)
      return InvalidArgumentError("--only", "no mutant or known bug named '" + name +
                                                "' (mlasim mutants --list; sim/known_bugs.h)");
  }
  return OkStatus();
}

// The signature yield table: per swarm mode, over every seed.
std::string YieldTable(const EffectivenessOptions& o,
                       const std::function<void(const std::string&)>& progress) {
  std::string out =
      "| swarm | seeds | cases per seed | distinct signatures (all seeds) | median per seed | "
      "median signatures per CPU-minute | CPU s (all seeds) |\n|---|---|---|---|---|---|---|\n";
  std::set<std::string> seen[2];  // swarm on, off
  for (const bool swarm : {true, false}) {
    GenConfig c = AtomProfiles(o.small);
    c.swarm = swarm;
    std::set<std::string>& all = seen[swarm ? 0 : 1];
    std::vector<double> per_seed, per_minute;
    double spent = 0;
    for (int32_t k = 0; k < o.seeds; ++k) {
      const SignatureYield y = MeasureSignatures(c, o.first_seed + k, o.signature_cases);
      all.insert(y.signatures.begin(), y.signatures.end());
      per_seed.push_back(static_cast<double>(y.distinct));
      per_minute.push_back(y.cpu_seconds > 0 ? 60.0 * y.distinct / y.cpu_seconds : 0.0);
      spent += y.cpu_seconds;
    }
    if (progress)
      progress(
          fmt::format("signature yield, swarm {}: {} distinct", swarm ? "on" : "off", all.size()));
    out += fmt::format("| {} | {} | {} | {} | {} | {:.1f} | {:.1f} |\n", swarm ? "on" : "off",
                       o.seeds, o.signature_cases, all.size(), Cases(CensoredMedian(per_seed), 0),
                       CensoredMedian(per_minute), spent);
  }
  for (const int mode : {0, 1}) {
    std::vector<std::string> only;
    std::set_difference(seen[mode].begin(), seen[mode].end(), seen[1 - mode].begin(),
                        seen[1 - mode].end(), std::back_inserter(only));
    out +=
        fmt::format("\nSeen only with swarm {} ({}): {}\n", mode == 0 ? "on" : "off", only.size(),
                    only.empty() ? "none" : "`" + fmt::format("{}", fmt::join(only, "`, `")) + "`");
  }
  return out;
}

}  // namespace

double CensoredMedian(std::vector<double> values) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  if (n % 2 == 1) return values[n / 2];
  const double a = values[n / 2 - 1], b = values[n / 2];
  return std::isinf(a) || std::isinf(b) ? std::numeric_limits<double>::infinity() : (a + b) / 2;
}

std::vector<EffectTarget> EffectivenessTargets(bool small) {
  std::vector<EffectTarget> out;
  for (const MutantSpec& m : MutantRegistry()) {
    EffectTarget t;
    t.name = m.name;
    t.kind = "mutant";
    t.bug_class = sim::BugClassLetter(m.bug_class);
    t.config = m.config;
    t.mutant = m.sim;
    t.detects = m.killing;
    if (m.kill_case) {
      const auto kill = m.kill_case;
      t.custom = [kill](uint64_t seed, int64_t index) { return kill(seed, index).has_value(); };
    }
    out.push_back(std::move(t));
  }
  for (const sim::KnownBug& k : sim::KnownBugs()) {
    EffectTarget t;
    t.name = k.name;
    t.kind = "known bug";
    t.bug_class = sim::BugClassLetter(k.bug_class);
    t.config = AtomProfiles(small);
    t.detects = KnownBugProperty(&k);
    out.push_back(std::move(t));
  }
  return out;
}

SeedSearch SearchTarget(const EffectTarget& target, bool swarm, uint64_t seed, int64_t max_cases) {
  MLASIM_ASSERT(max_cases >= 1, "a search runs at least one case");
  SeedSearch r;
  GenConfig config = target.config;
  config.swarm = swarm;
  const double t0 = ThreadCpuSeconds();
  for (int64_t i = 0; i < max_cases && !r.detected; ++i) {
    ++r.cases;
    if (target.custom) {
      r.detected = target.custom(seed, i);
      continue;
    }
    const sim::Scenario s = Generate(config, CaseSeed(seed, i), CaseSize(i));
    r.detected = !Evaluate(s, target.detects, target.mutant).empty();
  }
  r.cpu_seconds = ThreadCpuSeconds() - t0;
  return r;
}

SignatureYield MeasureSignatures(const GenConfig& config, uint64_t seed, int64_t cases) {
  SignatureYield y;
  std::set<std::string> seen;
  const Property all = [](const sim::ReplayReport& r) { return r.result.violations; };
  const double t0 = ThreadCpuSeconds();
  for (int64_t i = 0; i < cases; ++i) {
    const sim::Scenario s = Generate(config, CaseSeed(seed, i), CaseSize(i));
    for (const std::string& sig : Signatures(Evaluate(s, all, sim::SimMutant::kNone)))
      seen.insert(sig);
    ++y.cases;
  }
  y.cpu_seconds = ThreadCpuSeconds() - t0;
  y.distinct = static_cast<int64_t>(seen.size());
  y.signatures.assign(seen.begin(), seen.end());
  return y;
}

StatusOr<std::string> EffectivenessReport(const EffectivenessOptions& o,
                                          const std::function<void(const std::string&)>& progress) {
  const std::vector<EffectTarget> targets = EffectivenessTargets(o.small);
  MLASIM_RETURN_IF_ERROR(CheckOptions(o, targets));
  std::string out =
      "| target | kind | class | swarm | seeds detecting | median cases to detection | "
      "median CPU s to detection | CPU s (all seeds) |\n|---|---|---|---|---|---|---|---|\n";
  for (const EffectTarget& t : targets) {
    if (!o.only.empty() && std::find(o.only.begin(), o.only.end(), t.name) == o.only.end())
      continue;
    const std::vector<std::string> modes =
        t.UsesGenerator() ? std::vector<std::string>{"on", "off"} : std::vector<std::string>{"n/a"};
    for (const std::string& mode : modes) {
      std::vector<SeedSearch> runs;
      for (int32_t k = 0; k < o.seeds; ++k)
        runs.push_back(SearchTarget(t, mode == "on", o.first_seed + k, o.max_cases));
      if (progress) progress(t.name + " swarm " + mode + " done");
      out += TargetRow(t, mode, runs, o.max_cases);
    }
  }
  if (o.signature_cases > 0) out += "\n" + YieldTable(o, progress);
  return out;
}

}  // namespace mlasim::fuzz
