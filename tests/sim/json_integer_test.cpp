// sim/json_input.h integer helpers: a JSON number that is an integer beyond 64 bits (nlohmann
// stores it as a double) is named as such by every integer field, at each boundary of the 64-bit
// range; integers inside it keep their range messages.
#include <gtest/gtest.h>

#include <cstdint>

#include "sim/json_input.h"

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
            "is an integer above 64 bits (1.8446744073709552e+19; the largest is "
            "18446744073709551615)");
  EXPECT_EQ(NotAnIntegerReason(Num("-1e30")),
            "is an integer below -2^63 (-1e+30; the smallest is -9223372036854775808)");
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
            "is an integer above 64 bits (1.8446744073709552e+19; must be in 1..64)");
  EXPECT_EQ(IntegerRangeReason(Num("-9223372036854775809"), 1, 64),
            "is an integer below -2^63 (-9.223372036854776e+18; must be in 1..64)");
  EXPECT_EQ(IntegerRangeReason(Num("true"), 1, 64), "must be an integer");
}

TEST(JsonInteger, ObjectReaderFieldsSayAbove64Bits) {
  const json doc = json::parse(R"({"heads": 1e30, "lens": [1, 18446744073709551616]})");
  ObjectReader r(doc, "$");
  int32_t heads = 0;
  Status st = r.Int("heads", &heads, 1, 1024);
  EXPECT_EQ(st.field(), "$.heads");
  EXPECT_EQ(st.message(), "is an integer above 64 bits (1e+30; must be in 1..1024)");
  std::vector<int32_t> lens;
  st = r.IntArray("lens", &lens, 0, 100);
  EXPECT_EQ(st.field(), "$.lens[1]");
  EXPECT_EQ(st.message(),
            "is an integer above 64 bits (1.8446744073709552e+19; must be in 0..100)");
}

}  // namespace
}  // namespace mlasim::sim
