// File: sim/call_overrides.h
//
// Which scenario override applies to which call of the step (docs/scenario.md "Disagreements:
// calls and sizing"), as data: the one table the parser, the engine's check and the docs' table
// share. Also which scenario field set a planner input, so that a refusal by the planner or the
// sizing names the field that caused it ($.calls[1].planner_heads, $.sizing[0].heads) rather
// than the model's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ref/status.h"
#include "sim/scenario.h"

namespace mlasim::sim {

// The forms a call of the step takes, as an override sees them.
enum class CallForm : uint8_t {
  kAiterPlanBuild,    // get_mla_metadata_v1 (aiter's planner)
  kDialectPlanBuild,  // a plan build of the flashmla or flashinfer planner (sim/engine_dialect.h)
  kPlanUpdate,        // decode_update_mla_metadata_v1 in place
  kIndexFill,         // an index fill kernel (indexer_gather, kv_indices_generate)
  kDecode,            // a decode kernel launch
  kReduce,            // the reduce launch after a decode
};

// "a plan build", "a plan build of the flashmla planner" (`planner` names the dialect's planner),
// "a plan update", "an index fill", "a decode launch", "a reduce launch".
std::string CallFormName(CallForm form, const std::string& planner = "");

// One key of a `calls` entry: the forms of call it applies to, whether an entry sets it, and what
// it means (the docs' table).
struct CallOverrideField {
  const char* key;                   // the JSON key of $.calls[i]
  std::vector<CallForm> applies_to;  // the calls whose expansion reads it
  bool (*is_set)(const CallOverride&);
  void (*copy)(const CallOverride& from, CallOverride& to);  // this key's value only
  const char* meaning;
};

// Every override key, in the order a scenario's JSON writes them.
const std::vector<CallOverrideField>& CallOverrideFields();

// The calls `f` applies to, in words: "decode launches", "decode launches and plan builds of
// aiter's planner" (the docs' table and the refusal's text).
std::string CallOverrideAppliesTo(const CallOverrideField& f);

// OK when every key `o` sets applies to a call of form `form`; else InvalidArgument naming the
// first one that does not: "$.calls[0].kernel_heads: does not apply to verify.main_plan (a plan
// build); it applies to decode launches". `index`: the entry's position in $.calls; `planner`:
// the dialect's planner of a kDialectPlanBuild.
Status CheckOverrideApplies(const CallOverride& o, size_t index, CallForm form,
                            const std::string& planner = "");

// The keys `from` sets, copied into `into` (theirs replaced): one entry for one call when a second
// source (a simulator mutant) overrides a call the scenario already overrides.
void MergeCallOverride(const CallOverride& from, CallOverride* into);

// True when `o` sets at least one key of CallOverrideFields().
bool SetsAnyOverride(const CallOverride& o);
// Whether a sizing entry sets any of its keys; the keys, "batch, qlen, ..." (for messages).
bool SetsAnySizing(const SizingOverride& z);
std::string SizingKeys();

// The JSON path of key `key` of the `calls` entry at `index` ("$.calls[2].planner_heads").
std::string CallOverridePath(size_t index, const std::string& key);

// Where a planner input refused by aiter's planner or sizing (its field: "heads_per_head_k",
// "qlen", "batch_size", ...) came from in the scenario: the `calls` key of a plan build's
// override or the `sizing` key of a sizing entry that set it, else the model / batch path the
// engine derives it from ("$.model.heads", "$.batch.q_lens", "$.batch.contexts"), else "$".
struct PlannerInputSource {
  const char* planner_field;  // the field a ref:: error names (a prefix for "kv_indptr")
  const char* scenario_path;  // where the engine derives it from, "" = no one field
  const char* sizing_key;     // the `sizing` key that sets it, "" = none
  const char* call_key;       // the `calls` key that sets it (plan builds), "" = none
};
const std::vector<PlannerInputSource>& PlannerInputSources();

// The JSON path to blame for a refusal naming planner field `field`: the override's key when
// `o` (entry `index` of $.calls, may be null) sets it, else the derived path, else "$".
std::string PlannerRefusalPath(const std::string& field, const CallOverride* o, size_t index);

// The same for get_mla_metadata_info_v1's refusals: the sizing entry's key when `z` (entry
// `index` of $.sizing, may be null) sets it, else the derived path, else "$".
std::string SizingRefusalPath(const std::string& field, const SizingOverride* z, size_t index);

}  // namespace mlasim::sim
