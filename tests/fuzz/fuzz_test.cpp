// Issue 5's properties (fixed seeds and budgets under ctest), the mutant registry, and campaigns.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "fuzz/campaign.h"
#include "fuzz/findings.h"
#include "fuzz/mutants.h"
#include "fuzz/properties.h"
#include "fuzz/search.h"
#include "sim/contract.h"
#include "sim/mutants.h"
#include "sim/replay.h"
#include "sim/scenario_json.h"

namespace mlasim::fuzz {
namespace {

namespace fs = std::filesystem;

GenConfig Fixed() {
  GenConfig c;
  c.profiles = {"atom-2026-11"};
  c.sparse_only = true;
  return c;
}

TEST(FuzzProperties, FixedProfileHasNoViolation) {
  EXPECT_TRUE(rc::check("atom-2026-11, sparse MLA: clean", [] {
    const sim::Scenario s = *GenScenario(Fixed());
    const auto broken = Evaluate(s, FixedProfileViolations, sim::SimMutant::kNone);
    RC_ASSERT(broken.empty());
  }));
}

TEST(FuzzProperties, RealProfilesShowOnlyKnownFamilies) {
  // No uninitialised reads, invalid plans, overflows, hangs or stray overruns in any real
  // profile: only the documented families (fuzz/properties.h).
  EXPECT_TRUE(rc::check("only known families", [] {
    GenConfig c;
    c.profiles = {"atom-2026-08", "atom-2026-11"};
    const sim::Scenario s = *GenScenario(c);
    RC_ASSERT(Evaluate(s, UnknownViolations, sim::SimMutant::kNone).empty());
  }));
}

TEST(FuzzProperties, BeforeTheFixTheFoundingFaultIsFoundAndShrinksToAMinimalCase) {
  GenConfig c;
  c.profiles = {"atom-2026-08"};
  c.sparse_only = true;
  const Property founding = [](const sim::ReplayReport& r) {
    std::vector<sim::Violation> out;
    for (const sim::Violation& v : r.result.violations)
      if (IsFoundingSignature(v)) out.push_back(v);
    return out;
  };
  std::optional<Failure> f;
  for (uint64_t seed = 1; seed < 200 && !f; ++seed)
    f = TestSeed(c, seed, 50, founding, sim::SimMutant::kNone);
  ASSERT_TRUE(f.has_value());
  const sim::Scenario& s = f->scenario;
  EXPECT_LE(s.requests.size(), 2u) << sim::ScenarioToJson(s).dump();
  EXPECT_EQ(f->broken.front().step, "draft_step_0");
  EXPECT_EQ(f->broken.front().call, "sparse_decode");
  // Replaying the recorded shrink path gives the same scenario.
  EXPECT_EQ(sim::ScenarioToJson(*ReplayShrinkPath(c, f->seed, f->size, f->shrink_path)).dump(),
            sim::ScenarioToJson(s).dump());
  // The step is padded: more running than scheduled tokens.
  auto r = sim::Replay(s);
  ASSERT_TRUE(r.ok());
  EXPECT_GT(r->trace.shape.running_tokens, r->trace.shape.scheduled_tokens);
}

TEST(KnownBugs, AFindingOfAKnownBugNamesItInItsFile) {
  // The founding fault before the fix is atom-sparse-mtp-plan-over-running-tokens (ATOM #2715,
  // fixed in atom-2026-11): the finding file says so; a failure of an unlisted signature not.
  GenConfig c;
  c.profiles = {"atom-2026-08"};
  c.sparse_only = true;
  const Property founding = [](const sim::ReplayReport& r) {
    std::vector<sim::Violation> out;
    for (const sim::Violation& v : r.result.violations)
      if (IsFoundingSignature(v)) out.push_back(v);
    return out;
  };
  std::optional<Failure> f;
  for (uint64_t seed = 1; seed < 200 && !f; ++seed)
    f = TestSeed(c, seed, 50, founding, sim::SimMutant::kNone);
  ASSERT_TRUE(f.has_value());
  const std::string sig = Signature(f->broken.front());
  const sim::KnownBug* known = KnownBugOf(*f, sig);
  ASSERT_NE(known, nullptr);
  EXPECT_EQ(known->name, "atom-sparse-mtp-plan-over-running-tokens");
  FindingOrigin origin;
  origin.known = known;
  const nlohmann::json doc = FindingDocument(*f, sig, origin);
  EXPECT_EQ(doc["finding"]["known"]["name"], "atom-sparse-mtp-plan-over-running-tokens");
  EXPECT_EQ(doc["finding"]["known"]["upstream"], "ATOM #2715");
  EXPECT_EQ(doc["finding"]["known"]["fixed_in"], "atom-2026-11");
  EXPECT_EQ(KnownBugOf(*f, "verify|no_such_call|q|read|A"), nullptr);
  EXPECT_FALSE(FindingDocument(*f, sig, FindingOrigin{})["finding"].contains("known"));
}

TEST(MutantRegistry, AtLeastTwelveCoveringEveryClass) {
  std::set<std::string> names, classes;
  for (const MutantSpec& m : MutantRegistry()) {
    EXPECT_TRUE(names.insert(m.name).second) << "duplicate " << m.name;
    classes.insert(sim::BugClassLetter(m.bug_class));
  }
  EXPECT_GE(MutantRegistry().size(), 12u);
  for (const char* c : {"A", "B", "C", "D", "E", "F", "G", "H", "I", "J"})
    EXPECT_TRUE(classes.count(c)) << "no mutant for class " << c;
}

TEST(MutantRegistry, EveryMutantIsKilledWithinItsBudget) {
  // Cases, not seconds: the same kills at any machine speed. `mlasim mutants` (ctest
  // mutants_all_killed) runs the same budgets from seed 1.
  for (const MutantSpec& m : MutantRegistry()) {
    const MutantResult r = RunMutant(m, 1, m.budget);
    EXPECT_TRUE(r.killed) << m.name << " survived " << r.cases << " cases";
    EXPECT_LE(r.cases, m.budget) << m.name;
    ASSERT_TRUE(!r.killed || r.kill.has_value()) << m.name;
    // Class labels agree: the violation that kills a mutant carries the registry's class (a
    // stale plan is E whatever invariant it breaks, a captured launch past work_indptr is C).
    if (r.killed && r.kill->counterexample) {
      const sim::Violation& v = r.kill->counterexample->broken.front();
      EXPECT_EQ(sim::BugClassLetter(v.bug_class), std::string(sim::BugClassLetter(m.bug_class)))
          << m.name << ": killed by " << Signature(v);
    }
  }
}

// The features a built-in decode or reduce contract uses (docs/contracts.md): statement kinds,
// `when`, a loop's `bound`, the launch grid, each semantics field and each constant.
void ContractFeatures(const nlohmann::json& stmts, std::set<std::string>& out) {
  for (const nlohmann::json& st : stmts) {
    for (const char* kind : {"loop", "let", "if", "read", "write", "gather"})
      if (st.contains(kind)) out.insert(kind);
    if (st.contains("when")) out.insert("when");
    if (st.contains("bound")) out.insert("bound");
    if (st.contains("body")) ContractFeatures(st["body"], out);
  }
}

// The feature an edit at `pointer` of contract `doc` breaks: the innermost statement's kind (or
// `when` / `bound` when the edit is that field), `launch`, or `semantics.<field>`.
std::string EditedFeature(const nlohmann::json& doc, const std::string& pointer) {
  std::vector<std::string> t;
  std::istringstream in(pointer.substr(1));
  for (std::string part; std::getline(in, part, '/');) t.push_back(part);
  if (t[0] == "launch" || t[0] == "extends") return t[0];
  if (t[0] == "semantics") return "semantics." + t[1];
  if (t.back() == "when" || t.back() == "bound" || t.back() == "unit") return t.back();
  for (size_t n = t.size(); n >= 2; --n) {
    if ((t[n - 2] != "program" && t[n - 2] != "body") || !std::isdigit(t[n - 1][0])) continue;
    std::string prefix;
    for (size_t i = 0; i < n; ++i) prefix += "/" + t[i];
    const nlohmann::json& st = doc.at(nlohmann::json::json_pointer(prefix));
    for (const char* kind : {"loop", "let", "if", "read", "write", "gather"})
      if (st.contains(kind)) return kind;
  }
  return "?";
}

TEST(MutantRegistry, EveryContractFeatureHasAMutantThePropertiesKill) {
  auto seed = sim::BuiltinScenario("seed");
  ASSERT_TRUE(seed.ok());
  seed->kernel = "asm";
  std::map<sim::CallKind, nlohmann::json> docs;
  std::set<std::string> features;
  for (auto [call, variant] : {std::pair<sim::CallKind, const char*>{sim::CallKind::kDecode, "asm"},
                               {sim::CallKind::kReduce, "mla_reduce_v1"}}) {
    auto c = sim::ContractFor(*seed, call, variant, "test");
    ASSERT_TRUE(c.ok()) << variant;
    docs[call] = (*c)->doc;
    ContractFeatures((*c)->doc["program"], features);
    features.insert("launch");
    if ((*c)->doc.contains("semantics"))
      for (const auto& [k, v] : (*c)->doc["semantics"].items())
        if (k != "sources") features.insert("semantics." + k);
    if ((*c)->doc.contains("constants"))
      for (const auto& [k, v] : (*c)->doc["constants"].items()) features.insert("constant." + k);
  }
  // A read or write's `unit` (docs/contracts.md), which no built-in statement sets.
  features.insert("unit");
  // `extends` (a contract that starts from a built-in), which hk and opus use.
  features.insert("extends");
  // 6 statement kinds, when, bound, unit, extends, launch, 4 semantics fields, 2 constants (the
  // reduce's program adds nothing new).
  EXPECT_EQ(features.size(), 17u);
  std::map<std::string, std::string> covered;  // feature -> a mutant that breaks it
  for (const MutantSpec& m : MutantRegistry()) {
    if (m.sim != sim::SimMutant::kNone) {
      const sim::SimMutantSpec& spec = sim::GetSimMutantSpec(m.sim);
      for (const sim::ContractEdit& e : spec.contract_edits)
        covered.emplace(EditedFeature(docs.at(e.call), e.pointer), m.name);
      for (const auto& [name, value] : spec.contract_constants)
        covered.emplace("constant." + name, m.name);
    }
    if (m.numerics) {
      if (m.numerics->invalid_index != ref::InvalidIndexUse::kMasked)
        covered.emplace("semantics.invalid_index", m.name);
      if (m.numerics->read_masked_keys) covered.emplace("semantics.masked_keys", m.name);
      if (m.numerics->empty_rows != ref::EmptyRowPolicy::kWriteZero)
        covered.emplace("semantics.empty_rows", m.name);
    }
  }
  // Killing each within its budget is EveryMutantIsKilledWithinItsBudget.
  for (const std::string& f : features)
    EXPECT_TRUE(covered.count(f)) << "no mutant breaks the contract feature " << f;
  EXPECT_EQ(covered.at("when"), "contract-partial-write-when-off-by-one");
  EXPECT_EQ(covered.at("gather"), "contract-gather-before-start");
  EXPECT_EQ(covered.at("unit"), "contract-unit-rows-for-head-row-bounds");
  EXPECT_EQ(covered.at("extends"), "contract-extends-wrong-base");
  EXPECT_EQ(EditedFeature(docs.at(sim::CallKind::kDecode), "/program/0/body/0/body/7/rows/1"),
            "read");
}

// The `extends` mutant is a data variant of a user's contract as written: its world's contract
// (extends asm) replaces the decode contract and is asm's behaviour; the mutant's edit makes it
// extend hk, whose zero_kv it inherits. Seed 1 kills it at case 5 with a class I violation.
TEST(MutantRegistry, TheExtendsMutantInheritsTheWrongBase) {
  auto seed = sim::BuiltinScenario("seed");
  ASSERT_TRUE(seed.ok());
  auto clean = sim::MutantScenario(*seed, sim::SimMutant::kContractExtendsWrongBase, false);
  auto broken = sim::MutantScenario(*seed, sim::SimMutant::kContractExtendsWrongBase, true);
  ASSERT_TRUE(clean.ok() && broken.ok());
  auto decode = [](const sim::Scenario& s) {
    for (const auto& c : s.contracts)
      if (c->call == sim::CallKind::kDecode) return c;
    return std::shared_ptr<const sim::Contract>();
  };
  ASSERT_TRUE(decode(*clean) && decode(*broken));
  EXPECT_EQ(decode(*clean)->name, "user-asm-build");
  EXPECT_EQ(decode(*clean)->semantics.zero_kv, sim::ZeroKv::kReadsQWritesOutput);
  EXPECT_EQ(decode(*broken)->name, "user-asm-build");
  EXPECT_EQ(decode(*broken)->semantics.zero_kv, sim::ZeroKv::kReadsQOnly);
  EXPECT_EQ(decode(*broken)->semantics.empty_rows, sim::EmptyRows::kUnwritten);
  const MutantSpec* m = FindMutant("contract-extends-wrong-base");
  ASSERT_NE(m, nullptr);
  const MutantResult r = RunMutant(*m, 1, m->budget);
  ASSERT_TRUE(r.killed);
  EXPECT_EQ(r.cases, 5);
  ASSERT_TRUE(r.kill && r.kill->counterexample);
  EXPECT_EQ(r.kill->counterexample->broken.front().bug_class, sim::BugClass::kI);
}

TEST(MutantRegistry, TheSameCasesGiveTheSameKill) {
  // Determinism: two runs of a budget give the same case count and counterexample.
  for (const char* name :
       {"planner-drops-tail-rule", "reduce-merges-a-piece-twice",
        "semantics-invalid-index-clamp-to-zero", "fault-attributed-to-buffer-below"}) {
    const MutantSpec* m = FindMutant(name);
    ASSERT_NE(m, nullptr) << name;
    const MutantResult a = RunMutant(*m, 1, m->budget), b = RunMutant(*m, 1, m->budget);
    ASSERT_TRUE(a.killed && b.killed) << name;
    EXPECT_EQ(a.cases, b.cases) << name;
    EXPECT_EQ(a.kill->description, b.kill->description) << name;
  }
  EXPECT_EQ(FindMutant("no-such-mutant"), nullptr);
}

TEST(MutantRegistry, OneSitePerCodeMutantAndNumericsVariantsForNumericsKinds) {
  for (const MutantSpec& m : MutantRegistry()) {
    EXPECT_FALSE(m.site.empty()) << m.name;
    EXPECT_FALSE(m.property.empty()) << m.name;
    EXPECT_GE(m.budget, 1) << m.name;
    const bool numerics = m.kind == MutantKind::kNumerics || m.kind == MutantKind::kSemantics;
    EXPECT_EQ(m.numerics.has_value(), numerics) << m.name;
    EXPECT_EQ(m.kill_case != nullptr, m.sim == sim::SimMutant::kNone) << m.name;
  }
}

TEST(MutantRegistry, ABudgetOfZeroCasesKillsNothing) {
  const MutantSpec* m = FindMutant("reduce-merges-a-piece-twice");
  ASSERT_NE(m, nullptr);
  const MutantResult r = RunMutant(*m, 1, 0);
  EXPECT_FALSE(r.killed);
  EXPECT_EQ(r.cases, 0);
}

TEST(MutantRegistry, TheNumericsPropertyHoldsWithoutAMutant) {
  // A kill means something only if the unmutated system passes the same check.
  EXPECT_EQ(NumericsPropertyFailure(0, 1, 200), std::nullopt);
}

TEST(MutantRegistry, TheRaggedPropertiesHoldWithoutAMutant) {
  // planner-ragged-rows-by-max and numerics-ignores-q-lens die on ragged batches: those batches
  // pass the plan checker and the numerics property without them.
  EXPECT_EQ(RaggedPlanCheckFailure(0, 1, 300), std::nullopt);
  EXPECT_EQ(NumericsPropertyFailure(0, 1, 300, /*ragged=*/true), std::nullopt);
  EXPECT_NE(RaggedPlanCheckFailure(static_cast<int>(ref::PlannerMutant::kRaggedRowsByMax), 1, 20),
            std::nullopt);
  EXPECT_NE(NumericsPropertyFailure(static_cast<int>(ref::NumericsMutant::kIgnoreQLens), 1, 20,
                                    /*ragged=*/true),
            std::nullopt);
}

fs::path TempDir(const std::string& name) {
  const fs::path p =
      fs::temp_directory_path() / ("mlasim_fuzz_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(p);
  return p;
}

TEST(Campaign, FindingsAreReplayableDeduplicatedAndDeterministic) {
  CampaignOptions o;
  o.seconds = 60;
  o.max_cases = 300;
  o.seed = 7;
  o.small = true;
  o.out_dir = TempDir("a").string();
  auto a = RunCampaign(o, nullptr);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->cases, 300);
  ASSERT_FALSE(a->findings.empty());
  for (const auto& [sig, f] : a->findings) {
    ASSERT_FALSE(f.file.empty());
    auto s = sim::LoadScenarioFile(f.file);  // the finding file is a scenario
    ASSERT_TRUE(s.ok()) << f.file << ": " << s.status().ToString();
    auto r = sim::Replay(*s);
    ASSERT_TRUE(r.ok());
    bool same = false;
    for (const sim::Violation& v : r->result.violations) same |= Signature(v) == sig;
    EXPECT_TRUE(same) << f.file << " does not replay to " << sig;
  }
  // Same seed and case budget: the same findings.
  o.out_dir = TempDir("b").string();
  auto b = RunCampaign(o, nullptr);
  ASSERT_TRUE(b.ok());
  std::set<std::string> sa, sb;
  for (const auto& [k, v] : a->findings) sa.insert(k);
  for (const auto& [k, v] : b->findings) sb.insert(k);
  EXPECT_EQ(sa, sb);
  // Resume in the same folder with a budget of 350: earlier findings are known, the shard
  // continues from case 300 to 350 (the budget counts the whole campaign).
  o.resume = true;
  o.max_cases = 350;
  auto c = RunCampaign(o, nullptr);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->resumed_at, 300);
  EXPECT_EQ(c->cases, 50);
  EXPECT_EQ(c->next_index, 350);
  fs::remove_all(a->findings.begin()->second.file.empty()
                     ? ""
                     : fs::path(a->findings.begin()->second.file).parent_path());
  fs::remove_all(o.out_dir);
}

std::map<std::string, std::string> ReadDir(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".json") continue;
    std::ifstream f(e.path());
    std::stringstream b;
    b << f.rdbuf();
    files[e.path().filename().string()] = b.str();
  }
  return files;
}

TEST(Campaign, SameFindingFilesAtAnyJobCount) {
  // Threads generate, replay and shrink concurrently (RapidCheck under GeneratorMutex) and the
  // results are committed in seed-index order: --jobs 1 and --jobs 3 write the same bytes.
  std::map<std::string, std::string> files[2];
  std::map<std::string, uint64_t> index[2];
  for (int run = 0; run < 2; ++run) {
    CampaignOptions o;
    o.seconds = 120;
    o.max_cases = 240;
    o.seed = 11;
    o.small = true;
    o.jobs = run == 0 ? 1 : 3;
    o.out_dir = TempDir(run == 0 ? "jobs1" : "jobs3").string();
    auto r = RunCampaign(o, nullptr);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->cases, 240);
    EXPECT_EQ(r->next_index, 240);
    for (const auto& [sig, f] : r->findings) {
      index[run][sig] = f.seed_index.value();
      // Seed 11's generator seeds exceed 2^63 (stored as unsigned JSON numbers): the finding file
      // must still load as a scenario.
      auto s = sim::LoadScenarioFile(f.file);
      EXPECT_TRUE(s.ok()) << f.file << ": " << s.status().ToString();
    }
    files[run] = ReadDir(o.out_dir);
    fs::remove_all(o.out_dir);
  }
  ASSERT_GE(files[0].size(), 3u);
  EXPECT_EQ(index[0], index[1]);
  EXPECT_EQ(files[0], files[1]);
}

// A case that runs past slow_case_note_seconds is named on the note stream (its seed index, how
// long, its phase, the busy workers), and nowhere else: the summary's notes stay timing-free.
TEST(Campaign, ASlowCaseIsNamedOnTheNoteStream) {
  for (const double threshold : {0.2, 60.0}) {
    CampaignOptions o;
    o.seconds = 120;
    o.max_cases = 1;
    o.seed = 3;
    o.small = true;
    o.slow_case_note_seconds = threshold;
    o.property = [](const sim::ReplayReport&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(700));
      return std::vector<sim::Violation>{};
    };
    std::vector<std::string> notes;
    auto r = RunCampaign(o, nullptr, [&](const std::string& line) { notes.push_back(line); });
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r->notes.empty());
    if (threshold > 1) {
      EXPECT_TRUE(notes.empty()) << notes.front();
      continue;
    }
    ASSERT_GE(notes.size(), 1u);  // at most once per threshold seconds
    EXPECT_LE(notes.size(), 3u);
    for (const std::string& n : notes)
      EXPECT_TRUE(std::regex_match(
          n, std::regex("the case at seed index 0 has run for [01] s \\(checking\\); 1 of 1 "
                        "worker\\(s\\) busy")))
          << n;
  }
}

TEST(Campaign, ResumedRunWritesWhatAnUnbrokenRunWrites) {
  // 300 cases in one go, or a run stopped at 100 and resumed with the budget of 300: the progress
  // file carries the committed index and the signatures already seen, so the same cases are
  // shrunk. (Without the seen signatures this split writes an extra finding: checked on that
  // mutant.)
  CampaignOptions o;
  o.seconds = 120;
  o.seed = 123;
  o.small = true;
  o.profiles = {"atom-2026-03"};
  o.max_cases = 300;
  o.out_dir = TempDir("unbroken").string();
  ASSERT_TRUE(RunCampaign(o, nullptr).ok());
  const auto unbroken = ReadDir(o.out_dir);
  fs::remove_all(o.out_dir);
  o.out_dir = TempDir("split").string();
  o.max_cases = 100;
  ASSERT_TRUE(RunCampaign(o, nullptr).ok());
  o.max_cases = 300;
  o.resume = true;
  auto r = RunCampaign(o, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->next_index, 300);
  EXPECT_EQ(r->cases, 200);
  EXPECT_EQ(ReadDir(o.out_dir), unbroken);
  // Resuming another campaign's folder is refused, naming --resume.
  o.profiles = {"atom-2026-08"};
  auto other = RunCampaign(o, nullptr);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().field(), "--resume");
  fs::remove_all(o.out_dir);
}

TEST(Campaign, ShardsSplitTheSeedSpaceAndInputsAreChecked) {
  int32_t i = -1, n = -1;
  EXPECT_TRUE(ParseShard("2/5", &i, &n).ok());
  EXPECT_EQ(i, 2);
  EXPECT_EQ(n, 5);
  EXPECT_EQ(ParseShard("5/5", &i, &n).field(), "--shard");
  EXPECT_EQ(ParseShard("x", &i, &n).field(), "--shard");
  EXPECT_EQ(*ParseSeed("0x10"), 16u);
  EXPECT_TRUE(ParseSeed("3288a1f0000000000000000000000000000000ab").ok());
  EXPECT_EQ(ParseSeed("12z").status().field(), "--seed");
  for (const char* bad : {"-1", "+5", " 5", "0x", "-0x5"}) EXPECT_FALSE(ParseSeed(bad).ok()) << bad;
  EXPECT_FALSE(ParseShard(" 0/2", &i, &n).ok());
  EXPECT_FALSE(ParseShard("+0/2", &i, &n).ok());
  CampaignOptions o;
  o.jobs = 0;
  EXPECT_EQ(RunCampaign(o, nullptr).status().field(), "--jobs");
}

}  // namespace
}  // namespace mlasim::fuzz

namespace mlasim::fuzz {
namespace {

// Issue 11: campaigns run the engine-step numerics on every Nth case by seed index (its shrinks
// included), deterministically; the summary counts the cases it ran on. Seed 7, 400 cases,
// swarm on, --ignore-known: every 16th case gives 25 numerics steps; the never-written sparse
// o rows they show at seed index 96 (an hk step with DCP 2) are the known DCP family.
TEST(CampaignStepNumerics, EveryNthCaseRunsTheEngineStepNumerics) {
  CampaignOptions o;
  o.seconds = std::numeric_limits<double>::infinity();
  o.max_cases = 400;
  o.seed = 7;
  o.swarm = true;
  o.ignore_known = true;
  auto off = RunCampaign(o, nullptr);
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_EQ(off->step_numerics, 0);
  EXPECT_EQ(off->findings.size(), 0u);
  o.step_numerics_every = 16;
  auto on = RunCampaign(o, nullptr);
  ASSERT_TRUE(on.ok()) << on.status().ToString();
  EXPECT_EQ(on->cases, 400);
  EXPECT_EQ(on->step_numerics, 25);
  // The numerics of seed index 96 (DCP 2, hk, K 2) show o rows of a real token never written:
  // docs/findings.md #5, a known family (KnownBugs.NeverWrittenRowsUnderDcpAreTheDcpFamily);
  // before the known-bug pattern named that form, this campaign reported it as 2 new findings.
  EXPECT_EQ(on->findings.size(), 0u);
  o.step_numerics_every = 1;
  o.max_cases = 3;
  auto every = RunCampaign(o, nullptr);
  ASSERT_TRUE(every.ok());
  EXPECT_EQ(every->step_numerics, 3);
  o.step_numerics_every = -1;
  auto bad = RunCampaign(o, nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().ToString(), "--step-numerics-every: must be >= 0 (0: never)");
}

}  // namespace
}  // namespace mlasim::fuzz
