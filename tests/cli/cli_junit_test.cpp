// `replay --junit`, `fuzz --junit` and `fuzz merge --junit` in process: the exact XML of the
// builtin seed replay (one test case per call, the call with violations failing) and of a small
// campaign with findings, a passing campaign, earlier findings as skipped, the same bytes at any
// --jobs and with or without --json, --gpu findings and errors, and every bad --junit path
// (exit 2 naming --junit before any work). The XML is parsed by Python in the ctest
// junit_well_formed (tests/cli/junit_well_formed.py).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "fuzz/summary_junit.h"
#include "sim/junit.h"
#include "sim/replay.h"
#include "tools/mlasim/cli.h"

namespace mlasim::cli {
namespace {

namespace fs = std::filesystem;

struct Out {
  int code;
  std::string out, err;
};

Out Cli(const std::vector<std::string>& args) {
  std::ostringstream o, e;
  const int code = RunMlasim(args, o, e);
  return {code, o.str(), e.str()};
}

fs::path Tmp(const std::string& name) {
  const fs::path p =
      fs::temp_directory_path() / ("mlasim_junit_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(p);
  return p;
}

std::string Read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// `text` with every `from` replaced by `to`.
std::string ReplaceAll(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The builtin seed case: 16 calls, the two violations both in call 6 (draft step 0's
// sparse_decode writes o and reads q rows 156..159 of 156).
constexpr const char* kSeedJunit = R"xml(<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="mlasim replay" tests="16" failures="1" errors="0" skipped="0" time="0">
  <testsuite name="mlasim replay seed" tests="16" failures="1" errors="0" skipped="0" time="0">
    <properties>
      <property name="case" value="seed"/>
      <property name="profile" value="atom-2026-08"/>
      <property name="kernel" value="asm"/>
      <property name="calls" value="16"/>
      <property name="violations" value="2"/>
    </properties>
    <testcase classname="replay.verify" name="call 00 main_plan" time="0"/>
    <testcase classname="replay.verify" name="call 01 sparse_mtp_plan" time="0"/>
    <testcase classname="replay.verify" name="call 02 indexer_gather" time="0"/>
    <testcase classname="replay.verify" name="call 03 sparse_decode" time="0"/>
    <testcase classname="replay.verify" name="call 04 sparse_reduce" time="0"/>
    <testcase classname="replay.draft_step_0" name="call 05 indexer_gather" time="0"/>
    <testcase classname="replay.draft_step_0" name="call 06 sparse_decode" time="0">
      <failure type="A" message="2 violations: draft_step_0|sparse_decode|o|write|A; draft_step_0|sparse_decode|q|read|A">  [out_of_bounds] class A  draft_step_0 / sparse_decode (asm)  write o
      touches rows 156..159 of a buffer of 156 rows: 4 rows (65536 bytes) past the end
      work items: 374,375,376,377
      on hardware: fault at 0x7f10003d0000
      writes o rows 156..159 of 156
      known: atom-sparse-mtp-plan-over-running-tokens (ATOM #2715), fixed in atom-2026-11

  [out_of_bounds] class A  draft_step_0 / sparse_decode (asm)  read q
      touches rows 156..159 of a buffer of 156 rows: 4 rows (36864 bytes) past the end
      work items: 374,375,376,377
      on hardware: fault at 0x7f100015f000
      reads q rows 156..159 of 156
      known: atom-sparse-mtp-plan-over-running-tokens (ATOM #2715), fixed in atom-2026-11
</failure>
    </testcase>
    <testcase classname="replay.draft_step_0" name="call 07 sparse_reduce" time="0"/>
    <testcase classname="replay.draft_step_1" name="call 08 draft_sparse_plan" time="0"/>
    <testcase classname="replay.draft_step_1" name="call 09 indexer_gather" time="0"/>
    <testcase classname="replay.draft_step_1" name="call 10 sparse_decode" time="0"/>
    <testcase classname="replay.draft_step_1" name="call 11 sparse_reduce" time="0"/>
    <testcase classname="replay.draft_step_2" name="call 12 draft_sparse_plan" time="0"/>
    <testcase classname="replay.draft_step_2" name="call 13 indexer_gather" time="0"/>
    <testcase classname="replay.draft_step_2" name="call 14 sparse_decode" time="0"/>
    <testcase classname="replay.draft_step_2" name="call 15 sparse_reduce" time="0"/>
  </testsuite>
</testsuites>
)xml";

// `fuzz --cases 7 --seed 7 --small --shrink-steps 1 --out $OUT`: seed index 6 shows the known
// sparse-MTP bug as two signatures.
constexpr const char* kCampaignJunit = R"xml(<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="mlasim fuzz" tests="3" failures="2" errors="0" skipped="0" time="0">
  <testsuite name="mlasim fuzz" tests="3" failures="2" errors="0" skipped="0" time="0">
    <properties>
      <property name="seed" value="7"/>
      <property name="shard" value="0/1"/>
      <property name="profiles" value="atom-2026-08"/>
      <property name="swarm" value="on"/>
      <property name="small" value="true"/>
      <property name="generate" value=""/>
      <property name="budget_cases" value="7"/>
      <property name="cases" value="7"/>
      <property name="campaign_cases" value="7"/>
      <property name="signatures" value="2"/>
      <property name="findings" value="2"/>
      <property name="new_findings" value="2"/>
      <property name="cut_short" value="false"/>
      <property name="not_run_over_limit" value="0"/>
      <property name="not_run_refused" value="1"/>
    </properties>
    <testcase classname="fuzz" name="campaign" time="0">
      <system-out>cases 7 this run, 7 over the campaign of its 7-case budget
distinct signatures 2
findings 2: 2 new, 0 already in $OUT
1 of 7 cases not run: 1 refused by the step (shapes aiter or the engine refuses; the first, seed index 4: $.model.heads: the engine&#39;s main. buffers cannot be sized: heads_per_head_k: get_mla_metadata_info_v1 requires the q head count to be a multiple of 16 (got 24))
</system-out>
    </testcase>
    <testcase classname="fuzz.draft_step_0.sparse_decode" name="draft_step_0|sparse_decode|o|write|A" time="0">
      <failure type="A" message="A: writes o rows 3..8 of 3 [known: atom-sparse-mtp-plan-over-running-tokens]">signature: draft_step_0|sparse_decode|o|write|A
class: A (a plan or launch covers graph-padded rows the kernel&#39;s buffers lack)
known bug: atom-sparse-mtp-plan-over-running-tokens (ATOM #2715), fixed in atom-2026-11
detail: writes o rows 3..8 of 3
origin: seed index 6, 1 shrink step, cut short by the 1-step budget
finding file: $OUT/draft_step_0.sparse_decode.o.write.A.json
reproduce: mlasim fuzz --reproduce 6018027440424182937 --size 16 --shrink-path &#39;[0]&#39; --small --swarm on
replay: mlasim replay $OUT/draft_step_0.sparse_decode.o.write.A.json
</failure>
    </testcase>
    <testcase classname="fuzz.draft_step_0.sparse_decode" name="draft_step_0|sparse_decode|q|read|A" time="0">
      <failure type="A" message="A: reads q rows 3..8 of 3 [known: atom-sparse-mtp-plan-over-running-tokens]">signature: draft_step_0|sparse_decode|q|read|A
class: A (a plan or launch covers graph-padded rows the kernel&#39;s buffers lack)
known bug: atom-sparse-mtp-plan-over-running-tokens (ATOM #2715), fixed in atom-2026-11
detail: reads q rows 3..8 of 3
origin: seed index 6, 1 shrink step, cut short by the 1-step budget
finding file: $OUT/draft_step_0.sparse_decode.q.read.A.json
reproduce: mlasim fuzz --reproduce 6018027440424182937 --size 16 --shrink-path &#39;[0]&#39; --small --swarm on
replay: mlasim replay $OUT/draft_step_0.sparse_decode.q.read.A.json
</failure>
    </testcase>
  </testsuite>
</testsuites>
)xml";

TEST(CliJunit, ReplaySeedIsOneTestCasePerCallTheViolatingCallFailing) {
  const fs::path f = Tmp("seed.xml");
  const Out r = Cli({"replay", "--builtin", "seed", "--junit", f.string()});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_EQ(r.out, Cli({"replay", "--builtin", "seed"}).out);  // stdout as without the flag
  const std::string xml = Read(f);
  EXPECT_EQ(xml, kSeedJunit);
  EXPECT_EQ(Count(xml, "<testcase "), 16);
  EXPECT_EQ(Count(xml, "<failure "), 1);
  // The same bytes again, and with --json.
  const fs::path g = Tmp("seed-json.xml");
  EXPECT_EQ(Cli({"replay", "--builtin", "seed", "--json", "--junit", g.string()}).code, 1);
  EXPECT_EQ(Read(g), xml);
  fs::remove(f);
  fs::remove(g);
}

TEST(CliJunit, ACleanReplayPassesEveryCall) {
  const fs::path f = Tmp("clean.xml");
  const Out r =
      Cli({"replay", "--builtin", "seed", "--profile", "atom-2026-11", "--junit", f.string()});
  EXPECT_EQ(r.code, 0) << r.err;
  const std::string xml = Read(f);
  EXPECT_NE(xml.find("<testsuite name=\"mlasim replay seed\" tests=\"16\" failures=\"0\" "
                     "errors=\"0\" skipped=\"0\" time=\"0\">"),
            std::string::npos)
      << xml;
  EXPECT_EQ(Count(xml, "<testcase "), 16);
  EXPECT_EQ(Count(xml, "\" time=\"0\"/>\n"), 16);  // every one passing
  EXPECT_NE(xml.find("<property name=\"profile\" value=\"atom-2026-11\"/>"), std::string::npos);
  fs::remove(f);
}

TEST(CliJunit, ReplayBadJunitPathsExitTwoNamingTheFlagBeforeTheReport) {
  Out r = Cli({"replay", "--builtin", "seed", "--junit", "/nonexistent-mlasim/r.xml"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "mlasim replay: error: --junit: cannot write /nonexistent-mlasim/r.xml: the folder "
            "/nonexistent-mlasim does not exist\n");
  r = Cli({"replay", "--builtin", "seed", "--junit", fs::temp_directory_path().string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "mlasim replay: error: --junit: " + fs::temp_directory_path().string() +
                       " is a directory, not a file\n");
  r = Cli({"replay", "--builtin", "seed", "--junit", ""});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "mlasim replay: error: --junit: must not be empty\n");
  if (fs::exists("/dev/full")) {  // opens, then the write fails: the report is held back
    r = Cli({"replay", "--builtin", "seed", "--junit", "/dev/full"});
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err,
              "mlasim replay: error: --junit: cannot write /dev/full: no space left on the device "
              "(the disk is full)\n");
  }
}

TEST(CliJunit, ReplaySuiteWithKernelFindingsAndAKernelError) {
  auto s = sim::BuiltinScenario("seed");
  ASSERT_TRUE(s.ok());
  auto r = sim::Replay(*s);
  ASSERT_TRUE(r.ok());
  sim::Violation seen;
  seen.kind = sim::ViolationKind::kKernelContract;
  seen.step = "verify";
  seen.call = "sparse_decode";
  seen.call_index = 3;
  seen.buffer = "lse";
  seen.access = sim::Access::kWrite;
  seen.detail = "sentinel rows 160..163 past the end of lse damaged";
  sim::Violation nowhere = seen;
  nowhere.call_index = -1;
  nowhere.detail = "a finding of no call";
  sim::junit::KernelPart k{{seen, nowhere}, ""};
  const sim::junit::TestSuite suite = sim::junit::ReplaySuite(*r, &k);
  ASSERT_EQ(suite.cases.size(), 17u);  // 16 calls and the kernel
  const sim::junit::TestCase& c3 = suite.cases[3];
  EXPECT_EQ(c3.name, "call 03 sparse_decode");
  EXPECT_EQ(c3.outcome, sim::junit::Outcome::kFailure);
  EXPECT_EQ(c3.type, "KUT-contract");
  EXPECT_EQ(c3.message, "1 violation: verify|sparse_decode|lse|write|KUT-contract");
  EXPECT_EQ(c3.text,
            "  [observed on the kernel under test] verify|sparse_decode|lse|write|KUT-contract\n"
            "      sentinel rows 160..163 past the end of lse damaged\n");
  EXPECT_EQ(suite.cases[6].message,
            "2 violations: draft_step_0|sparse_decode|o|write|A; "
            "draft_step_0|sparse_decode|q|read|A");
  const sim::junit::TestCase& gpu = suite.cases[16];
  EXPECT_EQ(gpu.classname, "replay.gpu");
  EXPECT_EQ(gpu.name, "kernel under test");
  EXPECT_EQ(gpu.outcome, sim::junit::Outcome::kFailure);  // the finding naming no call
  EXPECT_EQ(suite.properties.back(), (std::pair<std::string, std::string>{"kernel_findings", "2"}));
  k = {{}, "too many worker faults in one step"};
  const sim::junit::TestSuite err = sim::junit::ReplaySuite(*r, &k);
  EXPECT_EQ(err.cases[16].outcome, sim::junit::Outcome::kError);
  EXPECT_EQ(err.cases[16].message,
            "the kernel under test could not run the step: too many worker faults in one step");
  EXPECT_EQ(err.cases[3].outcome, sim::junit::Outcome::kPassed);
  k = {{}, ""};
  EXPECT_EQ(sim::junit::ReplaySuite(*r, &k).cases[16].outcome, sim::junit::Outcome::kPassed);
}

// End to end through a kernel under test (a CPU library that overreads q; tests/kut/lib): its
// observation joins call 6's failure, and the kernel's own test case passes.
TEST(CliJunit, ReplayGpuAddsTheKernelsFindingsAndItsTestCase) {
  // The kernel's workers are `mlasim fuzz --kut-worker` processes of the real binary.
  ::setenv("MLASIM_EXE", (std::string(MLASIM_KUT_DIR) + "/mlasim").c_str(), 1);
  const fs::path f = Tmp("gpu.xml");
  const Out r = Cli({"replay", "--builtin", "seed", "--gpu", "--kernel-under-test",
                     std::string(MLASIM_KUT_DIR) + "/libmlasim_kut_example_q_overread.so",
                     "--head-dims", "32,16", "--junit", f.string()});
  EXPECT_EQ(r.code, 1) << r.err;
  const std::string xml = Read(f);
  EXPECT_NE(xml.find("<testsuite name=\"mlasim replay seed\" tests=\"17\" failures=\"1\" "
                     "errors=\"0\" skipped=\"0\" time=\"0\">"),
            std::string::npos)
      << xml;
  EXPECT_NE(xml.find("<property name=\"kernel_findings\" value=\"1\"/>"), std::string::npos);
  EXPECT_NE(
      xml.find("<failure type=\"A\" message=\"3 violations: "
               "draft_step_0|sparse_decode|o|write|A; draft_step_0|sparse_decode|q|read|A\">"),
      std::string::npos)
      << xml;
  EXPECT_NE(xml.find("  [observed on the kernel under test] draft_step_0|sparse_decode|o|write|A\n"
                     "      writes o rows 156..159 of 156; observed on example-q-overread: "
                     "sentinel rows 156..159 past the end of o damaged\n</failure>"),
            std::string::npos)
      << xml;
  EXPECT_NE(xml.find("    <testcase classname=\"replay.gpu\" name=\"kernel under test\" "
                     "time=\"0\"/>\n  </testsuite>"),
            std::string::npos);
  fs::remove(f);
}

// --gpu --devices: one campaign process per listed device (a list needs no GPU with a CPU
// kernel); the report covers their merged findings, the replay command with the kernel flags
// the finding file records.
TEST(CliJunit, DeviceCampaignReportsTheMergedFindings) {
  ::setenv("MLASIM_EXE", (std::string(MLASIM_KUT_DIR) + "/mlasim").c_str(), 1);
  const std::string lib = std::string(MLASIM_KUT_DIR) + "/libmlasim_kut_example_q_overread.so";
  const fs::path dir = Tmp("devices"), f = Tmp("devices.xml");
  const Out r = Cli({"fuzz", "--gpu", "sentinel", "--kernel-under-test", lib, "--head-dims",
                     "32,16", "--devices", "0,0", "--cases", "16", "--small", "--seed", "3",
                     "--out", dir.string(), "--junit", f.string()});
  ASSERT_EQ(r.code, 1) << r.out << r.err;
  const std::string xml = Read(f);
  EXPECT_NE(xml.find("<testsuite name=\"mlasim fuzz\" tests=\"2\" failures=\"1\" errors=\"0\" "
                     "skipped=\"0\" time=\"0\">"),
            std::string::npos)
      << xml;
  EXPECT_NE(xml.find("<property name=\"cases\" value=\"16\"/>"), std::string::npos);
  EXPECT_NE(xml.find("name=\"draft_step_0|sparse_decode|o|write|A\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("\nreplay: mlasim replay --gpu sentinel --kernel-under-test " + lib +
                     " --head-dims 32,16 " + dir.string() +
                     "/draft_step_0.sparse_decode.o.write.A.json\n"),
            std::string::npos)
      << xml;
  fs::remove_all(dir);
  fs::remove(f);
}

TEST(CliJunit, CampaignWithFindingsIsExactAndTheSameAtAnyJobs) {
  const fs::path dir = Tmp("findings"), f = Tmp("campaign.xml");
  const std::vector<std::string> cmd = {"fuzz",    "--cases",        "7", "--seed", "7",
                                        "--small", "--shrink-steps", "1", "--out",  dir.string(),
                                        "--junit", f.string()};
  const Out r = Cli(cmd);
  ASSERT_EQ(r.code, 1) << r.err;
  const std::string xml = Read(f);
  EXPECT_EQ(ReplaceAll(xml, dir.string(), "$OUT"), kCampaignJunit);
  // Two jobs: the same findings, so the same bytes.
  fs::remove_all(dir);
  auto two = cmd;
  two.insert(two.end(), {"--jobs", "2"});
  ASSERT_EQ(Cli(two).code, 1);
  EXPECT_EQ(Read(f), xml);
  // Resumed: nothing new, exit 0, the findings skipped (found before this run), no failure.
  auto again = cmd;
  again.push_back("--resume");
  const Out b = Cli(again);
  EXPECT_EQ(b.code, 0) << b.err;
  const std::string resumed = Read(f);
  EXPECT_NE(resumed.find("<testsuite name=\"mlasim fuzz\" tests=\"3\" failures=\"0\" errors=\"0\" "
                         "skipped=\"2\" time=\"0\">"),
            std::string::npos)
      << resumed;
  EXPECT_NE(resumed.find("<skipped message=\"found before this run: already in " + dir.string() +
                         "/draft_step_0.sparse_decode.q.read.A.json\"/>"),
            std::string::npos)
      << resumed;
  EXPECT_NE(resumed.find("known bug: atom-sparse-mtp-plan-over-running-tokens (ATOM #2715), "
                         "fixed in atom-2026-11\n"),
            std::string::npos);
  EXPECT_NE(resumed.find("<property name=\"cases\" value=\"0\"/>"), std::string::npos);
  fs::remove_all(dir);
  fs::remove(f);
}

TEST(CliJunit, APassingCampaignIsOneTestCaseSayingHowManyCasesRan) {
  const fs::path f = Tmp("passing.xml");
  const Out r = Cli({"fuzz", "--cases", "3", "--profile", "atom-2026-11", "--ignore-known",
                     "--small", "--junit", f.string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(Read(f), R"xml(<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="mlasim fuzz" tests="1" failures="0" errors="0" skipped="0" time="0">
  <testsuite name="mlasim fuzz" tests="1" failures="0" errors="0" skipped="0" time="0">
    <properties>
      <property name="seed" value="1"/>
      <property name="shard" value="0/1"/>
      <property name="profiles" value="atom-2026-11"/>
      <property name="swarm" value="on"/>
      <property name="small" value="true"/>
      <property name="generate" value=""/>
      <property name="budget_cases" value="3"/>
      <property name="cases" value="3"/>
      <property name="campaign_cases" value="3"/>
      <property name="signatures" value="0"/>
      <property name="findings" value="0"/>
      <property name="new_findings" value="0"/>
      <property name="cut_short" value="false"/>
      <property name="not_run_over_limit" value="0"/>
      <property name="not_run_refused" value="0"/>
    </properties>
    <testcase classname="fuzz" name="campaign" time="0">
      <system-out>cases 3 this run, 3 over the campaign of its 3-case budget
distinct signatures 0
findings 0: 0 new, 0 already in --out
</system-out>
    </testcase>
  </testsuite>
</testsuites>
)xml");
  fs::remove(f);
}

TEST(CliJunit, FuzzBadJunitPathsAndFlagsExitTwoBeforeTheCampaign) {
  Out r = Cli({"fuzz", "--cases", "30", "--junit", "/nonexistent-mlasim/f.xml"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "mlasim fuzz: error: --junit: cannot write /nonexistent-mlasim/f.xml: the folder "
            "/nonexistent-mlasim does not exist\n");
  r = Cli({"fuzz", "--cases", "1", "--junit", ""});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "mlasim fuzz: error: --junit: must not be empty\n");
  r = Cli({"fuzz", "--reproduce", "5", "--size", "10", "--junit", Tmp("r.xml").string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err,
            "mlasim fuzz: error: --junit: not used with --reproduce (it regenerates one case)\n");
  r = Cli({"fuzz", "--junit", Tmp("m.xml").string(), "merge", fs::temp_directory_path().string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "mlasim fuzz: error: --junit: not used with merge (put --junit after merge)\n");
  r = Cli({"fuzz", "merge", fs::temp_directory_path().string(), "--junit",
           "/nonexistent-mlasim/m.xml"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "mlasim fuzz: error: --junit: cannot write /nonexistent-mlasim/m.xml: the folder "
            "/nonexistent-mlasim does not exist\n");
}

TEST(CliJunit, MergeReportsEveryKeptFindingAsAFailureInOutsFiles) {
  const fs::path a = Tmp("merge-a"), out = Tmp("merge-out"), f = Tmp("merge.xml");
  ASSERT_EQ(Cli({"fuzz", "--cases", "7", "--seed", "7", "--small", "--shrink-steps", "1", "--out",
                 a.string()})
                .code,
            1);
  const Out m = Cli({"fuzz", "merge", a.string(), "--out", out.string(), "--junit", f.string()});
  ASSERT_EQ(m.code, 0) << m.err;
  const std::string xml = Read(f);
  EXPECT_NE(xml.find("<testsuite name=\"mlasim fuzz merge\" tests=\"3\" failures=\"2\" "
                     "errors=\"0\" skipped=\"0\" time=\"0\">"),
            std::string::npos)
      << xml;
  EXPECT_NE(xml.find("<property name=\"cases\" value=\"7\"/>"), std::string::npos);
  EXPECT_NE(xml.find("<testcase classname=\"fuzz\" name=\"merge\" time=\"0\">"), std::string::npos);
  EXPECT_EQ(Count(xml, "finding file: " + out.string() + "/draft_step_0.sparse_decode."), 2);
  EXPECT_EQ(Count(xml, "reproduce: mlasim fuzz --reproduce 6018027440424182937 --size 16 "), 2);
  // Without --out: the kept source files.
  ASSERT_EQ(Cli({"fuzz", "merge", a.string(), "--junit", f.string()}).code, 0);
  EXPECT_EQ(Count(Read(f), "finding file: " + a.string() + "/draft_step_0.sparse_decode."), 2);
  fs::remove_all(a);
  fs::remove_all(out);
  fs::remove(f);
}

TEST(CliJunit, FindingCaseOfAKernelFindingWithoutFileOrKnownBug) {
  fuzz::CampaignFinding f;
  f.signature = "verify|sparse_decode||write|KUT-fault";
  f.seed_index = 3;
  f.detail = "crashed <signal 11> & \"left\"";
  f.command = "mlasim fuzz --reproduce 9 --size 4 --shrink-path '[]' --gpu sentinel --swarm on";
  const sim::junit::TestCase c = fuzz::FindingCase(f);
  EXPECT_EQ(sim::junit::Document("t", {{"s", {}, {c}}}),
            R"xml(<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="t" tests="1" failures="1" errors="0" skipped="0" time="0">
  <testsuite name="s" tests="1" failures="1" errors="0" skipped="0" time="0">
    <testcase classname="fuzz.verify.sparse_decode" name="verify|sparse_decode||write|KUT-fault" time="0">
      <failure type="KUT-fault" message="KUT-fault: crashed &lt;signal 11&gt; &amp; &quot;left&quot;">signature: verify|sparse_decode||write|KUT-fault
class: KUT-fault (observed on the kernel under test, docs/kernel-under-test.md)
detail: crashed &lt;signal 11&gt; &amp; &quot;left&quot;
origin: seed index 3, 0 shrink steps
finding file: none (the campaign ran without --out)
reproduce: mlasim fuzz --reproduce 9 --size 4 --shrink-path &#39;[]&#39; --gpu sentinel --swarm on
</failure>
    </testcase>
  </testsuite>
</testsuites>
)xml");
  fuzz::CampaignFinding bare;
  bare.signature = "x";
  EXPECT_EQ(fuzz::FindingCase(bare).classname, "fuzz.x.-");
  EXPECT_EQ(fuzz::FindingCase(bare).type, "-");
}

}  // namespace
}  // namespace mlasim::cli
