// Tests of `mlasim check CASE_DIR --scenario-out FILE` (tools/io/case_scenario.h) on cases built
// in memory: a padded MTP decode call becomes the step whose draft step 0 consumes the captured
// plan with the captured rows (and replays with the case's findings), rows no engine call has
// become a verify override, and every case the scenario cannot describe exits 2 naming the
// manifest field. The Python round trip from a real capture is tests/python/test_check_scenario.py.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "ref/planner.h"
#include "sim/replay.h"
#include "sim/scenario_json.h"
#include "tests/cli/case_builders.h"
#include "tools/mlasim/cli.h"

namespace mlasim::cli {
namespace {

namespace fs = std::filesystem;
using io::test::CaseBuilder;

// 5 requests of KV 90..600 padded to 8 with zero-KV requests, Q = 4 (K 3), 16 heads, 80 CUs:
// the 5 -> 8 step of tests/python/test_check_call.py.
ref::PlanRequest Padded(std::vector<int32_t> kv = {90, 4000, 17, 600, 33, 0, 0, 0}) {
  ref::PlanRequest r;
  r.cu_count = 80;
  r.max_seqlen_qo = 4;
  r.uni_seqlen_qo = 4;
  r.qlen = 4;
  r.kv_indptr = {0};
  r.qo_indptr = {0};
  for (int32_t k : kv) {
    r.kv_indptr.push_back(r.kv_indptr.back() + k);
    r.qo_indptr.push_back(r.qo_indptr.back() + 4);
    r.kv_last_page_lens.push_back(1);
  }
  return r;
}

CaseBuilder Case(const ref::PlanRequest& r, int64_t rows) {
  CaseBuilder b;
  b.AddRequest(r);
  b.AddPlan(*ref::PlanMlaMetadata(r));
  b.Add("q", "bfloat16", {rows, 16, 576}, std::string(rows * 16 * 576 * 2, '\0'));
  b.Add("o", "bfloat16", {rows, 16, 512}, std::string(rows * 16 * 512 * 2, '\0'));
  b.manifest["config"]["kernel"] = "asm";
  return b;
}

class CheckScenario : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("mlasim_check_scenario_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    fs::remove_all(dir_);
    out_ = dir_.string() + ".json";
  }
  void TearDown() override {
    fs::remove_all(dir_);
    fs::remove(out_);
  }
  int Check(const CaseBuilder& b, std::string* out, std::string* err) {
    b.WriteTo(dir_);
    std::ostringstream o, e;
    const int rc = RunMlasim({"check", dir_.string(), "--scenario-out", out_}, o, e);
    *out = o.str();
    *err = e.str();
    return rc;
  }
  fs::path dir_;
  std::string out_;
};

TEST_F(CheckScenario, APaddedMtpCaseIsDraftStepZeroOfItsStep) {
  std::string out, err;
  ASSERT_EQ(Check(Case(Padded(), 20), &out, &err), 1) << err;
  EXPECT_NE(out.find("scenario: wrote " + out_ +
                     ": 5 requests padded to 8, MTP K 3, kernel asm, "
                     "engine atom-2026-08; the captured call is draft_step_0.dense_decode of "
                     "the engine's step"),
            std::string::npos)
      << out;
  StatusOr<sim::Scenario> s = sim::LoadScenarioFile(out_);
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s->requests.size(), 5u);
  EXPECT_EQ(s->requests[1].context, 4000);
  EXPECT_EQ(s->graph.capture_sizes, std::vector<int32_t>{8});
  EXPECT_EQ(s->mtp_k, 3);
  EXPECT_EQ(s->cu_count, 80);
  EXPECT_TRUE(s->calls.empty());
  StatusOr<sim::ReplayReport> rep = sim::Replay(*s);
  ASSERT_TRUE(rep.ok());
  std::vector<std::string> seen;
  for (const sim::Violation& v : rep->result.violations)
    if (v.step == "draft_step_0")
      seen.push_back(v.buffer + " " + sim::AccessName(v.access) + " " +
                     std::to_string(v.first_row) + ".." + std::to_string(v.last_row));
  EXPECT_EQ(seen, (std::vector<std::string>{"o write 20..31", "q read 20..31"}));
}

TEST_F(CheckScenario, RowsNoEngineCallHasBecomeAVerifyOverride) {
  std::string out, err;
  ASSERT_EQ(Check(Case(Padded(), 18), &out, &err), 1) << err;
  EXPECT_NE(out.find("the captured call is verify.dense_decode with the captured q/o rows as an "
                     "override"),
            std::string::npos)
      << out;
  StatusOr<sim::Scenario> s = sim::LoadScenarioFile(out_);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->calls.size(), 1u);
  EXPECT_EQ(s->calls[0].call, "verify.dense_decode");
  EXPECT_EQ(s->calls[0].q_rows, 18);
  EXPECT_EQ(s->calls[0].o_rows, 18);
}

TEST_F(CheckScenario, CasesAScenarioCannotDescribeExitTwoNamingTheField) {
  const std::string mf = dir_.string() + "/manifest.json";
  struct Bad {
    CaseBuilder b;
    std::string err;
  };
  ref::PlanRequest gap = Padded({90, 0, 17, 0, 0, 0, 0, 0});
  ref::PlanRequest ragged = Padded();  // a padding request with 3 q rows (ATOM's have 0)
  ragged.qo_indptr = {0, 4, 8, 12, 16, 20, 24, 28, 31};
  CaseBuilder dtypes = Case(Padded(), 20);
  dtypes.manifest["config"]["planner"]["q_dtype"] = "fp8";
  CaseBuilder profile = Case(Padded(), 20);
  profile.manifest["config"]["engine"] = {{"profile", "atom-2030-01"}};
  CaseBuilder tp = Case(Padded(), 20);
  tp.manifest["config"]["engine"] = {{"tp", "8"}};
  CaseBuilder update = Case(Padded(), 20);
  update.manifest["call"] = "decode_update_mla_metadata_v1";
  update.manifest["config"].erase("kernel");
  CaseBuilder bare;
  bare.Add("q", "bfloat16", {4, 16, 576}, std::string(4 * 16 * 576 * 2, '\0'));
  const std::vector<Bad> bad = {
      {Case(gap, 20), mf + ":tensors.kv_indptr: request 2 has KV after a zero-KV request: the "
                           "engine pads the graph batch with zero-KV requests at its end only"},
      {Case(ragged, 20), mf + ":tensors.qo_indptr: request 7 has 3 q rows, not max_seqlen_qo = "
                              "4: the engine's MTP step gives every request K + 1 rows"},
      {dtypes, mf + ":config.planner.q_dtype: differs from kv_dtype: the simulator's engine "
                    "passes q in the KV dtype (ATOM#287)"},
      {profile, mf + ":config.engine.profile: "},
      {tp, mf + ":config.engine.tp: must be an integer 1..64"},
      {update, mf + ":call: --scenario-out reproduces decode and reduce calls; "
                     "'decode_update_mla_metadata_v1' is a plan_update"},
      {bare, mf + ": --scenario-out needs the planner request: the case has no "},
  };
  for (const Bad& x : bad) {
    fs::remove_all(dir_);
    std::string out, err;
    EXPECT_EQ(Check(x.b, &out, &err), 2) << x.err << "\n" << out;
    EXPECT_EQ(out, "");
    EXPECT_EQ(err.rfind("mlasim check: error: " + x.err, 0), 0u) << err;
  }
}

}  // namespace
}  // namespace mlasim::cli
