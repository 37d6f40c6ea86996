// ref/int_text.h: a decimal integer beyond 64 bits is named as such, at both ends of the 64-bit
// range, with its sign, leading zeros and a range.
#include "ref/int_text.h"

#include <gtest/gtest.h>

namespace mlasim::ref {
namespace {

TEST(IntText, UnsignedLimitIsTheBoundary) {
  EXPECT_FALSE(IsDecimalBeyond64Bits("18446744073709551615"));  // 2^64 - 1
  EXPECT_TRUE(IsDecimalBeyond64Bits("18446744073709551616"));   // 2^64
  EXPECT_TRUE(IsDecimalBeyond64Bits("99999999999999999999"));   // 20 digits
  EXPECT_TRUE(IsDecimalBeyond64Bits("100000000000000000000"));  // 21 digits
  EXPECT_FALSE(IsDecimalBeyond64Bits("+18446744073709551615"));
  EXPECT_TRUE(IsDecimalBeyond64Bits("+18446744073709551616"));
  EXPECT_FALSE(IsDecimalBeyond64Bits("000018446744073709551615"));  // leading zeros do not count
}

TEST(IntText, SignedLimitIsTheBoundaryBelowZero) {
  EXPECT_FALSE(IsDecimalBeyond64Bits("-9223372036854775808"));  // -2^63
  EXPECT_TRUE(IsDecimalBeyond64Bits("-9223372036854775809"));
  EXPECT_FALSE(IsDecimalBeyond64Bits("-0"));
}

TEST(IntText, OnlyDecimalIntegersCount) {
  for (const char* t : {"", "-", "+", "1e30", "0x1ffffffffffffffff", "1.5", " 18446744073709551616",
                        "18446744073709551616 ", "abc"})
    EXPECT_FALSE(IsDecimalBeyond64Bits(t)) << t;
  EXPECT_FALSE(IsDecimalBeyond64Bits("0"));
  EXPECT_FALSE(IsDecimalBeyond64Bits("1"));
}

TEST(IntText, TextNamesTheValueTheLimitAndTheRange) {
  EXPECT_EQ(Beyond64BitsText("18446744073709551616"),
            "'18446744073709551616' is an integer above 64 bits (the largest is "
            "18446744073709551615)");
  EXPECT_EQ(Beyond64BitsText("-9223372036854775809"),
            "'-9223372036854775809' is an integer below -2^63 (the smallest is "
            "-9223372036854775808)");
  EXPECT_EQ(Beyond64BitsText("18446744073709551616", "1..4096"),
            "'18446744073709551616' is an integer above 64 bits (the largest is "
            "18446744073709551615; must be in 1..4096)");
}

}  // namespace
}  // namespace mlasim::ref
