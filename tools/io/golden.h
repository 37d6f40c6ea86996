// File: tools/io/golden.h
//
// Replays a golden corpus produced by running aiter's own code (docs/golden.md) and
// compares every written buffer field by field: aiter-v12-dev.jsonl (plans) and
// aiter-decode-update-dev.jsonl (plans updated by decode_update_mla_metadata_v1).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "ref/metadata.h"
#include "ref/status.h"

namespace mlasim::io {

// The first difference between mlasim and one golden record.
struct GoldenMismatch {
  int64_t id = -1;
  std::string buffer;  // "work_info", "sizes.work_indptr", "error", ...
  int64_t index = -1;  // first differing element (flat), -1 when not an element
  std::string detail;  // expected vs got
};

// Compares one record (a parsed JSON line). Returns nullopt when everything matches, a mismatch
// otherwise; an unreadable record is a mismatch with buffer "record".
std::optional<GoldenMismatch> CheckGoldenRecord(const nlohmann::json& record);

// Applies the decode_update chain of one aiter-decode-update record to `plan` (the record's plan):
// every step's new kv_indptr and num_reject_tokens, in order. On success `served` is the request
// the updated plan must serve (the last lengths, one q row per request). Errors: the update's.
Status ApplyUpdateChain(const nlohmann::json& record, const ref::PlanRequest& request,
                        ref::Plan& plan, ref::PlanRequest* served);

struct GoldenSummary {
  int64_t records = 0;
  int64_t matched = 0;
};

// Checks one line of a golden corpus (what CheckGoldenFile does per line; `where` is
// "<path>:<line>", the field of every error): strict JSON, a record's shape, its request against
// the limits (ref/limits.h), then CheckGoldenRecord. Counts it in `sum` (records; matched when it
// matches) or calls `on_mismatch`. Errors: InvalidArgument(where...) for malformed JSON, a line
// that is not a record, a request beyond a limit and a malformed record.
Status CheckGoldenLine(const std::string& line, const std::string& where, GoldenSummary* sum,
                       const std::function<void(const GoldenMismatch&)>& on_mismatch);

// Reads a .jsonl file, plain or xz-compressed (tools/io/input_file.h), and checks every line,
// calling `on_mismatch` for each mismatch in file order. Errors: InvalidArgument(path) when the
// file cannot be read or its xz data is truncated or corrupt, and
// InvalidArgument("<path>:<line>") for a line that is not JSON.
StatusOr<GoldenSummary> CheckGoldenFile(
    const std::string& path, const std::function<void(const GoldenMismatch&)>& on_mismatch);

}  // namespace mlasim::io
