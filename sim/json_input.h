// File: sim/json_input.h
//
// Reading user input files safely: bounded reads (an endless file such as /dev/zero is refused,
// not read into memory) and strict JSON (duplicate keys and out-of-range numbers are errors,
// never resolved silently). Every error is InvalidArgument(field, reason): exit 2 in the CLI.
#pragma once

#include <cstdint>
#include <istream>
#include <string>

#include <nlohmann/json.hpp>

#include "ref/status.h"

namespace mlasim::sim {

// Largest input file mlasim reads (scenario, plan request, layout, fault log): 64 MiB.
inline constexpr int64_t kMaxInputBytes = int64_t{64} << 20;

// The whole file at `path`, at most `max_bytes` bytes. Errors (field `field`): a directory, a
// file that cannot be opened or read, or one longer than max_bytes ("larger than 64 MiB").
StatusOr<std::string> ReadTextFile(const std::string& path, const std::string& field,
                                   int64_t max_bytes = kMaxInputBytes);

// std::getline with a bound: false at the end of the stream; `*too_long` is set (and false
// returned) when a line exceeds max_bytes, so a stream without newlines cannot grow a line
// without limit.
bool ReadLineBounded(std::istream& in, std::string* line, bool* too_long,
                     int64_t max_bytes = kMaxInputBytes);

// Parses JSON text strictly: malformed text, numbers beyond a double (1e400) and duplicate
// object keys (which nlohmann would silently resolve to the last value) are errors. (Integers up
// to 2^64 - 1 parse; the typed readers refuse those beyond their field's range.) Error field: `field`; the reason names the problem and, for a duplicate, its JSON
// path ("$.requests[1].context").
StatusOr<nlohmann::json> ParseJsonStrict(const std::string& text, const std::string& field);

// True when v is an integer that fits int64 (nlohmann stores 2^63 .. 2^64-1 as unsigned, and
// get<int64_t>() would wrap them to negatives).
inline bool IsInt64(const nlohmann::json& v) {
  return v.is_number_integer() &&
         !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX});
}

}  // namespace mlasim::sim
