// Tests of `mlasim triage` (tools/mlasim/cmd_triage.cpp, fuzz/triage.h), run in-process: the
// founding report (61 requests padded to 64, TP 8, MTP K 3, GLM-5.2-like sparse MLA, ATOM before
// the fix) names the padded-MTP family of ATOM #2715 with a nonzero overrun share, and the fixing
// profile has none; the same bytes at --jobs 1 and 2; examples written with --out replay to the
// same family with the report's fields kept; every bad flag exits 2 naming it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz/triage.h"
#include "sim/call_table.h"
#include "sim/known_bugs.h"
#include "sim/replay.h"
#include "sim/scenario_json.h"
#include "tools/mlasim/cli.h"

namespace mlasim::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct CliResult {
  int exit_code = -1;
  std::string out, err;
};

CliResult Triage(std::vector<std::string> args) {
  args.insert(args.begin(), "triage");
  std::ostringstream out, err;
  CliResult r;
  r.exit_code = RunMlasim(args, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

// The founding report as a user types it, with a small budget.
std::vector<std::string> Founding(const std::string& profile, const std::string& cases = "24") {
  return {"--model",        "glm-5.2", "--tp",     "8",      "--mtp-k",   "3",     "--batch", "61",
          "--graph",        "64",      "--target", "gfx950", "--profile", profile, "--cases", cases,
          "--shrink-steps", "2",       "--json"};
}

const json* Family(const json& j, const std::string& name) {
  for (const json& f : j["families"])
    if (f["name"] == name) return &f;
  return nullptr;
}

TEST(TriageCli, TheFoundingReportNamesThePaddedMtpFamilyAndTheFixRemovesIt) {
  CliResult r = Triage(Founding("atom-2026-08"));
  ASSERT_EQ(r.exit_code, 1) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["report"]["batch"], 61);
  EXPECT_EQ(j["report"]["graph"], 64);
  EXPECT_EQ(j["cases"], 24);
  ASSERT_EQ(j["combos"].size(), 6u);  // 3 kernels x 2 allocators
  int64_t overrun = 0, cases = 0;
  for (const json& c : j["combos"]) {
    EXPECT_EQ(c["profile"], "atom-2026-08");
    EXPECT_EQ(c["cases"], 4);
    overrun += c["overrun"].get<int64_t>();
    cases += c["cases"].get<int64_t>();
  }
  EXPECT_GT(overrun, 0);
  EXPECT_EQ(cases, 24);
  const json* f = Family(j, "atom-sparse-mtp-plan-over-running-tokens");
  ASSERT_NE(f, nullptr) << r.out;
  EXPECT_EQ((*f)["upstream"], "ATOM #2715");
  EXPECT_EQ((*f)["fixed_in"], "atom-2026-11");
  EXPECT_GT((*f)["cases"].get<int64_t>(), 0);
  // The example keeps the report: 61 requests, K 3, TP 8, graph 64, the pre-fix profile.
  const json& ex = (*f)["example"]["scenario"];
  EXPECT_EQ(ex["batch"]["contexts"].size(), 61u);
  EXPECT_EQ(ex["mtp"]["k"], 3);
  EXPECT_EQ(ex["parallelism"]["tp"], 8);
  EXPECT_EQ(ex["graph"]["capture_sizes"], json::array({64}));
  EXPECT_EQ(ex["engine"], "atom-2026-08");  // the preset's own flags: written as its name

  r = Triage(Founding("atom-2026-11"));
  const json fixed = json::parse(r.out);
  for (const json& c : fixed["combos"]) {
    EXPECT_EQ(c["overrun"], 0) << c.dump();
    EXPECT_EQ(c["fault"], 0) << c.dump();
    EXPECT_EQ(c["corrupt"], 0) << c.dump();
  }
  EXPECT_EQ(Family(fixed, "atom-sparse-mtp-plan-over-running-tokens"), nullptr) << r.out;
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

TEST(TriageCli, SameBytesAtOneAndTwoJobs) {
  std::vector<std::string> a = Founding("atom-2026-08,atom-2026-11", "18");
  a.push_back("--jobs");
  std::vector<std::string> b = a;
  a.push_back("1");
  b.push_back("2");
  const CliResult one = Triage(a), two = Triage(b);
  EXPECT_EQ(one.exit_code, 1);
  EXPECT_EQ(one.out, two.out);
  EXPECT_EQ(one.exit_code, two.exit_code);
  // Another seed sweeps other batches.
  a.back() = "1";
  a.push_back("--seed");
  a.push_back("2");
  EXPECT_NE(Triage(a).out, one.out);
}

TEST(TriageCli, ExamplesWrittenWithOutReplayToTheirFamily) {
  const fs::path dir =
      fs::temp_directory_path() / ("mlasim_triage_out_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  std::vector<std::string> args = Founding("atom-2026-08", "6");
  args.pop_back();  // text
  args.push_back("--kernel");
  args.push_back("asm");
  args.push_back("--allocator");
  args.push_back("exact");
  args.push_back("--out");
  args.push_back(dir.string());
  const CliResult r = Triage(args);
  ASSERT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("triage: glm-5.2 (64 heads, sparse top-k 2048, KV fp8), TP 8, DP 1, MTP "
                       "K 3, batch 61 (padded to 64), gfx950 aiter 2026-08; 6 cases, seed 1\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("profile       kernel allocator  cases  ran  overrun    fault  corrupt  "
                       "refused\n"
                       "atom-2026-08  asm    exact          6    6    83.3%    83.3%     0.0%     "
                       "0.0%\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  atom-sparse-mtp-plan-over-running-tokens (ATOM #2715), fixed in "
                       "atom-2026-11: 5 of 6 cases\n    share per profile: atom-2026-08 83.3%\n"
                       "    example: case 0 shrunk 2 steps -> " +
                       (dir / "atom-sparse-mtp-plan-over-running-tokens.json").string() +
                       ": draft_step_0 sparse_decode writes o rows 244..247 of 244 (fault)\n"),
            std::string::npos)
      << r.out;
  const fs::path file = dir / "atom-sparse-mtp-plan-over-running-tokens.json";
  ASSERT_TRUE(fs::exists(file)) << r.out;
  StatusOr<sim::Scenario> s = sim::LoadScenarioFile(file.string());
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->requests.size(), 61u);
  StatusOr<sim::ReplayReport> rep = sim::Replay(*s);
  ASSERT_TRUE(rep.ok());
  bool named = false;
  for (const sim::Violation& v : rep->result.violations) {
    const sim::KnownBug* k = sim::MatchKnownBug(v, *rep);
    named |= k && k->name == "atom-sparse-mtp-plan-over-running-tokens";
  }
  EXPECT_TRUE(named);
  fs::remove_all(dir);
}

// Without --profile, triage sweeps ATOM's presets only (the vLLM / SGLang profiles of
// docs/engines.md are swept only when named), and --help says which ones. The help text said
// "default: every preset" while the sweep held the three atom-* presets (a newcomer reading it
// expected the vLLM / SGLang rows): the help assertion fails on that text.
TEST(TriageCli, DefaultProfilesAreAtomsPresetsAndTheHelpNamesThem) {
  std::vector<std::string> atom, others;
  for (const sim::EngineProfile& e : sim::BuiltinProfiles())
    (e.table == "atom" ? atom : others).push_back(e.name);
  ASSERT_EQ(atom, (std::vector<std::string>{"atom-2026-03", "atom-2026-08", "atom-2026-11"}));
  ASSERT_FALSE(others.empty());
  CliResult r = Triage({"--model", "glm-5.2", "--tp", "8", "--mtp-k", "3", "--batch", "61",
                        "--graph", "64", "--cases", "3", "--shrink-steps", "0", "--json"});
  ASSERT_LE(r.exit_code, 1) << r.err;
  EXPECT_EQ(json::parse(r.out)["report"]["profiles"], json(atom));
  const CliResult help = Triage({"--help"});
  ASSERT_EQ(help.exit_code, 0) << help.err;
  const size_t at = help.out.find("--profile LIST");
  ASSERT_NE(at, std::string::npos) << help.out;
  const std::string line = help.out.substr(at, help.out.find("--versions", at) - at);
  EXPECT_EQ(line.find("every preset"), std::string::npos) << line;
  EXPECT_NE(line.find("default: ATOM's presets atom-2026-03, atom-2026-08, atom-2026-11"),
            std::string::npos)
      << line;
}

// A profile name longer than the table's first column (vllm-flashmla-2025-07, 21 characters)
// widens the column: the table read "vllm-flashmla-2025-07asm    exact" at the fixed width of 14
// (a mutant that keeps 14 fails both rows). Shorter names keep the width of 14.
TEST(TriageCli, ALongProfileNameWidensTheProfileColumn) {
  const CliResult r = Triage({"--model", "deepseek-v3", "--batch", "8", "--cases", "4", "--profile",
                              "atom-2026-08,vllm-flashmla-2025-07", "--kernel", "asm",
                              "--allocator", "exact", "--shrink-steps", "0"});
  ASSERT_LE(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("\nprofile               kernel allocator  cases  ran  overrun    fault  "
                       "corrupt  refused\n"
                       "atom-2026-08          asm    exact          2    2"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\nvllm-flashmla-2025-07 asm    exact          2    2"), std::string::npos)
      << r.out;
}

TEST(TriageCli, BadInputsExitTwoNamingTheFlag) {
  const std::vector<std::string> base = {"--model", "glm-5.2", "--batch", "61", "--graph", "64"};
  struct Bad {
    std::vector<std::string> extra;
    std::string err;
  };
  const std::vector<Bad> bad = {
      {{"--model", "llama"},
       "--model: unknown model 'llama' (glm-5.2, deepseek-v3.2, deepseek-v3, kimi-k2)"},
      {{"--tp", "0"}, "--tp: must be 1..64"},
      {{"--tp", "3"}, "--tp: 3 does not divide the model's 64 heads"},
      {{"--dp", "0"}, "--dp: must be 1..64"},
      {{"--mtp-k", "8"}, "--mtp-k: must be 0..7"},
      {{"--heads", "0"}, "--heads: must be 1..1024"},
      {{"--batch", "0"}, "--batch: must be 1..4096"},
      {{"--graph", "60"},
       "--graph: must be 61..4096 (at least --batch: the batch is padded up "
       "to it)"},
      {{"--eager"}, "--graph: not with --eager"},
      {{"--target", "gfx1250"}, "--target: "},
      {{"--revision", "2025-01"}, "--revision: "},
      {{"--profile", "atom-2027"}, "--profile: "},
      {{"--versions", "2026-09..2026-10"},
       "--versions: no engine profile lies in "
       "2026-09..2026-10"},
      {{"--versions", "2026"}, "--versions: must be FROM..TO (YYYY-MM, either may be empty)"},
      {{"--versions", "2026-03..", "--profile", "atom-2026-08"}, "--versions: not with --profile"},
      {{"--kernel", "triton"}, "--kernel: unknown variant 'triton' (asm, opus, hk)"},
      {{"--allocator", "slab"}, "--allocator: unknown model 'slab' (exact, caching)"},
      // A sweep axis naming a value twice ran its combinations twice, as rows of their own
      // (round 8).
      {{"--kernel", "asm,asm"}, "--kernel: 'asm' given twice"},
      {{"--kernel", "opus,hk,opus"}, "--kernel: 'opus' given twice"},
      {{"--allocator", "exact,caching,caching"}, "--allocator: 'caching' given twice"},
      {{"--profile", "atom-2026-08,atom-2026-03,atom-2026-08"},
       "--profile: 'atom-2026-08' given twice"},
      {{"--cases", "0"}, "--cases: must be 1..100000"},
      {{"--cases", "100001"}, "--cases: must be 1..100000"},
      {{"--jobs", "0"}, "--jobs: must be 1..64"},
      {{"--shrink-steps", "-1"}, "--shrink-steps: must be 0..1000"},
      {{"--seed", "x"}, "--seed: "},
      {{"--fault-address", "1234"},
       "--fault-address: '1234' is a decimal number; an address is hexadecimal with a 0x prefix"},
      {{"--fault-address", "0x12345678901234567"},
       "--fault-address: '0x12345678901234567' is above 64 bits (17 significant hex digits; at "
       "most 16)"},
  };
  for (const Bad& b : bad) {
    std::vector<std::string> args = base;
    auto given = std::find(args.begin(), args.end(), b.extra[0]);
    if (given != args.end() && b.extra.size() == 2)
      *(given + 1) = b.extra[1];  // a flag of the base given another value
    else
      args.insert(args.end(), b.extra.begin(), b.extra.end());
    const CliResult r = Triage(args);
    EXPECT_EQ(r.exit_code, 2) << b.extra[0] << ": " << r.out;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err.rfind("mlasim triage: error: " + b.err, 0), 0u) << r.err;
  }
  // --batch is required.
  const CliResult r = Triage({"--model", "glm-5.2"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--batch"), std::string::npos) << r.err;
}

// Cases a lowered --limit refuses ran nothing: round 12 found them counted as run and clean ("no
// case overruns", exit 0, with 0 of 3 replayed). They are counted apart now, by why, and a sweep
// of which none ran is exit 2 naming the limit.
TEST(TriageCli, CasesOverALimitAreCountedAsNotRunNeverAsClean) {
  std::vector<std::string> args = Founding("atom-2026-11", "6");
  args.pop_back();  // text
  args.insert(args.end(), {"--kernel", "asm", "--allocator", "exact"});
  std::vector<std::string> limited = {"--limit", "indptr=280000", "triage"};
  limited.insert(limited.end(), args.begin(), args.end());
  std::ostringstream out, err;
  ASSERT_EQ(RunMlasim(limited, out, err), 0) << err.str();
  const std::string text = out.str();
  EXPECT_NE(text.find("atom-2026-11  asm    exact          6    2     0.0%     0.0%     0.0%     "
                      "0.0%\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("4 of 6 cases not run: 4 over mlasim's limits (the first, case 0: "
                      "$.batch.contexts: the engine's main_plan at verify is refused by the "
                      "planner: kv_indptr[60]: value is 283749, "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("above mlasim's limit of 280000 (raise it with --limit indptr=N"),
            std::string::npos);
  EXPECT_NE(text.find("  none in the 2 cases that ran: none overruns, faults, corrupts or is "
                      "refused\n"),
            std::string::npos)
      << text;
  // JSON: per combination and in all.
  limited.push_back("--json");
  std::ostringstream jout, jerr;
  ASSERT_EQ(RunMlasim(limited, jout, jerr), 0) << jerr.str();
  const json j = json::parse(jout.str());
  EXPECT_EQ(j["combos"][0]["replayed"], 2);
  EXPECT_EQ(j["combos"][0]["over_limit"], 4);
  EXPECT_EQ(j["not_run"]["over_limit"], 4);
  EXPECT_EQ(j["not_run"]["refused"], 0);
  EXPECT_TRUE(j["not_run"]["first_refused"].is_null());
  EXPECT_EQ(j["not_run"]["first_over_limit"].get<std::string>().rfind("$.batch.contexts: ", 0), 0u);
  // Unlimited, the same sweep runs every case (the same batches: 0 not run, no line).
  std::ostringstream full, ferr;
  std::vector<std::string> unlimited = {"triage"};
  unlimited.insert(unlimited.end(), args.begin(), args.end());
  ASSERT_EQ(RunMlasim(unlimited, full, ferr), 0) << ferr.str();
  EXPECT_EQ(full.str().find("not run"), std::string::npos) << full.str();
  EXPECT_NE(full.str().find("atom-2026-11  asm    exact          6    6     0.0%"),
            std::string::npos)
      << full.str();
  EXPECT_NE(full.str().find("  none: no case overruns, faults, corrupts or is refused\n"),
            std::string::npos);
  // None ran: exit 2 naming the limit, stdout empty.
  limited[1] = "indptr=1000";
  limited.pop_back();
  std::ostringstream nout, nerr;
  EXPECT_EQ(RunMlasim(limited, nout, nerr), 2);
  EXPECT_EQ(nout.str(), "");
  EXPECT_EQ(nerr.str().rfind("mlasim triage: error: --cases: none of the 6 cases ran: 6 over "
                             "mlasim's limits (the first, case 0: $.batch.contexts: ",
                             0),
            0u)
      << nerr.str();
}

TEST(TriageCli, AFaultAddressIsComparedByItsPageOffset) {
  std::vector<std::string> args = Founding("atom-2026-08", "6");
  args.insert(args.end(),
              {"--kernel", "asm", "--allocator", "exact", "--fault-address", "0x7f3a12340000"});
  const CliResult r = Triage(args);
  const json j = json::parse(r.out);
  EXPECT_EQ(j["fault_address"]["address"], "0x7f3a12340000");
  // Exact allocator: each buffer ends at its mapping's end, so the first faulting byte starts a
  // page, as does the address (offset 0).
  EXPECT_GT(j["fault_address"]["faulting_cases"].get<int64_t>(), 0);
  EXPECT_EQ(j["fault_address"]["same_page_offset"], j["fault_address"]["faulting_cases"]);
  // ... which is weak evidence, and says so; an address one byte further matches no case.
  EXPECT_EQ(j["fault_address"]["page_aligned"], true);
  args.back() = "0x7f3a12340001";
  const json off = json::parse(Triage(args).out);
  EXPECT_EQ(off["fault_address"]["same_page_offset"], 0);
  EXPECT_EQ(off["fault_address"]["page_aligned"], false);
  args.back() = "0x7f3a12340000";
  args.erase(std::find(args.begin(), args.end(), "--json"));
  const CliResult text = Triage(args);
  EXPECT_NE(text.out.find(fmt::format(
                "\nfault address 0x7f3a12340000: {0} of {0} faulting cases fault at the same "
                "offset in a page\n  the address starts a page: every overrun past a buffer that "
                "ends on a page boundary faults there",
                j["fault_address"]["faulting_cases"].get<int64_t>())),
            std::string::npos)
      << text.out;
  args.back() = "0x7f3a12340001";
  EXPECT_EQ(Triage(args).out.find("the address starts a page"), std::string::npos);
}

}  // namespace
}  // namespace mlasim::cli
