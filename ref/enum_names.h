// File: ref/enum_names.h
//
// Enum <-> string conversion from ONE table per enum (issue 10 §6): a table lists each value with
// its name (first row of a value = its canonical name; later rows = accepted aliases). NameOf
// renders a value, ParseEnum is what every parser in ref/ and tools/ calls, with one error
// message format: "unknown <what> '<text>' (expected a, b or c)". The tables live next to their
// enums (ref/target.h, ref/planner.h, ref/plan_check.h).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "ref/status.h"

namespace mlasim::ref {

template <typename E>
struct EnumName {
  E value;
  const char* name;
};

// The canonical name of `value`, or "?" if the table does not list it.
template <typename E, size_t N>
constexpr const char* NameOf(const EnumName<E> (&table)[N], E value) {
  for (const EnumName<E>& row : table)
    if (row.value == value) return row.name;
  return "?";
}

// "a, b or c": the canonical names, in table order.
template <typename E, size_t N>
std::string ExpectedNames(const EnumName<E> (&table)[N]) {
  std::string names;
  size_t listed = 0, count = 0;
  for (size_t i = 0; i < N; ++i)
    if (NameOf(table, table[i].value) == table[i].name) ++count;
  for (size_t i = 0; i < N; ++i) {
    if (NameOf(table, table[i].value) != table[i].name) continue;  // an alias
    if (listed > 0) names += listed + 1 == count ? " or " : ", ";
    names += table[i].name;
    ++listed;
  }
  return names;
}

// "a|b|c": the canonical names, in table order (a CLI option's value type, as its help shows it).
template <typename E, size_t N>
std::string NameChoices(const EnumName<E> (&table)[N]) {
  std::string names;
  for (size_t i = 0; i < N; ++i) {
    if (NameOf(table, table[i].value) != table[i].name) continue;  // an alias
    names += (names.empty() ? "" : "|") + std::string(table[i].name);
  }
  return names;
}

// The value named `text` (a canonical name or an alias). Errors: InvalidArgument(field,
// "unknown <what> '<text>' (expected ...)").
template <typename E, size_t N>
StatusOr<E> ParseEnum(const EnumName<E> (&table)[N], std::string_view text, std::string_view field,
                      std::string_view what) {
  for (const EnumName<E>& row : table)
    if (text == row.name) return row.value;
  return InvalidArgumentError(std::string(field), "unknown " + std::string(what) + " '" +
                                                      std::string(text) + "' (expected " +
                                                      ExpectedNames(table) + ")");
}

}  // namespace mlasim::ref
