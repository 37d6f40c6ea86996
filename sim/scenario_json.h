// File: sim/scenario_json.h
//
// Scenario <-> JSON (schema: docs/scenario.md). Parsing is strict: an unknown key, a wrong type
// or an impossible value is an InvalidArgument error whose field is the JSON path ("$.model.heads")
// and whose message says why.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "sim/scenario.h"

namespace mlasim::sim {

StatusOr<Scenario> ParseScenario(const nlohmann::json& doc);

// Parses JSON text strictly: malformed text and duplicate object keys (which nlohmann would
// silently resolve to the last value) are errors. Error field: `field`; the reason names the
// problem and, for a duplicate, its JSON path ("$.requests[1].context").
StatusOr<nlohmann::json> ParseJsonStrict(const std::string& text, const std::string& field);
// Reads and parses a file; malformed JSON is reported with its line and column.
StatusOr<Scenario> LoadScenarioFile(const std::string& path);
// The canonical JSON of a scenario (every field, engine flags spelled out).
nlohmann::json ScenarioToJson(const Scenario& s);

}  // namespace mlasim::sim
