// The one limits table (ref/limits.h, docs/limits.md): the table itself, every SetLimits error,
// the message beyond a limit, the request checks at their boundaries (the limit, one past it),
// and the paths that must apply them: mlasim's CLI (--limit, $MLASIM_LIMITS) and the golden
// reader (`plan --check-golden`), which applied none before.
#include "ref/limits.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <set>
#include <string>
#include <vector>

#include "ref/planner.h"
#include "sim/replay.h"
#include "tools/mlasim/cli.h"

namespace mlasim::ref {
namespace {

// Every test starts and ends at the defaults.
class Limits : public ::testing::Test {
 protected:
  void SetUp() override { ResetLimits(); }
  void TearDown() override { ResetLimits(); }
};

// A dense bf16 request of `requests` requests with 100 KV tokens each, qlen 1, 16 heads.
PlanRequest Request(int32_t requests) {
  PlanRequest r;
  r.cu_count = 8;
  r.heads_per_head_k = 16;
  r.num_heads_k = 1;
  r.qlen = r.max_seqlen_qo = r.uni_seqlen_qo = 1;
  r.page_size = 1;
  r.kv_granularity = 16;
  for (int32_t i = 0; i <= requests; ++i) {
    r.qo_indptr.push_back(i);
    r.kv_indptr.push_back(100 * i);
  }
  r.kv_last_page_lens.assign(requests, 1);
  return r;
}

TEST_F(Limits, TableIsInIdOrderWithUniqueNamesAndSaneValues) {
  std::set<std::string> names;
  for (int i = 0; i < static_cast<int>(LimitId::kCount); ++i) {
    const LimitSpec& s = kLimits[i];
    EXPECT_EQ(static_cast<int>(s.id), i) << s.name;
    EXPECT_TRUE(names.insert(s.name).second) << "duplicate " << s.name;
    EXPECT_GE(s.default_value, 1) << s.name;
    EXPECT_LE(s.default_value, s.hard_max) << s.name;
    EXPECT_EQ(Limit(s.id), s.default_value) << s.name;
  }
  EXPECT_EQ(Limit(LimitId::kRequests), 1 << 20);
  EXPECT_EQ(Limit(LimitId::kPlanElements), 1 << 24);
  EXPECT_EQ(Limit(LimitId::kInputBytes), 64 << 20);
}

TEST_F(Limits, SetLimitsRaisesLowersAndResets) {
  ASSERT_TRUE(SetLimits(" requests = 2000000 , qlen=8").ok());
  EXPECT_EQ(Limit(LimitId::kRequests), 2000000);
  EXPECT_EQ(Limit(LimitId::kQlen), 8);
  ASSERT_TRUE(SetLimits("requests=16777216").ok());  // exactly the hard maximum
  EXPECT_EQ(Limit(LimitId::kRequests), 16777216);
  ASSERT_TRUE(SetLimits("requests=1").ok());  // the smallest value
  EXPECT_EQ(Limit(LimitId::kRequests), 1);
  ASSERT_TRUE(SetLimits("").ok());    // nothing to set
  ASSERT_TRUE(SetLimits("  ").ok());  // blanks only: nothing to set
  ResetLimits();
  EXPECT_EQ(Limit(LimitId::kRequests), 1 << 20);
  EXPECT_EQ(Limit(LimitId::kQlen), 4096);
}

TEST_F(Limits, SetLimitsErrorsNameTheFieldAndChangeNothing) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"requests", "'requests' is not NAME=VALUE (limits: clusters, heads,"},
      {"bogus=1", "no limit named 'bogus' (limits: clusters,"},
      {"requests=abc", "requests: 'abc' is not a decimal integer"},
      {"requests=", "requests: '' is not a decimal integer"},
      {"requests=0", "requests: 0 is outside 1..16777216"},
      {"requests=-5", "requests: -5 is outside 1..16777216"},
      {"requests=16777217", "requests: 16777217 is outside 1..16777216"},
      {"requests=99999999999999999999",
       "requests: '99999999999999999999' is an integer above 64 bits (the largest is "
       "18446744073709551615; must be in 1..16777216)"},
      {"requests=18446744073709551615", "requests: 18446744073709551615 is outside 1..16777216"},
      {"requests=18446744073709551616", "requests: '18446744073709551616' is an integer above 64"},
      {"qlen=8,requests=0", "requests: 0 is outside"},
      // Round 8: an empty item was skipped and the last of two values won.
      {"requests=7,", "empty item: a leading, trailing or doubled comma (got 'requests=7,')"},
      {",requests=7", "empty item: a leading, trailing or doubled comma (got ',requests=7')"},
      {"requests=7,,qlen=8",
       "empty item: a leading, trailing or doubled comma (got "
       "'requests=7,,qlen=8')"},
      {"requests=7, ,qlen=8", "empty item: a leading, trailing or doubled comma"},  // blanks only
      {"requests=7,requests=8",
       "requests given twice (got 'requests=7,requests=8'; each limit at most once)"},
      {"requests=7,qlen=8, requests = 7",  // the same value twice too
       "requests given twice (got 'requests=7,qlen=8, requests = 7'; each limit at most once)"},
  };
  for (const auto& [spec, want] : cases) {
    SCOPED_TRACE(spec);
    const Status st = SetLimits(spec, "--limit");
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.field(), "--limit");
    EXPECT_NE(st.message().find(want), std::string::npos) << st.message();
    EXPECT_EQ(Limit(LimitId::kRequests), 1 << 20);  // unchanged, also by the valid first item
    EXPECT_EQ(Limit(LimitId::kQlen), 4096);
  }
  // Limits that protect int32 arithmetic cannot be raised.
  EXPECT_FALSE(SetLimits("indptr=1073741825").ok());
  EXPECT_TRUE(SetLimits("indptr=1073741824").ok());
}

TEST_F(Limits, EnvironmentIsReadWithItsOwnFieldName) {
  ::unsetenv("MLASIM_LIMITS");
  EXPECT_TRUE(SetLimitsFromEnvironment().ok());
  ::setenv("MLASIM_LIMITS", "requests=7", 1);
  EXPECT_TRUE(SetLimitsFromEnvironment().ok());
  EXPECT_EQ(Limit(LimitId::kRequests), 7);
  ::setenv("MLASIM_LIMITS", "requests=x", 1);
  const Status st = SetLimitsFromEnvironment();
  EXPECT_EQ(st.field(), "MLASIM_LIMITS");
  ::unsetenv("MLASIM_LIMITS");
}

TEST_F(Limits, TooLargeSaysHowToRaiseOrWhyNot) {
  EXPECT_EQ(TooLarge("kv_indptr", 5, LimitId::kRequests, "request count").message(),
            "request count is 5, above mlasim's limit of 1048576 (raise it with --limit "
            "requests=N or MLASIM_LIMITS=requests=N, up to 16777216)");
  EXPECT_EQ(TooLarge("kv_indptr[1]", 5, LimitId::kIndptr, "value").message(),
            "value is 5, above mlasim's limit of 1073741824 (limit indptr, which cannot be "
            "raised: it keeps int32 arithmetic exact)");
  EXPECT_EQ(TooLarge("x", 1, LimitId::kRequests, "y").field(), "x");
  ASSERT_TRUE(SetLimits("requests=16777216").ok());  // raised as far as it goes
  EXPECT_EQ(TooLarge("kv_indptr", 16777217, LimitId::kRequests, "request count").message(),
            "request count is 16777217, above mlasim's limit of 16777216 (requests is at its "
            "hard maximum)");
}

// An input over a limit is ResourceExhausted, every other refusal InvalidArgument, and the code
// survives the engine's own wording (sim/engine.cpp WrappedError): `triage` and `fuzz` count the
// cases a lowered limit refuses as not run by this code (round 12: they were counted clean).
TEST_F(Limits, OverALimitIsResourceExhaustedThroughTheEngineOtherRefusalsAreNot) {
  EXPECT_EQ(TooLarge("x", 5, LimitId::kRequests, "y").code(), StatusCode::kResourceExhausted);
  EXPECT_STREQ(StatusCodeName(StatusCode::kResourceExhausted), "RESOURCE_EXHAUSTED");
  StatusOr<sim::Scenario> seed = sim::BuiltinScenario("seed");
  ASSERT_TRUE(seed.ok());
  ASSERT_TRUE(sim::Replay(*seed).ok());
  ASSERT_TRUE(SetLimits("requests=2").ok());
  StatusOr<sim::ReplayReport> over = sim::Replay(*seed);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted) << over.status().ToString();
  EXPECT_NE(over.status().message().find("above mlasim's limit of 2"), std::string::npos)
      << over.status().ToString();
  ResetLimits();
  StatusOr<sim::Scenario> dense = sim::BuiltinScenario("dense-mtp");
  ASSERT_TRUE(dense.ok());
  sim::Scenario odd = *dense;
  odd.model.heads = 192;  // 24 a rank at TP 8: aiter's dense planner refuses it
  StatusOr<sim::ReplayReport> refused = sim::Replay(odd);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << refused.status().ToString();
  // The wrapper keeps the one code and only that one.
  EXPECT_EQ(WrappedError(TooLarge("x", 5, LimitId::kRequests, "y"), "f", "m").code(),
            StatusCode::kResourceExhausted);
  for (const Status& cause : {InvalidArgumentError("a", "b"), FailedPreconditionError("a", "b"),
                              OutOfRangeError("a", "b")})
    EXPECT_EQ(WrappedError(cause, "f", "m").code(), StatusCode::kInvalidArgument);
}

TEST_F(Limits, RequestCountAtTheLimitPassesOnePastItIsRefused) {
  ASSERT_TRUE(SetLimits("requests=4").ok());
  EXPECT_TRUE(CheckRequestLimits(Request(4)).ok());
  EXPECT_TRUE(CheckPlanInputLimits(Request(4)).ok());
  const Status st = CheckRequestLimits(Request(5));
  EXPECT_EQ(st.field(), "kv_indptr");
  EXPECT_NE(st.message().find("request count is 5, above mlasim's limit of 4"), std::string::npos)
      << st.message();
  EXPECT_TRUE(CheckRequestLimits(Request(0)).ok());  // an empty batch
  EXPECT_TRUE(CheckRequestLimits(Request(1)).ok());
}

TEST_F(Limits, QLengthAtTheLimitPassesOnePastItIsRefused) {
  PlanRequest r = Request(2);
  r.max_seqlen_qo = 4096;
  EXPECT_TRUE(CheckRequestLimits(r).ok());
  r.max_seqlen_qo = 4097;
  const Status st = CheckRequestLimits(r);
  EXPECT_EQ(st.field(), "max_seqlen_qo");
  EXPECT_NE(st.message().find("4097, above mlasim's limit of 4096 (raise it with --limit qlen=N"),
            std::string::npos)
      << st.message();
}

TEST_F(Limits, PlanElementsAtTheLimitPassesOnePastItIsRefused) {
  MetadataSizes sizes;
  sizes.work_indptr = 9;
  sizes.work_info_rows = 100;  // 800 int32 elements; work_metadata_ptrs: 2 uint64 = 4
  ASSERT_TRUE(SetLimits("plan_elements=813").ok());
  EXPECT_TRUE(CheckSizesLimit(sizes).ok());
  ASSERT_TRUE(SetLimits("plan_elements=812").ok());
  const Status st = CheckSizesLimit(sizes);
  EXPECT_EQ(st.field(), "batch_size");
  EXPECT_NE(st.message().find("is 813, above mlasim's limit of 812"), std::string::npos)
      << st.message();
  // The buffer that drives the count is named with its sizing rule.
  EXPECT_NE(st.message().find("; the largest is work_info, 800 int32 elements (rows: (B + "
                              "max_splits - 1) x tiles per batch)"),
            std::string::npos)
      << st.message();
  sizes.reduce_partial_map = 900;  // now the largest
  EXPECT_NE(CheckSizesLimit(sizes).message().find(
                "; the largest is reduce_partial_map, 900 int32 elements (rows: max_split_tiles)"),
            std::string::npos);
}

// The CLI: --limit before the command, $MLASIM_LIMITS, and their errors (exit 2).
TEST_F(Limits, CliLimitFlagAndEnvironment) {
  std::ostringstream out, err;
  EXPECT_EQ(cli::RunMlasim({"--limit", "requests=2", "plan", "--kv-lens", "1,2,3"}, out, err), 2);
  EXPECT_NE(err.str().find("request count is 3, above mlasim's limit of 2 (raise it with --limit "
                           "requests=N"),
            std::string::npos)
      << err.str();
  std::ostringstream out2, err2;
  EXPECT_EQ(cli::RunMlasim({"--limit", "requests=3", "plan", "--kv-lens", "1,2,3"}, out2, err2), 0)
      << err2.str();
  std::ostringstream out3, err3;
  EXPECT_EQ(cli::RunMlasim({"--limit", "bogus=3", "plan", "--kv-lens", "1"}, out3, err3), 2);
  EXPECT_NE(err3.str().find("--limit: no limit named 'bogus'"), std::string::npos) << err3.str();
  ::setenv("MLASIM_LIMITS", "requests=2", 1);
  std::ostringstream out4, err4;
  EXPECT_EQ(cli::RunMlasim({"plan", "--kv-lens", "1,2,3"}, out4, err4), 2);
  std::ostringstream out5, err5;  // --limit overrides the environment
  EXPECT_EQ(cli::RunMlasim({"--limit", "requests=3", "plan", "--kv-lens", "1,2,3"}, out5, err5), 0);
  ::setenv("MLASIM_LIMITS", "requests", 1);
  std::ostringstream out6, err6;
  EXPECT_EQ(cli::RunMlasim({"plan", "--kv-lens", "1"}, out6, err6), 2);
  EXPECT_NE(err6.str().find("MLASIM_LIMITS: 'requests' is not NAME=VALUE"), std::string::npos)
      << err6.str();
  ::unsetenv("MLASIM_LIMITS");
  std::ostringstream out7, err7;  // each run starts from the defaults
  EXPECT_EQ(cli::RunMlasim({"plan", "--kv-lens", "1,2,3"}, out7, err7), 0) << err7.str();
}

}  // namespace
}  // namespace mlasim::ref
