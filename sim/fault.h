// File: sim/fault.h
//
// Fault attribution: read a fault report (a ROCm "Memory access fault by GPU node-N ... on
// address 0x..." line, compute-sanitizer memcheck output, or a bare address) and name the buffer,
// the bytes past its end, and the row, head and column the address corresponds to, from a layout
// written by `mlasim replay --layout-out` (seed-fault.md, "What fault reports look like").
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ref/status.h"

namespace mlasim::sim {

struct FaultReport {
  uint64_t address = 0;
  bool null_address = false;            // ROCm printed "(nil)"
  std::string source;                   // "rocm", "compute-sanitizer", "address"
  std::string reason;                   // ROCm's Reason text or the sanitizer's access kind
  std::vector<std::string> hsa_status;  // HSA_STATUS_ERROR_* names seen in the log
};

// Parses log text (possibly wrapped or split mid-word, with timestamp or rank prefixes) or a
// bare "0x..." address. Errors: InvalidArgument("--log") when no address can be found (plain CUDA
// "illegal memory access" messages carry none: use the simulator's prediction instead).
StatusOr<FaultReport> ParseFaultText(const std::string& text, const std::string& field);

// Validates a layout document (the `--layout-out` JSON). Errors name the JSON path.
Status ValidateLayout(const nlohmann::json& layout);

struct Attribution {
  std::string buffer;          // the allocation the address is in or just past
  bool inside = false;         // within the allocation's bytes
  bool before_start = false;   // an underflow: the address precedes the buffer's first byte
  int64_t offset = 0;          // address - base (bytes)
  int64_t bytes_past_end = 0;  // when not inside: address - (base + bytes)
  int64_t row = -1, head = -1, column = -1;  // -1 when the layout lacks the shape
  int64_t rows = 0;                          // rows the buffer holds
  std::string next_buffer;                   // the allocation above the address, if any
  int64_t bytes_before_next = 0;
  bool mapped = false;  // inside a mapped range of the layout
  std::string text;     // one sentence
};

// An address just before a buffer's start but inside its mapping is reported against that buffer
// (an underflow: negative offset and row). Errors (field `field`): the layout is malformed, or
// the address is more than 1 GiB from every allocation (not an overrun of any of them).
StatusOr<Attribution> AttributeAddress(const nlohmann::json& layout, uint64_t address,
                                       const std::string& field = "--address");

}  // namespace mlasim::sim
