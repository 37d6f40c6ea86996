// Engine presets: read from the call tables' "profiles" (sim/engines/*.json, sim/call_table.h).
#include <string>

#include "sim/call_table.h"
#include "sim/scenario.h"

namespace mlasim::sim {

std::vector<std::string> EngineProfileNames() {
  std::vector<std::string> names;
  for (const EngineProfile& e : BuiltinProfiles()) names.push_back(e.name);
  return names;
}

StatusOr<EngineProfile> GetEngineProfile(const std::string& name, const std::string& field) {
  for (const EngineProfile& e : BuiltinProfiles())
    if (e.name == name) return e;
  std::string known;
  for (const std::string& n : EngineProfileNames()) known += (known.empty() ? "" : ", ") + n;
  return InvalidArgumentError(field,
                              "unknown engine profile '" + name + "' (known: " + known + ")");
}

}  // namespace mlasim::sim
