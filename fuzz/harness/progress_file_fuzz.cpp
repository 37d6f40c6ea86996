// libFuzzer harness: a campaign's progress file (fuzz/progress.h ParseProgressText), what
// `mlasim fuzz --resume` reads from its --out folder: identity, next_index, seconds_spent,
// signatures. A file that parses must write back to one that parses to the same progress.
// Seeds: tests/fuzz/corpus/progress_file/ (files of docs/fuzzing.md's resumable campaigns).
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/progress.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto p = mlasim::fuzz::ParseProgressText(text, ".progress-0-of-1", "--resume");
  if (!p.ok()) return 0;
  const std::string again = mlasim::fuzz::ProgressText(*p);
  auto q = mlasim::fuzz::ParseProgressText(again, ".progress-0-of-1", "--resume");
  if (!q.ok() || mlasim::fuzz::ProgressText(*q) != again) __builtin_trap();  // not a round trip
  return 0;
}
