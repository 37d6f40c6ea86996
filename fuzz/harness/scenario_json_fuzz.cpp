// libFuzzer harness: scenario JSON (sim/scenario_json.h: ParseJsonStrict, ParseScenario). Any
// input must give a scenario or a clean error; a parsed scenario must expand (or be refused)
// without crashing, and its index values be placed or refused (sim/index_values.h).
#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/engine.h"
#include "sim/index_values.h"
#include "sim/scenario_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto doc = mlasim::sim::ParseJsonStrict(text, "fuzz");  // the path every CLI input takes
  if (!doc.ok()) return 0;
  auto s = mlasim::sim::ParseScenario(*doc);
  if (!s.ok()) return 0;
  // Keep runs short: expand only small steps.
  if (s->requests.size() > 64) return 0;
  auto t = mlasim::sim::ExpandStep(*s);
  if (t.ok()) (void)mlasim::sim::CheckIndexValuesPlaced(*s, *t);
  return 0;
}
