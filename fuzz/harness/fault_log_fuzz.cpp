// libFuzzer harness: fault log lines (sim/fault.h ParseFaultText).
#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/fault.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;  // std::regex recursion depth grows with input length
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)mlasim::sim::ParseFaultText(text, "--log");
  return 0;
}
