// Issue 20 §1 (findings that do not slip) and issue 12 (campaigns across --resume, merge): each
// signature any case shows is its own target, shrunk to a case that still shows it; budgets count
// the whole campaign; merge keeps the smallest case per signature. Every check here also runs on
// CampaignMutant::kSlippingShrink (the old rule) and must fail there.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <cmath>

#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "fuzz/campaign.h"
#include "fuzz/findings.h"
#include "fuzz/progress.h"
#include "fuzz/search.h"
#include "fuzz/signature.h"
#include "sim/replay.h"
#include "sim/scenario_json.h"

namespace mlasim::fuzz {
namespace {

namespace fs = std::filesystem;

fs::path TempDir(const std::string& name) {
  const fs::path p =
      fs::temp_directory_path() / ("mlasim_camp_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(p);
  return p;
}

std::map<std::string, std::string> ReadDir(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::ifstream f(e.path());
    std::stringstream b;
    b << f.rdbuf();
    files[e.path().filename().string()] = b.str();
  }
  return files;
}

// Two independent synthetic bugs: X needs at least 3 requests in the step, Y at least 2 draft
// tokens (MTP K >= 2). A case with both lists X first.
constexpr char kSigX[] = "verify|synthetic_decode|q|read|A";
constexpr char kSigY[] = "draft_step_1|synthetic_reduce|o|write|B";
std::vector<sim::Violation> TwoBugs(const sim::ReplayReport& r) {
  std::vector<sim::Violation> out;
  if (r.scenario.requests.size() >= 3) out.push_back(ViolationWithSignature(kSigX, "B >= 3"));
  if (r.scenario.mtp_k >= 2) out.push_back(ViolationWithSignature(kSigY, "K >= 2"));
  return out;
}

CampaignOptions TwoBugOptions(uint64_t seed) {
  CampaignOptions o;
  o.seconds = 120;
  o.max_cases = 1;
  o.seed = seed;
  o.shard = 60;  // the shard's first case is seed index 60: RapidCheck size 70, not 10
  o.shards = 100;
  o.small = true;
  o.property = TwoBugs;
  return o;
}

// The first base seed whose seed index 60 shows both synthetic bugs.
uint64_t SeedShowingBothBugs() {
  for (uint64_t seed = 1; seed < 400; ++seed) {
    auto s = RunCampaign(TwoBugOptions(seed), nullptr);
    if (s.ok() && s->signatures.size() == 2) return seed;
  }
  return 0;
}

// "" when a one-case campaign over a case with both bugs reports both, each in a file whose case
// still shows its own bug and nothing smaller does (X: exactly 3 requests, Y: exactly K = 2);
// otherwise what went wrong.
std::string TwoBugsReportedApart(uint64_t seed, CampaignMutant mutant, const std::string& dir) {
  CampaignOptions o = TwoBugOptions(seed);
  o.mutant = mutant;
  o.out_dir = dir;
  auto s = RunCampaign(o, nullptr);
  if (!s.ok()) return s.status().ToString();
  std::string why;
  for (const char* sig : {kSigX, kSigY}) {
    auto it = s->findings.find(sig);
    if (it == s->findings.end()) {
      why += std::string("not reported: ") + sig + "; ";
      continue;
    }
    auto c = sim::LoadScenarioFile(it->second.file);
    if (!c.ok()) return c.status().ToString();
    const bool x = std::string(sig) == kSigX;
    if (x ? c->requests.size() != 3 : c->mtp_k != 2)
      why += std::string(sig) + " shrunk to B=" + std::to_string(c->requests.size()) +
             " K=" + std::to_string(c->mtp_k) + "; ";
  }
  if (s->findings.size() != 2) why += "findings " + std::to_string(s->findings.size());
  return why;
}

TEST(NoSlip, TwoIndependentViolationsAreBothReportedEachShrunkToItsOwnBug) {
  const uint64_t seed = SeedShowingBothBugs();
  ASSERT_NE(seed, 0u) << "no seed in 1..399 shows both synthetic bugs in its first case";
  const fs::path dir = TempDir("twobugs");
  EXPECT_EQ(TwoBugsReportedApart(seed, CampaignMutant::kNone, dir.string()), "");
  fs::remove_all(dir);
  // The old rule (first violation only, keep any failure) loses one of them.
  const std::string slipped =
      TwoBugsReportedApart(seed, CampaignMutant::kSlippingShrink, dir.string());
  EXPECT_NE(slipped, "");
  EXPECT_NE(slipped.find("not reported"), std::string::npos) << slipped;
  fs::remove_all(dir);
}

TEST(NoSlip, TheShrinkStepBudgetSaysWhenItCutShrinkingShort) {
  const uint64_t seed = SeedShowingBothBugs();
  ASSERT_NE(seed, 0u);
  auto run = [seed](int steps) {
    CampaignOptions o = TwoBugOptions(seed);
    o.max_shrink_steps = steps;
    auto s = RunCampaign(o, nullptr);
    EXPECT_TRUE(s.ok());
    return s->findings.at(kSigX);
  };
  const CampaignFinding full = run(kDefaultShrinkSteps);
  ASSERT_GE(full.shrink_steps, 2);
  EXPECT_FALSE(full.cut_short);
  EXPECT_EQ(full.max_shrink_steps, kDefaultShrinkSteps);
  // Exactly the steps it needs: not cut short. One fewer, or none: cut short, and said so.
  const CampaignFinding exact = run(full.shrink_steps);
  EXPECT_EQ(exact.shrink_steps, full.shrink_steps);
  EXPECT_FALSE(exact.cut_short);
  const CampaignFinding one_less = run(full.shrink_steps - 1);
  EXPECT_EQ(one_less.shrink_steps, full.shrink_steps - 1);
  EXPECT_TRUE(one_less.cut_short);
  const CampaignFinding none = run(0);
  EXPECT_EQ(none.shrink_steps, 0);
  EXPECT_TRUE(none.cut_short);
  // The finding file records it.
  const fs::path dir = TempDir("cutshort");
  CampaignOptions o = TwoBugOptions(seed);
  o.max_shrink_steps = 1;
  o.out_dir = dir.string();
  ASSERT_TRUE(RunCampaign(o, nullptr).ok());
  auto rec = ReadFindingFile((dir / FindingFileName(kSigX)).string());
  ASSERT_TRUE(rec.ok() && *rec);
  EXPECT_TRUE((*rec)->cut_short);
  EXPECT_EQ((*rec)->shrink_steps, 1);
  EXPECT_EQ((*rec)->max_shrink_steps, 1);
  fs::remove_all(dir);
}

TEST(NoSlip, ShrinkToSignatureKeepsItsTargetOrRefusesACaseWithoutIt) {
  GenConfig config;
  config.profiles = {"atom-2026-08"};
  config.small = true;
  config.max_batch = 64;
  // A seed whose case shows X: shrunk to exactly 3 requests, whatever happens to Y.
  for (uint64_t seed = 1; seed < 200; ++seed) {
    auto f = ShrinkToSignature(config, seed, 70, TwoBugs, sim::SimMutant::kNone, kSigX);
    if (!f) {
      // No X in this case: targeting it gives nothing, though Y may be there.
      EXPECT_FALSE(ShrinkToSignature(config, seed, 70, TwoBugs, sim::SimMutant::kNone, kSigX, 0)
                       .has_value());
      continue;
    }
    EXPECT_EQ(f->target, kSigX);
    EXPECT_EQ(f->scenario.requests.size(), 3u);
    EXPECT_NE(FindSignature(f->broken, kSigX), nullptr);
    EXPECT_EQ(static_cast<int>(f->shrink_path.size()), f->shrink_steps);
    // The recorded path regenerates the shrunk case.
    auto again = ReplayShrinkPath(config, seed, 70, f->shrink_path);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(sim::ScenarioToJson(*again), sim::ScenarioToJson(f->scenario));
    return;
  }
  FAIL() << "no seed in 1..199 shows X at size 70";
}

// "" when every signature the committed cases showed is a finding whose file replays to a case
// that shows it; otherwise the ones that slipped.
std::string EveryTargetIsAFinding(const CampaignSummary& s) {
  std::string why;
  for (const std::string& sig : s.signatures) {
    auto it = s.findings.find(sig);
    if (it == s.findings.end()) {
      why += "lost " + sig + "; ";
      continue;
    }
    auto c = sim::LoadScenarioFile(it->second.file);
    auto r = c.ok() ? sim::Replay(*c) : StatusOr<sim::ReplayReport>(c.status());
    if (!r.ok() || !FindSignature(r->result.violations, sig))
      why += it->second.file + " does not show " + sig + "; ";
  }
  return why;
}

TEST(NoSlip, Seed7ReportsEveryDistinctSignature) {
  // Issue 20: `mlasim fuzz --cases 3000 --seconds 600 --seed 7 --jobs 2` on the default profile
  // saw 10 distinct first-violation signatures and reported 6 findings. Its first 300 cases
  // show 44 distinct signatures over all their violations (39 before underflows below a
  // buffer's start were reported and q/o width overruns became class C): 44 findings, each
  // replaying to its own signature. Round 1's rule (--shrink first-failure, and the slipping
  // mutant) reports 6 of its 9 first-violation signatures.
  CampaignOptions o;
  o.seed = 7;
  o.max_cases = 300;
  o.seconds = std::numeric_limits<double>::infinity();
  o.jobs = 2;
  o.out_dir = TempDir("seed7").string();
  auto s = RunCampaign(o, nullptr);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->signatures.size(), 44u);
  EXPECT_EQ(s->findings.size(), 44u);
  EXPECT_EQ(EveryTargetIsAFinding(*s), "");
  fs::remove_all(o.out_dir);
  // Round 1's rule, as `--shrink first-failure` runs it: 44 signatures shown, 9 first-violation
  // targets, 6 findings.
  o.shrink = ShrinkPolicy::kFirstFailure;
  auto ff = RunCampaign(o, nullptr);
  ASSERT_TRUE(ff.ok());
  EXPECT_EQ(ff->shown, s->shown);
  EXPECT_EQ(ff->signatures.size(), 9u);
  EXPECT_EQ(ff->findings.size(), 6u);
  EXPECT_NE(EveryTargetIsAFinding(*ff), "");
  fs::remove_all(o.out_dir);
  // The slipping mutant ignores the policy asked for: first-failure's findings, byte for byte.
  o.shrink = ShrinkPolicy::kPerSignature;
  o.mutant = CampaignMutant::kSlippingShrink;
  auto m = RunCampaign(o, nullptr);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->signatures, ff->signatures);
  EXPECT_EQ(m->findings.size(), 6u);
  EXPECT_NE(EveryTargetIsAFinding(*m), "");
  fs::remove_all(o.out_dir);
}

// A campaign of the fixed profile with --ignore-known: no findings (RealProfilesShowOnlyKnownFamilies),
// so only its budgets and bookkeeping are observed.
CampaignOptions Quiet(const std::string& dir) {
  CampaignOptions o;
  o.seed = 5;
  o.small = true;
  o.profiles = {"atom-2026-11"};
  o.ignore_known = true;
  o.out_dir = dir;
  return o;
}

TEST(CampaignBudget, ACaseBudgetCountsTheWholeCampaignAcrossResume) {
  const fs::path dir = TempDir("budget");
  CampaignOptions o = Quiet(dir.string());
  o.seconds = std::numeric_limits<double>::infinity();
  o.max_cases = 40;
  auto a = RunCampaign(o, nullptr);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->cases, 40);
  EXPECT_FALSE(a->cut_short);
  // The same command line again with --resume: the budget is spent, nothing runs, and it says so.
  o.resume = true;
  auto b = RunCampaign(o, nullptr);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->cases, 0);
  EXPECT_EQ(b->next_index, 40);
  EXPECT_EQ(b->resumed_at, 40);
  ASSERT_FALSE(b->notes.empty());
  EXPECT_NE(b->notes.back().find("budget is spent"), std::string::npos) << b->notes.back();
  // A larger budget on resume is the campaign's new total: 40 more cases, not 60.
  o.max_cases = 60;
  auto c = RunCampaign(o, nullptr);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->cases, 20);
  EXPECT_EQ(c->next_index, 60);
  fs::remove_all(dir);
}

TEST(CampaignBudget, ASecondsBudgetCountsTheWholeCampaignAcrossResume) {
  const fs::path dir = TempDir("seconds");
  CampaignOptions o = Quiet(dir.string());
  o.seconds = 0.3;  // time only
  auto a = RunCampaign(o, nullptr);
  ASSERT_TRUE(a.ok());
  EXPECT_GE(a->campaign_seconds, 0.3);
  auto p = ReadProgressFile((dir / ProgressFileName(0, 1)).string(), "--resume");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_GE(p->seconds_spent, 0.3);
  EXPECT_EQ(p->next_index, a->next_index);
  o.resume = true;  // the same command line: its 0.3 s are spent
  auto b = RunCampaign(o, nullptr);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->cases, 0);
  EXPECT_EQ(b->next_index, a->next_index);
  EXPECT_FALSE(b->cut_short);  // no case budget to cut
  fs::remove_all(dir);
}

TEST(CampaignBudget, SecondsThatEndACaseBudgetEarlyAreReported) {
  const fs::path dir = TempDir("cut");
  CampaignOptions o = Quiet(dir.string());
  o.seconds = 0.2;
  o.max_cases = int64_t{1} << 40;  // far more than 0.2 s can run
  auto s = RunCampaign(o, nullptr);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->cut_short);
  EXPECT_LT(s->next_index, o.max_cases);
  EXPECT_EQ(s->NewFindings(), 0);
  fs::remove_all(dir);
}

TEST(CampaignResume, EarlierFindingsKeepTheirSeedIndicesAndAreNotNew) {
  const fs::path dir = TempDir("indices");
  CampaignOptions o;
  o.seed = 7;
  o.small = true;
  o.seconds = std::numeric_limits<double>::infinity();
  o.max_cases = 80;
  o.out_dir = dir.string();
  auto a = RunCampaign(o, nullptr);
  ASSERT_TRUE(a.ok());
  ASSERT_GE(a->findings.size(), 2u);
  o.resume = true;
  o.max_cases = 120;
  auto b = RunCampaign(o, nullptr);
  ASSERT_TRUE(b.ok());
  int64_t nonzero = 0;
  for (const auto& [sig, f] : a->findings) {
    ASSERT_TRUE(b->findings.count(sig)) << sig;
    const CampaignFinding& g = b->findings.at(sig);
    EXPECT_TRUE(g.earlier);
    EXPECT_EQ(g.seed_index, f.seed_index) << sig;
    EXPECT_EQ(g.shrink_steps, f.shrink_steps) << sig;
    nonzero += *f.seed_index > 0;
  }
  EXPECT_GT(nonzero, 0);  // the indices are real, not all 0
  EXPECT_EQ(b->NewFindings(), static_cast<int64_t>(b->findings.size() - a->findings.size()));
  fs::remove_all(dir);
}

TEST(CampaignResume, ResumingWithoutAProgressFileSaysItStartsAtCaseZero) {
  const fs::path dir = TempDir("noprogress");
  CampaignOptions o = Quiet(dir.string());
  o.max_cases = 5;
  o.resume = true;
  std::vector<std::string> told;
  auto s = RunCampaign(o, nullptr, [&told](const std::string& l) { told.push_back(l); });
  ASSERT_TRUE(s.ok());
  ASSERT_FALSE(told.empty());
  EXPECT_NE(told.front().find("no progress file"), std::string::npos) << told.front();
  EXPECT_NE(told.front().find("case 0"), std::string::npos) << told.front();
  EXPECT_EQ(s->resumed_at, -1);
  EXPECT_EQ(s->notes, told);
  fs::remove_all(dir);
}

TEST(CampaignResume, TempFilesOfAKilledRunOfThisShardAreRemoved) {
  const fs::path dir = TempDir("temps");
  fs::create_directories(dir);
  for (const char* n : {".tmp-0-of-2-verify.x.json", ".tmp-0-of-2-progress", ".tmp-1-of-2-a.json",
                        ".tmp-0-of-20-b.json"})
    std::ofstream(dir / n) << "partial";
  CampaignOptions o = Quiet(dir.string());
  o.max_cases = 3;
  o.shard = 0;
  o.shards = 2;
  auto s = RunCampaign(o, nullptr);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(fs::exists(dir / ".tmp-0-of-2-verify.x.json"));
  EXPECT_FALSE(fs::exists(dir / ".tmp-0-of-2-progress"));
  EXPECT_TRUE(fs::exists(dir / ".tmp-1-of-2-a.json"));  // another shard's
  EXPECT_TRUE(fs::exists(dir / ".tmp-0-of-20-b.json"));
  ASSERT_FALSE(s->notes.empty());
  EXPECT_NE(s->notes.front().find("removed 2 temp file(s)"), std::string::npos) << s->notes.front();
  fs::remove_all(dir);
}

TEST(CampaignOptionsCheck, EveryBoundaryAndError) {
  CampaignOptions o = Quiet("");
  o.max_cases = 0;
  auto zero = RunCampaign(o, nullptr);
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->cases, 0);
  EXPECT_FALSE(zero->cut_short);
  o.max_cases = -2;
  EXPECT_EQ(RunCampaign(o, nullptr).status().field(), "--cases");
  o.max_cases = (int64_t{1} << 50) + 1;
  EXPECT_EQ(RunCampaign(o, nullptr).status().field(), "--cases");
  o.max_cases = -1;
  o.seconds = std::numeric_limits<double>::infinity();  // no budget at all
  EXPECT_EQ(RunCampaign(o, nullptr).status().field(), "--seconds");
  o.seconds = 0;
  EXPECT_EQ(RunCampaign(o, nullptr).status().field(), "--seconds");
  o.seconds = std::nan("");
  EXPECT_EQ(RunCampaign(o, nullptr).status().field(), "--seconds");
  // At most a year (kMaxCampaignSeconds): 1e308 was taken. Boundaries with a case budget, so that
  // a budget that is taken runs one case.
  o.max_cases = 1;
  for (double s : {1e308, std::nextafter(kMaxCampaignSeconds, 1e308), -1.0, 0.0,
                   -std::numeric_limits<double>::infinity()}) {
    o.seconds = s;
    EXPECT_EQ(RunCampaign(o, nullptr).status().ToString(),
              fmt::format("--seconds: must be in (0, 31536000] seconds (a year; it may be left out "
                          "with --cases; got {})",
                          s));
  }
  for (double s : {kMaxCampaignSeconds, 1e-300, std::numeric_limits<double>::infinity()}) {
    o.seconds = s;
    EXPECT_TRUE(RunCampaign(o, nullptr).ok()) << s;
  }
  o.max_cases = -1;
  o.seconds = 10;
  o.max_cases = 1;
  for (int steps : {-1, 100001}) {
    o.max_shrink_steps = steps;
    EXPECT_EQ(RunCampaign(o, nullptr).status().field(), "--shrink-steps") << steps;
  }
  for (int steps : {0, 100000}) {
    o.max_shrink_steps = steps;
    EXPECT_TRUE(RunCampaign(o, nullptr).ok()) << steps;
  }
  o.resume = true;  // without --out
  EXPECT_EQ(RunCampaign(o, nullptr).status().field(), "--resume");
}

TEST(CampaignResume, AProgressFileOfAnotherShrinkBudgetIsRefused) {
  const fs::path dir = TempDir("otherbudget");
  CampaignOptions o = Quiet(dir.string());
  o.max_cases = 2;
  ASSERT_TRUE(RunCampaign(o, nullptr).ok());
  o.resume = true;
  o.max_shrink_steps = 10;
  auto s = RunCampaign(o, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().field(), "--resume");
  EXPECT_NE(s.status().message().find("max_shrink_steps"), std::string::npos);
  fs::remove_all(dir);
}

// Two shards of one campaign, each in its own folder.
struct Shards {
  fs::path a, b;
  CampaignSummary sa, sb;
};
Shards RunTwoShards(const std::string& tag) {
  Shards s{TempDir(tag + "_s0"), TempDir(tag + "_s1"), {}, {}};
  CampaignOptions o;
  o.seed = 7;
  o.small = true;
  o.seconds = std::numeric_limits<double>::infinity();
  o.max_cases = 60;
  o.shards = 2;
  for (int i = 0; i < 2; ++i) {
    o.shard = i;
    o.out_dir = (i == 0 ? s.a : s.b).string();
    auto r = RunCampaign(o, nullptr);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    (i == 0 ? s.sa : s.sb) = *r;
  }
  return s;
}

TEST(FuzzMerge, OneFindingPerSignatureAcrossShardsTheSmallestKeptInAnyOrder) {
  Shards sh = RunTwoShards("merge");
  std::set<std::string> all;
  for (const auto* s : {&sh.sa, &sh.sb})
    for (const auto& [sig, f] : s->findings) all.insert(sig);
  const fs::path out1 = TempDir("merged1"), out2 = TempDir("merged2");
  auto m1 = MergeFindingDirs({sh.a.string(), sh.b.string()}, out1.string());
  ASSERT_TRUE(m1.ok()) << m1.status().ToString();
  auto m2 = MergeFindingDirs({sh.b.string(), sh.a.string()}, out2.string());
  ASSERT_TRUE(m2.ok());
  EXPECT_EQ(m1->findings.size(), all.size());
  EXPECT_EQ(m1->cases, 120);  // 60 per shard
  ASSERT_EQ(m1->shards.size(), 2u);
  EXPECT_EQ(m1->shards[0].cases + m1->shards[1].cases, 120);
  EXPECT_EQ(ReadDir(out1.string()), ReadDir(out2.string()));  // argument order does not matter
  EXPECT_EQ(ReadDir(out1.string()).size(), all.size());
  for (const auto& [sig, r] : m1->findings) {
    EXPECT_EQ(m2->findings.at(sig).path, r.path);
    const int both = sh.sa.findings.count(sig) + sh.sb.findings.count(sig);
    EXPECT_EQ(m1->folders_with.at(sig), both) << sig;
    // The kept case is the smaller one of the shards that found it.
    for (const fs::path& d : {sh.a, sh.b}) {
      auto other = ReadFindingFile((d / FindingFileName(sig)).string());
      if (other.ok() && *other) {
        EXPECT_FALSE(SmallerFinding(**other, r)) << sig;
      }
    }
  }
  // Merging again into the same folder changes nothing.
  auto again = MergeFindingDirs({sh.a.string(), sh.b.string()}, out1.string());
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->written.empty());
  for (const fs::path& d : {sh.a, sh.b, out1, out2}) fs::remove_all(d);
}

TEST(FuzzMerge, TheSmallerCaseWinsAndOutTakesPart) {
  Shards sh = RunTwoShards("smallest");
  ASSERT_FALSE(sh.sa.findings.empty());
  const CampaignFinding& f = sh.sa.findings.begin()->second;
  // A bigger case of the same signature in a third folder (an extra request-free field makes
  // the case JSON longer): merge keeps the shard's.
  const fs::path big = TempDir("big");
  fs::create_directories(big);
  auto doc = nlohmann::json::parse(ReadDir(sh.a.string()).at(fs::path(f.file).filename().string()));
  doc["description"] = "a larger case of the same signature";
  std::ofstream(big / FindingFileName(f.signature)) << doc.dump(2) << '\n';
  const fs::path out = TempDir("smallest_out");
  auto m = MergeFindingDirs({big.string(), sh.a.string()}, out.string());
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->findings.at(f.signature).path, f.file);
  // OUT's own smaller file wins over a folder's larger one.
  doc.erase("description");
  doc["finding"]["seed_index"] = 999999;
  const std::string mine = doc.dump(2) + "\n";
  fs::remove_all(out);
  fs::create_directories(out);
  std::ofstream(out / FindingFileName(f.signature)) << mine;  // same case, different file text
  std::ofstream(out / ".tmp-merge-x.json") << "partial";      // a killed merge's temp file
  auto m2 = MergeFindingDirs({big.string()}, out.string());
  ASSERT_TRUE(m2.ok());
  EXPECT_EQ(ReadDir(out.string()).at(FindingFileName(f.signature)), mine);
  EXPECT_FALSE(fs::exists(out / ".tmp-merge-x.json"));
  for (const fs::path& d : {sh.a, sh.b, big, out}) fs::remove_all(d);
}

// A finding file of an older campaign: the seed scenario with a bare `finding` of `signature`
// (no seed_index, shrink or reproduce), plus `edit` applied to the document.
std::string SeedFinding(const std::string& signature,
                        const std::function<void(nlohmann::json&)>& edit = nullptr) {
  nlohmann::json doc = sim::ScenarioToJson(*sim::BuiltinScenario("seed"));
  doc["finding"] = {{"signature", signature}};
  if (edit) edit(doc);
  return doc.dump(1) + "\n";
}

// merge and --resume read every finding file with the one reader (ReadFindingDir): a finding
// whose case `mlasim replay` refuses, an unknown key, a signature that is no signature or not
// its file's, or a reproduce field out of range is refused naming the file and the field, and
// nothing is copied into --out. Mutant: ParseFindingText / ReadFindingDir of 219489c accept
// every case (merge exits 0 and copies it; '|||||' became the hidden file '......json').
TEST(FuzzMerge, AMalformedFindingIsRefusedNamingFileAndField) {
  const std::string sig = "verify|sparse_decode|o|write|A";
  struct Bad {
    const char* what;
    std::string file;  // "" = FindingFileName(sig)
    std::function<void(nlohmann::json&)> edit;
    std::string field_suffix;  // of the status field after the path ("" = the path alone)
    const char* reason;
  };
  const Bad bad[] = {
      {"heads -1", "", [](auto& d) { d["model"]["heads"] = -1; }, ": $.model.heads",
       "must be in 1..1024 (got -1)"},
      {"unknown scenario key", "", [](auto& d) { d["zzz"] = 1; }, ": $.zzz", "unknown key"},
      {"unknown finding key", "", [](auto& d) { d["finding"]["zzz"] = 1; }, "",
       "finding.zzz: unknown key"},
      {"signature of bars (was written as the hidden file ......json)", "",
       [](auto& d) { d["finding"]["signature"] = "|||||"; }, "",
       "'|||||' is not a signature step|call|buffer|access|class (5 parts separated by |, got 6)"},
      {"signature with a slash", "x.json",
       [](auto& d) { d["finding"]["signature"] = "verify|a/b|o|write|A"; }, "",
       "step and call are 1..128 of [A-Za-z0-9_-]"},
      {"signature class Z", "", [](auto& d) { d["finding"]["signature"] = "verify|sparse_decode|o|write|Z"; },
       "", "class is A..J"},
      {"signature not the file's", FindingFileName("verify|sparse_decode|q|read|A"),
       nullptr, "", "is not the file's: its file is verify.sparse_decode.o.write.A.json"},
      {"violation unlike the signature", "",
       [](auto& d) { d["finding"]["violation"] = {{"buffer", "q"}}; }, "",
       "finding.violation.buffer \"q\" is not the signature's buffer 'o'"},
      {"huge reproduce.size", "",
       [](auto& d) { d["finding"]["reproduce"] = {{"size", int64_t{1} << 40}}; }, "",
       "finding.reproduce.size must be in 1..1000"},
      {"shrink_path item negative", "",
       [](auto& d) { d["finding"]["reproduce"] = {{"shrink_path", {0, -3}}}; }, "",
       "finding.reproduce.shrink_path[1] must be in 0..999999 (got -3)"},
      {"unknown reproduce key", "",
       [](auto& d) { d["finding"]["reproduce"] = {{"sizes", 3}}; }, "",
       "finding.reproduce.sizes: unknown key"},
  };
  for (const Bad& b : bad) {
    const fs::path dir = TempDir("badfinding");
    const fs::path out = TempDir("badfinding_out");
    fs::create_directories(dir);
    const std::string name = b.file.empty() ? FindingFileName(sig) : b.file;
    std::ofstream(dir / name) << SeedFinding(sig, b.edit);
    auto m = MergeFindingDirs({dir.string()}, out.string());
    EXPECT_FALSE(m.ok()) << "accepted: " << b.what;
    if (!m.ok()) {
      EXPECT_EQ(m.status().field(), (dir / name).string() + b.field_suffix) << b.what;
      EXPECT_NE(m.status().message().find(b.reason), std::string::npos)
          << b.what << ": " << m.status().message();
    }
    EXPECT_FALSE(fs::exists(out)) << b.what << ": nothing is written";
    fs::remove_all(dir);
    fs::remove_all(out);
  }
  // The unedited file is a finding merge keeps (the table's edits are what it refuses).
  const fs::path dir = TempDir("goodfinding");
  fs::create_directories(dir);
  std::ofstream(dir / FindingFileName(sig)) << SeedFinding(sig);
  auto m = MergeFindingDirs({dir.string()}, "");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->findings.count(sig), 1u);
  fs::remove_all(dir);
}

// Shards of one campaign split two ways (0/1 and 1/2) cover the same seed indices: merging them
// would count those cases twice. Mutant: without CheckOneSplit merge reports 0/1's and 1/2's
// cases summed.
TEST(FuzzMerge, ShardsOfTwoSplitsOfOneCampaignAreRefused) {
  const fs::path whole = TempDir("split_whole"), half = TempDir("split_half");
  CampaignOptions o = Quiet(whole.string());
  o.max_cases = 4;
  ASSERT_TRUE(RunCampaign(o, nullptr).ok());
  o.out_dir = half.string();
  o.shard = 1;
  o.shards = 2;
  ASSERT_TRUE(RunCampaign(o, nullptr).ok());
  auto m = MergeFindingDirs({whole.string(), half.string()}, "");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().field(), "DIR");
  EXPECT_NE(m.status().message().find("(shard 0/1) and "), std::string::npos)
      << m.status().message();
  EXPECT_NE(m.status().message().find("(shard 1/2) are shards of one campaign split two ways"),
            std::string::npos)
      << m.status().message();
  // Another campaign (another seed) split otherwise is merged: its cases are others.
  fs::remove_all(half);
  o.seed = 8;
  ASSERT_TRUE(RunCampaign(o, nullptr).ok());
  auto other = MergeFindingDirs({whole.string(), half.string()}, "");
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_EQ(other->shards.size(), 2u);
  fs::remove_all(whole);
  fs::remove_all(half);
}

TEST(FuzzMerge, BadFoldersAndFilesAreRefusedNamingThem) {
  const fs::path dir = TempDir("badmerge");
  fs::create_directories(dir);
  auto missing = MergeFindingDirs({(dir / "nope").string()}, "");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().field(), "DIR");
  EXPECT_EQ(missing.status().message(), (dir / "nope").string() + " does not exist");
  std::ofstream(dir / "file") << "x";
  auto notdir = MergeFindingDirs({(dir / "file").string()}, "");
  ASSERT_FALSE(notdir.ok());
  EXPECT_NE(notdir.status().message().find("not a directory"), std::string::npos);
  fs::remove(dir / "file");
  // A folder with no progress file and no finding is no shard's output (round 9), JSON without a
  // finding in it or not; beside a finding that JSON is skipped and listed. A malformed one is an
  // error naming it.
  std::ofstream(dir / "scenario.json") << "{\"name\": \"plain\"}\n";
  auto none = MergeFindingDirs({dir.string()}, "");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().field(), "DIR");
  EXPECT_EQ(none.status().message(),
            dir.string() +
                " holds no shard output: no progress file (.progress-I-of-N) and no finding file "
                "(*.json with a finding); its 1 .json file(s) hold no finding; name the --out "
                "folder of a fuzz campaign");
  std::ofstream(dir / FindingFileName("x|y|q|read|A")) << SeedFinding("x|y|q|read|A");
  auto skipped = MergeFindingDirs({dir.string()}, "");
  ASSERT_TRUE(skipped.ok()) << skipped.status().field() << ": " << skipped.status().message();
  EXPECT_EQ(skipped->skipped, std::vector<std::string>{(dir / "scenario.json").string()});
  std::ofstream(dir / "broken.json") << "{\"finding\": ";
  auto broken = MergeFindingDirs({dir.string()}, "");
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().field(), (dir / "broken.json").string());
  std::ofstream(dir / "broken.json") << "{\"finding\": {\"signature\": 3}}";
  broken = MergeFindingDirs({dir.string()}, "");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("finding.signature"), std::string::npos);
  std::ofstream(dir / "broken.json") << "{\"finding\": {\"signature\": \"a|b|o|write|B\", \"seed_index\": -1}}";
  broken = MergeFindingDirs({dir.string()}, "");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("seed_index"), std::string::npos);
  std::ofstream(dir / "broken.json") << "{\"finding\": {\"signature\": \"a|b|o|write|B\", \"shrink\": 2}}";
  broken = MergeFindingDirs({dir.string()}, "");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("finding.shrink"), std::string::npos);
  // A finding of an older campaign (no seed_index, no shrink) is merged, its index unknown.
  fs::remove(dir / "broken.json");
  std::ofstream(dir / FindingFileName("a|b|o|write|B")) << SeedFinding("a|b|o|write|B");
  auto old = MergeFindingDirs({dir.string()}, "");
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_FALSE(old->findings.at("a|b|o|write|B").seed_index.has_value());
  EXPECT_EQ(old->findings.at("a|b|o|write|B").max_shrink_steps, -1);
  fs::remove(dir / FindingFileName("a|b|o|write|B"));
  fs::remove(dir / FindingFileName("x|y|q|read|A"));
  std::ofstream(dir / ".progress-0-of-1") << "{}";
  auto prog = MergeFindingDirs({dir.string()}, "");
  ASSERT_FALSE(prog.ok());
  EXPECT_EQ(prog.status().field(), (dir / ".progress-0-of-1").string());
  fs::remove_all(dir);
}

TEST(FindingFiles, ShellQuoteKeepsShellsFromGlobbingOrSplitting) {
  EXPECT_EQ(ShellQuote("[3,0,1]"), "'[3,0,1]'");
  EXPECT_EQ(ShellQuote("[]"), "'[]'");
  EXPECT_EQ(ShellQuote("atom-2026-08"), "atom-2026-08");
  EXPECT_EQ(ShellQuote("a b"), "'a b'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("*"), "'*'");
}

TEST(FindingFiles, AtomicWritesLeaveNoTempFileBehind) {
  const fs::path dir = TempDir("atomic");
  fs::create_directories(dir);
  ASSERT_TRUE(
      WriteFileAtomic((dir / "a.json").string(), (dir / ".t").string(), "abc", "--out").ok());
  EXPECT_EQ(ReadDir(dir.string()), (std::map<std::string, std::string>{{"a.json", "abc"}}));
  // A stale temp file of a killed writer is replaced, and gone afterwards.
  std::ofstream(dir / ".t") << "stale";
  ASSERT_TRUE(
      WriteFileAtomic((dir / "a.json").string(), (dir / ".t").string(), "de", "--out").ok());
  EXPECT_EQ(ReadDir(dir.string()), (std::map<std::string, std::string>{{"a.json", "de"}}));
  // Into a folder that is gone: an error naming the field and the path, and no temp file.
  Status st =
      WriteFileAtomic((dir / "no" / "b.json").string(), (dir / "no" / ".t").string(), "x", "--out");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.field(), "--out");
  EXPECT_EQ(st.message(), "cannot write " + (dir / "no" / "b.json").string() + ": the folder " +
                              (dir / "no").string() + " does not exist");
  // The rename fails (the target is a non-empty folder): the temp file is removed.
  fs::create_directories(dir / "c.json" / "x");
  st = WriteFileAtomic((dir / "c.json").string(), (dir / ".t").string(), "x", "--out");
  ASSERT_FALSE(st.ok());
  EXPECT_FALSE(fs::exists(dir / ".t"));
  fs::remove_all(dir);
}

// A progress file with `key` set to `value`.
std::string ProgressWith(const std::string& key, const nlohmann::json& value) {
  Progress p;
  p.identity.profiles = {"atom-2026-08"};
  auto doc = nlohmann::json::parse(ProgressText(p));
  if (value.is_discarded())
    doc.erase(key);
  else
    doc[key] = value;
  return doc.dump();
}

TEST(ProgressFiles, EveryFieldIsCheckedWithItsBoundaries) {
  const fs::path dir = TempDir("progress");
  fs::create_directories(dir);
  const std::string path = (dir / ".progress-0-of-1").string();
  auto read = [&](const std::string& text) {
    std::ofstream(path) << text;
    return ReadProgressFile(path, "--resume");
  };
  const nlohmann::json drop = nlohmann::json::value_t::discarded;
  for (const auto& [value, ok] :
       std::vector<std::pair<nlohmann::json, bool>>{{0, true},
                                                    {int64_t{1} << 50, true},
                                                    {(int64_t{1} << 50) + 1, false},
                                                    {-1, false},
                                                    {1.5, false}}) {
    auto p = read(ProgressWith("next_index", value));
    EXPECT_EQ(p.ok(), ok) << value;
    if (ok) {
      EXPECT_EQ(p->next_index, value.get<int64_t>());
    } else {
      EXPECT_NE(p.status().message().find("next_index"), std::string::npos);
    }
  }
  for (const auto& [value, ok] :
       std::vector<std::pair<nlohmann::json, bool>>{{0.0, true}, {-0.5, false}, {"1", false}})
    EXPECT_EQ(read(ProgressWith("seconds_spent", value)).ok(), ok) << value;
  auto old = read(ProgressWith("format", drop));
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.status().message().find("older mlasim"), std::string::npos);
  EXPECT_FALSE(read(ProgressWith("format", 3)).ok());
  EXPECT_FALSE(read(ProgressWith("shard", 1)).ok());  // shard 1 of 1
  EXPECT_FALSE(read(ProgressWith("signatures", nlohmann::json::array({1}))).ok());
  EXPECT_FALSE(read(ProgressWith("max_shrink_steps", 100001)).ok());
  auto missing = read(ProgressWith("next_index", drop));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().field(), "--resume");
  EXPECT_NE(missing.status().message().find("missing next_index"), std::string::npos);
  EXPECT_FALSE(read("[1]").ok());
  EXPECT_FALSE(read("{").ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mlasim::fuzz
