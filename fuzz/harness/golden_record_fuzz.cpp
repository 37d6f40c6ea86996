// libFuzzer harness: golden corpus lines (tools/io/golden.h CheckGoldenLine), the input of
// `mlasim plan --check-golden`: strict JSON, the record's shape, its request against the limits
// table (ref/limits.h), then the replay of the record (plan, sizes, decode_update chain) and the
// comparison with its buffers. The input is the file: lines split on '\n' as the CLI splits
// them. Seeds: tests/fuzz/corpus/golden_record/ (records of tests/golden/, docs/golden.md).
#include <cstddef>
#include <cstdint>
#include <string>

#include "ref/limits.h"
#include "tools/io/golden.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The one limits table, lowered as in plan_request_fuzz so each record plans in milliseconds.
  (void)mlasim::ref::SetLimits("requests=600,clusters=2048,plan_elements=1048576");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  mlasim::io::GoldenSummary sum;
  size_t at = 0;
  for (int line = 1; at <= text.size(); ++line) {
    const size_t end = std::min(text.find('\n', at), text.size());
    const std::string l = text.substr(at, end - at);
    at = end + 1;
    if (l.empty()) continue;
    // The CLI stops at the first bad line.
    if (!mlasim::io::CheckGoldenLine(l, "fuzz:" + std::to_string(line), &sum,
                                     [](const mlasim::io::GoldenMismatch&) {})
             .ok())
      return 0;
  }
  return 0;
}
