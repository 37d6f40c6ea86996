// File: sim/json_input.cpp — bounded file reads and strict JSON (sim/json_input.h).
#include "sim/json_input.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
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

StatusOr<json> ParseJsonStrict(const std::string& text, const std::string& field) {
  // Frames of the containers being parsed: an object's keys so far, an array's element index.
  struct Frame {
    bool array = false;
    std::set<std::string> keys;
    std::string key;
    int64_t index = -1;
  };
  std::vector<Frame> frames;
  std::string duplicate;  // JSON path of the first duplicate key
  auto path = [&frames](const std::string& last) {
    std::string p = "$";
    for (size_t i = 0; i + 1 < frames.size(); ++i)
      p += frames[i].array ? "[" + std::to_string(frames[i].index) + "]" : "." + frames[i].key;
    return p + "." + last;
  };
  const json::parser_callback_t cb = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    using E = json::parse_event_t;
    if ((event == E::object_start || event == E::array_start || event == E::value) &&
        !frames.empty() && frames.back().array)
      ++frames.back().index;
    if (event == E::object_start || event == E::array_start) {
      frames.emplace_back();
      frames.back().array = event == E::array_start;
    } else if (event == E::object_end || event == E::array_end) {
      if (!frames.empty()) frames.pop_back();
    } else if (event == E::key && !frames.empty()) {
      const std::string k = parsed.is_string() ? parsed.get<std::string>() : parsed.dump();
      if (!frames.back().keys.insert(k).second && duplicate.empty()) duplicate = path(k);
      frames.back().key = k;
    }
    return true;
  };
  json doc;
  try {
    doc = json::parse(text, cb);
  } catch (const json::exception& e) {  // parse errors, and numbers out of range (1e400)
    std::string what = e.what();
    const size_t cut = what.find("] ");  // drop nlohmann's "[json.exception.parse_error.101] "
    if (cut != std::string::npos) what = what.substr(cut + 2);
    return InvalidArgumentError(field, "malformed JSON: " + what);
  }
  if (!duplicate.empty())
    return InvalidArgumentError(
        field, "duplicate key " + duplicate + " (JSON objects must not repeat a key)");
  return doc;
}

}  // namespace mlasim::sim
