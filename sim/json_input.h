// File: sim/json_input.h
//
// Reading user input files safely: bounded reads (an endless file such as /dev/zero is refused,
// not read into memory) and strict JSON (duplicate keys and out-of-range numbers are errors,
// never resolved silently). Every error is InvalidArgument(field, reason): exit 2 in the CLI.
#pragma once

#include <cmath>
#include <cstdint>
#include <istream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ref/status.h"

namespace mlasim::sim {

// Largest input file mlasim reads (scenario, contract, plan request, layout, fault log) by
// default: 64 MiB; the value in force is ref::Limit(LimitId::kInputBytes) (`--limit
// input_bytes=N`, ref/limits.h), used when max_bytes is -1.
inline constexpr int64_t kMaxInputBytes = int64_t{64} << 20;

// The whole file at `path`, at most `max_bytes` bytes. Errors (field `field`): a directory, a
// pipe, a file that cannot be opened or read (the cause in words, sim/os_error.h: "x.json does
// not exist", "permission denied reading x.json"), or one longer than max_bytes ("larger than
// 64 MiB").
StatusOr<std::string> ReadTextFile(const std::string& path, const std::string& field,
                                   int64_t max_bytes = -1);

// std::getline with a bound: false at the end of the stream; `*too_long` is set (and false
// returned) when a line exceeds max_bytes, so a stream without newlines cannot grow a line
// without limit.
bool ReadLineBounded(std::istream& in, std::string* line, bool* too_long, int64_t max_bytes = -1);

// "gzip", "xz", "zstd" or "bzip2" when `bytes` start with that format's magic bytes (1F 8B;
// FD 37 7A 58 5A 00; 28 B5 2F FD; "BZh"), else nullptr: a compressed file given where text is
// read is named as such, not as malformed text (ParseJsonStrict; io::InputFile reads xz and
// refuses the others).
const char* CompressionOf(std::string_view bytes);

// Parses JSON text strictly: malformed text, numbers beyond a double (1e400) and duplicate
// object keys (which nlohmann would silently resolve to the last value) are errors. (Integers up
// to 2^64 - 1 parse; the typed readers refuse those beyond their field's range.) Bounded by the
// limits table (ref/limits.h): nesting deeper than json_depth and more values than json_values
// are refused as they are met (ref::TooLarge: the limit and how to raise it). Linear time, no
// recursion. Error field: `field`; the reason names the problem and, for a duplicate, its JSON
// path ("$.requests[1].context"). Text that starts with a compression's magic (CompressionOf) is
// "gzip-compressed; decompress it first (this input is read as plain JSON)".
StatusOr<nlohmann::json> ParseJsonStrict(const std::string& text, const std::string& field);

// Names and descriptions the text reports print (a scenario's, a contract's): OK when `text`
// holds no control character, else InvalidArgument(field, "holds the control character U+XXXX
// at byte N: text reports print it as is"). Control characters are C0 (U+0000..U+001F), DEL
// (U+007F) and C1 (U+0080..U+009F, UTF-8 C2 80..C2 9F: a terminal reads U+009B as CSI, U+0085
// as a line break); `multiline` lets line breaks and tabs through. Other multi-byte UTF-8 is
// accepted as is (JSON text is valid UTF-8 once parsed).
Status PrintableText(const std::string& field, const std::string& text, bool multiline = false);

// True when v is an integer that fits int64 (nlohmann stores 2^63 .. 2^64-1 as unsigned, and
// get<int64_t>() would wrap them to negatives).
inline bool IsInt64(const nlohmann::json& v) {
  return v.is_number_integer() &&
         !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX});
}

// True when v is a whole number beyond 64 bits: at least 2^64 or below -2^63. nlohmann stores
// such numbers as doubles (18446744073709551616, 1e30), so is_number_integer() is false for them.
// -2^63 - 1 rounds to the double -2^63, which an integer of that text would not be stored as: a
// double at or below -2^63 is beyond 64 bits.
inline bool IsIntegerBeyond64Bits(const nlohmann::json& v) {
  if (!v.is_number_float()) return false;
  const double d = v.get<double>();
  return std::isfinite(d) && std::floor(d) == d &&
         (d >= 18446744073709551616.0 || d <= -9223372036854775808.0);
}

// Why v is not an integer: "must be an integer" (a string, 2.5, 1e3), or for a whole number
// beyond 64 bits, which nlohmann stores as a double whether it was written 1e300 or
// 18446744073709551616, "is out of the 64-bit integer range (got 1e+300; the largest is
// 18446744073709551615)" / "(got -1e+30; the smallest is -9223372036854775808)". Words that fit
// either spelling (it said "is an integer above 64 bits", the wrong word for 1e300). The one text
// every JSON integer field uses.
inline std::string NotAnIntegerReason(const nlohmann::json& v) {
  if (!IsIntegerBeyond64Bits(v)) return "must be an integer";
  return "is out of the 64-bit integer range (got " + v.dump() +
         (v.get<double>() > 0 ? "; the largest is 18446744073709551615)"
                              : "; the smallest is -9223372036854775808)");
}

// Why v is not an integer in lo..hi, or "" when it is: "must be an integer", or "must be in lo..hi
// (got x)" for any number outside the range, x printed exactly (2^63 .. 2^64-1 included) or, for
// one beyond 64 bits, as the double it is stored as ("got 1e+300").
inline std::string IntegerRangeReason(const nlohmann::json& v, int64_t lo, int64_t hi) {
  const std::string range = "must be in " + std::to_string(lo) + ".." + std::to_string(hi);
  if (IsIntegerBeyond64Bits(v)) return range + " (got " + v.dump() + ")";
  if (!v.is_number_integer()) return "must be an integer";
  if (!IsInt64(v)) return range + " (got " + std::to_string(v.get<uint64_t>()) + ")";
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) return range + " (got " + std::to_string(x) + ")";
  return "";
}

// Reads one JSON object field by field, remembering which keys were consumed so that Finish()
// can refuse unknown keys. Every error names the field's JSON path.
class ObjectReader {
 public:
  ObjectReader(const nlohmann::json& obj, std::string path) : obj_(obj), path_(std::move(path)) {}

  Status Check() const {
    if (!obj_.is_object()) return InvalidArgumentError(path_, "must be an object");
    return OkStatus();
  }
  std::string Path(const std::string& key) const { return path_ + "." + key; }
  bool Has(const std::string& key) const { return obj_.contains(key); }

  Status Int(const std::string& key, int32_t* out, int64_t lo, int64_t hi, bool required = false) {
    int64_t x = *out;
    MLASIM_RETURN_IF_ERROR(Int64(key, &x, lo, hi, required));
    *out = static_cast<int32_t>(x);  // lo..hi lie within int32 for every int32 field
    return OkStatus();
  }
  Status Int64(const std::string& key, int64_t* out, int64_t lo, int64_t hi,
               bool required = false) {
    seen_.insert(key);
    if (!obj_.contains(key)) return Missing(key, required);
    const nlohmann::json& v = obj_.at(key);
    if (std::string why = IntegerRangeReason(v, lo, hi); !why.empty())
      return InvalidArgumentError(Path(key), why);
    *out = v.get<int64_t>();
    return OkStatus();
  }
  Status Bool(const std::string& key, bool* out) {
    seen_.insert(key);
    if (!obj_.contains(key)) return OkStatus();
    if (!obj_.at(key).is_boolean()) return InvalidArgumentError(Path(key), "must be true or false");
    *out = obj_.at(key).get<bool>();
    return OkStatus();
  }
  Status String(const std::string& key, std::string* out, bool required = false) {
    seen_.insert(key);
    if (!obj_.contains(key)) return Missing(key, required);
    if (!obj_.at(key).is_string()) return InvalidArgumentError(Path(key), "must be a string");
    *out = obj_.at(key).get<std::string>();
    return OkStatus();
  }
  Status IntArray(const std::string& key, std::vector<int32_t>* out, int64_t lo, int64_t hi) {
    seen_.insert(key);
    if (!obj_.contains(key)) return OkStatus();
    const nlohmann::json& v = obj_.at(key);
    if (!v.is_array()) return InvalidArgumentError(Path(key), "must be an array of integers");
    out->clear();
    for (size_t i = 0; i < v.size(); ++i) {
      const std::string p = Path(key) + "[" + std::to_string(i) + "]";
      if (std::string why = IntegerRangeReason(v[i], lo, hi); !why.empty())
        return InvalidArgumentError(p, why);
      out->push_back(static_cast<int32_t>(v[i].get<int64_t>()));
    }
    return OkStatus();
  }
  const nlohmann::json* Child(const std::string& key) {
    seen_.insert(key);
    return obj_.contains(key) ? &obj_.at(key) : nullptr;
  }
  Status Finish() const {
    for (auto it = obj_.begin(); it != obj_.end(); ++it)
      if (!seen_.count(it.key())) return InvalidArgumentError(Path(it.key()), "unknown key");
    return OkStatus();
  }

 private:
  Status Missing(const std::string& key, bool required) const {
    return required ? InvalidArgumentError(Path(key), "required key is missing") : OkStatus();
  }
  const nlohmann::json& obj_;
  std::string path_;
  std::set<std::string> seen_;
};

}  // namespace mlasim::sim
