// sim/json_input.h integer helpers: a JSON number beyond 64 bits (nlohmann stores it as a double,
// whether written 1e300 or 18446744073709551616) is refused by every integer field in words that
// fit either spelling, at each boundary of the 64-bit range; integers inside it keep their range
// messages.
#include <gtest/gtest.h>

#include <cstdint>

#include "sim/json_input.h"
#include "sim/scenario_json.h"

namespace mlasim::sim {
namespace {

using nlohmann::json;

json Num(const char* text) {
  return json::parse(text);
}

TEST(JsonInteger, BeyondSixtyFourBitsAtBothEnds) {
  EXPECT_FALSE(IsIntegerBeyond64Bits(Num("18446744073709551615")));  // 2^64 - 1: unsigned
  EXPECT_TRUE(IsIntegerBeyond64Bits(Num("18446744073709551616")));   // 2^64: a double
  EXPECT_FALSE(IsIntegerBeyond64Bits(Num("-9223372036854775808")));  // -2^63: signed
  EXPECT_TRUE(IsIntegerBeyond64Bits(Num("-9223372036854775809")));   // a double
  EXPECT_TRUE(IsIntegerBeyond64Bits(Num("1e30")));
  EXPECT_TRUE(IsIntegerBeyond64Bits(Num("-1e30")));
  EXPECT_FALSE(IsIntegerBeyond64Bits(Num("1e19")));  // a double, but within 64 bits
  EXPECT_FALSE(IsIntegerBeyond64Bits(Num("0.5")));
  EXPECT_FALSE(IsIntegerBeyond64Bits(Num("\"18446744073709551616\"")));
}

TEST(JsonInteger, NotAnIntegerReasonNamesTheCause) {
  EXPECT_EQ(NotAnIntegerReason(Num("\"12\"")), "must be an integer");
  EXPECT_EQ(NotAnIntegerReason(Num("2.5")), "must be an integer");
  EXPECT_EQ(NotAnIntegerReason(Num("18446744073709551616")),
            "is out of the 64-bit integer range (got 1.8446744073709552e+19; the largest is "
            "18446744073709551615)");
  EXPECT_EQ(NotAnIntegerReason(Num("1e300")),
            "is out of the 64-bit integer range (got 1e+300; the largest is "
            "18446744073709551615)");
  EXPECT_EQ(NotAnIntegerReason(Num("-1e30")),
            "is out of the 64-bit integer range (got -1e+30; the smallest is "
            "-9223372036854775808)");
}

TEST(JsonInteger, RangeReasonAtEveryBoundary) {
  EXPECT_EQ(IntegerRangeReason(Num("1"), 1, 64), "");
  EXPECT_EQ(IntegerRangeReason(Num("64"), 1, 64), "");
  EXPECT_EQ(IntegerRangeReason(Num("0"), 1, 64), "must be in 1..64 (got 0)");
  EXPECT_EQ(IntegerRangeReason(Num("65"), 1, 64), "must be in 1..64 (got 65)");
  EXPECT_EQ(IntegerRangeReason(Num("9223372036854775807"), 1, 64),
            "must be in 1..64 (got 9223372036854775807)");
  EXPECT_EQ(IntegerRangeReason(Num("9223372036854775808"), 1, 64),  // unsigned, above int64
            "must be in 1..64 (got 9223372036854775808)");
  EXPECT_EQ(IntegerRangeReason(Num("18446744073709551615"), 1, 64),
            "must be in 1..64 (got 18446744073709551615)");
  EXPECT_EQ(IntegerRangeReason(Num("18446744073709551616"), 1, 64),
            "must be in 1..64 (got 1.8446744073709552e+19)");
  EXPECT_EQ(IntegerRangeReason(Num("1e300"), 1, 64), "must be in 1..64 (got 1e+300)");
  EXPECT_EQ(IntegerRangeReason(Num("-9223372036854775809"), 1, 64),
            "must be in 1..64 (got -9.223372036854776e+18)");
  EXPECT_EQ(IntegerRangeReason(Num("true"), 1, 64), "must be an integer");
}

TEST(JsonInteger, ObjectReaderFieldsGiveTheRangeBeyond64Bits) {
  const json doc = json::parse(R"({"heads": 1e30, "lens": [1, 18446744073709551616]})");
  ObjectReader r(doc, "$");
  int32_t heads = 0;
  Status st = r.Int("heads", &heads, 1, 1024);
  EXPECT_EQ(st.field(), "$.heads");
  EXPECT_EQ(st.message(), "must be in 1..1024 (got 1e+30)");
  std::vector<int32_t> lens;
  st = r.IntArray("lens", &lens, 0, 100);
  EXPECT_EQ(st.field(), "$.lens[1]");
  EXPECT_EQ(st.message(), "must be in 0..100 (got 1.8446744073709552e+19)");
}

// A scenario's integer fields, top-k lengths included (they had a reader of their own), read
// through IntegerRangeReason: "heads": 1e300 was "an integer above 64 bits", a wrong word for a
// float given where an integer is expected.
TEST(JsonInteger, ScenarioIntegersAreReadByTheOneReader) {
  const json base = json::parse(R"({"model": {"heads": 64, "sparse": true, "topk": 2048},
    "batch": {"contexts": [5000], "topk_lengths": [[4096]]}, "engine": "atom-2026-08"})");
  ASSERT_TRUE(ParseScenario(base).ok()) << ParseScenario(base).status().ToString();
  const std::pair<std::string, std::string> cases[] = {
      {R"({"model": {"heads": 1e300}})", "$.model.heads: must be in 1..1024 (got 1e+300)"},
      {R"({"model": {"heads": -1e300}})", "$.model.heads: must be in 1..1024 (got -1e+300)"},
      {R"({"model": {"heads": 18446744073709551616}})",
       "$.model.heads: must be in 1..1024 (got 1.8446744073709552e+19)"},
      {R"({"model": {"heads": 64.5}})", "$.model.heads: must be an integer"},
      {R"({"batch": {"topk_lengths": [[1e300]]}})",
       "$.batch.topk_lengths[0][0]: must be in 0..1048576 (got 1e+300)"},
      {R"({"batch": {"topk_lengths": [[-1]]}})",
       "$.batch.topk_lengths[0][0]: must be in 0..1048576 (got -1)"},
      {R"({"batch": {"topk_lengths": [[1048577]]}})",
       "$.batch.topk_lengths[0][0]: must be in 0..1048576 (got 1048577)"},
      {R"({"batch": {"topk_lengths": [[9223372036854775808]]}})",
       "$.batch.topk_lengths[0][0]: must be in 0..1048576 (got 9223372036854775808)"},
      {R"({"batch": {"topk_lengths": [[1.5]]}})", "$.batch.topk_lengths[0][0]: must be an integer"},
  };
  for (const auto& [patch, want] : cases) {
    json doc = base;
    doc.merge_patch(json::parse(patch));
    const StatusOr<Scenario> s = ParseScenario(doc);
    ASSERT_FALSE(s.ok()) << patch;
    EXPECT_EQ(s.status().ToString(), want) << patch;
  }
  json top = base;
  top["batch"]["topk_lengths"] = json::parse("[[1048576]]");
  EXPECT_TRUE(ParseScenario(top).ok()) << ParseScenario(top).status().ToString();
}

}  // namespace
}  // namespace mlasim::sim
