#include "tests/ref/dialect_corpus.h"

#include <fmt/format.h>
#include <zlib.h>

namespace mlasim::test {

Status ForEachGzipLine(const std::string& path,
                       const std::function<void(const std::string&)>& on_line,
                       size_t max_line_bytes) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return FailedPreconditionError(path, "cannot open");
  std::string line;
  char buf[1 << 16];
  int n = 0;
  Status status;
  while (status.ok() && (n = gzread(f, buf, sizeof buf)) > 0) {
    for (int i = 0; i < n; ++i) {
      if (buf[i] == '\n') {
        on_line(line);
        line.clear();
      } else if (line.size() >= max_line_bytes) {
        status = OutOfRangeError(path, fmt::format("a line exceeds {} bytes", max_line_bytes));
        break;
      } else {
        line.push_back(buf[i]);
      }
    }
  }
  if (status.ok() && n < 0) {
    int err = 0;
    status = FailedPreconditionError(path, fmt::format("corrupt gzip data: {}", gzerror(f, &err)));
  }
  gzclose(f);
  if (status.ok() && !line.empty()) on_line(line);
  return status;
}

GzipLineWriter::GzipLineWriter(const std::string& path) : file_(gzopen(path.c_str(), "wb9")) {}

GzipLineWriter::~GzipLineWriter() {
  Close().IgnoreError();
}

void GzipLineWriter::Write(const std::string& line) {
  if (!ok()) return;
  const std::string with_newline = line + "\n";
  ok_ =
      gzwrite(static_cast<gzFile>(file_), with_newline.data(),
              static_cast<unsigned>(with_newline.size())) == static_cast<int>(with_newline.size());
}

Status GzipLineWriter::Close() {
  if (file_ == nullptr) return OkStatus();
  const int rc = gzclose(static_cast<gzFile>(file_));
  file_ = nullptr;
  if (rc != Z_OK || !ok_) return FailedPreconditionError("gzip", "write failed");
  return OkStatus();
}

uint64_t Fnv1a64(const uint8_t* data, size_t size) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < size; ++i) {
    h ^= data[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::string Hex64(uint64_t v) {
  return fmt::format("{:016x}", v);
}

}  // namespace mlasim::test
