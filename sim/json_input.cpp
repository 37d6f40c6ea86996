// File: sim/json_input.cpp — bounded file reads and strict JSON (sim/json_input.h).
#include "sim/json_input.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "ref/limits.h"
#include "sim/os_error.h"

namespace mlasim::sim {

using json = nlohmann::json;

StatusOr<std::string> ReadTextFile(const std::string& path, const std::string& field,
                                   int64_t max_bytes) {
  const bool from_limit = max_bytes < 0;
  if (from_limit) max_bytes = ref::Limit(ref::LimitId::kInputBytes);
  MLASIM_RETURN_IF_ERROR(CheckReadableFile(field, path));  // missing, a directory, a pipe
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return OsError(field, FileOp::kRead, path, errno);
  std::string text;
  char buf[1 << 16];
  int err = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) err = errno;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (static_cast<int64_t>(text.size()) > max_bytes) {
      ::close(fd);
      const std::string size = max_bytes % (int64_t{1} << 20) == 0
                                   ? std::to_string(max_bytes >> 20) + " MiB"
                                   : std::to_string(max_bytes) + " bytes";
      return InvalidArgumentError(
          field, (field == path ? "is" : path + " is") + " larger than " + size +
                     " (an endless or wrong file?" +
                     (from_limit ? "; raise it with --limit input_bytes=N" : "") + ")");
    }
  }
  ::close(fd);
  if (err != 0) return OsError(field, FileOp::kRead, path, err);
  return text;
}

bool ReadLineBounded(std::istream& in, std::string* line, bool* too_long, int64_t max_bytes) {
  if (max_bytes < 0) max_bytes = ref::Limit(ref::LimitId::kInputBytes);
  line->clear();
  *too_long = false;
  std::streambuf* sb = in.rdbuf();
  bool any = false;
  for (;;) {
    const int c = sb->sbumpc();
    if (c == std::char_traits<char>::eof()) {
      in.setstate(std::ios::eofbit);
      return any;
    }
    any = true;
    if (c == '\n') return true;
    line->push_back(static_cast<char>(c));
    if (static_cast<int64_t>(line->size()) > max_bytes) {
      *too_long = true;
      return false;
    }
  }
}

namespace {

// Builds the document from nlohmann's SAX events (json::sax_parse) with an explicit stack: linear
// time, no recursion, whatever the nesting. (nlohmann's callback parser, used before, scans the
// parent container for discarded values at every end of an object or array: an array of N
// objects cost O(N^2), a 1 MiB `[{},{},...]` minutes.) It notes the JSON path of the first
// duplicate key, and stops at nesting deeper than the json_depth limit and at more values than
// the json_values limit (ref/limits.h).
class StrictDomBuilder {
 public:
  StrictDomBuilder(int64_t max_depth, int64_t max_values)
      : max_depth_(max_depth), max_values_(max_values) {}

  bool null() { return Put(json(nullptr)); }
  bool boolean(bool v) { return Put(json(v)); }
  bool number_integer(json::number_integer_t v) { return Put(json(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return Put(json(v)); }
  bool number_float(json::number_float_t v, const json::string_t& /*text*/) { return Put(json(v)); }
  bool string(json::string_t& v) { return Put(json(std::move(v))); }
  bool binary(json::binary_t& v) { return Put(json::binary(std::move(v))); }  // not in JSON text
  bool start_object(std::size_t /*unknown*/) { return Open(json::value_t::object); }
  bool start_array(std::size_t /*unknown*/) { return Open(json::value_t::array); }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }
  bool key(json::string_t& k) {
    Frame& f = frames_.back();
    auto [it, inserted] = f.value->get_ref<json::object_t&>().emplace(std::move(k), json());
    if (!inserted && duplicate_.empty()) duplicate_ = PathTo(it->first);
    f.member = it;  // a duplicate's value replaces the first one; the parse fails anyway
    return true;
  }
  bool parse_error(std::size_t /*position*/, const std::string& /*token*/,
                   const json::exception& e) {
    error_ = e.what();
    return false;
  }

  json& root() { return root_; }
  const std::string& error() const { return error_; }
  const std::string& duplicate() const { return duplicate_; }
  bool too_deep() const { return too_deep_; }
  bool too_many() const { return too_many_; }

 private:
  struct Frame {
    json* value;                      // the open array or object
    json::object_t::iterator member;  // object: the member of the last key
  };

  // Places `v` in the innermost open container (or as the document) and returns where it is.
  json* Place(json&& v) {
    if (frames_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Frame& f = frames_.back();
    if (f.value->is_array()) {
      auto& a = f.value->get_ref<json::array_t&>();
      a.push_back(std::move(v));
      return &a.back();
    }
    f.member->second = std::move(v);
    return &f.member->second;
  }
  // Every value counts against json_values before it is stored: the tree costs about 100
  // bytes a value (an empty object in an array), whatever the text's size.
  bool Count() {
    if (++values_ <= max_values_) return true;
    too_many_ = true;
    return false;
  }
  bool Put(json&& v) {
    if (!Count()) return false;
    Place(std::move(v));
    return true;
  }
  bool Open(json::value_t t) {
    if (static_cast<int64_t>(frames_.size()) >= max_depth_) {
      too_deep_ = true;
      return false;
    }
    if (!Count()) return false;
    frames_.push_back(Frame{Place(json(t)), {}});
    return true;
  }
  bool Close() {
    frames_.pop_back();
    return true;
  }
  // "$.a[3].b" for key `last` of the innermost object: each outer frame adds its member's key or
  // its last element's index (the element being parsed is always an array's last one).
  std::string PathTo(const std::string& last) const {
    std::string p = "$";
    for (size_t i = 0; i + 1 < frames_.size(); ++i) {
      const json& v = *frames_[i].value;
      p += v.is_array() ? "[" + std::to_string(v.size() - 1) + "]" : "." + frames_[i].member->first;
    }
    return p + "." + last;
  }

  int64_t max_depth_, max_values_, values_ = 0;
  json root_;
  std::vector<Frame> frames_;
  std::string error_, duplicate_;
  bool too_deep_ = false, too_many_ = false;
};

}  // namespace

const char* CompressionOf(std::string_view bytes) {
  static constexpr std::pair<std::string_view, const char*> kMagic[] = {
      {std::string_view("\x1f\x8b", 2), "gzip"},
      {std::string_view("\xfd\x37\x7a\x58\x5a\x00", 6), "xz"},
      {std::string_view("\x28\xb5\x2f\xfd", 4), "zstd"},
      {std::string_view("BZh", 3), "bzip2"},
  };
  for (const auto& [magic, name] : kMagic)
    if (bytes.substr(0, magic.size()) == magic) return name;
  return nullptr;
}

StatusOr<json> ParseJsonStrict(const std::string& text, const std::string& field) {
  const int64_t max_depth = ref::Limit(ref::LimitId::kJsonDepth);
  const int64_t max_values = ref::Limit(ref::LimitId::kJsonValues);
  // nlohmann's lexer reads a NUL byte as the end of the input: "{...}\0anything" parsed as
  // "{...}", the rest dropped without a word. JSON text holds no NUL byte (a string's is \u0000).
  if (const size_t nul = text.find('\0'); nul != std::string::npos && !CompressionOf(text)) {
    const size_t line_start = text.rfind('\n', nul);
    return InvalidArgumentError(
        field, fmt::format("malformed JSON: a NUL byte at line {}, column {} (JSON text holds "
                           "none; a binary, padded or damaged file?)",
                           std::count(text.begin(), text.begin() + nul, '\n') + 1,
                           nul - (line_start == std::string::npos ? 0 : line_start + 1) + 1));
  }
  StrictDomBuilder dom(max_depth, max_values);
  const bool ok = json::sax_parse(text, &dom);
  if (dom.too_deep())
    return ref::TooLarge(field, max_depth + 1, ref::LimitId::kJsonDepth,
                         "JSON nesting depth (arrays and objects)");
  if (dom.too_many())
    return ref::TooLarge(field, max_values + 1, ref::LimitId::kJsonValues,
                         "JSON values (numbers, strings, arrays, objects, ...)");
  if (!ok) {  // parse errors, and numbers out of range (1e400)
    // A compressed file: no JSON text starts with these bytes.
    if (const char* z = CompressionOf(text))
      return InvalidArgumentError(field, std::string(z) +
                                             "-compressed; decompress it first (this input is "
                                             "read as plain JSON)");
    std::string what = dom.error();
    const size_t cut = what.find("] ");  // drop nlohmann's "[json.exception.parse_error.101] "
    if (cut != std::string::npos) what = what.substr(cut + 2);
    return InvalidArgumentError(field, "malformed JSON: " + what);
  }
  if (!dom.duplicate().empty())
    return InvalidArgumentError(
        field, "duplicate key " + dom.duplicate() + " (JSON objects must not repeat a key)");
  return std::move(dom.root());
}

Status PrintableText(const std::string& field, const std::string& text, bool multiline) {
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const auto next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
    uint32_t code = 0;
    if (c < 0x20 || c == 0x7f) {
      if (multiline && (c == '\n' || c == '\t')) continue;
      code = c;
    } else if (c == 0xc2 && next >= 0x80 && next <= 0x9f) {
      code = next;  // UTF-8 C2 xx is U+00xx for xx in 80..BF
    } else {
      continue;
    }
    return InvalidArgumentError(
        field, fmt::format("holds the control character U+{:04X} at byte {}: text reports print "
                           "it as is",
                           code, i));
  }
  return OkStatus();
}

}  // namespace mlasim::sim
