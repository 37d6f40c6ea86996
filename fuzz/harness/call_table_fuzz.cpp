// libFuzzer harness: engine call tables (sim/call_table.h, docs/contracts.md "Call tables")
// through the strict JSON reader and ParseCallTable: profiles and their flags, variables and
// their expressions, plan-buffer sets, persistent buffers, steps and rows. Tables are built in
// (sim/engines/); no command loads a user's table yet, so the engine's interpreter (which asserts
// on a table it cannot run) is not fuzzed here. Seeds: tests/fuzz/corpus/call_table/ (the
// built-in table, minified).
#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/call_table.h"
#include "sim/json_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto doc = mlasim::sim::ParseJsonStrict(text, "fuzz");  // the path every JSON input takes
  if (!doc.ok()) return 0;
  auto table = mlasim::sim::ParseCallTable(*doc, "fuzz");
  if (!table.ok()) return 0;
  // Overriding a variable the table has: the path the simulator's mutants take.
  if (!table->variables.empty())
    (void)mlasim::sim::ParseCallTable(*doc, "fuzz", {{table->variables[0].name, "T_r + 1"}});
  return 0;
}
