// Issue 20 §2 (swarm generation) and §3 (the effectiveness benchmark): --swarm off keeps the
// generator of before, byte for byte; a swarm case's left-out options are never drawn; swarm
// campaigns are the same at any --jobs and count their configurations in the coverage summary;
// swarm reaches a combination the default weights make rare. The CLI side is in
// tests/cli/cli_fuzz_test.cpp (CliSwarm.*).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "fuzz/campaign.h"
#include "fuzz/effectiveness.h"
#include "fuzz/mutants.h"
#include "fuzz/progress.h"
#include "fuzz/properties.h"
#include "fuzz/scenario_gen.h"
#include "sim/known_bugs.h"
#include "sim/scenario_json.h"

namespace mlasim::fuzz {
namespace {

namespace fs = std::filesystem;

uint64_t Fnv(const std::string& bytes, uint64_t h) {
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// FNV-1a over `mlasim fuzz --reproduce SEED --size 10 + 7 * SEED % 91` for seeds 1..40: the CLI's
// output (JSON, indent 2, newline) of each case.
uint64_t DigestOfCases(const GenConfig& config) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    const int size = static_cast<int>(10 + (seed * 7) % 91);
    const sim::Scenario s = ScenarioFromSeed(config, seed, size).value();
    h = Fnv(sim::ScenarioToJson(s).dump(2) + "\n", h);
  }
  return h;
}

TEST(SwarmOff, FixedSeedsGiveTheCasesOfTheGeneratorBeforeSwarmByteForByte) {
  // The digests were taken from `mlasim fuzz --reproduce` of main at f1d66a1, before swarm.
  GenConfig plain;
  plain.profiles = {"atom-2026-08"};
  EXPECT_EQ(DigestOfCases(plain), 0xe46ad9e3ca30e86cull);
  GenConfig every;  // --small, two profiles, every --generate family
  every.profiles = {"atom-2026-08", "atom-2026-11"};
  every.small = true;
  every.max_batch = 64;
  ASSERT_TRUE(EnableFamilies({"hostile-indices", "disagreements", "paged"}, &every).ok());
  // Since issue 10's review the generator keeps only the index values a fill places
  // (sim/index_values.h): the cases of f1d66a1 (0xab5e6c217f3cff79) less the values no fill of
  // their step placed, which changed nothing but the JSON (IndexValues.GeneratedCasesHoldOnly...).
  EXPECT_EQ(DigestOfCases(every), 0x85a83a7bb1579166ull);
  // One of them in full: seed 6 at size 10.
  EXPECT_EQ(
      sim::ScenarioToJson(ScenarioFromSeed(plain, 6, 10).value()).dump(),
      R"({"allocator":{"live_before_call":[],"model":"caching","page_bytes":65536,"segment_bytes":2097152},"batch":{"contexts":[2],"rejected":[0],"rejected_prev":[0]},"description":"","engine":"atom-2026-08","graph":{"capture_sizes":[6,8],"eager":false,"max_model_len":163840,"max_num_batched_tokens":16384,"max_num_seqs":512},"kernel":"opus","model":{"heads":256,"kv_dtype":"fp8","kv_lora_rank":512,"model_dtype":"bf16","name":"model","rope_dim":64,"sparse":false,"topk":64},"mtp":{"k":1},"name":"fuzz","parallelism":{"dcp":1,"dcp_interleave":1,"dp":1,"dp_scheduled_tokens":[],"tp":4},"planner":"aiter-dispatch","revision":"2026-08","target":"gfx950","zero_kv_reads_index_row":false})");
  // Swarm on draws its masks first: the same seed gives another case.
  GenConfig swarm = plain;
  swarm.swarm = true;
  EXPECT_NE(DigestOfCases(swarm), 0xe46ad9e3ca30e86cull);
}

TEST(Swarm, KnobsFollowTheConfig) {
  GenConfig c;
  EXPECT_TRUE(SwarmKnobs(c).empty());  // swarm off: nothing drawn
  EXPECT_TRUE(SwarmFromSeed(c, 3, 20).omitted.empty());
  c.swarm = true;
  std::vector<std::string> names;
  for (const SwarmKnob& k : SwarmKnobs(c)) names.push_back(k.name);
  // Two default profiles; no --generate family enabled.
  EXPECT_EQ(names, (std::vector<std::string>{"profile", "model", "mtp_k", "kv_dtype", "graph",
                                             "dcp", "dp", "kernel", "allocator", "kv_granularity",
                                             "max_split", "topk_lengths"}));
  EXPECT_EQ(SwarmKnobs(c)[7].options, (std::vector<std::string>{"asm", "opus", "hk"}));
  c.profiles = {"atom-2026-08"};
  c.sparse_only = true;
  c.allow_dcp = false;
  ASSERT_TRUE(EnableFamilies({"disagreements"}, &c).ok());
  names.clear();
  for (const SwarmKnob& k : SwarmKnobs(c)) names.push_back(k.name);
  EXPECT_EQ(names, (std::vector<std::string>{"mtp_k", "kv_dtype", "graph", "dp", "kernel",
                                             "allocator", "kv_granularity", "max_split",
                                             "topk_lengths", "disagreements"}));
  EXPECT_EQ(SwarmKnobs(c).back().options.size(), 7u);
}

// Campaigns generate a case once (ScenarioAndSwarmFromSeed) and take its swarm from that run:
// the same scenario, byte for byte, and the same masks as the two calls it replaces.
TEST(Swarm, OneGeneratorRunGivesTheCaseAndTheSwarmOfTwo) {
  GenConfig swarm;
  swarm.swarm = true;
  swarm.small = true;
  swarm.max_batch = 64;
  GenConfig families = swarm;
  ASSERT_TRUE(
      EnableFamilies({"hostile-indices", "disagreements", "paged", "ragged-q"}, &families).ok());
  GenConfig off;  // swarm off: no masks
  int64_t narrowed = 0;
  for (const GenConfig* c : {&swarm, &families, &off}) {
    for (uint64_t seed = 1; seed <= 150; ++seed) {
      const int size = static_cast<int>(10 + seed % 91);
      SwarmDraw d;
      const sim::Scenario s = ScenarioAndSwarmFromSeed(*c, seed, size, &d);
      EXPECT_EQ(sim::ScenarioToJson(s).dump(),
                sim::ScenarioToJson(ScenarioFromSeed(*c, seed, size).value()).dump())
          << "seed " << seed;
      EXPECT_EQ(d.omitted, SwarmFromSeed(*c, seed, size).omitted) << "seed " << seed;
      for (uint32_t m : d.omitted) narrowed += m != 0;
    }
  }
  EXPECT_GT(narrowed, 1000);  // the masks compared are mostly not empty
}

// Whether scenario `s` drew option `option` of knob `knob`.
bool Drew(const sim::Scenario& s, const std::string& knob, const std::string& option) {
  if (knob == "model") return s.model.sparse == (option == "sparse");
  if (knob == "kernel") return s.kernel == option;
  if (knob == "graph") return s.graph.eager == (option == "eager");
  if (knob == "dcp") return (s.parallel.dcp > 1) == (option == "on");
  if (knob == "dp") return (s.parallel.dp > 1) == (option == "on");
  if (knob == "kv_dtype") return (s.model.kv_dtype == ref::DType::kFp8) == (option == "fp8");
  if (knob == "profile") return s.engine.name == option;
  if (knob == "mtp_k")
    return option == "0" ? s.mtp_k == 0 : option == "1" ? s.mtp_k == 1 : s.mtp_k >= 2;
  if (knob == "allocator")
    return (s.allocator.model == sim::AllocatorModel::kExact) == (option == "exact");
  if (knob == "kv_granularity") return std::to_string(s.kv_granularity) == option;
  return false;  // not checked here
}

TEST(Swarm, ALeftOutOptionIsNeverDrawnAndTheDrawsAreTheCasesOwn) {
  GenConfig c;
  c.swarm = true;
  c.small = true;
  c.max_batch = 64;
  const std::vector<SwarmKnob> knobs = SwarmKnobs(c);
  int64_t left_out = 0, checked = 0, narrowed_cases = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    const int size = static_cast<int>(10 + seed % 91);
    const sim::Scenario s = ScenarioFromSeed(c, seed, size).value();
    const SwarmDraw d = SwarmFromSeed(c, seed, size);
    ASSERT_EQ(d.omitted.size(), knobs.size());
    bool narrowed = false;
    for (size_t k = 0; k < knobs.size(); ++k) {
      const uint32_t all = (1u << knobs[k].options.size()) - 1;
      EXPECT_NE(d.omitted[k], all) << "a knob keeps at least one option";
      narrowed |= d.omitted[k] != 0;
      for (size_t i = 0; i < knobs[k].options.size(); ++i) {
        if (!(d.omitted[k] >> i & 1u)) continue;
        ++left_out;
        if (knobs[k].name == "topk_lengths" || knobs[k].name == "max_split") continue;
        ++checked;
        EXPECT_FALSE(Drew(s, knobs[k].name, knobs[k].options[i]))
            << "seed " << seed << " left " << knobs[k].name << "." << knobs[k].options[i]
            << " out but drew it";
      }
    }
    narrowed_cases += narrowed ? 1 : 0;
  }
  // Each option out with probability 1/2 (all-out counts as none): about 11 per case.
  EXPECT_EQ(left_out, 2738);  // 9.125 expected per case: 2737.5
  EXPECT_EQ(checked, 2241);
  EXPECT_EQ(narrowed_cases, 300);
}

// Cases among `n` (seed indices 0..n-1 of base seed 11, as a campaign draws them) with DCP,
// eager mode, a bf16 KV cache and the HK kernel at once: 1 in 560 by the default weights.
int64_t RareCombination(bool swarm, int64_t n) {
  GenConfig c;
  c.profiles = {"atom-2026-08"};
  c.small = true;
  c.max_batch = 64;
  c.swarm = swarm;
  int64_t hits = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t seed = 11 * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(i);
    const sim::Scenario s = ScenarioFromSeed(c, seed, static_cast<int>(10 + i % 91)).value();
    hits += s.parallel.dcp > 1 && s.graph.eager && s.model.kv_dtype == ref::DType::kBf16 &&
                    s.kernel == "hk"
                ? 1
                : 0;
  }
  return hits;
}

// The campaign counts a case's omitted options through SwarmOptionKeys, made once: the keys its
// draw's bits name are SwarmOmittedNames of the draw, prefixed, in the same order, for every
// config the generator families and --small give (and none without swarm).
TEST(Swarm, OptionKeysNameWhatSwarmOmittedNamesNames) {
  GenConfig plain;
  EXPECT_TRUE(SwarmOptionKeys(plain, "swarm-out:").empty());
  int64_t named = 0;
  for (int variant = 0; variant < 3; ++variant) {
    GenConfig c;
    c.swarm = true;
    c.small = variant != 1;
    if (c.small) c.max_batch = 64;
    if (variant == 2) {
      ASSERT_TRUE(EnableFamilies(GeneratorFamilies(), &c).ok());
    }
    const std::vector<std::vector<std::string>> keys = SwarmOptionKeys(c, "swarm-out:");
    const std::vector<SwarmKnob> knobs = SwarmKnobs(c);
    ASSERT_EQ(keys.size(), knobs.size());
    for (size_t k = 0; k < knobs.size(); ++k) ASSERT_EQ(keys[k].size(), knobs[k].options.size());
    EXPECT_EQ(keys[0][0], "swarm-out:" + knobs[0].name + "." + knobs[0].options[0]);
    for (uint64_t seed = 1; seed <= 100; ++seed) {
      const SwarmDraw d = SwarmFromSeed(c, seed, static_cast<int>(10 + seed % 91));
      std::vector<std::string> want;
      for (const std::string& n : SwarmOmittedNames(c, d)) want.push_back("swarm-out:" + n);
      std::vector<std::string> got;
      for (size_t k = 0; k < keys.size() && k < d.omitted.size(); ++k)
        for (size_t i = 0; i < keys[k].size(); ++i)
          if (d.omitted[k] >> i & 1u) got.push_back(keys[k][i]);
      ASSERT_EQ(got, want) << "variant " << variant << " seed " << seed;
      named += static_cast<int64_t>(got.size());
    }
  }
  EXPECT_GT(named, 300);
}

TEST(Swarm, ReachesACombinationTheDefaultWeightsMakeRare) {
  // 2000 cases: about 3.6 expected without swarm (1/560), about 28 with it (0.32 x 0.3 x 0.5 x
  // 0.29: each feature's own option left in, or its rival left out).
  EXPECT_EQ(RareCombination(false, 2000), 2);
  EXPECT_EQ(RareCombination(true, 2000), 29);
}

fs::path TempDir(const std::string& name) {
  const fs::path p =
      fs::temp_directory_path() / ("mlasim_swarm_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(p);
  return p;
}

std::map<std::string, std::string> ReadDir(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().rfind(".progress", 0) == 0) continue;  // holds seconds
    std::ifstream f(e.path());
    std::stringstream b;
    b << f.rdbuf();
    files[e.path().filename().string()] = b.str();
  }
  return files;
}

CampaignOptions SwarmCampaign(int32_t jobs, const fs::path& dir) {
  CampaignOptions o;
  o.seed = 7;
  o.max_cases = 60;
  o.seconds = std::numeric_limits<double>::infinity();
  o.small = true;
  o.swarm = true;
  o.jobs = jobs;
  o.out_dir = dir.string();
  return o;
}

TEST(SwarmCampaign, SameFindingsAndCoverageAtOneAndTwoJobs) {
  const fs::path d1 = TempDir("jobs1"), d2 = TempDir("jobs2");
  auto one = RunCampaign(SwarmCampaign(1, d1), nullptr);
  auto two = RunCampaign(SwarmCampaign(2, d2), nullptr);
  ASSERT_TRUE(one.ok() && two.ok());
  EXPECT_EQ(one->signatures, two->signatures);
  EXPECT_EQ(one->coverage, two->coverage);
  EXPECT_EQ(ReadDir(d1), ReadDir(d2));
  EXPECT_EQ(one->findings.size(), 13u);
  EXPECT_EQ(one->signatures.size(), one->findings.size());  // no slippage under swarm either
  for (const auto& [sig, f] : one->findings) {
    std::ifstream in(f.file);
    std::stringstream b;
    b << in.rdbuf();
    EXPECT_NE(b.str().find("--swarm on"), std::string::npos) << f.file;
  }
  // The coverage summary counts the swarm configurations of the 60 cases.
  // P(asm left out) = 3/8, P(dcp.off left out) = 1/4: 22.5 and 15 expected.
  EXPECT_EQ(one->coverage.at("swarm-out:kernel.asm"), 25);
  EXPECT_EQ(one->coverage.at("swarm-out:dcp.off"), 13);
  EXPECT_EQ(one->coverage.count("swarm-out:profile.atom-2026-08"), 0u);  // one profile: not drawn
  fs::remove_all(d1);
  fs::remove_all(d2);
  // Swarm off: no swarm counts.
  CampaignOptions off = SwarmCampaign(1, d1);
  off.swarm = false;
  auto o = RunCampaign(off, nullptr);
  ASSERT_TRUE(o.ok());
  for (const auto& [k, v] : o->coverage) EXPECT_NE(k.rfind("swarm-out:", 0), 0u) << k;
  fs::remove_all(d1);
}

// Every case counts one key of each feature, the numbers spelled in decimal after the prefix
// (the campaign spells keys in a reused buffer: a key must never keep a longer one's tail).
TEST(SwarmCampaign, CoverageCountsOneKeyPerFeatureAndCase) {
  const fs::path d = TempDir("coverage");
  auto sum = RunCampaign(SwarmCampaign(1, d), nullptr);
  ASSERT_TRUE(sum.ok());
  std::map<std::string, int64_t> family;  // prefix -> cases counted under it
  std::map<std::string, int64_t> numbered;
  for (const auto& [k, v] : sum->coverage) {
    for (const char* prefix :
         {"mtp_k:", "heads_per_rank:", "kv_granularity:", "kernel:", "target:", "revision:",
          "profile:", "planner:", "model:", "graph:", "allocator:", "batch:", "max_split:"})
      if (k.rfind(prefix, 0) == 0) family[prefix] += v;
    if (k.rfind("mtp_k:", 0) == 0 || k.rfind("heads_per_rank:", 0) == 0 ||
        k.rfind("kv_granularity:", 0) == 0)
      numbered[k] = v;
  }
  for (const auto& [prefix, n] : family) EXPECT_EQ(n, 60) << prefix;
  EXPECT_EQ(family.size(), 13u);
  const std::map<std::string, int64_t> want_numbered = {
      {"heads_per_rank:128", 4}, {"heads_per_rank:16", 22}, {"heads_per_rank:24", 6},
      {"heads_per_rank:32", 9},  {"heads_per_rank:48", 2},  {"heads_per_rank:64", 9},
      {"heads_per_rank:8", 8},   {"kv_granularity:16", 19}, {"kv_granularity:32", 9},
      {"kv_granularity:64", 17}, {"kv_granularity:8", 15},  {"mtp_k:0", 18},
      {"mtp_k:1", 19},           {"mtp_k:2", 21},           {"mtp_k:3", 2}};
  EXPECT_EQ(numbered, want_numbered);
  fs::remove_all(d);
}

TEST(SwarmCampaign, AResumeWithTheOtherModeIsRefused) {
  const fs::path dir = TempDir("resume");
  CampaignOptions o = SwarmCampaign(1, dir);
  o.max_cases = 2;
  ASSERT_TRUE(RunCampaign(o, nullptr).ok());
  o.max_cases = 4;
  o.resume = true;
  o.swarm = false;
  auto other = RunCampaign(o, nullptr);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().field(), "--resume");
  EXPECT_NE(other.status().message().find("swarm true, this run false"), std::string::npos)
      << other.status().message();
  o.swarm = true;
  auto same = RunCampaign(o, nullptr);
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_EQ(same->resumed_at, 2);
  // A progress file of a version before swarm (no "swarm" key) is a campaign with swarm off.
  const fs::path p = dir / ProgressFileName(0, 1);
  auto prog = ReadProgressFile(p.string(), "--resume");
  ASSERT_TRUE(prog.ok());
  EXPECT_TRUE(prog->identity.swarm);
  nlohmann::json doc = nlohmann::json::parse(ProgressText(*prog));
  doc.erase("swarm");
  std::ofstream(p) << doc.dump() << '\n';
  auto old = ReadProgressFile(p.string(), "--resume");
  ASSERT_TRUE(old.ok());
  EXPECT_FALSE(old->identity.swarm);
  doc["swarm"] = "yes";
  std::ofstream(p) << doc.dump() << '\n';
  auto bad = ReadProgressFile(p.string(), "--resume");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("swarm must be true or false"), std::string::npos);
  fs::remove_all(dir);
}

TEST(Effectiveness, CensoredMedian) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(std::isnan(CensoredMedian({})));
  EXPECT_EQ(CensoredMedian({5}), 5);
  EXPECT_EQ(CensoredMedian({9, 1, 5}), 5);
  EXPECT_EQ(CensoredMedian({4, 1, 8, 2}), 3);
  EXPECT_EQ(CensoredMedian({1, inf, 3}), 3);         // one seed of three did not detect
  EXPECT_EQ(CensoredMedian({1, inf, 3, inf}), inf);  // half did not: the median is censored
  EXPECT_EQ(CensoredMedian({inf}), inf);
}

TEST(Effectiveness, EveryMutantAndKnownFamilyIsATarget) {
  const std::vector<EffectTarget> t = EffectivenessTargets(true);
  ASSERT_EQ(t.size(), MutantRegistry().size() + sim::KnownBugs().size());
  EXPECT_EQ(t.front().name, "engine-sparse-plan-over-running-tokens");
  EXPECT_EQ(t.back().name, sim::KnownBugs().back().name);
  EXPECT_EQ(t.back().kind, "known bug");
  EXPECT_TRUE(t.front().UsesGenerator());
}

const EffectTarget& Target(const std::vector<EffectTarget>& all, const std::string& name) {
  for (const EffectTarget& t : all)
    if (t.name == name) return t;
  ADD_FAILURE() << "no target " << name;
  return all.front();
}

TEST(Effectiveness, CasesToDetectionAreDeterministic) {
  const std::vector<EffectTarget> all = EffectivenessTargets(true);
  const EffectTarget& family = Target(all, "atom-sparse-mtp-plan-over-running-tokens");
  const SeedSearch off = SearchTarget(family, false, 1, 200);
  EXPECT_TRUE(off.detected);
  EXPECT_EQ(off.cases, 9);
  EXPECT_EQ(SearchTarget(family, false, 1, 200).cases, off.cases);
  const SeedSearch on = SearchTarget(family, true, 1, 200);
  EXPECT_TRUE(on.detected);
  EXPECT_EQ(on.cases, 9);
  // A budget below the detecting case: not detected, the whole budget run.
  const SeedSearch cut = SearchTarget(family, false, 1, off.cases - 1);
  EXPECT_FALSE(cut.detected);
  EXPECT_EQ(cut.cases, off.cases - 1);
  // A numerics mutant: its own kill search, case by case.
  const SeedSearch n = SearchTarget(Target(all, "reduce-merges-a-piece-twice"), false, 1, 200);
  EXPECT_TRUE(n.detected);
  EXPECT_EQ(n.cases, 3);
}

TEST(Effectiveness, ReportRowsAndErrors) {
  EffectivenessOptions o;
  o.seeds = 2;
  o.max_cases = 5;
  o.only = {"atom-sparse-mtp-plan-over-running-tokens"};
  auto r = EffectivenessReport(o, nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // Budget 5: seed 1 detects at case 9 in both modes (CasesToDetectionAreDeterministic), so
  // neither mode reports it within 5 cases on seeds 1 and 2, under either shrink policy: listed
  // as not found, not left out.
  const std::string none = "0/2 **not found within the budget** | > 5 | not found";
  for (const char* mode : {"on", "off"})
    EXPECT_NE(r->find(std::string("| atom-sparse-mtp-plan-over-running-tokens | known bug | A | ") +
                      mode + " | " + none + " | " + none + " |\n"),
              std::string::npos)
        << *r;
  // The campaigns that looked for it: one row per swarm mode and policy.
  for (const char* row : {"| on | per-signature | 2 | 5 |", "| on | first-failure | 2 | 5 |",
                          "| off | per-signature | 2 | 5 |", "| off | first-failure | 2 | 5 |"})
    EXPECT_NE(r->find(row), std::string::npos) << row << '\n' << *r;
  auto field = [](EffectivenessOptions bad) {
    auto s = EffectivenessReport(bad, nullptr);
    return s.ok() ? std::string("ok") : s.status().field();
  };
  EffectivenessOptions b = o;
  b.seeds = 0;
  EXPECT_EQ(field(b), "--seeds");
  b.seeds = 1001;
  EXPECT_EQ(field(b), "--seeds");
  b = o;
  b.max_cases = 0;
  EXPECT_EQ(field(b), "--cases");
  b.max_cases = 1000001;
  EXPECT_EQ(field(b), "--cases");
  b = o;
  b.signature_cases = -1;
  EXPECT_EQ(field(b), "--signature-cases");
  b = o;
  b.only = {"no-such-target"};
  EXPECT_EQ(field(b), "--only");
}

}  // namespace
}  // namespace mlasim::fuzz
