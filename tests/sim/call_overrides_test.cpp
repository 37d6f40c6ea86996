// sim/call_overrides.h: a scenario's `calls` and `sizing` entries are refused, naming the JSON
// path and the reason, when the engine would otherwise guess (a call or buffer set stated twice,
// an entry that overrides nothing, a key its call's expansion never reads); a refusal by the
// planner or the sizing names the override that set the refused input; the CLI names the file of
// an error the expansion finds.
#include "sim/call_overrides.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "sim/engine.h"
#include "sim/mutants.h"
#include "sim/replay.h"
#include "sim/scenario_json.h"
#include "tools/mlasim/cli.h"
#include "tools/mlasim/scenario_input.h"

namespace mlasim::sim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json SeedJson() {
  return ScenarioToJson(*BuiltinScenario("seed"));
}

std::string ParseError(const json& doc) {
  const auto s = ParseScenario(doc);
  return s.ok() ? "ok" : s.status().ToString();
}

std::string ExpandError(const Scenario& s) {
  const auto t = ExpandStep(s);
  return t.ok() ? "ok" : t.status().ToString();
}

// The same call twice: the engine followed the first entry and dropped the second (swapping them
// changed the report). Refused naming both, as a repeated index_values slot is.
TEST(CallOverrides, ACallTakesOneEntry) {
  json doc = SeedJson();
  doc["calls"] = {{{"call", "draft_step_0.sparse_decode"}, {"q_rows", 100}},
                  {{"call", "verify.sparse_decode"}, {"q_rows", 100}},
                  {{"call", "draft_step_0.sparse_decode"}, {"q_rows", 200}}};
  EXPECT_EQ(ParseError(doc),
            "$.calls[2].call: draft_step_0.sparse_decode is already overridden by $.calls[0]; a "
            "call takes one entry");
  doc["calls"].erase(2);
  EXPECT_EQ(ParseError(doc), "ok");  // two calls, one entry each
}

TEST(CallOverrides, ABufferSetTakesOneSizing) {
  json doc = SeedJson();
  doc["sizing"] = {{{"buffers", "main."}, {"heads", 16}},
                   {{"buffers", "sparse_mtp."}, {"batch", 4}},
                   {{"buffers", "main."}, {"batch", 3}}};
  EXPECT_EQ(ParseError(doc),
            "$.sizing[2].buffers: \"main.\" is already sized by $.sizing[0]; a buffer set takes "
            "one entry");
  doc["sizing"].erase(2);
  EXPECT_EQ(ParseError(doc), "ok");
}

// An entry with no key but its call's name would change nothing, yet labelled the call in the
// report ("planner inputs differ from the sizing's").
TEST(CallOverrides, AnEntryOverridesSomething) {
  json doc = SeedJson();
  doc["calls"] = {{{"call", "verify.main_plan"}}};
  EXPECT_EQ(ParseError(doc),
            "$.calls[0]: overrides nothing of verify.main_plan (give one of launch_grid, q_rows, "
            "o_rows, kernel_heads, kernel_q_cols, planner_cu_count, planner_heads, planner_dtype, "
            "plan_from)");
  doc.erase("calls");
  doc["sizing"] = {{{"buffers", "main."}}};
  EXPECT_EQ(ParseError(doc),
            "$.sizing[0]: sizes main. as the engine does (give one of batch, qlen, heads, "
            "cu_count, dtype, is_sparse)");
}

// A field that also takes a string says so when it is given neither.
TEST(CallOverrides, StringOrObjectFieldsSaySo) {
  json doc = SeedJson();
  doc["engine"] = nullptr;
  EXPECT_EQ(ParseError(doc), "$.engine: must be a profile name or an object");
  doc = SeedJson();
  doc["planner"] = 3;
  EXPECT_EQ(ParseError(doc), "$.planner: must be \"aiter-dispatch\", \"serial\" or an object");
}

// One call of each form, in the built-in cases: (scenario, profile, call, form).
struct FormCase {
  const char* builtin;
  const char* profile;  // "" = the case's own
  const char* call;
  CallForm form;
};
const FormCase kForms[] = {
    {"dense-mtp", "", "verify.main_plan", CallForm::kAiterPlanBuild},
    {"dense-mtp", "sglang-flashinfer", "decode.mla_plan", CallForm::kDialectPlanBuild},
    {"dense-mtp", "", "draft_step_1.main_plan_update", CallForm::kPlanUpdate},
    {"dense-mtp", "", "verify.kv_indices_generate", CallForm::kIndexFill},
    {"seed", "", "verify.indexer_gather", CallForm::kIndexFill},
    {"dense-mtp", "", "draft_step_0.dense_decode", CallForm::kDecode},
    {"seed", "", "draft_step_0.sparse_decode", CallForm::kDecode},
    {"dense-mtp", "", "verify.dense_reduce", CallForm::kReduce},
    {"seed", "", "draft_step_0.sparse_reduce", CallForm::kReduce},
};

// A valid value of each key.
const std::map<std::string, std::function<void(CallOverride&)>>& Setters() {
  static const std::map<std::string, std::function<void(CallOverride&)>> kSet = {
      {"launch_grid", [](CallOverride& o) { o.launch_grid = 64; }},
      {"q_rows", [](CallOverride& o) { o.q_rows = 40; }},
      {"o_rows", [](CallOverride& o) { o.o_rows = 40; }},
      {"kernel_heads", [](CallOverride& o) { o.kernel_heads = 16; }},
      {"kernel_q_cols", [](CallOverride& o) { o.kernel_q_cols = 576; }},
      {"planner_cu_count", [](CallOverride& o) { o.planner_cu_count = 304; }},  // gfx942's
      {"planner_heads", [](CallOverride& o) { o.planner_heads = 16; }},
      {"planner_dtype", [](CallOverride& o) { o.planner_dtype = "bf16"; }},
      {"plan_from", [](CallOverride& o) { o.plan_from = "capture"; }},
  };
  return kSet;
}

// Every key on a call of every form: the step expands iff the table says the key applies;
// otherwise the key is refused naming its path, the call, its form and the calls it applies to
// (before, kernel_heads / launch_grid / q_rows on a plan build, anything on an index fill or a
// reduce, were dropped without a word).
TEST(CallOverrides, EveryKeyAppliesOnlyWhereTheTableSays) {
  int refused = 0, applied = 0;
  for (const CallOverrideField& f : CallOverrideFields()) {
    ASSERT_TRUE(Setters().count(f.key)) << f.key;
    for (const FormCase& fc : kForms) {
      Scenario s = *BuiltinScenario(fc.builtin);
      if (*fc.profile) s.engine = *GetEngineProfile(fc.profile, "profile");
      CallOverride o;
      o.call = fc.call;
      Setters().at(f.key)(o);
      s.calls = {o};
      const bool applies =
          std::find(f.applies_to.begin(), f.applies_to.end(), fc.form) != f.applies_to.end();
      const std::string got = ExpandError(s);
      if (applies) {
        EXPECT_EQ(got, "ok") << f.key << " on " << fc.call;
        ++applied;
      } else {
        EXPECT_EQ(got, "$.calls[0]." + std::string(f.key) + ": does not apply to " + fc.call +
                           " (" + CallFormName(fc.form, "flashinfer") + "); it applies to " +
                           CallOverrideAppliesTo(f))
            << f.key << " on " << fc.call;
        ++refused;
      }
    }
  }
  EXPECT_EQ(applied, 5 * 2 + 3 * 1 + 1 * 3);  // decode keys x 2 decodes, planner keys, plan_from
  EXPECT_EQ(refused, 9 * 9 - applied);
}

// The brief's cases, word for word.
TEST(CallOverrides, RefusalsReadAsStated) {
  Scenario s = *BuiltinScenario("seed");
  CallOverride o;
  o.call = "verify.main_plan";
  o.kernel_heads = 16;
  s.calls = {o};
  EXPECT_EQ(ExpandError(s),
            "$.calls[0].kernel_heads: does not apply to verify.main_plan (a plan build); it "
            "applies to decode launches");
  o = CallOverride();
  o.call = "verify.indexer_gather";
  o.plan_from = "capture";
  s.calls = {o};
  EXPECT_EQ(ExpandError(s),
            "$.calls[0].plan_from: does not apply to verify.indexer_gather (an index fill); it "
            "applies to decode launches and plan builds of aiter's planner");
}

// A planner input the planner refuses is blamed on the override that set it, not on the model.
TEST(CallOverrides, PlannerRefusalNamesTheOverride) {
  Scenario s = *BuiltinScenario("seed");
  CallOverride o;
  o.call = "verify.main_plan";
  o.planner_heads = 7;
  s.calls = {o};
  const auto t = ExpandStep(s);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().field(), "$.calls[0].planner_heads");
  EXPECT_NE(t.status().message().find("the engine's main_plan at verify is refused by the "
                                      "planner: heads_per_head_k: "),
            std::string::npos)
      << t.status().message();
  // The model's own heads, refused, are still the model's.
  EXPECT_EQ(PlannerRefusalPath("heads_per_head_k", nullptr, 0), "$.model.heads");
  EXPECT_EQ(PlannerRefusalPath("kv_indptr[3]", &o, 0), "$.batch.contexts");
  EXPECT_EQ(PlannerRefusalPath("work_info", &o, 0), "$");
}

// A sizing get_mla_metadata_info_v1 refuses names the sizing entry's key (it named no JSON path
// at all: "heads_per_head_k: get_mla_metadata_info_v1 requires ...").
TEST(CallOverrides, SizingRefusalNamesTheEntry) {
  Scenario s = *BuiltinScenario("seed");
  SizingOverride z;
  z.buffers = "sparse_mtp.";
  z.batch = 4;
  SizingOverride h;
  h.buffers = "main.";
  h.heads = 7;
  s.sizing = {z, h};
  EXPECT_EQ(ExpandError(s),
            "$.sizing[1].heads: the engine's main. buffers cannot be sized: heads_per_head_k: "
            "get_mla_metadata_info_v1 requires the q head count to be a multiple of 8 (got 7)");
  EXPECT_EQ(SizingRefusalPath("heads_per_head_k", &z, 0), "$.model.heads");  // z sets batch
  EXPECT_EQ(SizingRefusalPath("batch_size", &z, 3), "$.sizing[3].batch");
}

// decode_update refusing a plan built over another CU count than its buffers were sized for names
// that override (it named "work_indptr", no JSON path).
TEST(CallOverrides, UpdateRefusalNamesThePlannerOverride) {
  Scenario s = *BuiltinScenario("dense-mtp");  // gfx942: 304 CUs size the main plan's buffers
  CallOverride o;
  o.call = "verify.main_plan";
  o.planner_cu_count = 80;
  s.calls = {o};
  const auto t = ExpandStep(s);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().field(), "$.calls[0].planner_cu_count");
  EXPECT_EQ(t.status().message().rfind("the engine's main_plan_update at draft_step_1 is refused "
                                       "by decode_update_mla_metadata_v1: work_indptr: ",
                                       0),
            0u)
      << t.status().message();
}

// The docs' table (docs/scenario.md "Disagreements") is the table's own rows.
TEST(CallOverrides, DocsTableIsTheTable) {
  std::ifstream in(fs::path(MLASIM_SOURCE_DIR) / "docs/scenario.md");
  std::stringstream text;
  text << in.rdbuf();
  for (const CallOverrideField& f : CallOverrideFields()) {
    const std::string row =
        "| `" + std::string(f.key) + "` | " + CallOverrideAppliesTo(f) + " | " + f.meaning + " |\n";
    EXPECT_NE(text.str().find(row), std::string::npos) << "docs/scenario.md lacks the row\n" << row;
  }
}

// replay and numerics of a file: an error found by the expansion names the file, as a parse
// error does; a --builtin case has no file to name.
TEST(CallOverrides, ExpansionErrorsNameTheFile) {
  json doc = SeedJson();
  doc["calls"] = {{{"call", "nope.x"}, {"launch_grid", 3}}};
  const fs::path file =
      fs::temp_directory_path() / ("mlasim_call_overrides_" + std::to_string(::getpid()) + ".json");
  std::ofstream(file) << doc.dump();
  for (const char* command : {"replay", "numerics"}) {
    std::ostringstream out, err;
    EXPECT_EQ(cli::RunMlasim({command, file.string()}, out, err), 2) << command;
    EXPECT_EQ(out.str(), "");
    EXPECT_EQ(err.str(), "mlasim " + std::string(command) + ": error: " + file.string() +
                             ": $.calls[0].call: no call \"nope.x\" in this step\n");
  }
  fs::remove(file);
  const Status st = InvalidArgumentError("$.batch.q_lens", "x");
  EXPECT_EQ(sim::InScenarioFile("a.json", st).field(), "a.json: $.batch.q_lens");
  EXPECT_EQ(sim::InScenarioFile("", st).field(), "$.batch.q_lens");  // --builtin
  EXPECT_EQ(sim::InScenarioFile("a.json", InvalidArgumentError("--kernel", "x")).field(),
            "--kernel");
  EXPECT_EQ(sim::InScenarioFile("a.json", InvalidArgumentError("", "x")).field(), "a.json: $");
}

// A simulator mutant overriding a call the scenario already overrides merges its keys into the
// scenario's entry: before, it added a second entry, the engine read the first, and the mutant's
// grid was dropped (`replay --mutant call-launch-grid-captured` on such a file changed nothing).
TEST(CallOverrides, AMutantsOverrideMergesIntoTheScenarios) {
  Scenario s = *BuiltinScenario("seed");
  CallOverride o;
  o.call = "verify.sparse_decode";
  o.o_rows = 100;
  s.calls = {o};
  SizingOverride z;
  z.buffers = "main.";
  z.heads = 16;
  s.sizing = {z};
  for (SimMutant m : {SimMutant::kCallLaunchGridCaptured, SimMutant::kSizingForOneRequest}) {
    const auto w = MutantScenario(s, m);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_EQ(w->calls.size(), 1u);
    ASSERT_EQ(w->sizing.size(), 1u);
    EXPECT_EQ(w->calls[0].o_rows, 100);  // the scenario's own key stays
    EXPECT_EQ(w->sizing[0].heads, 16);
    if (m == SimMutant::kCallLaunchGridCaptured) {
      EXPECT_EQ(w->calls[0].launch_grid, 4096);
    }
    if (m == SimMutant::kSizingForOneRequest) {
      EXPECT_EQ(w->sizing[0].batch, 1);
    }
    EXPECT_TRUE(ParseScenario(ScenarioToJson(*w)).ok());  // its JSON replays
  }
}

}  // namespace
}  // namespace mlasim::sim
