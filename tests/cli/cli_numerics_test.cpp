// `mlasim numerics` in process: the founding case runs within tolerance with one row per decode
// call, the JSON keys and its bytes are stable, bad input exits 2 naming the field, a case file
// from tests/cases runs, and a plan that decode_update broke fails.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "sim/replay.h"
#include "sim/scenario_json.h"
#include "tools/mlasim/cli.h"

namespace mlasim::cli {
namespace {

namespace fs = std::filesystem;

struct Out {
  int code;
  std::string out, err;
};

Out Numerics(std::vector<std::string> args) {
  args.insert(args.begin(), "numerics");
  std::ostringstream o, e;
  const int code = RunMlasim(args, o, e);
  return {code, o.str(), e.str()};
}

std::string Case(const std::string& name) {
  return (fs::path(MLASIM_SOURCE_DIR) / "tests/cases" / name).string();
}

// Lines of the text table that start with a call index.
std::vector<std::string> CallRows(const std::string& text) {
  std::vector<std::string> rows;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t p = line.find_first_not_of(' ');
    if (p != std::string::npos && p < 4 && std::isdigit(static_cast<unsigned char>(line[p])))
      rows.push_back(line);
  }
  return rows;
}

TEST(CliNumerics, SeedRunsOneRowPerDecodeCallWithinTolerance) {
  const Out r = Numerics({"--builtin", "seed"});
  EXPECT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_TRUE(r.err.empty()) << r.err;
  const std::vector<std::string> rows = CallRows(r.out);
  ASSERT_EQ(rows.size(), 4u) << r.out;  // verify, draft_step_0, draft_step_1, draft_step_2
  const char* steps[] = {"verify", "draft_step_0", "draft_step_1", "draft_step_2"};
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_NE(rows[i].find(steps[i]), std::string::npos) << rows[i];
    EXPECT_NE(rows[i].find(" ok"), std::string::npos) << rows[i];
  }
  EXPECT_NE(r.out.find("verdict: within tolerance (4/4 decode calls ok)"), std::string::npos)
      << r.out;
  // The parallel planner leaves the zero-KV padding tokens 156..159 unwritten: expected.
  EXPECT_NE(r.out.find("padding-row finding"), std::string::npos) << r.out;
}

TEST(CliNumerics, JsonHasTheKeysErrorsBelowToleranceAndStableBytes) {
  const Out r = Numerics({"--builtin", "seed", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, Numerics({"--builtin", "seed", "--json"}).out);
  const auto j = nlohmann::json::parse(r.out);
  for (const char* k : {"case", "profile", "target", "kernel", "seed", "accumulate", "reduction",
                        "calls", "verdict", "padding_row_findings", "real_row_findings"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["verdict"], "within_tolerance");
  EXPECT_EQ(j["real_row_findings"], 0);
  EXPECT_EQ(j["reduction"]["max_context"], 512);
  EXPECT_EQ(j["reduction"]["head_dim_qk"], 80);
  EXPECT_EQ(j["reduction"]["head_dim_v"], 64);
  EXPECT_EQ(j["reduction"]["topk_after"], 512);
  ASSERT_EQ(j["calls"].size(), 4u);
  for (const auto& c : j["calls"]) {
    for (const char* k :
         {"index", "step", "call", "row", "plan", "q_rows", "heads", "max_keys", "o", "lse",
          "poison", "within_tolerance", "verdict", "unexplained_nan", "monolithic_nan"})
      EXPECT_TRUE(c.contains(k)) << k;
    EXPECT_EQ(c["verdict"], "ok");
    EXPECT_TRUE(c["within_tolerance"].get<bool>());
    for (const char* t : {"o", "lse"}) {
      for (const char* k : {"max_abs", "max_rel", "cos_diff", "tolerance", "passed"})
        EXPECT_TRUE(c[t].contains(k)) << t << "." << k;
      EXPECT_LE(c[t]["max_abs"].get<double>(), c[t]["tolerance"]["atol"].get<double>());
      EXPECT_LE(c[t]["cos_diff"].get<double>(), c[t]["tolerance"]["cos_diff"].get<double>());
    }
    EXPECT_LT(c["o"]["max_abs"].get<double>(), 1e-5);  // fp32 accumulation, ~1e-7 measured
    EXPECT_EQ(c["poison"]["real_row_findings"], 0);
  }
  EXPECT_EQ(j["calls"][0]["poison"]["first_padding"]["kind"], "never_written");
}

TEST(CliNumerics, SeedAndFullDimsChangeTheInputsNotTheVerdict) {
  const auto a = nlohmann::json::parse(Numerics({"--builtin", "seed", "--json"}).out);
  const Out r = Numerics({"--builtin", "seed", "--json", "--seed", "7", "--max-context", "64"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto b = nlohmann::json::parse(r.out);
  EXPECT_EQ(b["seed"], 7);
  EXPECT_EQ(b["reduction"]["topk_after"], 64);
  EXPECT_NE(a["calls"][0]["o"]["max_abs"], b["calls"][0]["o"]["max_abs"]);
  const Out f = Numerics({"--builtin", "seed", "--full-dims", "--max-context", "64", "--json"});
  ASSERT_EQ(f.code, 0) << f.err;
  EXPECT_EQ(nlohmann::json::parse(f.out)["reduction"]["head_dim_qk"], 576);
}

// The decode contract's zero_kv and empty_rows reach each call (OPUS: zero-KV items skipped,
// keyless rows written), and --zero-kv / --empty-rows replace them, in the header and the JSON.
TEST(CliNumerics, ZeroKvAndEmptyRowsComeFromTheContractUnlessGiven) {
  const std::vector<std::string> opus = {"--builtin", "dense-mtp", "--profile",     "atom-2026-11",
                                         "--kernel",  "opus",      "--max-context", "64"};
  Out r = Numerics(opus);
  EXPECT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("semantics: invalid_index fault, masked_keys never_read, empty_rows "
                       "write-zero, zero_kv skip (decode contract aiter-opus-decode)"),
            std::string::npos)
      << r.out;
  std::vector<std::string> args = opus;
  args.push_back("--json");
  auto j = nlohmann::json::parse(Numerics(args).out);
  EXPECT_EQ(j["empty_rows"], "contract");
  EXPECT_EQ(j["zero_kv"], "contract");
  for (const auto& call : j["calls"]) {
    if (!call["launched"].get<bool>()) continue;
    EXPECT_EQ(call["zero_kv"], "skip");
    EXPECT_EQ(call["empty_rows"], "write-zero");
  }
  for (const char* flag : {"--zero-kv", "run", "--empty-rows", "nan"}) args.push_back(flag);
  j = nlohmann::json::parse(Numerics(args).out);
  EXPECT_EQ(j["empty_rows"], "nan");
  EXPECT_EQ(j["zero_kv"], "run");
  for (const auto& call : j["calls"]) {
    if (!call["launched"].get<bool>()) continue;
    EXPECT_EQ(call["zero_kv"], "run");
    EXPECT_EQ(call["empty_rows"], "nan");
  }
}

TEST(CliNumerics, BadInputExitsTwoNamingTheField) {
  struct BadCase {
    std::vector<std::string> args;
    const char* field;
  };
  const BadCase cases[] = {
      {{}, "case: "},
      {{"--builtin", "nope"}, "--builtin: "},
      {{"--builtin", "seed", "--max-context", "0"}, "--max-context: "},
      {{"--builtin", "seed", "--profile", "nope"}, "--profile: "},
      {{"--builtin", "seed", "--kernel", "nope"}, "--kernel: "},
      {{"--builtin", "seed", "--accumulate", "fp16"}, "--accumulate: "},
      {{"--builtin", "seed", "--empty-rows", "maybe"}, "--empty-rows: "},
      {{"--builtin", "seed", "--zero-kv", "writes"}, "--zero-kv: "},
      {{Case("bad/heads-is-a-string.json")}, "$.model.heads: "},
      {{Case("no-such-file.json")}, ""},
  };
  for (const BadCase& c : cases) {
    const Out r = Numerics(c.args);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_EQ(r.err.rfind("mlasim numerics: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(c.field), std::string::npos) << c.field << " in " << r.err;
  }
}

TEST(CliNumerics, TooLargeAfterTheReductionIsBadInput) {
  // dense-mtp with 160k-token contexts at 576 columns: 5 x 160k x 576 > 2^28 values.
  const fs::path file =
      fs::temp_directory_path() / ("mlasim_numerics_" + std::to_string(::getpid()) + ".json");
  std::ostringstream o, e;
  ASSERT_EQ(RunMlasim({"replay", "--builtin", "dense-mtp", "--scenario-out", file.string()}, o, e),
            1)
      << e.str();
  nlohmann::json doc;
  {
    std::ifstream in(file);
    in >> doc;
  }
  doc["batch"]["contexts"] = std::vector<int>(5, 160000);
  {
    std::ofstream out(file);
    out << doc.dump(2);
  }
  const Out big = Numerics({file.string(), "--full-dims", "--max-context", "1048576"});
  EXPECT_EQ(big.code, 2) << big.err << big.out;
  EXPECT_EQ(big.err.rfind("mlasim numerics: error: --full-dims: ", 0), 0u) << big.err;
  const Out reduced = Numerics({file.string(), "--full-dims"});  // capped at 512: fits
  EXPECT_NE(reduced.code, 2) << reduced.err;
  fs::remove(file);
}

TEST(CliNumerics, CaseFileRuns) {
  const Out r = Numerics({Case("A-seed-fixed-profile.json"), "--json"});
  EXPECT_EQ(r.code, 0) << r.err << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["verdict"], "within_tolerance");
  EXPECT_EQ(j["calls"].size(), 4u);
}

// A scenario's explicit index values at slots the reduced step no longer has (top-k and contexts
// capped at 2: positions 3 and 4 of token 1) are named as left out, in the text and the JSON;
// at the default cap they are all in the run.
TEST(CliNumerics, IndexValuesPastTheReducedStepAreNamedAsLeftOut) {
  const std::string file = Case("G-hostile-sparse-indices-masked.json");
  const Out reduced = Numerics({file, "--max-context", "2", "--json"});
  ASSERT_NE(reduced.code, 2) << reduced.err;
  const auto j = nlohmann::json::parse(reduced.out);
  EXPECT_EQ(j["reduction"]["index_values_left_out"], nlohmann::json::array({0, 1}));
  const Out text = Numerics({file, "--max-context", "2"});
  EXPECT_NE(text.out.find("left out: 2 of 2 index value(s) name a slot past the reduced step's "
                          "contexts or top-k: $.kv_cache.index_values[0], "
                          "$.kv_cache.index_values[1] (raise --max-context to keep them)\n"),
            std::string::npos)
      << text.out;
  const Out whole = Numerics({file, "--json"});
  ASSERT_NE(whole.code, 2) << whole.err;
  EXPECT_EQ(nlohmann::json::parse(whole.out)["reduction"]["index_values_left_out"],
            nlohmann::json::array());
  EXPECT_EQ(Numerics({file}).out.find("left out:"), std::string::npos);
}

TEST(CliNumerics, PlanThatDecodeUpdateBrokeFails) {
  // Class H/F: decode_update folds 64 heads by 4 while the planner ran them natively; the
  // updated plan no longer tiles the new lengths, and the numerics see wrong answers.
  const Out r = Numerics({Case("H-update-fold-mismatch.json"), "--json"});
  EXPECT_EQ(r.code, 1) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["verdict"], "failed");
  bool failed_draft = false;
  for (const auto& c : j["calls"])
    failed_draft = failed_draft || (c["step"] == "draft_step_1" && c["verdict"] == "failed");
  EXPECT_TRUE(failed_draft) << r.out;
}

TEST(CliNumerics, PaddingRowsAreNotCompared) {
  // dense-mtp's drafts run 8 q rows for 5 real requests. The updated draft plans still tile the
  // 3 padding rows with stale windows (draft_step_2: o of rows 5..7 differs from the truth) and
  // leave a padding work's KV window undefined (draft_step_1): both are the engine's discarded
  // rows, so the step passes; the real rows agree.
  const Out r = Numerics({"--builtin", "dense-mtp", "--profile", "atom-2026-11", "--json"});
  EXPECT_EQ(r.code, 0) << r.err << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["verdict"], "within_tolerance");
  ASSERT_EQ(j["calls"].size(), 4u);
  const auto& d1 = j["calls"][2];
  const auto& d2 = j["calls"][3];
  EXPECT_EQ(d1["step"], "draft_step_1");
  EXPECT_EQ(d2["step"], "draft_step_2");
  for (const auto* c : {&d1, &d2}) {
    EXPECT_EQ((*c)["q_rows"], 8);
    EXPECT_EQ((*c)["real_requests"], 5);
    EXPECT_EQ((*c)["rows_compared"], 5);
    EXPECT_EQ((*c)["verdict"], "ok");
    // Exactly the real rows' elements compared: 5 rows x 16 heads (x 64 values of o).
    EXPECT_EQ((*c)["heads"], 16);
    EXPECT_EQ((*c)["o"]["elements"], 5 * 16 * 64);
    EXPECT_EQ((*c)["lse"]["elements"], 5 * 16);
  }
  EXPECT_EQ(d1["poison"]["real_row_findings"], 0);
  EXPECT_EQ(d1["poison"]["padding_row_findings"], 4);
  EXPECT_EQ(d1["poison"]["first_padding"]["kind"], "out_of_range_read");
  EXPECT_EQ(d1["poison"]["first_padding"]["source"], "work_info");
  EXPECT_EQ(d1["poison"]["first_padding"]["source_index"], 316);  // work 39's kv_start
  EXPECT_EQ(d1["poison"]["first_padding"]["row_begin"], 5);
  EXPECT_EQ(d1["poison"]["first_padding"]["row_end"], 6);
}

TEST(CliNumerics, ConsumedPaddingRowsFailAsClassI) {
  // The same step as PaddingRowsAreNotCompared on an engine whose next layer reads o's padding
  // rows: the padding-row findings of draft_step_1 now fail the call.
  auto s = sim::BuiltinScenario("dense-mtp");
  ASSERT_TRUE(s.ok());
  s->engine = *sim::GetEngineProfile("atom-2026-11", "profile");
  s->engine.o_padding = sim::EngineProfile::Padding::kConsumed;
  const fs::path file = fs::temp_directory_path() /
                        ("mlasim_numerics_consumed_" + std::to_string(::getpid()) + ".json");
  std::ofstream(file) << sim::ScenarioToJson(*s).dump(2);
  const Out r = Numerics({file.string(), "--json"});
  EXPECT_EQ(r.code, 1) << r.err << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["padding"]["o"], "consumed");
  EXPECT_EQ(j["padding"]["lse"], "dropped");
  const auto& d1 = j["calls"][2];
  EXPECT_EQ(d1["step"], "draft_step_1");
  EXPECT_EQ(d1["verdict"], "failed");
  EXPECT_EQ(d1["poison"]["padding_row_findings"], 4);
  EXPECT_EQ(d1["poison"]["real_row_findings"], 0);
  EXPECT_EQ(d1["padding"]["consumed_and_bad"], true);
  const Out t = Numerics({file.string()});
  EXPECT_NE(t.out.find("padding: o consumed, lse dropped"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("class I: the engine consumes padding rows"), std::string::npos) << t.out;
  fs::remove(file);
}

// empty_rows = zero_and_pos_inf_lse (FlashMLA's keyless rows): the zero-KV padding requests' rows
// hold lse = +inf, a class I finding where the engine consumes the padding rows' lse; the same
// step under asm's own value (--empty-rows write-zero: lse = -inf) passes.
TEST(CliNumerics, PosInfLseOfKeylessPaddingRowsFailsWhereTheEngineConsumesThem) {
  const std::string file = Case("I-pos-inf-lse-consumed-padding.json");
  Out r = Numerics({file});
  EXPECT_EQ(r.code, 1) << r.err << r.out;
  EXPECT_NE(r.out.find("padding: o dropped, lse consumed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("empty_rows write-zero-pos-inf, zero_kv run (decode contract "
                       "asm-with-flashmla-empty-rows)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("call 2 (verify): class I: the engine consumes padding rows and they hold 0 "
                       "poison finding(s), 0 non-finite o values, 128 NaN/+inf lse values\n"),
            std::string::npos)
      << r.out;
  const Out j = Numerics({file, "--json"});
  const auto doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["empty_rows"], "contract");
  EXPECT_EQ(doc["calls"][0]["empty_rows"], "write-zero-pos-inf");
  EXPECT_EQ(doc["calls"][0]["padding"]["lse_bad"], 128);
  EXPECT_EQ(doc["calls"][0]["padding"]["consumed_and_bad"], true);
  r = Numerics({file, "--empty-rows", "write-zero"});
  EXPECT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("empty_rows write-zero,"), std::string::npos) << r.out;
  // Where the engine drops the padding rows' lse the value is harmless (the real rows compare
  // equal: their truth holds +inf too).
  r = Numerics({"--builtin", "dense-mtp", "--profile", "atom-2026-11", "--empty-rows",
                "write-zero-pos-inf"});
  EXPECT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("verdict: within tolerance (4/4 decode calls ok)"), std::string::npos);
}

TEST(CliNumerics, MutantBreaksTheStepAndNamesTheSlot) {
  // dense-mtp splits its tiles: pieces written one partial row too far leave partial_o[0]
  // unwritten, and the reduce reads it into real o rows (ATOM's sparse path hands the kernel
  // per-token page tables, so the seed's calls read no invalid index: a mutant of invalid_index
  // does not change them).
  const Out r = Numerics({"--builtin", "dense-mtp", "--profile", "atom-2026-11", "--mutant",
                          "partial-row-offset-off-by-one"});
  EXPECT_EQ(r.code, 1) << r.err << r.out;
  EXPECT_NE(r.out.find("mutant partial-row-offset-off-by-one"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("call 2 (verify): 1 poison finding(s) in real rows; first: unwritten_read: "
                       "o rows [0,1) heads [0,16) from partial_o[0] tile 0"),
            std::string::npos)
      << r.out;
  const Out j = Numerics({"--builtin", "dense-mtp", "--profile", "atom-2026-11", "--mutant",
                          "partial-row-offset-off-by-one", "--json"});
  EXPECT_EQ(nlohmann::json::parse(j.out)["mutant"], "partial-row-offset-off-by-one");
  // Without it the same step passes (PaddingRowsAreNotCompared).
}

TEST(CliNumerics, PoisonedInputsLeaveTheSeedWithinTolerance) {
  const Out r = Numerics({"--builtin", "seed", "--poison"});
  EXPECT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("inputs poisoned (--poison)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("verdict: within tolerance (4/4 decode calls ok)"), std::string::npos);
  const Out d = Numerics({"--builtin", "dense-mtp", "--profile", "atom-2026-11", "--poison"});
  EXPECT_EQ(d.code, 0) << d.err << d.out;
}

// Issue 11: the numerics model the decode contract's invalid_index / masked_keys exactly where
// the kernel meets an invalid index (the index values of the step's fills): a contract that
// dereferences, clamps, or clamps then reads-then-masks a NaN row fails with a finding naming
// the slot, the value, the work item and the field; a contract that skips (masked) is clean.
TEST(CliNumerics, ContractSemanticsDecideWhereTheKernelMeetsAnInvalidIndex) {
  Out r = Numerics({Case("G-hostile-sparse-indices-fault.json")});
  EXPECT_EQ(r.code, 1) << r.err << r.out;
  EXPECT_NE(r.out.find("\nsemantics: invalid_index fault, masked_keys never_read, empty_rows "
                       "write-zero, zero_kv run (decode contract aiter-asm-decode); 3 index "
                       "value(s) from the step's fills in the slots the kernel reads\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\ncall 3 (verify): 4 poison finding(s) in real rows; first: "
                       "out_of_range_read: partial_o rows [4,5) heads [0,16) from "
                       "kv_indices[102] = -1 work 4 (invalid_index = fault)\n"),
            std::string::npos)
      << r.out;
  r = Numerics({Case("G-hostile-sparse-indices-clamped.json")});
  EXPECT_EQ(r.code, 1) << r.err << r.out;
  EXPECT_NE(r.out.find("\ncall 3 (verify): 2 poison finding(s) in real rows; first: "
                       "hostile_index: partial_o rows [4,5) heads [0,16) from kv_indices[102] = "
                       "-1 work 4 (invalid_index = clamp_to_zero)\n"),
            std::string::npos)
      << r.out;
  // FlashMLA's V3.2 sparse decode skips -1 alone: the first poison comes from the INT_MAX in
  // the next slot, not from the -1 the fault contract names.
  r = Numerics({Case("G-hostile-sparse-indices-minus-one-masked.json")});
  EXPECT_EQ(r.code, 1) << r.err << r.out;
  EXPECT_NE(r.out.find("\ncall 3 (verify): 4 poison finding(s) in real rows; first: "
                       "out_of_range_read: partial_o rows [4,5) heads [0,16) from "
                       "kv_indices[103] = 2147483647 work 4 (invalid_index = minus_one_masked)\n"),
            std::string::npos)
      << r.out;
  r = Numerics({Case("G-hostile-sparse-indices-masked.json")});
  EXPECT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("semantics: invalid_index masked, masked_keys never_read, empty_rows "
                       "write-zero, zero_kv run (decode contract masking-decode); 2 index "
                       "value(s)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("verdict: within tolerance (2/2 decode calls ok)"), std::string::npos);
  // JSON: each call states the semantics it ran and its violations with their class.
  const auto j =
      nlohmann::json::parse(Numerics({Case("G-hostile-sparse-indices-fault.json"), "--json"}).out);
  const auto& call = j["calls"][0];
  EXPECT_EQ(call["invalid_index"], "fault");
  EXPECT_EQ(call["masked_keys"], "never_read");
  EXPECT_EQ(call["index_values"], 3);
  ASSERT_FALSE(call["violations"].empty());
  EXPECT_EQ(call["violations"][0]["kind"], "poisoned_output");
  EXPECT_EQ(call["violations"][0]["class"], "G");
}

TEST(CliNumerics, ReadThenMaskFailsOnlyWhereTheClampedRowHoldsNaN) {
  const fs::path file =
      fs::temp_directory_path() / ("mlasim_clamp_mask_" + std::to_string(::getpid()) + ".json");
  std::ofstream(file) << R"({"contract": 1, "extends": "asm", "name": "clamp-read-then-mask",
    "variant": "asm", "semantics": {"invalid_index": "clamp_to_zero",
    "masked_keys": "read_then_mask"}})";
  // --poison keeps page 0 NaN: the clamped slot loads it, 0 x NaN reaches o.
  Out r = Numerics(
      {Case("G-hostile-sparse-indices-clamped.json"), "--contract", file.string(), "--poison"});
  EXPECT_EQ(r.code, 1) << r.err << r.out;
  EXPECT_NE(r.out.find("\ncall 3 (verify): 2 poison finding(s) in real rows; first: masked_nan: "
                       "partial_o rows [4,5) heads [0,16) from kv_indices[102] = -1 work 4 "
                       "(invalid_index = clamp_to_zero, masked_keys = read_then_mask)\n"),
            std::string::npos)
      << r.out;
  // Without the poison page 0 is a real token's row: loaded, masked, harmless.
  r = Numerics({Case("G-hostile-sparse-indices-clamped.json"), "--contract", file.string()});
  EXPECT_EQ(r.code, 0) << r.err << r.out;
  fs::remove(file);
}

TEST(CliNumerics, TheSeedsVerdictUnderItsContract) {
  // The founding seed runs the asm kernel (invalid_index = fault), but ATOM's fills give its
  // decodes per-token lists of valid slots: no invalid index is met, the verdict stays.
  Out r = Numerics({"--builtin", "seed", "--poison"});
  EXPECT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("semantics: invalid_index fault, masked_keys never_read, empty_rows "
                       "write-zero, zero_kv run (decode contract aiter-asm-decode); 0 index "
                       "value(s)"),
            std::string::npos)
      << r.out;
  // The same step with one -1 in token 0's region of the index buffer fails on that slot.
  nlohmann::json doc = sim::ScenarioToJson(*sim::BuiltinScenario("seed"));
  doc["name"] = "seed-with-an-invalid-index";
  doc["kv_cache"] = {{"index_values", {{{"token", 0}, {"position", 1}, {"value", -1}}}}};
  const fs::path file =
      fs::temp_directory_path() / ("mlasim_seed_index_" + std::to_string(::getpid()) + ".json");
  std::ofstream(file) << doc.dump();
  r = Numerics({file.string()});
  EXPECT_EQ(r.code, 1) << r.err << r.out;
  EXPECT_NE(r.out.find("(invalid_index = fault)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("from kv_indices[1] = -1"), std::string::npos) << r.out;
  fs::remove(file);
}

// Known bugs by name (sim/known_bugs.h), as replay and fuzz print them.
TEST(CliNumerics, AKnownBugIsNamedAndIgnoreKnownHonoursIt) {
  const std::string h = Case("H-update-fold-mismatch.json");
  Out r = Numerics({h});
  EXPECT_EQ(r.code, 1) << r.err << r.out;
  const std::string known =
      "known: decode-update-unsupported-plan (docs/findings.md #4 (aiter-mla-metadata.md §9.3)), "
      "open: no profile fixes it";
  EXPECT_NE(r.out.find("\ncall 8 (draft_step_1): class F wrong_output: " + known + "\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\ncall 8 (draft_step_1): class G poisoned_output: " + known + "\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\nverdict: FAILED (2/3 decode calls ok)\n"), std::string::npos);
  r = Numerics({h, "--ignore-known"});
  EXPECT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("\ncall 8 (draft_step_1): class F wrong_output: " + known +
                       "; ignored (--ignore-known)\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\nverdict: within tolerance but for known bugs (--ignore-known) (2/3 "
                       "decode calls ok, 1 failing only with known bugs)\n"),
            std::string::npos)
      << r.out;
  const auto j = nlohmann::json::parse(Numerics({h, "--ignore-known", "--json"}).out);
  EXPECT_EQ(j["verdict"], "known_bugs_only");
  EXPECT_EQ(j["calls"][2]["verdict"], "known");
  EXPECT_EQ(j["calls"][2]["violations"][0]["known"]["name"], "decode-update-unsupported-plan");
  // A failure of no known family still fails with --ignore-known.
  r = Numerics({Case("G-hostile-sparse-indices-fault.json"), "--ignore-known"});
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(r.out.find("known:"), std::string::npos) << r.out;
}

TEST(CliNumerics, ACounterexampleIsWrittenAsAReplayableCase) {
  const fs::path dir =
      fs::temp_directory_path() / ("mlasim_numerics_out_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const Out r =
      Numerics({"--builtin", "dense-mtp", "--profile", "atom-2026-11", "--mutant",
                "reduce-merges-a-piece-twice", "--max-context", "128", "--out", dir.string()});
  EXPECT_EQ(r.code, 1) << r.err << r.out;
  const fs::path file = dir / "numerics-dense-mtp-reduce-merges-a-piece-twice.json";
  ASSERT_TRUE(fs::exists(file)) << r.out;
  EXPECT_NE(r.out.find("case written: " + file.string()), std::string::npos) << r.out;
  std::ifstream in(file);
  const auto doc = nlohmann::json::parse(in);
  const std::string desc = doc["description"];
  EXPECT_NE(desc.find("--max-context 128 --seed 1 --accumulate fp32 "
                      "--mutant reduce-merges-a-piece-twice"),
            std::string::npos)
      << desc;
  // Replaying the file with that command fails the same way; without the mutant it passes.
  const Out again =
      Numerics({file.string(), "--max-context", "128", "--mutant", "reduce-merges-a-piece-twice"});
  EXPECT_EQ(again.code, 1) << again.err;
  EXPECT_EQ(Numerics({file.string(), "--max-context", "128"}).code, 0);
  // A passing run writes nothing.
  fs::remove(file);
  EXPECT_EQ(Numerics({"--builtin", "seed", "--out", dir.string()}).code, 0);
  EXPECT_TRUE(fs::is_empty(dir));
  fs::remove_all(dir);
}

// The counterexample's file name came from the scenario's "name" as written: a name with '/'
// and ".." put it outside --out ("x/../../f" wrote DIR/../../f.json, beside the run's folder).
TEST(CliNumerics, TheCounterexampleStaysInOutWhateverTheCaseName) {
  const fs::path root =
      fs::temp_directory_path() / ("mlasim_numerics_name_" + std::to_string(::getpid()));
  const fs::path dir = root / "a" / "out";
  fs::create_directories(dir / "numerics-x");  // the name's first component resolves
  std::ifstream in(Case("G-dense-mtp-snapshot-era.json"));
  nlohmann::json doc = nlohmann::json::parse(in);
  doc["name"] = "x/../../escaped";
  const fs::path scenario = root / "case.json";
  std::ofstream(scenario) << doc.dump();
  const Out r = Numerics({scenario.string(), "--max-context", "64", "--out", dir.string()});
  EXPECT_EQ(r.code, 1) << r.err << r.out;  // the case fails (its draft steps' requests)
  EXPECT_FALSE(fs::exists(root / "a" / "escaped.json"));
  const fs::path file = dir / "numerics-x-------escaped.json";
  EXPECT_TRUE(fs::exists(file)) << r.out;
  EXPECT_NE(r.out.find("case written: " + file.string() + "\n"), std::string::npos) << r.out;
  fs::remove_all(root);
}

TEST(CliNumerics, BadMutantAndOutExitTwo) {
  Out r = Numerics({"--builtin", "seed", "--mutant", "nope"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--mutant: no numerics mutant named 'nope' (numerics and semantics "
                       "mutants: reduce-merges-a-piece-twice, "),
            std::string::npos)
      << r.err;
  // A mutant of another kind is not a numerics mutant.
  r = Numerics({"--builtin", "seed", "--mutant", "engine-sparse-plan-over-running-tokens"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--mutant: no numerics mutant named"), std::string::npos) << r.err;
  r = Numerics({"--builtin", "seed", "--out", "/nonexistent/dir"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--out: /nonexistent/dir does not exist (there is no folder /nonexistent)"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace mlasim::cli
