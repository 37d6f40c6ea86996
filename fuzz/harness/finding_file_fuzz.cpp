// libFuzzer harness: a campaign's finding files (fuzz/findings.h ParseFindingText), what
// `mlasim fuzz --resume` and `mlasim fuzz merge` read from every --out folder: the finding's
// signature, seed index, shrink record, violation detail, reproduce commands and known bug.
// Seeds: tests/fuzz/corpus/finding_file/ (finding files of docs/fuzzing.md's worked examples).
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/findings.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto r = mlasim::fuzz::ParseFindingText(std::move(text), "finding.json");
  if (!r.ok() || !r->has_value()) return 0;
  (void)mlasim::fuzz::SmallerFinding(**r, **r);  // merge's order over what it read
  return 0;
}
