// vLLM and SGLang driving FlashMLA's and FlashInfer's planners under CUDA graphs
// (sim/engines/vllm.json, sglang.json; docs/engines.md): each profile plans the batch it names
// (the B real requests or the graph's R, padding requests at their stated length) with the
// planner it names, and the decode launch is checked against that plan with the dialect's plan
// checker: exact findings, or exactly none. Batch 0; metadata captured at C and replayed at B.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/call_table.h"
#include "sim/engine.h"
#include "sim/replay.h"
#include "sim/report.h"
#include "sim/scenario_json.h"

namespace mlasim::sim {
namespace {

using nlohmann::json;

// A DeepSeek-like dense decode step: 16 heads per rank, bf16 KV in 64-token pages, one query
// token per request, an 8-SM device (8 scheduler rows), buffers for 8 sequences.
Scenario Step(const std::string& profile, std::vector<int32_t> contexts,
              std::vector<int32_t> capture_sizes, json engine_overrides = json::object()) {
  json doc = {{"name", "engines"},
              {"model", {{"name", "DeepSeek-V3-like"}, {"heads", 128}, {"kv_dtype", "bf16"}}},
              {"parallelism", {{"tp", 8}}},
              {"target", "gfx942"},
              {"engine", profile},
              {"batch", {{"contexts", contexts}}},
              {"graph", {{"capture_sizes", capture_sizes}, {"max_num_seqs", 8}}},
              {"kv_cache", {{"page_size", 64}}},
              {"cu_count", 8}};
  if (!engine_overrides.empty()) {
    engine_overrides["preset"] = profile;
    doc["engine"] = engine_overrides;
  }
  auto s = ParseScenario(doc);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? *s : Scenario();
}

struct Finding {
  std::string buffer, diag;
  int64_t first, last;
  std::vector<int32_t> items;
  std::string cls;
};

std::vector<Finding> Findings(const ReplayReport& r) {
  std::vector<Finding> out;
  for (const Violation& v : r.result.violations)
    out.push_back({v.buffer, v.consequence_of, v.first_row, v.last_row, v.work_items,
                   BugClassLetter(v.bug_class)});
  return out;
}

void Print(const std::vector<Finding>& f) {
  for (const Finding& x : f) {
    std::string items;
    for (int32_t i : x.items) items += std::to_string(i) + ",";
    std::printf("FINDING %s %s %lld %lld [%s] %s\n", x.buffer.c_str(), x.diag.c_str(),
                (long long)x.first, (long long)x.last, items.c_str(), x.cls.c_str());
  }
}

const PlanSnapshot& ThePlan(const ReplayReport& r) {
  for (const Call& c : r.trace.calls)
    if (c.kind == CallKind::kPlanBuild) return r.trace.plans[c.plan];
  ADD_FAILURE() << "no plan call";
  return r.trace.plans.front();
}

// Every finding as (buffer, diagnostic, first row, last row, rows listed, class).
using Want = std::vector<Finding>;
void ExpectFindings(const Scenario& s, const Want& want) {
  auto r = Replay(s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::vector<Finding> got = Findings(*r);
  if (got.size() != want.size()) Print(got);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(want[i].diag);
    EXPECT_EQ(got[i].buffer, want[i].buffer);
    EXPECT_EQ(got[i].diag, want[i].diag);
    EXPECT_EQ(got[i].first, want[i].first);
    EXPECT_EQ(got[i].last, want[i].last);
    EXPECT_EQ(got[i].items, want[i].items);
    EXPECT_EQ(got[i].cls, want[i].cls);
  }
}

// A dialect decode's note (sim::CallNote) says its rows and the requests it launches over, and
// the reduce after it says its merge, as the engine said them when it set every call's note.
// Fails when the decode's note is only DialectLaunch's ", launched over ..." tail (the engine
// appending to a note it no longer sets) and the reduce inherits it from the decode it copies.
TEST(EngineProfiles, DialectDecodeAndReduceNotes) {
  for (const char* p : {"vllm-flashmla-2025-07", "sglang-flashinfer"}) {
    SCOPED_TRACE(p);
    auto t = ExpandStep(Step(p, {300, 65, 1000}, {4}));
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    std::vector<std::string> notes;
    for (const Call& c : t->calls) notes.push_back(c.name + ": " + CallNote(*t, c));
    const std::string planned = std::string(p) == "sglang-flashinfer"
                                    ? "mla_plan: plans 4 requests (3 real) into flashinfer.*"
                                    : "mla_plan: plans 3 requests (3 real) into flashmla.*";
    EXPECT_EQ(notes, (std::vector<std::string>{
                         planned, "kv_indices_generate: writes the index regions of 4 tokens",
                         "mla_decode: q/o 4 rows, plan covers 4 rows, launched over 4 requests",
                         "mla_reduce: merges the split tiles' partial rows into o"}));
  }
}

TEST(EngineProfiles, TheTablesAndTheirProfiles) {
  std::vector<std::string> names;
  for (const EngineProfile& e : BuiltinProfiles()) names.push_back(e.name);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "atom-2026-03", "atom-2026-08", "atom-2026-11", "sglang-flashmla",
                       "sglang-flashinfer", "vllm-flashmla-2025-07", "vllm-flashmla",
                       "vllm-flashinfer"}));
  auto e = GetEngineProfile("vllm-flashmla-2025-07", "p");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->table, "vllm");
  EXPECT_EQ(e->plan_batch, EngineProfile::PlanBatch::kReal);
  EXPECT_EQ(e->num_splits_pad, EngineProfile::NumSplitsPad::kZero);
  EXPECT_EQ(e->flashmla_revision, "414a2f3");
  auto g = GetEngineProfile("sglang-flashmla", "p");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->pad_kv_len, 1024);
  EXPECT_EQ(g->plan_batch, EngineProfile::PlanBatch::kPadded);
}

// vLLM before #21691: get_mla_metadata over the 3 real requests, the graph launches 4. FlashMLA
// 414a2f3 marks the scheduler rows left without work with begin = b = 3, which the kernel
// launched with b = 4 decodes as request 3 (rows 6 and 7 of 8: the IMA #21691 fixed); num_splits
// zero-filled past entry 3 falls back; no row decodes padding request 3.
TEST(EngineProfiles, VllmFlashMlaBeforeTheFixPlansBAndLaunchesR) {
  const Scenario s = Step("vllm-flashmla-2025-07", {300, 65, 1000}, {4});
  auto r = Replay(s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const PlanSnapshot& plan = ThePlan(*r);
  ASSERT_NE(plan.dialect, nullptr);
  EXPECT_EQ(plan.dialect->planner, "flashmla");
  EXPECT_EQ(plan.dialect->flashmla_input.seqlens_k, (std::vector<int32_t>{300, 65, 1000}));
  EXPECT_EQ(plan.dialect->flashmla.rows.size(), 8u);
  EXPECT_EQ(plan.dialect->flashmla.rows[6].begin_req_idx, 3);
  ExpectFindings(s, {{"flashmla.num_splits", "NumSplitsNotIncreasing", 3, 3, {3}, "A"},
                     {"flashmla.tile_scheduler_metadata", "RowRequestRange", 6, 7, {6, 7}, "A"},
                     {"flashmla.tile_scheduler_metadata", "RequestNotConsumed", 3, 3, {3}, "A"}});
  // num_splits not extended at all: the kernel reads b + 1 = 5 entries of a 4-entry plan.
  ExpectFindings(Step("vllm-flashmla-2025-07", {300, 65, 1000}, {4}, {{"num_splits_pad", "none"}}),
                 {{"flashmla.num_splits", "NumSplitsShape", -1, -1, {}, "A"},
                  {"flashmla.tile_scheduler_metadata", "RowRequestRange", 6, 7, {6, 7}, "A"},
                  {"flashmla.tile_scheduler_metadata", "RequestNotConsumed", 3, 3, {3}, "A"}});
  // No padding (R = B = 4): the same profile is clean.
  ExpectFindings(Step("vllm-flashmla-2025-07", {300, 65, 1000, 7}, {4}), {});
}

// The report's header names the decode kernel the profile's calls ran (FlashMLA's, FlashInfer's),
// not the scenario's aiter variant, which such a step never launches.
TEST(EngineProfiles, TheReportNamesTheKernelTheCallsRan) {
  for (const auto& [profile, kernel] : {std::pair<const char*, const char*>{"vllm-flashmla-2025-07",
                                                                            "flashmla_dense"},
                                        {"sglang-flashinfer", "flashinfer_fa3"}}) {
    auto r = Replay(Step(profile, {300, 65, 1000}, {4}));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const std::string text = ReportText(*r);
    const std::string first = text.substr(0, text.find('\n'));
    EXPECT_NE(first.find(std::string("  kernel ") + kernel + "  "), std::string::npos) << first;
  }
}

// Every current profile plans the launched batch R = 4, padding at its stated length: clean.
TEST(EngineProfiles, CurrentProfilesPlanTheLaunchedBatchAndAreClean) {
  const struct {
    const char* profile;
    const char* planner;
    std::vector<int32_t> lens;
  } cases[] = {{"vllm-flashmla", "flashmla", {300, 65, 1000, 0}},
               {"sglang-flashmla", "flashmla", {300, 65, 1000, 1024}},
               {"vllm-flashinfer", "flashinfer", {300, 65, 1000, 0}},
               {"sglang-flashinfer", "flashinfer", {300, 65, 1000, 0}}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.profile);
    const Scenario s = Step(c.profile, {300, 65, 1000}, {4});
    auto r = Replay(s);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const PlanSnapshot& plan = ThePlan(*r);
    ASSERT_NE(plan.dialect, nullptr);
    EXPECT_EQ(plan.dialect->planner, c.planner);
    EXPECT_EQ(plan.dialect->batch(), 4);
    EXPECT_EQ(plan.real_requests, 3);
    if (std::string(c.planner) == "flashmla")
      EXPECT_EQ(plan.dialect->flashmla_input.seqlens_k, c.lens);
    else
      EXPECT_EQ(plan.dialect->flashinfer_input.kv_len, c.lens);
    ExpectFindings(s, {});
  }
}

// FlashInfer planned over B = 3 and launched over R = 4: MLAPlan gave padding request 3 no
// work, so its output tile is never written; whatever its length (0 or 1).
TEST(EngineProfiles, FlashInferPlannedOverBLaunchedOverR) {
  for (int pad : {0, 1}) {
    SCOPED_TRACE(pad);
    ExpectFindings(Step("sglang-flashinfer", {300, 65, 1000}, {4},
                        {{"plan_batch", "real"}, {"pad_kv_len", pad}}),
                   {{"flashinfer.int_workspace", "TileWithoutWork", 3, 3, {3}, "A"}});
  }
}

// Batch 0 (an idle DP rank): planning the real requests refuses (FlashMLA's APIs refuse b = 0);
// planning the padded batch plans the smallest captured size (1 padding request): clean.
TEST(EngineProfiles, BatchZero) {
  Scenario real = Step("vllm-flashmla-2025-07", {300}, {1, 2});
  real.requests.clear();
  auto refused = Replay(real);
  EXPECT_EQ(refused.status().ToString(),
            "$.batch.contexts: the engine's mla_plan at decode is refused by the flashmla "
            "planner: batch_size: is 0, must be in [1, 1048576]");
  for (const char* p : {"vllm-flashmla", "sglang-flashmla", "sglang-flashinfer"}) {
    SCOPED_TRACE(p);
    Scenario s = Step(p, {300}, {1, 2});
    s.requests.clear();
    auto r = Replay(s);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->trace.shape.R, 1);
    EXPECT_EQ(ThePlan(*r).dialect->batch(), 1);
    EXPECT_TRUE(r->result.violations.empty());
  }
}

Scenario Captured(const char* profile, std::vector<int32_t> now, std::vector<int32_t> capture) {
  Scenario s = Step(profile, std::move(now), {4}, {{"metadata", "captured"}});
  s.graph.eager = true;  // the launch runs over the B requests of this step
  s.capture_contexts = std::move(capture);
  return s;
}

// Metadata built at capture for C requests, consumed by a launch of B (class E).
TEST(EngineProfiles, MetadataCapturedAtCReplayedAtB) {
  // B = 2 < C = 3, same lengths: rows of request 2 are skipped (begin >= b): clean.
  ExpectFindings(Captured("sglang-flashmla", {300, 65}, {300, 65, 1000}), {});
  // B = 2 < C = 3, request 0 grew from 100 to 300 tokens since capture: its pieces stop short.
  ExpectFindings(Captured("sglang-flashmla", {300, 65}, {100, 65, 1000}),
                 {{"flashmla.tile_scheduler_metadata", "SplitFlagMismatch", 0, 0, {0}, "E"},
                  {"flashmla.tile_scheduler_metadata", "RequestNotConsumed", 0, 0, {0}, "E"}});
  // B = 3 > C = 2: num_splits has 3 entries for 4, rows without work (begin = 2) decode request
  // 2, which no row covers.
  ExpectFindings(Captured("sglang-flashmla", {300, 65, 1000}, {300, 65}),
                 {{"flashmla.num_splits", "NumSplitsShape", -1, -1, {}, "E"},
                  {"flashmla.tile_scheduler_metadata", "RowRequestRange", 3, 7, {3, 4, 5, 6, 7},
                   "E"},
                  {"flashmla.tile_scheduler_metadata", "RequestNotConsumed", 2, 2, {2}, "E"}});
  // FlashInfer: B < C, works name request 2 of the captured batch; B > C, request 2 has none.
  ExpectFindings(Captured("sglang-flashinfer", {300, 65}, {300, 65, 1000}),
                 {{"flashinfer.int_workspace", "WorkUnknownRequest", 1, 6, {1, 3, 4, 6}, "E"},
                  {"flashinfer.int_workspace", "MergeRowsMismatch", 1, 3, {1, 2, 3}, "E"}});
  ExpectFindings(Captured("sglang-flashinfer", {300, 65, 1000}, {300, 65}),
                 {{"flashinfer.int_workspace", "TileWithoutWork", 2, 2, {2}, "E"}});
}

json MinimalTable() {
  return json::parse(R"({"engine_table": 1, "name": "t", "source": "s", "profiles": [],
    "variables": [], "persistent": [],
    "plan_buffers": [{"prefix": "fm.", "planner": "flashmla", "sizing_batch": 8, "qlen": 1},
                     {"prefix": "ai.", "sizing_batch": 8, "qlen": 1, "topk": -1}],
    "steps": [{"step": "verify", "calls": []}]})");
}

std::string ParseError(const char* patch) {
  json doc = MinimalTable();
  doc.merge_patch(json::parse(patch));
  auto t = ParseCallTable(doc, "t.json");
  return t.ok() ? "" : t.status().ToString();
}

TEST(EngineProfiles, ADialectRowParses) {
  EXPECT_EQ(ParseError(R"({"steps": [{"step": "v", "calls": [{"row": "P", "call": "p",
      "kind": "plan_build", "planner": "flashmla", "inputs": "engine_batch", "tokens": "R",
      "real": "B", "buffers": "fm.", "capacity": "fm."}, {"row": "D", "call": "d",
      "kind": "decode", "plan": "last", "q_rows": "R", "sparse": 0, "graph": "graph",
      "max_seqlen_q": 1, "launch": "R", "num_splits_tail": "num_splits_pad"}]}]})"),
            "");
}

// A table has a sparse decode when some decode row's `sparse` is not the constant 0: ATOM's
// does, vLLM's and SGLang's do not, and a sparse model is refused under them (round 12 found it
// silently run their dense decode: 128 of a 200-case vLLM campaign were such cases).
TEST(EngineProfiles, ASparseModelRunsOnlyWhereTheTableHasASparseDecode) {
  std::vector<std::string> sparse;
  for (const EngineProfile& e : BuiltinProfiles())
    if (ProfileHasSparseDecode(e)) sparse.push_back(e.name);
  EXPECT_EQ(sparse, (std::vector<std::string>{"atom-2026-03", "atom-2026-08", "atom-2026-11"}));
  EngineProfile unknown;
  unknown.table = "nope";
  EXPECT_FALSE(ProfileHasSparseDecode(unknown));
  // From the rows: a constant 0 is dense, 1 or an expression is sparse.
  const char* row = R"({"steps": [{"step": "v", "calls": [{"row": "P", "call": "p",
      "kind": "plan_build", "planner": "flashmla", "inputs": "engine_batch", "tokens": "R",
      "real": "B", "buffers": "fm.", "capacity": "fm."}, {"row": "D", "call": "d",
      "kind": "decode", "plan": "last", "q_rows": "R", "sparse": SPARSE, "graph": "graph",
      "max_seqlen_q": 1, "launch": "R", "num_splits_tail": "num_splits_pad"}]}]})";
  for (const auto& [text, want] : std::vector<std::pair<std::string, bool>>{{"0", false},
                                                                            {"\"0\"", false},
                                                                            {"1", true},
                                                                            {"\"sparse\"", true},
                                                                            {"\"graph\"", true}}) {
    std::string patch = row;
    patch.replace(patch.find("SPARSE"), 6, text);
    json doc = MinimalTable();
    doc.merge_patch(json::parse(patch));
    auto t = ParseCallTable(doc, "t.json");
    ASSERT_TRUE(t.ok()) << text << ": " << t.status().ToString();
    EXPECT_EQ(t->sparse_decode, want) << text;
  }
  // The step refuses a sparse model there, naming the field; dense runs.
  for (const char* profile : {"vllm-flashmla", "sglang-flashinfer"}) {
    StatusOr<Scenario> seed = BuiltinScenario("seed");
    ASSERT_TRUE(seed.ok());
    seed->engine = *GetEngineProfile(profile, "p");
    StatusOr<Trace> t = ExpandStep(*seed);
    ASSERT_FALSE(t.ok()) << profile;
    EXPECT_EQ(t.status().field(), "$.model.sparse");
    EXPECT_NE(t.status().message().find(std::string("the ") + profile +
                                        " profile's call table (sim/engines/"),
              std::string::npos)
        << t.status().message();
    seed->model.sparse = false;
    EXPECT_TRUE(ExpandStep(*seed).ok()) << profile;
  }
}

TEST(EngineProfiles, AnUnknownPlannerInARow) {
  EXPECT_EQ(ParseError(R"({"steps": [{"step": "v", "calls": [{"row": "P", "call": "p",
      "kind": "plan_build", "planner": "triton", "inputs": "engine_batch", "real": "B",
      "buffers": "fm.", "capacity": "fm."}]}]})"),
            "t.json: $.steps[0].calls[0].planner: unknown \"triton\" (known: aiter, flashmla, "
            "flashinfer)");
}

TEST(EngineProfiles, AnUnknownPlannerInAPlanBufferSet) {
  EXPECT_EQ(ParseError(R"({"plan_buffers": [{"prefix": "x.", "planner": "flashattn",
      "sizing_batch": 8, "qlen": 1}]})"),
            "t.json: $.plan_buffers[0].planner: unknown \"flashattn\" (known: aiter, flashmla, "
            "flashinfer)");
}

TEST(EngineProfiles, AnAiterSetStillNeedsTopk) {
  EXPECT_EQ(ParseError(R"({"plan_buffers": [{"prefix": "x.", "sizing_batch": 8, "qlen": 1}]})"),
            "t.json: $.plan_buffers[0].topk: required key is missing");
}

TEST(EngineProfiles, ARowWritesBuffersOfAnotherPlanner) {
  EXPECT_EQ(ParseError(R"({"steps": [{"step": "v", "calls": [{"row": "P", "call": "p",
      "kind": "plan_build", "planner": "flashinfer", "inputs": "engine_batch", "real": "B",
      "buffers": "fm.", "capacity": "fm."}]}]})"),
            "t.json: $.steps[0].calls[0].capacity: \"fm.\" is sized by the flashmla planner, "
            "the row runs flashinfer");
}

TEST(EngineProfiles, ARowNamesNoPlanBufferSet) {
  EXPECT_EQ(ParseError(R"({"steps": [{"step": "v", "calls": [{"row": "P", "call": "p",
      "kind": "plan_build", "planner": "flashmla", "inputs": "engine_batch", "real": "B",
      "buffers": "zz.", "capacity": "zz."}]}]})"),
            "t.json: $.steps[0].calls[0].capacity: no plan_buffers set \"zz.\"");
}

TEST(EngineProfiles, EveryNewFlagErrorNamesItsPath) {
  const struct {
    const char* flags;
    const char* want;
  } cases[] = {
      {R"({"plan_batch": "all"})", "t.json: $.profiles[0].flags.plan_batch: must be \"real\" or "
                                   "\"padded\""},
      {R"({"pad_kv_len": -1})", "t.json: $.profiles[0].flags.pad_kv_len: must be in 0..1048576 "
                                "(got -1)"},
      {R"({"pad_kv_len": 1048577})", "t.json: $.profiles[0].flags.pad_kv_len: must be in "
                                     "0..1048576 (got 1048577)"},
      {R"({"num_splits_pad": "one"})", "t.json: $.profiles[0].flags.num_splits_pad: must be "
                                       "\"none\" or \"zero\" or \"last\""},
      {R"({"metadata": "stale"})", "t.json: $.profiles[0].flags.metadata: must be \"replanned\" "
                                   "or \"captured\""},
      {R"({"flashmla_revision": "main"})", "t.json: $.profiles[0].flags.flashmla_revision: must "
                                           "be \"9241ae3\" or \"414a2f3\""},
      {R"({"attention_backend": "triton"})", "t.json: $.profiles[0].flags.attention_backend: "
                                             "must be \"aiter\", \"flashmla\" or "
                                             "\"flashinfer\""},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.flags);
    const std::string patch =
        std::string(R"({"profiles": [{"name": "p", "summary": "s", "flags": )") + c.flags + "}]}";
    EXPECT_EQ(ParseError(patch.c_str()), c.want);
  }
  // The boundaries themselves parse.
  EXPECT_EQ(ParseError(R"({"profiles": [{"name": "p", "summary": "s",
      "flags": {"pad_kv_len": 1048576}}]})"), "");
  EXPECT_EQ(ParseError(R"({"profiles": [{"name": "p", "summary": "s",
      "flags": {"pad_kv_len": 0}}]})"), "");
}

// A scenario overriding a profile's new flags writes them back (--scenario-out) and reads the
// same profile again.
TEST(EngineProfiles, OverriddenFlagsRoundTrip) {
  const Scenario s = Step("sglang-flashmla", {300}, {1},
                          {{"pad_kv_len", 1}, {"metadata", "captured"}});
  EXPECT_EQ(s.engine.name, "sglang-flashmla+overrides");
  const json out = ScenarioToJson(s);
  EXPECT_EQ(out["engine"]["pad_kv_len"], 1);
  EXPECT_EQ(out["engine"]["metadata"], "captured");
  EXPECT_FALSE(out["engine"].contains("plan_batch"));
  auto back = ParseScenario(out);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->engine.pad_kv_len, 1);
  EXPECT_EQ(back->engine.metadata, EngineProfile::Metadata::kCaptured);
}

}  // namespace
}  // namespace mlasim::sim
