#include "tools/io/npy_reader.h"

#include <set>

namespace mlasim::io {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";

// A cursor over the header dict literal.
class DictScanner {
 public:
  DictScanner(std::string_view text, const std::string& field) : s_(text), field_(field) {}

  void SkipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t')) ++pos_;
  }
  bool Eat(char c) {
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool Peek(char c) {
    SkipSpace();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  bool AtEnd() const { return pos_ >= s_.size(); }
  size_t pos() const { return pos_; }

  // A Python string literal in single or double quotes, without escapes.
  StatusOr<std::string> QuotedString(const std::string& what) {
    SkipSpace();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"'))
      return Error(what, "expected a quoted string" + Near());
    const char quote = s_[pos_++];
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != quote) {
      const char c = s_[pos_++];
      if (c == '\\' || static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e)
        return Error(what, "string holds an escape or a non-printable character");
      if (out.size() >= 64) return Error(what, "string longer than 64 characters");
      out += c;
    }
    if (pos_ >= s_.size()) return Error(what, "unterminated string");
    ++pos_;
    return out;
  }

  StatusOr<bool> Bool(const std::string& what) {
    SkipSpace();
    for (const auto& [word, value] :
         {std::pair<std::string_view, bool>{"True", true}, {"False", false}}) {
      if (s_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    }
    return Error(what, "expected True or False" + Near());
  }

  // A non-negative decimal integer (no sign, no Python 2 'L' suffix) of at most `max`.
  StatusOr<int64_t> Int(const std::string& what, int64_t max) {
    SkipSpace();
    const size_t start = pos_;
    int64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      const int64_t digit = s_[pos_++] - '0';
      if (v > (max - digit) / 10)
        return Error(what, "extent above mlasim's limit of " + std::to_string(max));
      v = v * 10 + digit;
    }
    if (pos_ == start) return Error(what, "expected a non-negative integer" + Near());
    return v;
  }

  Status Error(const std::string& what, const std::string& reason) const {
    return InvalidArgumentError(field_ + ":header" + (what.empty() ? "" : "." + what), reason);
  }
  std::string Near() const {
    if (pos_ >= s_.size()) return " (at the end of the header)";
    std::string near;
    for (size_t i = pos_; i < s_.size() && near.size() < 12; ++i)
      near += (s_[i] >= 0x20 && s_[i] < 0x7f) ? s_[i] : '?';
    return " near '" + near + "'";
  }

 private:
  std::string_view s_;
  const std::string& field_;
  size_t pos_ = 0;
};

StatusOr<std::vector<int64_t>> ParseShape(DictScanner& sc, const NpyLimits& limits) {
  if (!sc.Eat('(')) return sc.Error("shape", "expected a tuple '(...)'" + sc.Near());
  std::vector<int64_t> shape;
  bool trailing_comma = false;
  while (!sc.Peek(')')) {
    if (static_cast<int32_t>(shape.size()) >= limits.max_ndim)
      return sc.Error(
          "shape", "more than " + std::to_string(limits.max_ndim) + " dimensions (mlasim's limit)");
    MLASIM_ASSIGN_OR_RETURN(const int64_t d, sc.Int("shape", limits.max_dim));
    shape.push_back(d);
    trailing_comma = sc.Eat(',');
    if (!trailing_comma && !sc.Peek(')'))
      return sc.Error("shape", "expected ',' or ')'" + sc.Near());
  }
  sc.Eat(')');
  if (shape.size() == 1 && !trailing_comma)
    return sc.Error("shape", "'(n)' is an integer in Python, not a tuple: write '(n,)'");
  return shape;
}

}  // namespace

int32_t NpyItemSize(std::string_view d) {
  if (d.size() < 3 || d.size() > 4) return 0;
  if (d[0] != '<' && d[0] != '>' && d[0] != '|' && d[0] != '=') return 0;
  if (std::string_view("biufcV").find(d[1]) == std::string_view::npos) return 0;
  const std::string_view n = d.substr(2);
  for (const char* ok : {"1", "2", "4", "8", "16"})
    if (n == ok) return static_cast<int32_t>(std::stoi(std::string(n)));
  return 0;
}

std::string NpyShapeString(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) s += ",";
  return s + ")";
}

StatusOr<int64_t> ParseNpyPreamble(std::string_view head, const std::string& field,
                                   const NpyLimits& limits, int64_t* header_len) {
  if (head.size() < 8 || head.substr(0, 6) != kMagic)
    return InvalidArgumentError(field + ":magic",
                                head.size() < 8 ? "file is shorter than the 8-byte .npy preamble"
                                                : "not a .npy file (no \\x93NUMPY magic)");
  const int32_t major = static_cast<unsigned char>(head[6]);
  const int32_t minor = static_cast<unsigned char>(head[7]);
  if (minor != 0 || major < 1 || major > 3)
    return InvalidArgumentError(field + ":version", "format version " + std::to_string(major) +
                                                        "." + std::to_string(minor) +
                                                        " is not 1.0, 2.0 or 3.0");
  const int64_t len_bytes = major == 1 ? 2 : 4;
  if (static_cast<int64_t>(head.size()) < 8 + len_bytes)
    return InvalidArgumentError(field + ":header_len", "truncated: the file ends in the preamble");
  uint64_t len = 0;
  for (int64_t i = len_bytes - 1; i >= 0; --i)
    len = (len << 8) | static_cast<unsigned char>(head[static_cast<size_t>(8 + i)]);
  if (len > static_cast<uint64_t>(limits.max_header_bytes))
    return InvalidArgumentError(field + ":header_len",
                                "header of " + std::to_string(len) + " bytes is above mlasim's " +
                                    "limit of " + std::to_string(limits.max_header_bytes));
  *header_len = static_cast<int64_t>(len);
  return 8 + len_bytes;
}

StatusOr<NpyHeader> ParseNpyHeaderDict(std::string_view dict, const std::string& field,
                                       const NpyLimits& limits) {
  DictScanner sc(dict, field);
  if (dict.empty() || dict.back() != '\n')
    return sc.Error("", "does not end with a newline (truncated or not written by numpy)");
  dict.remove_suffix(1);
  DictScanner body(dict, field);
  if (!body.Eat('{')) return body.Error("", "expected '{'" + body.Near());
  NpyHeader h;
  std::set<std::string> seen;
  while (!body.Peek('}')) {
    MLASIM_ASSIGN_OR_RETURN(const std::string key, body.QuotedString("key"));
    if (seen.count(key)) return body.Error(key, "key given twice");
    if (!body.Eat(':')) return body.Error(key, "expected ':'" + body.Near());
    if (key == "descr") {
      MLASIM_ASSIGN_OR_RETURN(h.descr, body.QuotedString("descr"));
      h.itemsize = NpyItemSize(h.descr);
      if (h.itemsize == 0)
        return body.Error("descr", "'" + h.descr +
                                       "' is not a plain type string (byte order, kind, size; "
                                       "structured and object arrays are not read)");
    } else if (key == "fortran_order") {
      MLASIM_ASSIGN_OR_RETURN(h.fortran_order, body.Bool("fortran_order"));
    } else if (key == "shape") {
      MLASIM_ASSIGN_OR_RETURN(h.shape, ParseShape(body, limits));
    } else {
      return body.Error(key, "unknown key (a .npy header holds descr, fortran_order, shape)");
    }
    seen.insert(key);
    if (!body.Eat(',') && !body.Peek('}'))
      return body.Error(key, "expected ',' or '}'" + body.Near());
  }
  body.Eat('}');
  body.SkipSpace();
  if (!body.AtEnd()) return body.Error("", "text after the closing '}'" + body.Near());
  for (const char* k : {"descr", "fortran_order", "shape"})
    if (!seen.count(k)) return body.Error(k, "required key is missing");
  int64_t bytes = h.itemsize;
  for (const int64_t d : h.shape) {
    if (d != 0 && bytes > limits.max_data_bytes / d)
      return body.Error("shape", NpyShapeString(h.shape) + " of " + std::to_string(h.itemsize) +
                                     "-byte elements is above mlasim's limit of 2^62 bytes");
    bytes *= d;
  }
  h.data_bytes = bytes;
  return h;
}

StatusOr<NpyHeader> ParseNpyHeader(std::string_view file, const std::string& field,
                                   const NpyLimits& limits) {
  int64_t header_len = 0;
  MLASIM_ASSIGN_OR_RETURN(const int64_t preamble,
                          ParseNpyPreamble(file.substr(0, 12), field, limits, &header_len));
  if (static_cast<int64_t>(file.size()) < preamble + header_len)
    return InvalidArgumentError(field + ":header", "truncated: the file ends inside the header (" +
                                                       std::to_string(file.size()) + " of " +
                                                       std::to_string(preamble + header_len) +
                                                       " bytes)");
  MLASIM_ASSIGN_OR_RETURN(
      NpyHeader h, ParseNpyHeaderDict(
                       file.substr(static_cast<size_t>(preamble), static_cast<size_t>(header_len)),
                       field, limits));
  h.major = static_cast<unsigned char>(file[6]);
  h.minor = static_cast<unsigned char>(file[7]);
  h.data_offset = preamble + header_len;
  return h;
}

Status CheckNpyDataSize(const NpyHeader& h, int64_t file_size, const std::string& field) {
  const int64_t have = file_size - h.data_offset;
  if (have < h.data_bytes)
    return InvalidArgumentError(field + ":data",
                                "truncated: the header declares " + std::to_string(h.data_bytes) +
                                    " data bytes (" + h.descr + " " + NpyShapeString(h.shape) +
                                    ") but the file holds " + std::to_string(have));
  if (have > h.data_bytes)
    return InvalidArgumentError(
        field + ":data", std::to_string(have - h.data_bytes) + " bytes after the " +
                             std::to_string(h.data_bytes) + " data bytes the header declares");
  return OkStatus();
}

}  // namespace mlasim::io
