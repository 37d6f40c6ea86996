// `mlasim triage` (fuzz/triage.h): the report's step, swept over what the report does not say.
#include "fuzz/triage.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "fuzz/signature.h"
#include "sim/call_table.h"
#include "sim/engine.h"
#include "sim/replay.h"

namespace mlasim::fuzz {
namespace {

// The RapidCheck size of every triage case (campaigns use 10..100; the largest keeps the whole
// range of context lengths).
constexpr int kTriageSize = 100;

struct CaseOutcome {
  bool replayed = false, overrun = false, fault = false, corrupt = false, refused = false;
  Status not_run;  // why the step ran nothing (ok: it ran)
  // (family key, first signature) per family shown, in order of first violation.
  std::vector<std::pair<std::string, std::string>> families;
  std::vector<uint64_t> fault_addresses;  // first faulting byte of each faulting violation
  int64_t page_bytes = 4096;
};

size_t Combos(const TriageOptions& o) {
  return o.profiles.size() * o.kernels.size() * o.allocators.size();
}

// Combination `c` (profile-major, then kernel, then allocator).
void ComboOf(const TriageOptions& o, size_t c, std::string* profile, std::string* kernel,
             sim::AllocatorModel* alloc) {
  const size_t na = o.allocators.size(), nk = o.kernels.size();
  *alloc = o.allocators[c % na];
  *kernel = o.kernels[(c / na) % nk];
  *profile = o.profiles[c / (na * nk)];
}

uint64_t CaseSeed(uint64_t seed, int64_t index) {
  return seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(index);
}

GenConfig ConfigFor(const TriageOptions& o, int64_t index) {
  std::string profile, kernel;
  sim::AllocatorModel alloc;
  ComboOf(o, static_cast<size_t>(index) % Combos(o), &profile, &kernel, &alloc);
  auto pins = std::make_shared<ReportPins>();
  pins->base = o.base;
  pins->base.kernel = kernel;
  pins->base.allocator.model = alloc;
  pins->base.engine = *sim::GetEngineProfile(profile, "--profile");  // validated
  pins->batch = o.batch;
  GenConfig cfg;
  cfg.pins = std::move(pins);
  return cfg;
}

// The findings triage explains: accesses outside a buffer, faults, corruption, guard refusals.
bool Counts(const sim::Violation& v) {
  return v.kind == sim::ViolationKind::kOutOfBounds ||
         v.kind == sim::ViolationKind::kGuardRefused || v.consequence == sim::Consequence::kFault ||
         v.consequence == sim::Consequence::kCorrupts;
}

std::vector<sim::Violation> AllViolations(const sim::ReplayReport& r) {
  return r.result.violations;
}

CaseOutcome RunCase(const TriageOptions& o, int64_t index) {
  const sim::Scenario s = TriageCase(o, index);
  CaseOutcome out;
  out.page_bytes = s.allocator.page_bytes;
  sim::ExecuteOptions opt;
  opt.capture_layout = false;
  StatusOr<sim::ReplayReport> r = sim::Replay(s, opt);
  if (!r.ok()) {  // aiter refuses the shape, or it is over mlasim's limits: nothing runs
    out.not_run = r.status();
    return out;
  }
  out.replayed = true;
  std::map<std::string, bool> seen;
  for (const sim::Violation& v : r->result.violations) {
    if (!Counts(v)) continue;
    out.overrun |= v.kind == sim::ViolationKind::kOutOfBounds;
    out.refused |= v.kind == sim::ViolationKind::kGuardRefused;
    out.corrupt |= v.consequence == sim::Consequence::kCorrupts;
    if (v.consequence == sim::Consequence::kFault) {
      out.fault = true;
      out.fault_addresses.push_back(v.first_bad_address);
    }
    const sim::KnownBug* k = sim::MatchKnownBug(v, *r);
    const std::string sig = Signature(v);
    const std::string key = k ? k->name : "unknown " + sig;
    if (seen.emplace(key, true).second) out.families.push_back({key, sig});
  }
  return out;
}

std::vector<CaseOutcome> RunCases(const TriageOptions& o) {
  std::vector<CaseOutcome> out(static_cast<size_t>(o.cases));
  std::mutex mu;
  int64_t next = 0;
  auto worker = [&] {
    for (;;) {
      int64_t i;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (next == o.cases) return;
        i = next++;
      }
      out[static_cast<size_t>(i)] = RunCase(o, i);
    }
  };
  std::vector<std::thread> threads;
  for (int32_t j = 1; j < o.jobs; ++j) threads.emplace_back(worker);
  worker();
  for (std::thread& t : threads) t.join();
  return out;
}

void Shrink(const TriageOptions& o, TriageFamily& f) {
  const GenConfig cfg = ConfigFor(o, f.first_case);
  f.example = ShrinkToSignature(cfg, CaseSeed(o.seed, f.first_case), kTriageSize, AllViolations,
                                sim::SimMutant::kNone, f.first_signature, o.shrink_steps);
  std::string file = f.known ? f.name : "unknown-" + f.first_signature;
  for (char& ch : file)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_')) ch = '-';
  f.example_file = file + ".json";
}

}  // namespace

const std::vector<TriageModel>& TriageModels() {
  static const std::vector<TriageModel> k = {
      {"glm-5.2", 64, true, 2048, ref::DType::kFp8,
       "sparse MLA (DSA top-k 2048), 64 heads: the founding report's model (seed-fault.md)"},
      {"deepseek-v3.2", 128, true, 2048, ref::DType::kFp8,
       "sparse MLA (DSA top-k 2048), 128 heads"},
      {"deepseek-v3", 128, false, 0, ref::DType::kBf16, "dense MLA, 128 heads (also R1)"},
      {"kimi-k2", 64, false, 0, ref::DType::kBf16, "dense MLA, 64 heads"},
  };
  return k;
}

namespace {

// The first entry of `names` that an earlier one repeats, or "" when none does.
std::string FirstRepeat(const std::vector<std::string>& names) {
  for (size_t i = 0; i < names.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (names[i] == names[j]) return names[i];
  return "";
}

// A sweep axis that names a value twice would run its combinations twice, as rows of their own,
// and skew the shares of the summary: refused, as `fuzz --profile A --profile A` is.
Status CheckNoRepeats(const TriageOptions& o) {
  std::vector<std::string> allocators;
  for (sim::AllocatorModel a : o.allocators)
    allocators.push_back(a == sim::AllocatorModel::kExact ? "exact" : "caching");
  const std::pair<const char*, const std::vector<std::string>*> axes[] = {
      {"--profile", &o.profiles}, {"--kernel", &o.kernels}, {"--allocator", &allocators}};
  for (const auto& [flag, names] : axes)
    if (const std::string r = FirstRepeat(*names); !r.empty())
      return InvalidArgumentError(flag, "'" + r + "' given twice");
  return OkStatus();
}

}  // namespace

Status ValidateTriage(const TriageOptions& o) {
  if (o.batch < 1 || o.batch > o.base.graph.max_num_seqs)
    return InvalidArgumentError("--batch",
                                "must be 1.." + std::to_string(o.base.graph.max_num_seqs));
  if (o.cases < 1 || o.cases > kMaxTriageCases)
    return InvalidArgumentError("--cases", "must be 1.." + std::to_string(kMaxTriageCases));
  if (o.jobs < 1 || o.jobs > kMaxTriageJobs)
    return InvalidArgumentError("--jobs", "must be 1.." + std::to_string(kMaxTriageJobs));
  if (o.shrink_steps < 0 || o.shrink_steps > kMaxTriageShrinkSteps)
    return InvalidArgumentError("--shrink-steps",
                                "must be 0.." + std::to_string(kMaxTriageShrinkSteps));
  if (o.profiles.empty()) return InvalidArgumentError("--profile", "no engine profile");
  for (const std::string& p : o.profiles) {
    StatusOr<sim::EngineProfile> e = sim::GetEngineProfile(p, "--profile");
    MLASIM_RETURN_IF_ERROR(e.status());
    if (o.base.model.sparse && !sim::ProfileHasSparseDecode(*e))
      return InvalidArgumentError(
          "--profile", fmt::format("{} models dense MLA only (its call table, sim/engines/{}.json, "
                                   "has no sparse decode); the model {} is sparse",
                                   p, e->table, o.base.model.name));
  }
  if (o.kernels.empty()) return InvalidArgumentError("--kernel", "no kernel variant");
  for (const std::string& k : o.kernels)
    if (k != "asm" && k != "opus" && k != "hk")
      return InvalidArgumentError("--kernel", "unknown variant '" + k + "' (asm, opus, hk)");
  if (o.allocators.empty()) return InvalidArgumentError("--allocator", "no allocator model");
  MLASIM_RETURN_IF_ERROR(CheckNoRepeats(o));
  const int32_t q = o.base.mtp_k + 1;
  if (int64_t{o.batch} * q > o.base.graph.max_num_batched_tokens)
    return InvalidArgumentError("--batch", "batch x (K + 1) exceeds max_num_batched_tokens");
  // One case through the simulator's own checks: a shape it refuses is named by its flag.
  sim::Scenario s = TriageCase(o, 0);
  StatusOr<sim::Trace> t = sim::ExpandStep(s);
  if (!t.ok() && t.status().field() == "$.model.heads")
    return InvalidArgumentError(
        "--tp", "the planner refuses " + std::to_string(o.base.model.heads / o.base.parallel.tp) +
                    " heads per rank: " + t.status().message());
  return OkStatus();
}

sim::Scenario TriageCase(const TriageOptions& o, int64_t index) {
  const GenConfig cfg = ConfigFor(o, index);
  std::lock_guard<std::mutex> lock(GeneratorMutex());
  sim::Scenario s = ScenarioFromSeed(cfg, CaseSeed(o.seed, index), kTriageSize).value();
  s.name = "triage-" + std::to_string(index);
  return s;
}

StatusOr<TriageResult> RunTriage(const TriageOptions& o) {
  MLASIM_RETURN_IF_ERROR(ValidateTriage(o));
  TriageResult res;
  res.cases = o.cases;
  for (size_t c = 0; c < Combos(o); ++c) {
    TriageCombo combo;
    ComboOf(o, c, &combo.profile, &combo.kernel, &combo.allocator);
    res.combos.push_back(combo);
  }
  const std::vector<CaseOutcome> outcomes = RunCases(o);
  std::map<std::string, size_t> family_index;
  for (int64_t i = 0; i < o.cases; ++i) {
    const CaseOutcome& c = outcomes[static_cast<size_t>(i)];
    const size_t ci = static_cast<size_t>(i) % res.combos.size();
    TriageCombo& combo = res.combos[ci];
    ++combo.cases;
    combo.replayed += c.replayed;
    combo.overrun += c.overrun;
    combo.fault += c.fault;
    combo.corrupt += c.corrupt;
    combo.refused += c.refused;
    if (!c.not_run.ok()) {
      res.not_run.Add(c.not_run, static_cast<uint64_t>(i));
      combo.over_limit += c.not_run.code() == StatusCode::kResourceExhausted;
    }
    for (const auto& [key, sig] : c.families) {
      auto [it, fresh] = family_index.emplace(key, res.families.size());
      if (fresh) {
        TriageFamily f;
        for (const sim::KnownBug& k : sim::KnownBugs())
          if (k.name == key) f.known = &k;
        f.name = f.known ? key : "unknown";
        f.signature = f.known ? "" : sig;
        f.combo_cases.assign(res.combos.size(), 0);
        f.first_case = i;
        f.first_signature = sig;
        res.families.push_back(std::move(f));
      }
      TriageFamily& f = res.families[it->second];
      ++f.cases;
      ++f.combo_cases[ci];
    }
    if (c.fault) ++res.faulting_cases;
    if (c.fault && o.fault_address) {
      const uint64_t page = static_cast<uint64_t>(c.page_bytes);
      bool match = false;
      for (uint64_t a : c.fault_addresses) match |= a % page == *o.fault_address % page;
      res.fault_address_page_aligned &= *o.fault_address % page == 0;
      res.fault_offset_matches += match;
    }
  }
  for (TriageFamily& f : res.families) Shrink(o, f);
  return res;
}

}  // namespace mlasim::fuzz
