// sim/fault.h ParseAddressText: what is wrong with an address typed by a user, one reason each,
// and the 64-bit boundary (16 significant hex digits) on both sides.
#include <gtest/gtest.h>

#include "sim/fault.h"

namespace mlasim::sim {
namespace {

std::string Why(const std::string& text) {
  auto a = ParseAddressText(text, "--address");
  EXPECT_FALSE(a.ok()) << text;
  EXPECT_EQ(a.status().field(), "--address");
  return a.ok() ? "" : a.status().message();
}

TEST(AddressText, ValidAddressesUpToSixteenDigits) {
  EXPECT_EQ(*ParseAddressText("0x0", "f"), 0u);
  EXPECT_EQ(*ParseAddressText("0x7f1000200000", "f"), 0x7f1000200000u);
  EXPECT_EQ(*ParseAddressText("0XABCdef", "f"), 0xabcdefu);
  EXPECT_EQ(*ParseAddressText("  0x10\t", "f"), 0x10u);                   // blanks around
  EXPECT_EQ(*ParseAddressText("0xffffffffffffffff", "f"), ~uint64_t{0});  // 16 digits
  EXPECT_EQ(*ParseAddressText("0x00000000000000000001", "f"), 1u);        // leading zeros
}

TEST(AddressText, SeventeenSignificantDigitsAreAbove64Bits) {
  EXPECT_EQ(Why("0x10000000000000000"),
            "'0x10000000000000000' is above 64 bits (17 significant hex digits; at most 16)");
}

TEST(AddressText, EachMistakeHasItsReason) {
  EXPECT_EQ(Why(""), "is empty (give an address such as 0x7f1000200000)");
  EXPECT_EQ(Why("   "), "is empty (give an address such as 0x7f1000200000)");
  EXPECT_EQ(Why("-0x10"),
            "'-0x10' is negative: an address is an unsigned 64-bit number (0x followed by 1 to 16 "
            "hex digits)");
  EXPECT_EQ(Why("4096"),
            "'4096' is a decimal number; an address is hexadecimal with a 0x prefix "
            "(0x7f1000200000)");
  EXPECT_EQ(Why("7f10"), "'7f10' has no 0x prefix (write 0x7f10)");
  EXPECT_EQ(Why("fault"),
            "'fault' is not a hex address (expected 0x followed by 1 to 16 hex digits)");
  EXPECT_EQ(Why("0x"), "'0x' has no hex digits after 0x");
  EXPECT_EQ(Why("0xg1"), "'0xg1' is not hexadecimal: 'g' at position 3");
  EXPECT_EQ(Why("0x7f1g"), "'0x7f1g' is not hexadecimal: 'g' at position 6");
  EXPECT_EQ(Why("0x7f10 please"),
            "'0x7f10 please' has trailing text ' please' after the address 0x7f10");
  EXPECT_EQ(Why("0x7f10,"), "'0x7f10,' has trailing text ',' after the address 0x7f10");
}

}  // namespace
}  // namespace mlasim::sim
