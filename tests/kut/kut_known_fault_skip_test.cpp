// Guard mode with --ignore-known (fuzz/kut_check.h KutCheckOptions::skip_known_faults,
// docs/kernel-under-test.md): the decision not to run a call whose guarded predictions are all
// known families' (OnlyKnownFaults), at each of its boundaries.
#include <gtest/gtest.h>

#include "fuzz/kut_check_internal.h"

namespace mlasim::fuzz::kut_internal {
namespace {

// A prediction on `buffer` past its end from violations whose detail is `family` ("known" or
// "new").
Predicted Past(const std::string& buffer, std::vector<std::string> families,
               bool attribution_only = false) {
  Predicted p{buffer, "read", false, 10, 12, {}};
  for (const std::string& f : families) {
    sim::Violation v;
    v.buffer = buffer;
    v.detail = f;
    p.from.push_back(v);
  }
  p.attribution_only = attribution_only;
  return p;
}

bool Decide(const std::vector<Predicted>& predicted, const std::string& guarded_buffer = "") {
  return OnlyKnownFaults(
      predicted,
      [&](const Predicted& p) { return guarded_buffer.empty() || p.buffer == guarded_buffer; },
      [](const sim::Violation& v) { return v.detail == "known"; });
}

TEST(KutKnownFaultSkip, NoPredictionRuns) {
  EXPECT_FALSE(Decide({}));
}

TEST(KutKnownFaultSkip, OneGuardedKnownPredictionSkips) {
  EXPECT_TRUE(Decide({Past("q", {"known"})}));
}

TEST(KutKnownFaultSkip, OneGuardedNewPredictionRuns) {
  EXPECT_FALSE(Decide({Past("q", {"new"})}));
}

TEST(KutKnownFaultSkip, ANewViolationBehindAKnownOnesPredictionRuns) {
  EXPECT_FALSE(Decide({Past("q", {"known", "new"})}));
}

TEST(KutKnownFaultSkip, AGuardedNewPredictionBesideAKnownOneRuns) {
  EXPECT_FALSE(Decide({Past("q", {"known"}), Past("o", {"new"})}));
  EXPECT_FALSE(Decide({Past("o", {"new"}), Past("q", {"known"})}));
}

TEST(KutKnownFaultSkip, AnUnguardedNewPredictionDoesNotKeepTheCallRunning) {
  EXPECT_TRUE(Decide({Past("q", {"known"}), Past("o", {"new"})}, "q"));
}

TEST(KutKnownFaultSkip, OnlyUnguardedPredictionsRun) {
  EXPECT_FALSE(Decide({Past("o", {"known"})}, "q"));
}

TEST(KutKnownFaultSkip, AttributionOnlyPredictionsCountNeitherWay) {
  EXPECT_FALSE(Decide({Past("kv_cache", {"known"}, true)}));
  EXPECT_TRUE(Decide({Past("kv_cache", {"new"}, true), Past("q", {"known"})}));
}

}  // namespace
}  // namespace mlasim::fuzz::kut_internal
