// File: ref/int_text.h
//
// Decimal integers typed by a user (flag values, `--limit NAME=VALUE`, seeds): the words for one
// that does not fit 64 bits, so every reader says "is an integer above 64 bits" rather than
// "not a valid value" or a range that hides why (issue 19 §6). JSON numbers have their own test
// (sim::IsIntegerBeyond64Bits in sim/json_input.h): nlohmann stores such numbers as doubles.
#pragma once

#include <string>
#include <string_view>

namespace mlasim::ref {

// True when `text` is a decimal integer (an optional + or -, then digits only) whose value is
// above 2^64 - 1 or below -2^63: no 64-bit type holds it.
inline bool IsDecimalBeyond64Bits(std::string_view text) {
  const bool negative = !text.empty() && text[0] == '-';
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) text.remove_prefix(1);
  if (text.empty() || text.find_first_not_of("0123456789") != std::string_view::npos) return false;
  while (text.size() > 1 && text[0] == '0') text.remove_prefix(1);
  const std::string_view limit = negative ? "9223372036854775808" : "18446744073709551615";
  return text.size() > limit.size() || (text.size() == limit.size() && text > limit);
}

// "'TEXT' is an integer above 64 bits (the largest is 18446744073709551615)", or for a negative
// one "'TEXT' is an integer below -2^63 (the smallest is -9223372036854775808)"; with `range`
// ("1..4096"), "(the largest is 18446744073709551615; must be in 1..4096)".
inline std::string Beyond64BitsText(std::string_view text, const std::string& range = "") {
  const bool negative = !text.empty() && text[0] == '-';
  return "'" + std::string(text) + "' is an integer " +
         (negative ? "below -2^63 (the smallest is -9223372036854775808"
                   : "above 64 bits (the largest is 18446744073709551615") +
         (range.empty() ? std::string(")") : "; must be in " + range + ")");
}

}  // namespace mlasim::ref
