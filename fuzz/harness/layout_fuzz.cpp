// libFuzzer harness: layout files (sim/fault.h ValidateLayout / AttributeAddress).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "sim/fault.h"
#include "sim/json_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  uint64_t address = 0;
  std::memcpy(&address, data, 8);
  const std::string text(reinterpret_cast<const char*>(data) + 8, size - 8);
  auto doc = mlasim::sim::ParseJsonStrict(text, "--layout");  // as explain-fault reads it
  if (!doc.ok()) return 0;
  (void)mlasim::sim::AttributeAddress(*doc, address);
  return 0;
}
