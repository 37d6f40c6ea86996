#include "fuzz/effectiveness.h"

#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <mutex>
#include <set>

#include "fuzz/campaign.h"
#include "fuzz/mutants.h"
#include "fuzz/properties.h"
#include "fuzz/signature.h"
#include "sim/known_bugs.h"

namespace mlasim::fuzz {
namespace {

double CpuSeconds(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
double ThreadCpuSeconds() {
  return CpuSeconds(CLOCK_THREAD_CPUTIME_ID);
}
// A campaign's worker is another thread: the process clock counts it (the benchmark runs
// nothing else meanwhile).
double ProcessCpuSeconds() {
  return CpuSeconds(CLOCK_PROCESS_CPUTIME_ID);
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

std::string Quoted(const std::vector<std::string>& names) {
  return names.empty() ? "none" : "`" + fmt::format("{}", fmt::join(names, "`, `")) + "`";
}

// One policy's cells of a row: seeds reporting, median cases and CPU seconds to the report.
std::string PolicyCells(const std::vector<SeedSearch>& runs, int64_t budget) {
  std::vector<double> cases, cpu;
  int detected = 0;
  for (const SeedSearch& r : runs) {
    const double inf = std::numeric_limits<double>::infinity();
    cases.push_back(r.detected ? static_cast<double>(r.cases) : inf);
    cpu.push_back(r.detected ? r.cpu_seconds : inf);
    detected += r.detected ? 1 : 0;
  }
  const std::string verdict = detected == 0 ? " **not found within the budget**" : "";
  return fmt::format("{}/{}{} | {} | {}", detected, runs.size(), verdict,
                     Cases(CensoredMedian(cases), budget), Seconds(CensoredMedian(cpu)));
}

// One table row: a target under one swarm mode over every seed, per policy (kReportPolicies).
std::string TargetRow(const EffectTarget& t, const std::string& swarm,
                      const std::array<std::vector<SeedSearch>, 2>& runs, int64_t budget) {
  return fmt::format("| {} | {} | {} | {} | {} | {} |\n", t.name, t.kind, t.bug_class, swarm,
                     PolicyCells(runs[0], budget), PolicyCells(runs[1], budget));
}

Status CheckOptions(const EffectivenessOptions& o, const std::vector<EffectTarget>& targets) {
  if (o.seeds < 1 || o.seeds > 1000) return InvalidArgumentError("--seeds", "must be in 1..1000");
  if (o.max_cases < 1 || o.max_cases > 1000000)
    return InvalidArgumentError("--cases", "must be in 1..1000000");
  if (o.signature_cases < 0 || o.signature_cases > 1000000)
    return InvalidArgumentError("--signature-cases", "must be in 0..1000000");
  for (size_t i = 0; i < o.only.size(); ++i) {
    const std::string& name = o.only[i];
    if (std::find(o.only.begin(), o.only.begin() + i, name) != o.only.begin() + i)
      return InvalidArgumentError("--only", "'" + name + "' given twice");  // as fuzz's --profile
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
    out += fmt::format("\nSeen only with swarm {} ({}): {}\n", mode == 0 ? "on" : "off",
                       only.size(), Quoted(only));
  }
  return out;
}

// CPU seconds (this thread) a campaign of `policy` spends shrinking the case of seed index
// `index` before it reports it: ShrinkForPolicy for each of the case's PolicyTargets.
double ShrinkSeconds(const EffectTarget& t, bool swarm, uint64_t seed, int64_t index,
                     ShrinkPolicy policy) {
  GenConfig config = t.config;
  config.swarm = swarm;
  const double t0 = ThreadCpuSeconds();
  const sim::Scenario s = Generate(config, CaseSeed(seed, index), CaseSize(index));
  const std::vector<sim::Violation> broken = Evaluate(s, t.detects, t.mutant);
  MLASIM_ASSERT(!broken.empty(), "the detecting case fails again");
  for (const std::string& sig : PolicyTargets(broken, policy)) {
    auto f = ShrinkForPolicy(config, CaseSeed(seed, index), CaseSize(index), t.detects, t.mutant,
                             sig, policy);
    MLASIM_ASSERT(f.has_value(), "a replay of the same case shows the same violations");
  }
  return ThreadCpuSeconds() - t0;
}

// The known bugs' campaigns: per swarm mode and policy, one per seed.
using CampaignGrid = std::map<std::pair<bool, ShrinkPolicy>, std::vector<PolicyCampaign>>;

CampaignGrid RunCampaigns(const EffectivenessOptions& o,
                          const std::function<void(const std::string&)>& progress) {
  CampaignGrid grid;
  for (const bool swarm : {true, false})
    for (const ShrinkPolicy policy : kReportPolicies) {
      std::vector<PolicyCampaign>& runs = grid[{swarm, policy}];
      for (int32_t k = 0; k < o.seeds; ++k)
        runs.push_back(RunPolicyCampaign(o.small, swarm, policy, o.first_seed + k, o.max_cases));
      if (progress)
        progress(fmt::format("campaigns, swarm {}, shrink {} done", swarm ? "on" : "off",
                             ShrinkPolicyName(policy)));
    }
  return grid;
}

// A known bug's seeds in `runs`: a campaign that never reported it ran its whole budget.
std::vector<SeedSearch> KnownRuns(const std::vector<PolicyCampaign>& runs,
                                  const std::string& name) {
  std::vector<SeedSearch> out;
  for (const PolicyCampaign& c : runs) {
    const auto it = c.known.find(name);
    out.push_back(it != c.known.end() ? it->second : SeedSearch{false, c.cases, c.cpu_seconds});
  }
  return out;
}

// The campaigns' signatures seen against findings reported, per swarm mode and policy.
std::string CampaignTable(const EffectivenessOptions& o, const CampaignGrid& grid) {
  std::string out =
      "| swarm | shrink policy | seeds | cases per seed | signatures seen (all seeds) | findings "
      "reported (all seeds) | median seen per seed | median reported per seed | median seen "
      "per CPU-minute | median reported per CPU-minute | CPU s (all seeds) |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n";
  std::string lost;
  for (const bool swarm : {true, false})
    for (const ShrinkPolicy policy : kReportPolicies) {
      std::set<std::string> seen, reported;
      std::vector<double> seen_n, reported_n, seen_rate, reported_rate;
      double spent = 0;
      for (const PolicyCampaign& c : grid.at({swarm, policy})) {
        seen.insert(c.shown.begin(), c.shown.end());
        reported.insert(c.reported.begin(), c.reported.end());
        seen_n.push_back(static_cast<double>(c.shown.size()));
        reported_n.push_back(static_cast<double>(c.reported.size()));
        const double minutes = c.cpu_seconds / 60;
        seen_rate.push_back(minutes > 0 ? seen_n.back() / minutes : 0.0);
        reported_rate.push_back(minutes > 0 ? reported_n.back() / minutes : 0.0);
        spent += c.cpu_seconds;
      }
      out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {:.1f} | {:.1f} | {:.1f} |\n",
                         swarm ? "on" : "off", ShrinkPolicyName(policy), o.seeds, o.max_cases,
                         seen.size(), reported.size(), Cases(CensoredMedian(seen_n), 0),
                         Cases(CensoredMedian(reported_n), 0), CensoredMedian(seen_rate),
                         CensoredMedian(reported_rate), spent);
      std::vector<std::string> never;
      std::set_difference(seen.begin(), seen.end(), reported.begin(), reported.end(),
                          std::back_inserter(never));
      lost +=
          fmt::format("\nSeen but never reported, swarm {}, {} ({}): {}\n", swarm ? "on" : "off",
                      ShrinkPolicyName(policy), never.size(), Quoted(never));
    }
  return out + lost;
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
    t.known = &k;
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

PolicyCampaign RunPolicyCampaign(bool small, bool swarm, ShrinkPolicy policy, uint64_t seed,
                                 int64_t cases) {
  CampaignOptions o;
  o.seconds = std::numeric_limits<double>::infinity();
  o.max_cases = cases;
  o.seed = seed;
  o.profiles = AtomProfiles(small).profiles;
  o.small = small;
  o.swarm = swarm;
  o.shrink = policy;
  PolicyCampaign c;
  const double t0 = ProcessCpuSeconds();
  o.on_finding = [&c, t0](const CampaignFinding& f) {
    if (f.known_name.empty() || c.known.count(f.known_name)) return;
    c.known[f.known_name] = SeedSearch{true, static_cast<int64_t>(f.seed_index.value_or(0)) + 1,
                                       ProcessCpuSeconds() - t0};
  };
  auto sum = RunCampaign(o, nullptr);
  MLASIM_ASSERT(sum.ok(), "a campaign of valid options runs");
  c.cpu_seconds = ProcessCpuSeconds() - t0;
  c.cases = sum->cases;
  c.shown = sum->shown;
  for (const auto& [sig, f] : sum->findings) c.reported.insert(sig);
  return c;
}

namespace {

// One target's rows: its seeds per swarm mode, under both policies (mutants: a search and the
// shrinking of the detecting case; known bugs: the campaigns of `grid`).
std::string TargetRows(const EffectTarget& t, const EffectivenessOptions& o,
                       const CampaignGrid& grid,
                       const std::function<void(const std::string&)>& progress) {
  const std::vector<std::string> modes =
      t.UsesGenerator() ? std::vector<std::string>{"on", "off"} : std::vector<std::string>{"n/a"};
  std::string out;
  for (const std::string& mode : modes) {
    const bool swarm = mode == "on";
    std::array<std::vector<SeedSearch>, 2> runs;
    if (t.known) {
      for (size_t p = 0; p < kReportPolicies.size(); ++p)
        runs[p] = KnownRuns(grid.at({swarm, kReportPolicies[p]}), t.name);
    } else {
      for (int32_t k = 0; k < o.seeds; ++k) {
        const uint64_t seed = o.first_seed + k;
        const SeedSearch found = SearchTarget(t, swarm, seed, o.max_cases);
        for (size_t p = 0; p < kReportPolicies.size(); ++p) {
          SeedSearch r = found;
          if (r.detected && !t.custom)
            r.cpu_seconds += ShrinkSeconds(t, swarm, seed, r.cases - 1, kReportPolicies[p]);
          runs[p].push_back(r);
        }
      }
    }
    if (progress) progress(t.name + " swarm " + mode + " done");
    out += TargetRow(t, mode, runs, o.max_cases);
  }
  return out;
}

}  // namespace

StatusOr<std::string> EffectivenessReport(const EffectivenessOptions& o,
                                          const std::function<void(const std::string&)>& progress) {
  const std::vector<EffectTarget> targets = EffectivenessTargets(o.small);
  MLASIM_RETURN_IF_ERROR(CheckOptions(o, targets));
  auto selected = [&o](const EffectTarget& t) {
    return o.only.empty() || std::find(o.only.begin(), o.only.end(), t.name) != o.only.end();
  };
  bool any_known = false;
  for (const EffectTarget& t : targets) any_known = any_known || (t.known && selected(t));
  const CampaignGrid grid = any_known ? RunCampaigns(o, progress) : CampaignGrid{};
  std::string out =
      "## Time to first report\n\n"
      "| target | kind | class | swarm | seeds reporting, per-signature | median cases, "
      "per-signature | median CPU s, per-signature | seeds reporting, first-failure | median "
      "cases, first-failure | median CPU s, first-failure |\n"
      "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const EffectTarget& t : targets)
    if (selected(t)) out += TargetRows(t, o, grid, progress);
  if (any_known)
    out += "\n## Signatures seen against findings reported\n\n" + CampaignTable(o, grid);
  if (o.signature_cases > 0)
    out += "\n## Distinct signatures per CPU-minute, unshrunk\n\n" + YieldTable(o, progress);
  return out;
}

}  // namespace mlasim::fuzz
