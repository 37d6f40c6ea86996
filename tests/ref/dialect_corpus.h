// File: tests/ref/dialect_corpus.h
//
// Shared by the third-party planner corpora (FlashInfer MLAPlan, FlashMLA scheduler): gzip
// JSONL files (zlib) read and written a line at a time, and the FNV-1a 64 digest of byte
// images. Test support, not part of the libraries.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ref/status.h"

namespace mlasim::test {

// Calls `on_line` for every line of the gzip (or plain) file `path`, in order, without the
// newline. Errors: FailedPrecondition("path") when it cannot be opened or is corrupt;
// OutOfRange when a line exceeds `max_line_bytes`.
Status ForEachGzipLine(const std::string& path,
                       const std::function<void(const std::string&)>& on_line,
                       size_t max_line_bytes = 64 << 20);

class GzipLineWriter {
 public:
  // Opens `path` for writing at compression level 9. Check ok() before use.
  explicit GzipLineWriter(const std::string& path);
  ~GzipLineWriter();
  GzipLineWriter(const GzipLineWriter&) = delete;
  GzipLineWriter& operator=(const GzipLineWriter&) = delete;
  bool ok() const { return file_ != nullptr && ok_; }
  void Write(const std::string& line);  // appends line + '\n'
  Status Close();

 private:
  void* file_ = nullptr;  // gzFile
  bool ok_ = true;
};

// FNV-1a, 64 bits, over bytes [0, size).
uint64_t Fnv1a64(const uint8_t* data, size_t size);
std::string Hex64(uint64_t v);  // 16 lowercase hex digits

}  // namespace mlasim::test
