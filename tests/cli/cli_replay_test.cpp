// `mlasim replay` and `mlasim explain-fault` in process: exit codes, JSON keys, layout output and
// attribution, bad input naming the field.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tools/mlasim/cli.h"
#include "tools/mlasim/scenario_input.h"

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
  return fs::temp_directory_path() / ("mlasim_replay_" + std::to_string(::getpid()) + "_" + name);
}

// explain-fault --log of several ranks' faults: the first is explained, the others named with
// how to explain each (text and --json); one fault line prints no such line.
TEST(CliReplay, ExplainFaultNamesTheLogsOtherFaultAddresses) {
  const fs::path layout = Tmp("others_layout.json"), log = Tmp("others.log");
  ASSERT_EQ(Cli({"replay", "--builtin", "seed", "--layout-out", layout.string()}).code, 1);
  std::ofstream(log) << "Memory access fault by GPU node-2 (Agent handle: 0x1) on address "
                        "0x7f1000200000. Reason: Page not present\n"
                        "Memory access fault by GPU node-3 (Agent handle: 0x1) on address "
                        "0x7f1000300000. Reason: Page not present\n";
  const Out t = Cli({"explain-fault", "--layout", layout.string(), "--log", log.string()});
  EXPECT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("\nthe log names 1 more fault address, not explained here: "
                       "0x7f1000300000 (explain each with --address)\n"),
            std::string::npos)
      << t.out;
  const Out j =
      Cli({"explain-fault", "--layout", layout.string(), "--log", log.string(), "--json"});
  ASSERT_EQ(j.code, 0) << j.err;
  EXPECT_EQ(nlohmann::json::parse(j.out)["other_addresses"],
            nlohmann::json::array({"0x7f1000300000"}));
  const Out a = Cli({"explain-fault", "--layout", layout.string(), "--address", "0x7f1000200000"});
  EXPECT_EQ(a.out.find("more fault address"), std::string::npos) << a.out;
  // The call whose layout it is, as a clause of its own (it read as a dangling line before).
  EXPECT_NE(a.out.find("\n(in the layout of call draft_step_0 / sparse_decode)\n"),
            std::string::npos)
      << a.out;
  fs::remove(layout);
  fs::remove(log);
}

// Two output flags naming one file: each write replaced the one before and one report was left
// (replay --html r --junit r --layout-out r --scenario-out r printed the JUnit XML only). Refused
// before any work, naming both flags; paths are compared as files ("d/../r" is "r").
TEST(CliReplay, TwoOutputsOfOneFileAreRefusedNamingBothFlags) {
  const fs::path dir = Tmp("outputs");
  fs::create_directories(dir / "sub");
  const std::string r = (dir / "r.out").string(), alias = (dir / "sub" / ".." / "r.out").string();
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"replay", "--builtin", "seed", "--html", r, "--junit", r},
       "mlasim replay: error: --junit: " + r + " is also --html's output (each output needs a " +
           "file of its own)\n"},
      {{"replay", "--builtin", "seed", "--layout-out", r, "--scenario-out", alias},
       "mlasim replay: error: --scenario-out: " + alias +
           " is also --layout-out's output (each output needs a file of its own)\n"},
      {{"replay", "--builtin", "seed", "--html", r, "--scenario-out", r},
       "mlasim replay: error: --scenario-out: " + r +
           " is also --html's output (each output needs a file of its own)\n"},
      {{"fuzz", "--cases", "1", "--html", r, "--junit", r},
       "mlasim fuzz: error: --junit: " + r + " is also --html's output (each output needs a " +
           "file of its own)\n"},
  };
  for (const auto& [args, want] : cases) {
    const Out o = Cli(args);
    EXPECT_EQ(o.code, 2) << o.err;
    EXPECT_EQ(o.err, want);
    EXPECT_EQ(o.out, "");
    EXPECT_FALSE(fs::exists(r));  // refused before anything was written
  }
  // Each output its own file: all four written.
  const Out ok = Cli({"replay", "--builtin", "seed", "--html", r, "--junit", r + ".xml",
                      "--layout-out", r + ".layout", "--scenario-out", r + ".json"});
  EXPECT_EQ(ok.code, 1) << ok.err;  // the seed's violations
  for (const std::string& f : {r, r + ".xml", r + ".layout", r + ".json"})
    EXPECT_GT(fs::file_size(f), 100u) << f;
  fs::remove_all(dir);
}

TEST(CliReplay, SeedBeforeTheFixExitsOneWithTheJsonKeys) {
  const Out r = Cli({"replay", "--builtin", "seed", "--json"});
  EXPECT_EQ(r.code, 1) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* k :
       {"case", "profile", "verdict", "scheduled_tokens", "running_tokens", "calls", "violations"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["verdict"], "violations");
  EXPECT_EQ(j["profile"], "atom-2026-08");
  ASSERT_EQ(j["violations"].size(), 2u);
  for (const auto& v : j["violations"]) {
    for (const char* k : {"step", "call", "kernel", "buffer", "access", "first_row", "last_row",
                          "rows_past_end", "bytes_past_end", "work_items", "consequence"})
      EXPECT_TRUE(v.contains(k)) << k;
    EXPECT_EQ(v["step"], "draft_step_0");
    EXPECT_EQ(v["rows_past_end"], 4);
  }
}

TEST(CliReplay, ProfileOverrideMakesItClean) {
  const Out r = Cli({"replay", "--builtin", "seed", "--profile", "atom-2026-11"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("verdict: clean"), std::string::npos);
}

TEST(CliReplay, JsonIsByteIdenticalAcrossRuns) {
  EXPECT_EQ(Cli({"replay", "--builtin", "seed-b35", "--json"}).out,
            Cli({"replay", "--builtin", "seed-b35", "--json"}).out);
}

TEST(CliReplay, LayoutOutFeedsExplainFault) {
  const fs::path layout = Tmp("layout.json");
  const Out r = Cli({"replay", "--builtin", "seed-b35", "--layout-out", layout.string()});
  EXPECT_EQ(r.code, 1);
  const fs::path log = Tmp("fault.log");
  std::ofstream(log) << "[rank1] Memory access fault by GPU node-3 (Agent handle: 0x1) on address "
                        "0x7f1000200000. Reason: Page not present or supervisor privilege.\n";
  const Out e =
      Cli({"explain-fault", "--layout", layout.string(), "--log", log.string(), "--json"});
  ASSERT_EQ(e.code, 0) << e.err;
  const auto j = nlohmann::json::parse(e.out);
  EXPECT_EQ(j["buffer"], "q");
  EXPECT_EQ(j["bytes_past_end"], 22528);
  // ROCm names the page: a page-aligned address from its log is any byte of the 4096-byte page,
  // rows 142..142 of q (9216-byte rows), head and column unknown.
  EXPECT_EQ(j["page_bytes"], 4096);
  EXPECT_EQ(j["first_row"], 142);
  EXPECT_EQ(j["last_row"], 142);
  EXPECT_EQ(j["head"], -1);
  EXPECT_EQ(j["before_start"], false);
  // The replay's q read past the end covers those rows: the call and its work items are named.
  ASSERT_FALSE(j["accesses"].empty()) << e.out;
  EXPECT_EQ(j["accesses"][0]["step"], "draft_step_0");
  EXPECT_EQ(j["accesses"][0]["access"], "read");
  // --page-bytes 0: the exact byte, with head and column.
  const Out x = Cli({"explain-fault", "--layout", layout.string(), "--log", log.string(),
                     "--page-bytes", "0", "--json"});
  ASSERT_EQ(x.code, 0) << x.err;
  const auto k = nlohmann::json::parse(x.out);
  EXPECT_EQ(k["row"], 142);
  EXPECT_EQ(k["head"], 7);
  EXPECT_EQ(k["page_bytes"], 0);
  const Out t = Cli({"explain-fault", "--layout", layout.string(), "--address", "0x7f1000200000"});
  EXPECT_NE(t.out.find("22528 bytes past the end of q"), std::string::npos) << t.out;
  for (const char* bad : {"-1", "1073741825", "3", "4095", "2147483648"}) {
    const Out b = Cli({"explain-fault", "--layout", layout.string(), "--address", "0x7f1000200000",
                       "--page-bytes", bad});
    EXPECT_EQ(b.code, 2) << bad;
    EXPECT_EQ(b.err, std::string("mlasim explain-fault: error: --page-bytes: must be in "
                                 "0..1073741824 (0: an exact address) and a power of 2 (got ") +
                         bad + ")\n");
  }
  // Powers of 2 from 1 (the exact byte's row) to 2^30 (the limit).
  for (const char* good : {"1", "2", "4096", "1073741824"}) {
    const Out g = Cli({"explain-fault", "--layout", layout.string(), "--address", "0x7f1000200000",
                       "--page-bytes", good});
    EXPECT_EQ(g.code, 0) << good << ": " << g.err;
  }
  fs::remove(layout);
  fs::remove(log);
}

// --kernel NAME beside a decode contract of another variant: the contract would decide the
// kernel and --kernel do nothing, so both are refused (exit 2, naming both); a contract of that
// variant, a contract of another call kind, or no --kernel run as before.
TEST(CliReplay, KernelBesideADecodeContractOfAnotherVariantExitsTwoNamingBoth) {
  const std::string tile64 =
      (fs::path(MLASIM_SOURCE_DIR) / "tests/cases/contracts/tile64-decode.json").string();
  for (const char* command : {"replay", "numerics"}) {
    Out r = Cli({command, "--builtin", "seed", "--kernel", "opus", "--contract", tile64});
    EXPECT_EQ(r.code, 2) << command << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_NE(r.err.find("--kernel: --kernel opus and --contract " + tile64 +
                         " (decode contract tile64-decode, variant tile64) both choose the "
                         "decode kernel and disagree; the contract would win and --kernel do "
                         "nothing: give one of them, or a contract of variant opus\n"),
              std::string::npos)
        << command << r.err;
    // The contract's own variant: no conflict, it runs (exit 0 or 1, never 2).
    r = Cli({command, "--builtin", "seed", "--kernel", "tile64", "--contract", tile64});
    EXPECT_NE(r.code, 2) << command << r.err;
    // No --kernel: the contract alone, as before.
    r = Cli({command, "--builtin", "seed", "--contract", tile64});
    EXPECT_NE(r.code, 2) << command << r.err;
  }
  // A contract of another call kind leaves --kernel the decode kernel.
  const fs::path reduce = Tmp("reduce-contract.json");
  std::ofstream(reduce) << R"({"contract": 1, "extends": "mla_reduce_v1", "name": "my-reduce",
    "variant": "mla_reduce_v1"})";
  Out r = Cli({"replay", "--builtin", "seed", "--kernel", "opus", "--contract", reduce.string()});
  EXPECT_NE(r.code, 2) << r.err;
  // A decode contract inside the scenario ("contracts") is named by its JSON path.
  const fs::path scenario = Tmp("inline-contract.json");
  ASSERT_EQ(Cli({"replay", "--builtin", "seed", "--scenario-out", scenario.string()}).code, 1);
  nlohmann::json j = nlohmann::json::parse(std::ifstream(scenario));
  j["contracts"] = nlohmann::json::array({nlohmann::json::parse(std::ifstream(tile64))});
  std::ofstream(scenario) << j.dump();
  r = Cli({"replay", scenario.string(), "--kernel", "hk"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--kernel: --kernel hk and the scenario's $.contracts[0] (decode contract "
                       "tile64-decode, variant tile64) both choose the decode kernel"),
            std::string::npos)
      << r.err;
  EXPECT_NE(Cli({"replay", scenario.string(), "--kernel", "tile64"}).code, 2);
  fs::remove(reduce);
  fs::remove(scenario);
}

// A contract loop whose bounds are 2^63 or more apart: to - from overflowed int64, read
// negative, passed the 2^26-trip bound and ran ~2^63 iterations (replay hung). Now the trip count
// is exact (saturated at INT64_MAX for the report) and the loop is a class J hang at once. The
// seed's grid is 256 workgroups: from -2^62 walks 2^62 + 256 trips.
TEST(CliReplay, ALoopOfMoreThanInt64MaxTripsIsReportedNotRun) {
  const fs::path contract = Tmp("loop.json");
  for (const auto& [from, trips] :
       std::vector<std::pair<int64_t, std::string>>{{INT64_MIN, "9223372036854775807"},
                                                    {INT64_MIN + 1, "9223372036854775807"},
                                                    {-(int64_t{1} << 62), "4611686018427388160"}}) {
    std::ofstream(contract) << R"({"extends": "asm", "program": [{"loop": "c", "from": )" << from
                            << R"(, "to": "grid", "attribute": "workgroup", "body": [{"read": "q",
                            "rows": [0, 1]}]}]})";
    const Out r = Cli({"replay", "--builtin", "seed", "--contract", contract.string(), "--json"});
    EXPECT_EQ(r.code, 1) << from << ": " << r.err;
    bool hang = false;
    const nlohmann::json report = nlohmann::json::parse(r.out);  // held: the loop reads into it
    for (const auto& v : report.at("violations"))
      if (v.value("detail", "").find("would walk " + trips + " ") != std::string::npos) hang = true;
    EXPECT_TRUE(hang) << from << ": " << r.out.substr(0, 2000);
  }
  fs::remove(contract);
}

TEST(CliReplay, BadInputExitsTwoNamingTheField) {
  const fs::path bad = fs::path(MLASIM_SOURCE_DIR) / "tests/cases/bad/heads-is-a-string.json";
  Out r = Cli({"replay", bad.string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("$.model.heads"), std::string::npos) << r.err;
  r = Cli({"replay", "--builtin", "nope"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--builtin"), std::string::npos);
  r = Cli({"replay", "--builtin", "seed", "--profile", "atom-1999"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--profile"), std::string::npos);
  r = Cli({"replay", "/nonexistent/case.json"});
  EXPECT_EQ(r.code, 2);
  r = Cli({"explain-fault", "--layout", "/nonexistent.json", "--address", "0x10"});
  EXPECT_EQ(r.code, 2);
  const fs::path log = Tmp("nolog.log");
  std::ofstream(log) << "RuntimeError: CUDA error: an illegal memory access was encountered\n";
  const fs::path layout = Tmp("l2.json");
  Cli({"replay", "--builtin", "seed", "--layout-out", layout.string()});
  r = Cli({"explain-fault", "--layout", layout.string(), "--log", log.string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no address"), std::string::npos) << r.err;
  fs::remove(log);
  fs::remove(layout);
}

// An error of an expansion after the load (whose own expansion passed) names the scenario file as
// the load's errors do, and what changed the scenario since: here a mutant whose decode consumes
// the capture plan, against capture contexts that do not fill the rung. It said
// "$.capture.contexts: ..." without the file.
TEST(CliReplay, AnExpansionErrorAfterTheLoadNamesTheFileAndWhatChangedIt) {
  const fs::path file = Tmp("capture.json");
  ASSERT_EQ(Cli({"replay", "--builtin", "seed", "--scenario-out", file.string()}).code, 1);
  nlohmann::json doc = nlohmann::json::parse(std::ifstream(file));
  doc["capture"] = {{"contexts", {5, 6}}};
  std::ofstream(file) << doc.dump(1);
  EXPECT_EQ(Cli({"replay", file.string()}).code, 1);  // loads and replays
  const Out r = Cli({"replay", file.string(), "--mutant", "engine-decode-plan-from-capture"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "mlasim replay: error: " + file.string() +
                       ": $.capture.contexts: needs one context per captured request (the rung R "
                       "= 40) (with simulator mutant engine-decode-plan-from-capture)\n");
  fs::remove(file);
}

// ScenarioArgs::InFile, the one wrapper of those errors: a JSON path is named in the file, with
// what changed the scenario; a built-in case has no file; an internal error is left as it is.
TEST(CliReplay, ScenarioArgsInFileNamesJsonPathsOnly) {
  ScenarioArgs a;
  a.case_file = "c.json";
  const Status bad = InvalidArgumentError("$.batch.contexts", "too long");
  EXPECT_EQ(a.InFile(bad).ToString(), "c.json: $.batch.contexts: too long");
  EXPECT_EQ(a.InFile(bad, "simulator mutant m").ToString(),
            "c.json: $.batch.contexts: too long (with simulator mutant m)");
  EXPECT_EQ(a.InFile(InvalidArgumentError("--kernel", "x")).ToString(), "--kernel: x");
  EXPECT_EQ(a.InFile(InternalError("$.x", "bug")).ToString(),
            InternalError("$.x", "bug").ToString());
  EXPECT_TRUE(a.InFile(OkStatus(), "simulator mutant m").ok());
  ScenarioArgs builtin;
  builtin.builtin = "seed";
  EXPECT_EQ(builtin.InFile(bad).ToString(), "$.batch.contexts: too long");
}

}  // namespace
}  // namespace mlasim::cli
