// sim::MatchKnownBug for docs/findings.md #5 (dcp-token-without-local-kv): with DCP a token that
// owns no KV on this rank is a zero-KV item that OPUS and HK leave unwritten. The replay reports
// it as unwritten output, the engine-step numerics (campaigns run them, --step-numerics-every) as
// never-written poison in a real row: both are the known family under DCP, neither without it,
// and poison of another class is not it. (A campaign at seed 7 with --ignore-known reported the
// numerics' form as two new findings before the pattern named it.)
#include <gtest/gtest.h>

#include "sim/known_bugs.h"
#include "sim/replay.h"

namespace mlasim::sim {
namespace {

ReplayReport Step(int32_t dcp) {
  ReplayReport r;
  r.scenario.parallel.dcp = dcp;
  return r;
}

Violation NeverWritten(BugClass cls) {
  Violation v;
  v.kind = ViolationKind::kPoisonedOutput;
  v.bug_class = cls;
  v.step = "verify";
  v.call = "sparse_decode";
  v.buffer = "o";
  v.access = Access::kWrite;
  return v;
}

TEST(KnownBugs, NeverWrittenRowsUnderDcpAreTheDcpFamily) {
  const KnownBug* k = MatchKnownBug(NeverWritten(BugClass::kB), Step(2));
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->name, "dcp-token-without-local-kv");
  Violation unwritten = NeverWritten(BugClass::kB);
  unwritten.kind = ViolationKind::kUnwrittenOutput;
  k = MatchKnownBug(unwritten, Step(2));
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->name, "dcp-token-without-local-kv");
}

TEST(KnownBugs, NeverWrittenRowsWithoutDcpOrOfAnotherClassAreNot) {
  EXPECT_EQ(MatchKnownBug(NeverWritten(BugClass::kB), Step(1)), nullptr);
  EXPECT_EQ(MatchKnownBug(NeverWritten(BugClass::kI), Step(2)), nullptr);
}

}  // namespace
}  // namespace mlasim::sim
