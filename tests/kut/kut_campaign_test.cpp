// Kernel-under-test campaigns on the CPU path (docs/kernel-under-test.md): `mlasim fuzz --gpu
// sentinel|guard --kernel-under-test PATH.so` runs every generated step through an example
// kernel of tests/kut/lib/ in worker processes (the real mlasim binary beside mlasim_tests) and
// must find and shrink each deliberate bug, while mlasim's own CPU kernel, on the same seed and
// budget, has no finding at all; each finding replays through `mlasim replay --gpu
// --kernel-under-test` from the command its file records.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <vector>

#include "tools/mlasim/cli.h"

namespace mlasim::cli {
namespace {

namespace fs = std::filesystem;

struct Out {
  int code;
  std::string out, err;
};

// Workers exec the real mlasim binary (fuzz/kut_pool.h WorkerExe), not this test binary.
void UseRealMlasimForWorkers() {
  ::setenv("MLASIM_EXE", (std::string(MLASIM_KUT_DIR) + "/mlasim").c_str(), 1);
}

Out Cli(const std::vector<std::string>& args) {
  UseRealMlasimForWorkers();
  std::ostringstream o, e;
  const int code = RunMlasim(args, o, e);
  return {code, o.str(), e.str()};
}

std::string Lib(const std::string& name) {
  return std::string(MLASIM_KUT_DIR) + "/libmlasim_kut_" + name + ".so";
}

fs::path Tmp(const std::string& name) {
  const fs::path p =
      fs::temp_directory_path() / ("mlasim_kut_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(p);
  return p;
}

// Sets an environment variable for a scope and restores the caller's value (or its absence).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) had_ = true, old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_)
      ::setenv(name_, old_.c_str(), 1);
    else
      ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

// No MPS daemon for the campaigns of a test (the summary lines they compare would name one).
constexpr char kNoMps[] = "/nonexistent/mlasim-test-no-mps";

// A small campaign through `library`: 32 cases of seed 1 at head dims 32,16, known families off.
Out Campaign(const std::string& mode, const std::string& library, const fs::path& out,
             int cases = 32) {
  std::vector<std::string> args = {
      "fuzz",   "--gpu", mode,      "--kernel-under-test", library,       "--cases",
      std::to_string(cases),
      "--seed", "1",     "--small", "--ignore-known",      "--head-dims", "32,16",   "--jobs",
      "2"};
  if (!out.empty()) args.insert(args.end(), {"--out", out.string()});
  return Cli(args);
}

// Finding files of `dir` by signature.
std::map<std::string, nlohmann::json> Findings(const fs::path& dir) {
  std::map<std::string, nlohmann::json> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".json") continue;
    std::ifstream f(e.path());
    nlohmann::json doc = nlohmann::json::parse(f);
    out[doc["finding"]["signature"].get<std::string>()] = doc;
  }
  return out;
}

// Splits a recorded `mlasim replay ...` command (single-quoted arguments) into argv, without
// the leading "mlasim".
std::vector<std::string> Words(const std::string& cmd) {
  std::vector<std::string> out;
  std::string w;
  bool quoted = false, any = false;
  for (char c : cmd) {
    if (c == '\'') {
      quoted = !quoted;
      any = true;
    } else if (c == ' ' && !quoted) {
      if (any) out.push_back(w);
      w.clear();
      any = false;
    } else {
      w += c;
      any = true;
    }
  }
  if (any) out.push_back(w);
  if (!out.empty() && out[0] == "mlasim") out.erase(out.begin());
  return out;
}

// The requests of a scenario document: their count and total context tokens.
std::pair<size_t, int64_t> Requests(const nlohmann::json& scenario) {
  int64_t tokens = 0;
  for (const auto& c : scenario["batch"]["contexts"]) tokens += c.get<int64_t>();
  return {scenario["batch"]["contexts"].size(), tokens};
}

// Every finding of the campaign in `dir` is the bug's (buffer, access, class); each is shrunk
// (at least one accepted step, not cut short; no more requests and context tokens than the case
// its seed generated, which `fuzz --reproduce` regenerates, and fewer for at least one finding)
// and replays, from the command its file records, with exit 1 and its signature in the report.
void ExpectFoundAndShrunk(const fs::path& dir, const std::string& buffer_access_class) {
  const auto findings = Findings(dir);
  ASSERT_FALSE(findings.empty());
  bool smaller = false;
  for (const auto& [sig, doc] : findings) {
    SCOPED_TRACE(sig);
    EXPECT_NE(sig.find("|" + buffer_access_class), std::string::npos);
    const nlohmann::json& f = doc["finding"];
    EXPECT_GE(f["shrink"]["steps"].get<int>(), 1);
    EXPECT_FALSE(f["shrink"]["cut_short"].get<bool>());
    const Out gen = Cli(
        {"fuzz", "--reproduce", std::to_string(f["reproduce"]["seed"].get<uint64_t>()), "--size",
         std::to_string(f["reproduce"]["size"].get<int>()), "--small", "--gpu", "sentinel"});
    ASSERT_EQ(gen.code, 0) << gen.err;
    const auto [n0, t0] = Requests(nlohmann::json::parse(gen.out));
    const auto [n1, t1] = Requests(doc);
    EXPECT_LE(n1, n0);
    EXPECT_LE(t1, t0);
    smaller = smaller || n1 < n0 || t1 < t0;
    ASSERT_TRUE(f["reproduce"].contains("replay"));
    const std::string cmd = f["reproduce"]["replay"].get<std::string>();
    EXPECT_EQ(cmd.rfind("mlasim replay --gpu ", 0), 0u) << cmd;
    const fs::path cwd = fs::current_path();
    fs::current_path(dir);  // the command names the file relative to --out
    const Out r = Cli(Words(cmd));
    fs::current_path(cwd);
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_NE(r.out.find(sig), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("gpu verdict: FINDINGS"), std::string::npos) << r.out;
  }
  EXPECT_TRUE(smaller) << "no finding is smaller than the case that found it";
}

TEST(KutCampaign, CpuKernelHasNoFindingInEitherMode) {
  for (const std::string mode : {"sentinel", "guard"}) {
    const Out r = Campaign(mode, Lib("cpu"), {});
    EXPECT_EQ(r.code, 0) << mode << '\n' << r.out << r.err;
    EXPECT_NE(r.out.find("cases 32 "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("findings 0: 0 new"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("kernel under test: mlasim-cpu"), std::string::npos) << r.out;
    // Every decode call it ran had its numerics compared: none is above the CPU reference's
    // work bound at head dims 32,16 (fuzz/kut_check.h max_cpu_reference_macs).
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.out, m,
                                  std::regex("numerics: (\\d+) call\\(s\\) compared, "
                                             "0 not compared\n")))
        << r.out;
    EXPECT_GT(std::stoi(m[1]), 0);
  }
}

// mlasim's CPU kernel planning by itself (`--kernel-config variant=self`: one item per request
// from qo_indptr / kv_indptr, FlashMLA's contract, aiter's plan unread) runs every decode call,
// head-folded plans included, with no finding and every call's numerics compared against the
// monolithic reference. With the simulator's folded view of q/o for such a kernel (the view
// aiter's kernels have), the draft step's overrun showed as false `KUT-contract` findings on o
// and lse, as FlashMLA's did on the H200 (docs/gpu-results.md, 2026-12-02 session 4).
// Guard mode with --ignore-known does not run the calls that would fault through known families
// only (KutCheckOptions::skip_known_faults): mlasim's CPU kernel, whose faults in guard mode are
// all known families', then replaces no worker. Without --ignore-known, and in sentinel mode,
// every call runs (those faults are findings, or are seen in sentinel bytes).
TEST(KutCampaign, GuardModeWithIgnoreKnownSkipsCallsThatWouldFaultThroughKnownFamiliesOnly) {
  const Out skip = Campaign("guard", Lib("cpu"), Tmp("skip_known"));
  ASSERT_EQ(skip.code, 0) << skip.out << skip.err;
  EXPECT_NE(skip.out.find("0 worker replacement(s)"), std::string::npos) << skip.out;
  EXPECT_NE(skip.out.find("calls_skipped_known_fault 3 (guard mode, --ignore-known"),
            std::string::npos)
      << skip.out;
  const Out all = Cli({"fuzz", "--gpu", "guard", "--kernel-under-test", Lib("cpu"), "--cases", "32",
                       "--seed", "1", "--small", "--head-dims", "32,16", "--jobs", "2",
                       "--shrink-steps", "0", "--out", Tmp("skip_known_all").string()});
  EXPECT_EQ(all.code, 1) << all.out << all.err;  // the known families' faults are findings
  EXPECT_EQ(all.out.find("calls_skipped_known_fault"), std::string::npos) << all.out;
  EXPECT_EQ(all.out.find(" 0 worker replacement(s)"), std::string::npos) << all.out;
  const Out sentinel = Campaign("sentinel", Lib("cpu"), Tmp("skip_known_sentinel"));
  ASSERT_EQ(sentinel.code, 0) << sentinel.out << sentinel.err;
  EXPECT_EQ(sentinel.out.find("calls_skipped_known_fault"), std::string::npos) << sentinel.out;
  EXPECT_EQ(sentinel.out.find("predicted to fault"), std::string::npos) << sentinel.out;
}

TEST(KutCampaign, ASelfPlanningKernelRunsHeadFoldedPlansWithNoFinding) {
  for (const std::string mode : {"sentinel", "guard"}) {
    const Out r = Cli({"fuzz", "--gpu", mode, "--kernel-under-test", Lib("cpu"), "--kernel-config",
                       "variant=self", "--cases", "32", "--seed", "1", "--small", "--ignore-known",
                       "--head-dims", "32,16", "--jobs", "2"});
    EXPECT_EQ(r.code, 0) << mode << '\n' << r.out << r.err;
    EXPECT_NE(r.out.find("findings 0: 0 new"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("config variant=self"), std::string::npos) << r.out;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(
        r.out, m,
        std::regex("decode calls: (\\d+) run, (\\d+) skipped, 0 unsupported by the kernel")))
        << r.out;
    EXPECT_GT(std::stoi(m[1]), 0);
    // Every call runs, but in guard mode those that would fault through known families only
    // (KutCheckOptions::skip_known_faults).
    const std::string skipped = m[2];
    if (mode == "guard") {
      EXPECT_NE(r.out.find("calls_skipped_known_fault " + skipped + " ("), std::string::npos)
          << r.out;
    } else {
      EXPECT_EQ(skipped, "0") << r.out;
    }
    ASSERT_TRUE(std::regex_search(r.out, m,
                                  std::regex("numerics: (\\d+) call\\(s\\) compared, "
                                             "0 not compared\n")))
        << r.out;
  }
}

// The formats the decode calls that ran were handed, by count: mlasim's CPU kernel declares fp8
// e4m3fn q and KV, and the campaign's fp8 steps on e4m3fn targets hand it both (q follows the KV
// cache's dtype, ATOM#287); the counts add up to the calls run.
TEST(KutCampaign, SaysWhichFormatsTheCallsThatRanWereHanded) {
  const Out r = Campaign("sentinel", Lib("cpu"), fs::path(), 64);
  ASSERT_NE(r.code, 2) << r.out << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("decode calls: (\\d+) run, "))) << r.out;
  const int run = std::stoi(m[1]);
  ASSERT_TRUE(std::regex_search(r.out, m,
                                std::regex("decode calls run by format: q bf16, kv bf16 (\\d+); "
                                           "q fp8_e4m3fn, kv fp8_e4m3fn (\\d+)\n")))
      << r.out;
  EXPECT_GT(std::stoi(m[2]), 0) << r.out;
  EXPECT_EQ(std::stoi(m[1]) + std::stoi(m[2]), run) << r.out;
}

// A kernel described as FlashMLA's (dense only, bf16 KV, page size a multiple of 64 and at most
// 64: tests/kut/lib/kut_page64.cpp) gets steps it runs: every decode call it sees is a page-64
// bf16 dense call (a call outside its description would be an error return, a KUT-fault
// finding "called outside its description"), and calls do run. Without the limits the same
// seeds draw sparse, fp8 and page-1 steps (KernelLimitsGen.* in
// tests/fuzz/kernel_limits_test.cpp). What the campaign does find (aiter's decode_update moving
// pieces of a 64-token-page plan by tokens, tests/cases/H-decode-update-on-paged-plan.json) is
// the engine's, seen through the CPU kernel that runs aiter's plan as given.
TEST(KutCampaign, GeneratesStepsAKernelWithFlashMlasLimitsRuns) {
  const fs::path log = Tmp("page64.log"), out = Tmp("page64");
  ::setenv("MLASIM_KUT_PAGE64_LOG", log.c_str(), 1);
  const Out r = Campaign("sentinel", Lib("example_page64"), out);
  ::unsetenv("MLASIM_KUT_PAGE64_LOG");
  ASSERT_NE(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("cases 32 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kernel under test: example-page64"), std::string::npos) << r.out;
  std::ifstream f(log);
  std::string line;
  int calls = 0;
  while (std::getline(f, line)) {
    EXPECT_EQ(line, "decode page 64 kv 1 sparse 0");
    ++calls;
  }
  EXPECT_GE(calls, 32) << r.out;  // at least one decode call per case
  const std::regex run("decode calls: ([0-9]+) run, ([0-9]+) skipped, 0 unsupported");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, run)) << r.out;
  EXPECT_GT(std::stoi(m[1]), 0);
  EXPECT_LE(std::stoi(m[1]), calls);  // calls whose worker crashed report nothing
  // every call it ran was handed bf16 q and KV (the only formats it declares)
  EXPECT_NE(r.out.find("decode calls run by format: q bf16, kv bf16 " + m[1].str() + "\n"),
            std::string::npos)
      << r.out;
  // The most frequent reason whole (a head-folded plan's, ~130 characters, was cut at 120).
  EXPECT_NE(r.out.find("the harness lays q out unfolded)\n"), std::string::npos) << r.out;
  if (fs::exists(out))
    for (const auto& [sig, doc] : Findings(out)) {
      const std::string detail = doc["finding"]["violation"]["detail"].get<std::string>();
      EXPECT_EQ(detail.find("outside its description"), std::string::npos) << sig << ": " << detail;
      EXPECT_EQ(doc["kv_cache"]["page_size"], 64) << sig;
    }
  fs::remove(log);
  fs::remove_all(out);
}

// A finding of a limited kernel reproduces within its limits: the reproduce command names the
// kernel, and `fuzz --reproduce` with it regenerates the page-64 bf16 dense case.
TEST(KutCampaign, FindingsOfALimitedKernelReproduceWithinItsLimits) {
  const fs::path out = Tmp("page64_tile64");
  const Out r = Campaign("sentinel", Lib("example_page64_tile64"), out);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  const auto findings = Findings(out);
  ASSERT_FALSE(findings.empty());
  for (const auto& [sig, doc] : findings) {
    SCOPED_TRACE(sig);
    EXPECT_EQ(doc["kv_cache"]["page_size"], 64);
    const std::string cmd = doc["finding"]["reproduce"]["command"].get<std::string>();
    EXPECT_NE(cmd.find(" --gpu sentinel --kernel-under-test "), std::string::npos) << cmd;
    EXPECT_EQ(cmd.find("--head-dims"), std::string::npos) << cmd;  // not a shaping flag
    EXPECT_NE(cmd.find("example_page64_tile64.so"), std::string::npos) << cmd;
    const Out gen = Cli(Words(cmd));
    ASSERT_EQ(gen.code, 0) << gen.err;
    const nlohmann::json s = nlohmann::json::parse(gen.out);
    EXPECT_EQ(s["kv_cache"]["page_size"], 64) << gen.out;
    EXPECT_EQ(s["model"]["kv_dtype"], "bf16") << gen.out;
  }
  fs::remove_all(out);
}

TEST(KutCampaign, FindsAndShrinksAKernelStoringWhole64RowTiles) {
  const fs::path dir = Tmp("tile64");
  const Out r = Campaign("sentinel", Lib("example_tile64"), dir);
  ASSERT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("kernel under test: example-tile64"), std::string::npos);
  // Rows past a work item's end are written: o and lse (unsplit items), partial_o and
  // partial_lse (split ones), all seen in the sentinel bytes.
  const auto findings = Findings(dir);
  EXPECT_TRUE(findings.count("verify|dense_decode|o|write|KUT-contract")) << r.out;
  ExpectFoundAndShrunk(dir, "write|KUT-contract");
  const std::regex outputs(R"(\|(o|lse|partial_o|partial_lse)\|write\|KUT-contract$)");
  for (const auto& [sig, doc] : findings) EXPECT_TRUE(std::regex_search(sig, outputs)) << sig;
  fs::remove_all(dir);
}

TEST(KutCampaign, FindsAndShrinksAKernelReadingARowPastQForZeroKvItems) {
  const fs::path dir = Tmp("qover");
  const Out r = Campaign("guard", Lib("example_q_overread"), dir);
  ASSERT_EQ(r.code, 1) << r.out << r.err;
  ExpectFoundAndShrunk(dir, "q|read|KUT-contract");
  for (const auto& [sig, doc] : Findings(dir)) {  // the command names the campaign's mode
    const std::string cmd = doc["finding"]["reproduce"]["command"].get<std::string>();
    EXPECT_NE(cmd.find(" --gpu guard"), std::string::npos) << cmd;
    EXPECT_EQ(cmd.find("sentinel"), std::string::npos) << cmd;
  }
  // The faults end workers; the pool replaces them and the campaign goes on to its budget.
  EXPECT_NE(r.out.find("cases 32 "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(" 0 worker replacement(s)"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

// A campaign given the library by a relative path, as a user types it from the repository root
// (build/bin/lib.so): each finding file's replay command, which runs from --out, names the
// library by its absolute path, so it replays from there. It named the path as typed, which does
// not resolve from --out (exit 2, "--kernel-under-test: build/bin/... does not exist").
TEST(KutCampaign, AFindingsReplayCommandNamesTheLibraryByItsAbsolutePath) {
  const fs::path dir = Tmp("relative");
  const fs::path cwd = fs::current_path();
  fs::current_path(fs::path(MLASIM_KUT_DIR).parent_path());
  const std::string relative =
      (fs::path(MLASIM_KUT_DIR).filename() / "libmlasim_kut_example_q_overread.so").string();
  const Out r = Campaign("guard", relative, dir);
  fs::current_path(cwd);
  ASSERT_EQ(r.code, 1) << r.out << r.err;
  for (const auto& [sig, doc] : Findings(dir)) {
    const std::string cmd = doc["finding"]["reproduce"]["replay"].get<std::string>();
    EXPECT_NE(cmd.find(" --kernel-under-test " +
                       fs::path(Lib("example_q_overread")).lexically_normal().string() + " "),
              std::string::npos)
        << cmd;
  }
  ExpectFoundAndShrunk(dir, "q|read|KUT-contract");  // each replays from --out
  fs::remove_all(dir);
}

// In both modes: the KV cache starts at an unmapped page in sentinel mode too, so the read of
// row -1 faults instead of reading sentinel bytes unseen.
TEST(KutCampaign, FindsAndShrinksAKernelDereferencingIndexMinusOne) {
  for (const std::string mode : {"guard", "sentinel"}) {
    const fs::path dir = Tmp("minus1-" + mode);
    const Out r = Campaign(mode, Lib("example_minus_one"), dir);
    ASSERT_EQ(r.code, 1) << mode << '\n' << r.out << r.err;
    ExpectFoundAndShrunk(dir, "kv_cache|read|KUT-contract");
    for (const auto& [sig, doc] : Findings(dir))
      EXPECT_NE(sig.find("|sparse_decode|"), std::string::npos) << sig;  // top-k indices only
    fs::remove_all(dir);
  }
}

// A resumed campaign with the same command line finds nothing new: exit 0, the findings listed
// as earlier ones.
TEST(KutCampaign, ResumeWithTheSameKernelFindsNothingNew) {
  const fs::path dir = Tmp("resume");
  const Out a = Campaign("guard", Lib("example_q_overread"), dir);
  ASSERT_EQ(a.code, 1) << a.err;
  std::vector<std::string> again = {"fuzz",
                                    "--gpu",
                                    "guard",
                                    "--kernel-under-test",
                                    Lib("example_q_overread"),
                                    "--cases",
                                    "32",
                                    "--seed",
                                    "1",
                                    "--small",
                                    "--ignore-known",
                                    "--head-dims",
                                    "32,16",
                                    "--jobs",
                                    "2",
                                    "--out",
                                    dir.string(),
                                    "--resume"};
  const Out b = Cli(again);
  EXPECT_EQ(b.code, 0) << b.out << b.err;
  EXPECT_NE(b.out.find(" 0 new, "), std::string::npos) << b.out;
  // Another kernel on the same folder is another campaign: --resume refuses it.
  again[4] = Lib("cpu");
  const Out c = Cli(again);
  EXPECT_EQ(c.code, 2) << c.out << c.err;
  fs::remove_all(dir);
}

// A device fault that does not recur when its call runs again alone (what a worker sees when
// another client of the same NVIDIA MPS daemon faulted: every client on the GPU loses its
// context) is no finding. Injected once (MLASIM_KUT_TEST_FAULT_ONCE) into a campaign of the
// whole-tile kernel: the findings are exactly those of the same campaign without it, and the
// summary counts the fault and its worker's replacement.
TEST(KutCampaign, AFaultThatDoesNotRecurAloneIsNoFinding) {
  const fs::path plain = Tmp("fault_once_plain"), injected = Tmp("fault_once_injected");
  const fs::path marker = Tmp("fault_once_marker");
  const ScopedEnv no_mps("CUDA_MPS_PIPE_DIRECTORY", kNoMps);  // the suffixes below: no daemon's
  const Out base = Campaign("sentinel", Lib("example_tile64"), plain);
  Out r;
  {
    const ScopedEnv fault("MLASIM_KUT_TEST_FAULT_ONCE", marker.string());
    r = Campaign("sentinel", Lib("example_tile64"), injected);
  }
  EXPECT_TRUE(fs::exists(marker)) << "the fault was not injected";
  EXPECT_EQ(r.code, base.code) << r.out << r.err;
  // The kernel's own whole-tile overruns end workers in both runs (host faults past a sentinel
  // region); the injected fault ends one more.
  const std::regex replaced(R"(; (\d+) worker replacement\(s\)(.*)\n)");
  std::smatch b, i;
  ASSERT_TRUE(std::regex_search(base.out, b, replaced)) << base.out;
  ASSERT_TRUE(std::regex_search(r.out, i, replaced)) << r.out;
  EXPECT_EQ(std::stoi(i[1]), std::stoi(b[1]) + 1);
  EXPECT_EQ(b[2], "");
  EXPECT_EQ(i[2], ", 1 device fault(s) that did not recur alone (not findings)");
  std::vector<std::string> want, got;
  for (const auto& [sig, doc] : Findings(plain)) want.push_back(sig);
  for (const auto& [sig, doc] : Findings(injected)) got.push_back(sig);
  EXPECT_FALSE(want.empty());
  EXPECT_EQ(got, want);
  for (const fs::path& p : {plain, injected, marker}) fs::remove_all(p);
}

// An NVIDIA MPS daemon is recognised by the special file `control` in its pipe folder
// (CUDA_MPS_PIPE_DIRECTORY) when something listens on it: a UNIX socket that accepts (the H200's
// driver makes one) or a FIFO with a reader. A folder without it, a plain file or folder of that
// name, a socket nobody listens on (a daemon that was killed) is none. Under a daemon, a device
// fault makes every later worker start outside it: here a fault injected once (the fault another
// MPS client's fault causes) is no finding, as without MPS.
TEST(KutCampaign, WorkersUnderAnMpsDaemonAreSaidSoAndLeaveItAfterADeviceFault) {
  // a short folder: a socket path must fit sockaddr_un's 108 bytes
  const fs::path pipe = fs::path("/tmp") / ("mlasim_mps_" + std::to_string(::getpid()));
  const fs::path plain = Tmp("mps_plain"), injected = Tmp("mps_injected");
  const fs::path marker = Tmp("mps_marker");
  fs::remove_all(pipe);
  fs::create_directories(pipe);
  struct Cleanup {
    std::vector<fs::path> paths;
    int fd = -1;
    ~Cleanup() {
      if (fd >= 0) ::close(fd);
      for (const fs::path& p : paths) fs::remove_all(p);
    }
  } cleanup{{pipe, plain, injected, marker}};
  const ScopedEnv mps("CUDA_MPS_PIPE_DIRECTORY", pipe.string());
  const std::string kUnder = "; an MPS daemon was listening (workers start as its clients)";
  const std::string kLeft = "; workers left the MPS daemon after a device fault";
  const std::string control = (pipe / "control").string();
  // (the daemon checks read only the pool's summary line: 2 cases; the fault-once pair compares
  // findings: the full 32)
  auto summary = [&](const fs::path& out, int cases = 2) {
    const Out r = Campaign("sentinel", Lib("example_tile64"), out, cases);
    const size_t at = r.out.find("worker replacement(s)");
    return at == std::string::npos ? r.out : r.out.substr(at, r.out.find('\n', at) - at);
  };
  // no control file, a plain file, a folder: no daemon
  EXPECT_EQ(summary("").find(kUnder), std::string::npos);
  { std::ofstream(control) << "x"; }
  EXPECT_EQ(summary("").find(kUnder), std::string::npos);
  fs::remove(control);
  fs::create_directory(control);
  EXPECT_EQ(summary("").find(kUnder), std::string::npos);
  fs::remove(control);
  // a UNIX socket: bound but not listening (refuses), then listening (a daemon)
  cleanup.fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(cleanup.fd, 0) << std::strerror(errno);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(control.size(), sizeof addr.sun_path);
  std::memcpy(addr.sun_path, control.c_str(), control.size());
  ASSERT_EQ(::bind(cleanup.fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0)
      << std::strerror(errno);
  EXPECT_EQ(summary("").find(kUnder), std::string::npos);
  ASSERT_EQ(::listen(cleanup.fd, 64), 0) << std::strerror(errno);
  EXPECT_NE(summary("").find(kUnder), std::string::npos);
  ::close(cleanup.fd);
  cleanup.fd = -1;
  fs::remove(control);
  // a FIFO without a reader: none; with one (held open here): a daemon, and a device fault once
  // gives the campaign's findings, no more, and the pool leaves the daemon
  ASSERT_EQ(::mkfifo(control.c_str(), 0600), 0) << std::strerror(errno);
  EXPECT_EQ(summary("").find(kUnder), std::string::npos);
  cleanup.fd = ::open(control.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(cleanup.fd, 0) << std::strerror(errno);
  const std::string base = summary(plain, 32);
  EXPECT_NE(base.find(kUnder), std::string::npos) << base;
  EXPECT_EQ(base.find(kLeft), std::string::npos) << base;
  std::string once;
  {
    const ScopedEnv fault("MLASIM_KUT_TEST_FAULT_ONCE", marker.string());
    once = summary(injected, 32);
  }
  EXPECT_TRUE(fs::exists(marker)) << "the fault was not injected";
  EXPECT_NE(
      once.find(", 1 device fault(s) that did not recur alone (not findings)" + kUnder + kLeft),
      std::string::npos)
      << once;
  std::vector<std::string> want, got;
  for (const auto& [sig, doc] : Findings(plain)) want.push_back(sig);
  for (const auto& [sig, doc] : Findings(injected)) got.push_back(sig);
  EXPECT_FALSE(want.empty());
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace mlasim::cli
