// File: sim/scenario_json.h
//
// Scenario <-> JSON (schema: docs/scenario.md). Parsing is strict: an unknown key, a wrong type
// or an impossible value is an InvalidArgument error whose field is the JSON path ("$.model.heads")
// and whose message says why.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "sim/json_input.h"
#include "sim/scenario.h"

namespace mlasim::sim {

StatusOr<Scenario> ParseScenario(const nlohmann::json& doc);

// Reads and parses a file; malformed JSON is reported with its line and column. Every error's
// field starts with the path ("case.json: $.model.heads").
StatusOr<Scenario> LoadScenarioFile(const std::string& path);
// `st` with its JSON-path field ("$.calls[0].call"; an empty field is "$") named in the scenario
// file `path` ("case.json: $.calls[0].call"); OK, other fields (--kernel) and an empty `path` (a
// built-in case) are left as they are. LoadScenarioFile's errors and those of a later expansion
// of the file's scenario (tools/mlasim/scenario_input.h) go through it.
Status InScenarioFile(const std::string& path, const Status& st);
// The canonical JSON of a scenario (every field, engine flags spelled out).
nlohmann::json ScenarioToJson(const Scenario& s);

}  // namespace mlasim::sim
