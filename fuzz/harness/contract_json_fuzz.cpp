// libFuzzer harness: kernel contract files (docs/contracts.md, sim/contract.h) through the strict
// JSON reader and the contract compiler, and every contract that compiles through one replay of
// the built-in seed scenario in place of the built-in contract of its call kind, so a contract's
// program runs against real plan buffers (loops, loads, gathers, hang bounds).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ref/limits.h"
#include "sim/contract.h"
#include "sim/json_input.h"
#include "sim/replay.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The one limits table (ref/limits.h), lowered so a generated loop bound stays quick.
  (void)mlasim::ref::SetLimits("loop_trips=65536,launch_grid=4096");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto doc = mlasim::sim::ParseJsonStrict(text, "fuzz");  // the path --contract takes
  if (!doc.ok()) return 0;
  auto c = mlasim::sim::ParseContract(*doc, "fuzz");
  if (!c.ok()) return 0;
  static const auto seed = mlasim::sim::BuiltinScenario("seed");
  if (!seed.ok()) __builtin_trap();  // the built-in case must always load
  mlasim::sim::Scenario s = *seed;
  s.contracts.push_back(std::make_shared<const mlasim::sim::Contract>(std::move(*c)));
  (void)mlasim::sim::Replay(s);
  return 0;
}
