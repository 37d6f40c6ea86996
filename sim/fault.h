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
  // Further ROCm fault addresses the log names (other ranks' or queues' lines), distinct and
  // unlike `address`, in log order, at most kMaxOtherFaultAddresses, from the first 4096 further
  // fault lines: `address` is the first.
  std::vector<uint64_t> other_addresses;
};

inline constexpr size_t kMaxOtherFaultAddresses = 16;

// Parses log text (possibly wrapped or split mid-word, with timestamp or rank prefixes) or a
// bare "0x..." address. Errors: InvalidArgument("--log") when no address can be found (plain CUDA
// "illegal memory access" messages carry none: use the simulator's prediction instead), the text
// is empty, or it is one number-like word that is not an address (ParseAddressText's reason).
StatusOr<FaultReport> ParseFaultText(const std::string& text, const std::string& field);

// Parses a fault address typed by a user (`explain-fault --address`, `triage --fault-address`,
// a case manifest's data_ptr): "0x" then 1 to 16 hex digits of either case (leading zeros do
// not count), blanks around it allowed. Errors: InvalidArgument(field) saying what is wrong
// with the text: empty, negative, no 0x prefix (a decimal number named as such), no digits
// after 0x, a character that is not hexadecimal (which, and where), trailing text after the
// address, more than 16 significant hex digits (above 64 bits).
StatusOr<uint64_t> ParseAddressText(const std::string& text, const std::string& field);

// Validates a layout document (the `--layout-out` JSON, or one a user writes from their engine's
// data_ptr() and byte sizes: docs/cli.md "Layout JSON"): every key known and typed, in range and
// consistent (a shaped row is heads x cols x elem_bytes = row_bytes bytes and the buffer whole
// rows; elem_bytes the dtype's size; names distinct; allocations disjoint, no two at one base;
// an access names an allocation, first_row <= last_row). Errors: InvalidArgument naming the JSON
// path ("$.allocations[20].row_bytes", "$.page_byte: unknown key").
Status ValidateLayout(const nlohmann::json& layout);

// A replay access recorded in the layout ("accesses"): a call's rows outside a buffer.
struct LayoutAccess {
  int32_t call_index = -1;
  std::string step, call, buffer, access;
  int64_t first_row = 0, last_row = 0;
  std::vector<int32_t> work_items;
};

struct Attribution {
  std::string buffer;          // the allocation the address is in, just past, or just before
  bool inside = false;         // within the allocation's bytes
  bool before_start = false;   // an underflow: the address precedes the buffer's first byte
  int64_t offset = 0;          // address - base (bytes; negative before the start)
  int64_t bytes_past_end = 0;  // when past the end: address - (base + bytes)
  int64_t row = -1, head = -1, column = -1;  // -1 when unknown (no shape, or a page range)
  int64_t rows = 0;                          // rows the buffer holds
  // A page-granular address (a ROCm fault names the page): the fault is one of the bytes
  // [address, address + page_bytes), i.e. one of rows [first_row, last_row] of the buffer (rows
  // before its start are negative). Exact addresses: page_bytes 0, first_row = last_row = row.
  int64_t page_bytes = 0;
  int64_t first_row = -1, last_row = -1;
  std::string next_buffer;  // the allocation above the address, if any
  int64_t bytes_before_next = 0;
  // The other reading of an address between two allocations ("or 12 bytes before the start of
  // kv_indices"); empty when the address is inside a buffer or has one neighbour.
  std::string alternative;
  bool mapped = false;  // inside a mapped range of the layout
  // The replay's accesses (layout "accesses") to `buffer` whose rows meet [first_row, last_row]:
  // the call and work items that touch those rows.
  std::vector<LayoutAccess> accesses;
  std::string text;  // one sentence (two with the accesses)
};

// Attributes `address` to the allocation of `layout` it lies in, past the end of, or before the
// start of. Between two allocations, the one whose mapping holds the address wins, else the
// nearer one: an address 4 bytes before a buffer that starts on its own page is an underflow of
// that buffer (negative offset and row), not an overrun far past the end of the buffer below.
// `page_bytes` > 0: the address names a page (ROCm reports the faulting page): rows are given
// as the range that page covers, head and column stay -1. Errors (field `field`): the layout is
// malformed (ValidateLayout), or the address is more than 1 GiB from every allocation.
// A deliberately broken attribution (MLASIM_MUTANT, ref/mutant.h; fuzz/mutants.h registers it).
enum class FaultMutant : uint8_t {
  kNone,
  kAttributeToBufferBelow,  // round 1's rule: between two buffers, the one below wins
};

StatusOr<Attribution> AttributeAddress(const nlohmann::json& layout, uint64_t address,
                                       const std::string& field = "--address",
                                       int64_t page_bytes = 0,
                                       FaultMutant mutant = FaultMutant::kNone);

}  // namespace mlasim::sim
