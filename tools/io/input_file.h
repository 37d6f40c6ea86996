// File: tools/io/input_file.h
//
// Opens a text input that may be xz-compressed: the golden corpora live in the repository as
// tests/golden/*.jsonl.xz (docs/golden.md), and `mlasim plan --check-golden` takes a plain .jsonl
// or its .xz alike. The format is recognised by its magic bytes (FD 37 7A 58 5A 00), not by the
// file name; decompression streams through liblzma (xz-utils), so memory stays bounded by the
// decoder's dictionary (at most kMaxXzDecoderBytes) plus one buffer, whatever the file's size.
#pragma once

#include <cstdint>
#include <istream>
#include <memory>
#include <string>

#include "ref/status.h"

namespace mlasim::io {

// Memory the xz decoder may use (its dictionary and state). `xz -6` needs about 9 MiB and
// `xz -9` about 65 MiB; a stream asking for more is refused, not decoded.
inline constexpr uint64_t kMaxXzDecoderBytes = uint64_t{128} << 20;

class InputFile {
 public:
  // Opens `path`. Errors (field = path): a directory, a file that cannot be opened (the cause
  // in words: sim/os_error.h), an xz stream whose decoder could not be set up, a gzip file
  // ("gzip-compressed; decompress it or compress it with xz ...": not read as text).
  static StatusOr<std::unique_ptr<InputFile>> Open(const std::string& path);

  virtual ~InputFile() = default;

  // The decompressed bytes. At a decoding error the stream ends early; check status().
  virtual std::istream& stream() = 0;

  // OK, or the reason the stream ended early (field = path): truncated or corrupt xz data, a
  // read error, an xz stream needing more than kMaxXzDecoderBytes.
  virtual Status status() const = 0;

  // True when the file was xz-compressed.
  virtual bool compressed() const = 0;
};

}  // namespace mlasim::io
