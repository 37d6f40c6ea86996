// Ragged per-request verify q lengths (batch.q_lens, issue 10 §3): the scenario field and its
// boundaries, the engine's qo_indptr and per-token plan, the class H finding of a uniform-q
// plan over a ragged batch, the generator family `ragged-q` (draws, shrinking, swarm knob) and
// the campaign's coverage counters.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "fuzz/campaign.h"
#include "fuzz/properties.h"
#include "fuzz/scenario_gen.h"
#include "sim/replay.h"
#include "sim/scenario_json.h"

namespace mlasim::fuzz {
namespace {

// A dense MTP verify (K = 3, Q = 4), eager, three requests of 100, 60 and 40 KV tokens.
nlohmann::json DenseDoc(const std::vector<int32_t>& q_lens) {
  nlohmann::json d = {
      {"model",
       {{"heads", 16}, {"kv_dtype", "bf16"}, {"model_dtype", "bf16"}, {"sparse", false}}},
      {"mtp", {{"k", 3}}},
      {"batch", {{"contexts", {100, 60, 40}}}},
      {"graph", {{"eager", true}}},
      {"target", "gfx942"},
      {"planner", "serial"},
      {"engine", "atom-2026-11"}};
  if (!q_lens.empty()) d["batch"]["q_lens"] = q_lens;
  return d;
}

// The same batch on a sparse model (64 heads, TP 4, fp8, top-k 2048) on gfx950.
nlohmann::json SparseDoc(const std::vector<int32_t>& q_lens) {
  nlohmann::json d = DenseDoc(q_lens);
  d["model"] = {{"heads", 64},         {"kv_dtype", "fp8"}, {"model_dtype", "bf16"},
                {"sparse", true},      {"topk", 2048}};
  d["parallelism"] = {{"tp", 4}};
  d["target"] = "gfx950";
  d.erase("planner");
  return d;
}

sim::ReplayReport ReplayDoc(const nlohmann::json& d) {
  auto s = sim::ParseScenario(d);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  auto r = sim::Replay(*s);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return *r;
}

// The request the call `step`.`name` planned with (its plan's PlanRequest).
const ref::PlanRequest& PlanRequestOf(const sim::ReplayReport& r, const std::string& step,
                                      const std::string& name) {
  for (const sim::Call& c : r.trace.calls)
    if (c.step == step && c.name == name && c.plan >= 0) return r.trace.plans[c.plan].request;
  ADD_FAILURE() << "no call " << step << "." << name;
  static const ref::PlanRequest none;
  return none;
}

std::vector<std::string> Signatures(const sim::ReplayReport& r) {
  std::vector<std::string> out;
  for (const sim::Violation& v : r.result.violations)
    out.push_back(v.step + "|" + v.call + "|" + v.buffer + "|" + std::string(sim::BugClassLetter(v.bug_class)));
  return out;
}

// ---- The scenario field ----------------------------------------------------------------------

TEST(RaggedQ, LengthsZeroOneAndMaxShapeTheStepAndTheMainPlansQoIndptr) {
  const sim::ReplayReport r = ReplayDoc(DenseDoc({0, 1, 4}));
  EXPECT_EQ(r.trace.shape.q_lens, (std::vector<int32_t>{0, 1, 4}));
  EXPECT_EQ(r.trace.shape.scheduled_tokens, 5);  // T_s = 0 + 1 + 4
  EXPECT_EQ(r.trace.shape.running_tokens, 12);   // R x Q, eager R = B
  const ref::PlanRequest& main = PlanRequestOf(r, "verify", "main_plan");
  EXPECT_EQ(main.qo_indptr, (std::vector<int32_t>{0, 0, 1, 5}));
  EXPECT_EQ(main.uni_seqlen_qo, 4);  // the engine still passes Q: aiter tiles b x 4
  EXPECT_EQ(main.max_seqlen_qo, 4);
}

TEST(RaggedQ, AUniformPlanOverARaggedBatchIsAClassHFindingAndOverrunsQ) {
  const sim::ReplayReport r = ReplayDoc(DenseDoc({4, 2, 0}));
  ASSERT_EQ(r.result.violations.size(), 6u);
  const sim::Violation& h = r.result.violations[0];
  EXPECT_EQ(h.kind, sim::ViolationKind::kPlanInvalid);
  EXPECT_EQ(h.bug_class, sim::BugClass::kH);
  EXPECT_EQ(h.step, "verify");
  EXPECT_EQ(h.call, "dense_decode");
  EXPECT_EQ(h.buffer, "qo_indptr");
  EXPECT_EQ(h.consequence_of, "uni_seqlen_qo_ragged");
  EXPECT_EQ(h.work_items, (std::vector<int32_t>{1, 2}));  // request 0 holds its Q rows at 0
  EXPECT_EQ(h.first_row, 1);
  EXPECT_EQ(h.last_row, 2);
  EXPECT_EQ(h.detail,
            "the plan tiles uni_seqlen_qo = 4 q rows per request at b x 4; qo_indptr gives "
            "request 1 rows [4, 6) (2 of 3 real requests differ)");
  // q holds T_s = 6 rows; the plan's rows 6..11 (requests 1 and 2 at b x 4) are past its end.
  const sim::Violation& q = r.result.violations[1];
  EXPECT_EQ(q.kind, sim::ViolationKind::kOutOfBounds);
  EXPECT_EQ(q.buffer, "q");
  EXPECT_EQ(q.rows, 6);
  EXPECT_EQ(q.first_row, 6);
  EXPECT_EQ(q.last_row, 11);
  EXPECT_EQ(q.bytes_past_end, 110592);  // 6 rows x 16 heads x 576 x 2 bytes
}

TEST(RaggedQ, EveryLengthAtTheMaximumIsTheUniformStep) {
  const sim::ReplayReport stated = ReplayDoc(DenseDoc({4, 4, 4}));
  const sim::ReplayReport plain = ReplayDoc(DenseDoc({}));
  EXPECT_EQ(Signatures(stated), Signatures(plain));
  EXPECT_EQ(stated.trace.shape.scheduled_tokens, 12);
  EXPECT_EQ(PlanRequestOf(stated, "verify", "main_plan").qo_indptr,
            PlanRequestOf(plain, "verify", "main_plan").qo_indptr);
  for (const sim::Violation& v : stated.result.violations)
    EXPECT_NE(v.consequence_of, "uni_seqlen_qo_ragged");
}

TEST(RaggedQ, AboveTheMaximumNegativeOrMiscountedIsRefusedNamingTheField) {
  struct Bad {
    nlohmann::json lens;
    const char* field;
    const char* message;
  };
  const Bad bad[] = {
      {{4, 5, 0}, "$.batch.q_lens[1]", "at most Q = K + 1 = 4 q tokens per request (got 5)"},
      {{4, -1, 0}, "$.batch.q_lens[1]", "must be in 0..16777216 (got -1)"},
      {{4, 2}, "$.batch.q_lens", "needs one entry per request (3)"},
      {"x", "$.batch.q_lens", ""},
  };
  for (const Bad& b : bad) {
    nlohmann::json d = DenseDoc({});
    d["batch"]["q_lens"] = b.lens;
    auto s = sim::ParseScenario(d);
    ASSERT_FALSE(s.ok()) << b.lens.dump();
    EXPECT_EQ(s.status().field(), b.field) << b.lens.dump();
    EXPECT_NE(s.status().message().find(b.message), std::string::npos) << s.status().ToString();
  }
}

// The context must hold the request's own q_i verify tokens, not Q: boundaries q_i - 1 (refused),
// q_i and q_i + 1 (accepted), and q_i = 0 with an empty context.
TEST(RaggedQ, ContextMustHoldTheRequestsOwnQLength) {
  struct Row {
    std::vector<int32_t> contexts;
    std::vector<int32_t> q_lens;
    bool ok;
  };
  const Row rows[] = {
      {{100, 1, 40}, {4, 2, 0}, false},  // context 1 < q_len 2
      {{100, 2, 40}, {4, 2, 0}, true},   // context == q_len
      {{100, 3, 40}, {4, 2, 0}, true},   // context == q_len + 1
      {{100, 60, 0}, {4, 2, 0}, true},   // q_len 0: an empty context holds it
      {{100, 2, 40}, {}, false},         // unstated: Q = 4 tokens
  };
  for (const Row& row : rows) {
    nlohmann::json d = DenseDoc(row.q_lens);
    d["batch"]["contexts"] = row.contexts;
    auto s = sim::ParseScenario(d);
    ASSERT_EQ(s.ok(), row.ok) << d["batch"].dump() << " " << s.status().ToString();
    if (row.ok) {
      EXPECT_TRUE(sim::Replay(*s).ok()) << d["batch"].dump();
      continue;
    }
    EXPECT_EQ(s.status().field(), "$.batch.contexts[1]");
    const std::string q = row.q_lens.empty() ? "4" : "2";
    EXPECT_EQ(s.status().message(), "context minus rejected_prev must hold this step's " + q +
                                        " verify tokens (got " + std::to_string(row.contexts[1]) +
                                        ")");
  }
}

// A request of q_i tokens verifies q_i - 1 drafts: rejected is bounded by that (q_i = 0: none).
TEST(RaggedQ, RejectedIsBoundedByTheRequestsDrafts) {
  struct Row {
    std::vector<int32_t> rejected;
    const char* field;  // nullptr: accepted
    const char* message;
  };
  const Row rows[] = {
      {{3, 1, 0}, nullptr, ""},
      {{3, 2, 0},
       "$.batch.rejected[1]",
       "at most q_lens - 1 = 1 drafts can be rejected (the request verifies 2 q tokens; got 2)"},
      {{3, 0, 1},
       "$.batch.rejected[2]",
       "at most q_lens - 1 = 0 drafts can be rejected (the request verifies 0 q tokens; got 1)"},
      {{4, 0, 0}, "$.batch.rejected[0]", "at most K = 3 drafts can be rejected"},
  };
  for (const Row& row : rows) {
    nlohmann::json d = DenseDoc({4, 2, 0});
    d["batch"]["rejected"] = row.rejected;
    auto s = sim::ParseScenario(d);
    ASSERT_EQ(s.ok(), row.field == nullptr) << d["batch"].dump();
    if (row.field == nullptr) continue;
    EXPECT_EQ(s.status().field(), row.field);
    EXPECT_EQ(s.status().message(), row.message);
  }
}

TEST(RaggedQ, TopkLengthsFollowTheRequestsQLength) {
  nlohmann::json d = SparseDoc({4, 2, 0});
  d["batch"]["topk_lengths"] = {{10, 11, 12, 13}, {5, 6}, nlohmann::json::array()};
  EXPECT_TRUE(sim::ParseScenario(d).ok());
  d["batch"]["topk_lengths"][1] = {5, 6, 7, 8};
  auto s = sim::ParseScenario(d);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().field(), "$.batch.topk_lengths[1]");
  EXPECT_EQ(s.status().message(), "needs one count per verify token (q_lens = 2)");
}

TEST(RaggedQ, DpRanksScheduledTokensAreTheSumOfTheLengths) {
  nlohmann::json d = DenseDoc({4, 2, 0});
  d["parallelism"] = {{"dp", 2}, {"dp_scheduled_tokens", {12, 8}}};
  auto s = sim::ParseScenario(d);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().field(), "$.parallelism.dp_scheduled_tokens[0]");
  EXPECT_EQ(s.status().message(), "this rank's entry must equal its scheduled tokens (6)");
  d["parallelism"]["dp_scheduled_tokens"] = {6, 8};
  EXPECT_TRUE(sim::ParseScenario(d).ok());
}

TEST(RaggedQ, WrittenOutOnlyWhenStatedAndReadBackTheSame) {
  auto stated = sim::ParseScenario(DenseDoc({0, 1, 4}));
  ASSERT_TRUE(stated.ok());
  const nlohmann::json out = sim::ScenarioToJson(*stated);
  EXPECT_EQ(out["batch"]["q_lens"], nlohmann::json({0, 1, 4}));
  auto back = sim::ParseScenario(out);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(sim::ScenarioToJson(*back).dump(), out.dump());
  auto plain = sim::ParseScenario(DenseDoc({}));
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(sim::ScenarioToJson(*plain)["batch"].contains("q_lens"));
}

TEST(RaggedQ, SparsePerTokenPlansFollowTheRaggedTokensAndTheFixedProfileIsClean) {
  const sim::ReplayReport r = ReplayDoc(SparseDoc({4, 2, 0}));
  EXPECT_TRUE(r.clean());
  // Token j of a request of q tokens and L keys sees L - q + j + 1 of them: 97..100, then 59, 60.
  const ref::PlanRequest& t2 = PlanRequestOf(r, "verify", "sparse_mtp_plan");
  EXPECT_EQ(t2.kv_indptr, (std::vector<int32_t>{0, 97, 195, 294, 394, 453, 513}));
  EXPECT_EQ(t2.qo_indptr, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(FixedProfileViolations(r).empty());
}

// ---- The generator family ragged-q ---------------------------------------------------------

GenConfig RaggedConfig() {
  GenConfig c;
  c.profiles = {"atom-2026-11"};
  c.sparse_only = true;
  c.small = true;
  c.ragged_q = true;
  return c;
}

TEST(RaggedQGenerator, DrawsZeroToQPerRequestAndKeepsTheDrawsOfOtherFamiliesOff) {
  const GenConfig c = RaggedConfig();
  int ragged = 0, zero = 0, full = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const sim::Scenario s = ScenarioFromSeed(c, seed, 10 + static_cast<int>(seed % 91)).value();
    const int32_t q = s.mtp_k + 1;
    bool differs = false;
    for (const sim::RequestSpec& r : s.requests) {
      const int32_t len = sim::QLen(s, r);
      ASSERT_GE(len, 0);
      ASSERT_LE(len, q);
      if (!r.topk_lengths.empty()) {
        ASSERT_EQ(static_cast<int32_t>(r.topk_lengths.size()), len);
      }
      differs = differs || len != q;
      zero += len == 0;
      full += len == q;
    }
    ragged += differs;
    // Every generated case is a valid scenario: it round-trips through the parser.
    ASSERT_TRUE(sim::ParseScenario(sim::ScenarioToJson(s)).ok()) << seed;
  }
  EXPECT_EQ(ragged, 77);  // the family draws ragged lengths in half the cases, then d = 0..Q
  EXPECT_EQ(zero, 414);
  EXPECT_EQ(full, 2778);
  // Without the family nothing is stated: the generator draws what it drew before.
  GenConfig plain = c;
  plain.ragged_q = false;
  for (uint64_t seed = 0; seed < 50; ++seed)
    EXPECT_FALSE(sim::StatesQLens(ScenarioFromSeed(plain, seed, 50).value()));
}

// The vLLM / SGLang profiles refuse a stated batch.q_lens (their planners take one q length per
// batch): the family leaves their cases uniform, so every generated case replays, none refused.
TEST(RaggedQGenerator, LeavesNonAiterProfilesUniformSoTheirCasesRun) {
  GenConfig c = RaggedConfig();
  c.profiles = {"vllm-flashmla", "sglang-flashinfer"};
  c.sparse_only = false;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    const sim::Scenario s = ScenarioFromSeed(c, seed, 50).value();
    EXPECT_FALSE(sim::StatesQLens(s)) << seed;
    EXPECT_TRUE(sim::Replay(s).ok()) << seed;
  }
}

// The lengths shrink towards the uniform Q: among the shrinks of a ragged case is one that only
// raises request lengths (every other field, top-k counts aside, the same).
TEST(RaggedQGenerator, LengthsShrinkTowardsTheUniformQ) {
  const GenConfig c = RaggedConfig();
  int checked = 0;
  for (uint64_t seed = 0; seed < 40 && checked < 5; ++seed) {
    const rc::Shrinkable<sim::Scenario> sh = ScenarioFromSeed(c, seed, 50);
    const sim::Scenario s = sh.value();
    if (sim::ScheduledTokens(s) == static_cast<int32_t>(s.requests.size()) * (s.mtp_k + 1))
      continue;
    ++checked;
    // s with t's lengths (and top-k counts): equal to t when t changed nothing else.
    auto only_lengths_raised = [&s](const sim::Scenario& t) {
      if (t.requests.size() != s.requests.size()) return false;
      sim::Scenario u = s;
      bool up = false;
      for (size_t i = 0; i < s.requests.size(); ++i) {
        if (sim::QLen(t, t.requests[i]) < sim::QLen(s, s.requests[i])) return false;
        up = up || sim::QLen(t, t.requests[i]) > sim::QLen(s, s.requests[i]);
        u.requests[i].q_len = t.requests[i].q_len;
        u.requests[i].topk_lengths = t.requests[i].topk_lengths;
      }
      u.parallel.dp_scheduled_tokens = t.parallel.dp_scheduled_tokens;
      return up && sim::ScenarioToJson(u).dump() == sim::ScenarioToJson(t).dump();
    };
    bool raised = false;
    auto seq = sh.shrinks();
    while (auto next = seq.next()) raised = raised || only_lengths_raised(next->value());
    EXPECT_TRUE(raised) << "seed " << seed;
  }
  EXPECT_EQ(checked, 5);
}

TEST(RaggedQGenerator, TheSwarmKnobIsDrawnOnlyWithTheFamily) {
  GenConfig c = RaggedConfig();
  c.swarm = true;
  const std::vector<SwarmKnob> knobs = SwarmKnobs(c);
  ASSERT_FALSE(knobs.empty());
  EXPECT_EQ(knobs.back().name, "q_lens");
  EXPECT_EQ(knobs.back().options, (std::vector<std::string>{"uniform", "ragged"}));
  c.ragged_q = false;
  for (const SwarmKnob& k : SwarmKnobs(c)) EXPECT_NE(k.name, "q_lens");
}

// The property the fixed profile must keep (no violation on sparse steps) holds on generated
// ragged steps; the engine that ignores the lengths (plans B x Q tokens for q of T_s rows) is
// what tests/cases and the mutant run in docs/fuzzing.md show failing it.
TEST(RaggedQGenerator, TheFixedProfileStaysCleanOnGeneratedRaggedSparseSteps) {
  const GenConfig c = RaggedConfig();
  int ragged = 0, refused = 0;
  for (uint64_t seed = 0; seed < 150; ++seed) {
    const sim::Scenario s = ScenarioFromSeed(c, seed, 10 + static_cast<int>(seed % 91)).value();
    auto r = sim::Replay(s);
    if (!r.ok()) {  // a shape aiter's planner refuses (24 heads): campaigns skip it too
      ++refused;
      continue;
    }
    ragged += sim::ScheduledTokens(s) != int32_t(s.requests.size()) * (s.mtp_k + 1);
    EXPECT_TRUE(FixedProfileViolations(*r).empty())
        << "seed " << seed << ": " << sim::ScenarioToJson(s).dump();
  }
  EXPECT_EQ(ragged, 53);
  EXPECT_EQ(refused, 9);
}

TEST(RaggedQCampaign, CoverageCountsUniformRaggedZeroAndMaxLengths) {
  CampaignOptions o;
  o.max_cases = 60;
  o.seconds = std::numeric_limits<double>::infinity();
  o.seed = 3;
  o.small = true;
  o.profiles = {"atom-2026-11"};
  o.generate = {"ragged-q"};
  auto sum = RunCampaign(o, nullptr);
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  EXPECT_EQ(sum->coverage.at("q_lens:ragged"), 23);
  EXPECT_EQ(sum->coverage.at("q_lens:uniform"), 6);  // the family drew d = 0 for every request
  EXPECT_EQ(sum->coverage.at("q_len:0"), 18);
  EXPECT_EQ(sum->coverage.at("q_len:max"), 23);
  o.generate.clear();
  auto plain = RunCampaign(o, nullptr);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->coverage.count("q_lens:ragged") + plain->coverage.count("q_lens:uniform"), 0u);
}

}  // namespace
}  // namespace mlasim::fuzz
