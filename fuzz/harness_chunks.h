// fuzz/harness_chunks.h - splits one libFuzzer input into up to 64 byte strings, each a
// little-endian 16-bit length and that many bytes (the last one cut at the input's end): the
// files of a case folder, for case_dir_fuzz and case_check_fuzz. It lies beside fuzz/harness/,
// which holds only *_fuzz.cpp files.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

inline std::vector<std::string> Chunks(const uint8_t* data, size_t size) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at + 2 <= size && out.size() < 64) {
    const size_t n = std::min<size_t>(size - at - 2, data[at] | (size_t{data[at + 1]} << 8));
    out.emplace_back(reinterpret_cast<const char*>(data) + at + 2, n);
    at += 2 + n;
  }
  return out;
}
