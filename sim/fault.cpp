#include "sim/fault.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <map>
#include <set>
#include <regex>
#include <sstream>

#include "ref/mutant.h"
#include "sim/json_input.h"

namespace mlasim::sim {
namespace {

// std::regex recurses per character: every regex below runs on a bounded window of the text.
constexpr size_t kWindow = 1024;

std::string StripLinePrefix(const std::string& full_line) {
  // Only the head of a line can hold a prefix; keep the rest as it is.
  const std::string line = full_line.substr(0, kWindow);
  const std::string rest = full_line.size() > kWindow ? full_line.substr(kWindow) : std::string();
  // Timestamps ("2026-11-03 12:00:01.123", "[12:00:01]") and rank tags ("[rank3]", "rank 3:",
  // "(RANK 2)") that loggers put in front of each line, possibly several.
  static const std::regex kPrefix(
      R"(^\s*(((\[[^\]]*\])|(\([Rr][Aa][Nn][Kk][^)]*\)))\s*[:|>]?|(\d{4}-\d\d-\d\d[T ][\d:.,]+Z?)|)"
      R"(([Rr]ank\s*\d+\s*[:|>]))\s*)");
  std::string s = line;
  for (int i = 0; i < 4; ++i) {
    std::smatch m;
    if (!std::regex_search(s, m, kPrefix) || m.length(0) == 0) break;
    s = m.suffix().str();
  }
  return s + rest;
}

bool ParseHex(const std::string& digits, uint64_t* out) {
  if (digits.empty() || digits.size() > 16) return false;
  uint64_t v = 0;
  for (char ch : digits) {
    int d;
    if (ch >= '0' && ch <= '9')
      d = ch - '0';
    else if (ch >= 'a' && ch <= 'f')
      d = ch - 'a' + 10;
    else if (ch >= 'A' && ch <= 'F')
      d = ch - 'A' + 10;
    else
      return false;
    v = v * 16 + static_cast<uint64_t>(d);
  }
  *out = v;
  return true;
}

// "is out of the 64-bit integer range (...)" for a number beyond 64 bits, else `reason`.
std::string Beyond64Or(const nlohmann::json& v, const std::string& reason) {
  return IsIntegerBeyond64Bits(v) ? NotAnIntegerReason(v) : reason;
}

uint64_t LayoutHex(const nlohmann::json& j) {
  uint64_t v = 0;
  const std::string s = j.get<std::string>();
  ParseHex(s.substr(2), &v);
  return v;
}

}  // namespace

StatusOr<uint64_t> ParseAddressText(const std::string& raw, const std::string& field) {
  const auto blank = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  size_t b = 0, e = raw.size();
  while (b < e && blank(raw[b])) ++b;
  while (e > b && blank(raw[e - 1])) --e;
  const std::string text = raw.substr(b, e - b);
  const std::string shown = "'" + text.substr(0, 64) + (text.size() > 64 ? "...'" : "'");
  const auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
  if (text.empty())
    return InvalidArgumentError(field, "is empty (give an address such as 0x7f1000200000)");
  if (text[0] == '-')
    return InvalidArgumentError(field, shown +
                                           " is negative: an address is an unsigned "
                                           "64-bit number (0x followed by 1 to 16 hex digits)");
  const bool prefixed = text.size() >= 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
  if (!prefixed) {
    const bool decimal = text.find_first_not_of("0123456789") == std::string::npos;
    const bool bare_hex = std::all_of(text.begin(), text.end(), hex);
    return InvalidArgumentError(
        field, shown + (decimal    ? " is a decimal number; an address is hexadecimal "
                                     "with a 0x prefix (0x7f1000200000)"
                        : bare_hex ? " has no 0x prefix (write 0x" + text.substr(0, 64) + ")"
                                   : " is not a hex address (expected 0x followed by 1 to 16 "
                                     "hex digits)"));
  }
  size_t end = 2;
  while (end < text.size() && hex(text[end])) ++end;
  if (end < text.size()) {
    const char c = text[end];
    if (end == 2 || std::isalnum(static_cast<unsigned char>(c)))
      return InvalidArgumentError(field, shown + " is not hexadecimal: '" + std::string(1, c) +
                                             "' at position " + std::to_string(end + 1));
    return InvalidArgumentError(field, shown + " has trailing text '" + text.substr(end, 32) +
                                           "' after the address " + text.substr(0, end));
  }
  if (end == 2) return InvalidArgumentError(field, shown + " has no hex digits after 0x");
  size_t first = 2;
  while (first + 1 < end && text[first] == '0') ++first;  // leading zeros do not count
  if (end - first > 16)
    return InvalidArgumentError(field, shown + " is above 64 bits (" + std::to_string(end - first) +
                                           " significant hex digits; at most 16)");
  uint64_t v = 0;
  ParseHex(text.substr(first, end - first), &v);
  return v;
}

namespace {

// The log's lines without their per-line prefixes (timestamps, rank tags), joined.
std::string JoinedLines(const std::string& text) {
  std::istringstream in(text);
  std::string line, joined;
  while (std::getline(in, line)) joined += StripLinePrefix(line);
  return joined;
}

// `joined` without any whitespace, so that wrapping or a split mid-word does not matter.
std::string Squeezed(const std::string& joined) {
  std::string squeezed;
  for (char ch : joined)
    if (!std::isspace(static_cast<unsigned char>(ch))) squeezed += ch;
  return squeezed;
}

// The HSA_STATUS_ERROR_* names of the log, at most 16.
std::vector<std::string> HsaStatuses(const std::string& text) {
  std::vector<std::string> out;
  for (size_t pos = text.find("HSA_STATUS_ERROR_"); pos != std::string::npos;
       pos = text.find("HSA_STATUS_ERROR_", pos + 1)) {
    size_t end = pos + 17;
    while (end < text.size() &&
           (std::isupper(static_cast<unsigned char>(text[end])) || text[end] == '_'))
      ++end;
    out.push_back(text.substr(pos, end - pos));
    if (out.size() >= 16) break;
  }
  return out;
}

// The "Reason: ..." of the first ROCm fault of `joined`, stopping where a second fault message
// begins; "" when it has none.
std::string RocmReason(const std::string& joined) {
  const size_t fault_at = joined.find("Memory access fault");
  const size_t next_fault = fault_at == std::string::npos
                                ? std::string::npos
                                : joined.find("Memory access fault", fault_at + 1);
  const size_t reason_at = joined.find("Reason:");
  if (reason_at == std::string::npos || reason_at >= next_fault) return "";
  std::string reason =
      joined.substr(reason_at + 7, std::min<size_t>(256, next_fault - reason_at - 7));
  reason = reason.substr(0, std::min(reason.find('\n'), reason.find('.')));
  while (!reason.empty() && std::isspace(static_cast<unsigned char>(reason.front())))
    reason.erase(0, 1);
  while (!reason.empty() &&
         (std::isspace(static_cast<unsigned char>(reason.back())) || reason.back() == '.'))
    reason.pop_back();
  return reason;
}

// A ROCm "Memory access fault by GPU node-N ... on address 0x..." into r: true when the log has
// one. Errors: InvalidArgument(field) for an address above 64 bits.
StatusOr<bool> ParseRocmFault(const std::string& squeezed, const std::string& joined,
                              const std::string& field, FaultReport& r) {
  static const std::regex kRocm(
      R"(Memoryaccessfault(byGPUnode-?\d+)?.*?onaddress((0[xX][0-9a-fA-F]+)|\(nil\))\.?(Reason:([^.]*))?)");
  const size_t rocm_at = squeezed.find("Memoryaccessfault");
  if (rocm_at == std::string::npos) return false;
  const std::string rocm_window = squeezed.substr(rocm_at, kWindow);
  std::smatch m;
  if (!std::regex_search(rocm_window, m, kRocm)) return false;
  r.source = "rocm";
  if (m[2].str() == "(nil)") {
    r.null_address = true;
  } else if (!ParseHex(m[3].str().substr(2), &r.address)) {
    return InvalidArgumentError(
        field, "the fault address " + m[3].str().substr(0, 40) + " has more than 64 bits");
  }
  r.reason = RocmReason(joined);
  // The log's other fault lines (a crash of 8 ranks prints 8): named, so that the first is not
  // taken for the only one without a word. The first 4096 further lines are read (a 64 MiB log
  // of one repeated line stays as fast as one line).
  int lines = 0;
  for (size_t at = squeezed.find("Memoryaccessfault", rocm_at + 1);
       at != std::string::npos && lines < 4096; at = squeezed.find("Memoryaccessfault", at + 1)) {
    ++lines;
    const std::string window = squeezed.substr(at, kWindow);
    std::smatch n;
    uint64_t a = 0;
    if (!std::regex_search(window, n, kRocm) || n[3].str().empty() ||
        !ParseHex(n[3].str().substr(2), &a))
      continue;
    if ((!r.null_address && a == r.address) ||
        std::find(r.other_addresses.begin(), r.other_addresses.end(), a) != r.other_addresses.end())
      continue;
    if (r.other_addresses.size() == kMaxOtherFaultAddresses) break;
    r.other_addresses.push_back(a);
  }
  return true;
}

// compute-sanitizer memcheck's "Address 0x... is out of bounds" (and its access kind) into r:
// true when the log has it.
bool ParseSanitizerFault(const std::string& squeezed, FaultReport& r) {
  static const std::regex kSanitizer(R"(Address(0[xX][0-9a-fA-F]+)isoutofbounds)");
  const size_t san_at = squeezed.find("Address0");
  if (san_at == std::string::npos) return false;
  const std::string san_window = squeezed.substr(san_at, 64);
  std::smatch m;
  if (!std::regex_search(san_window, m, kSanitizer)) return false;
  r.source = "compute-sanitizer";
  ParseHex(m[1].str().substr(2), &r.address);
  static const std::regex kKind(R"(Invalid__global__(read|write)ofsize(\d+)bytes)");
  std::smatch k;
  const size_t kind_at = squeezed.find("Invalid__global__");
  const std::string kind_window =
      kind_at == std::string::npos ? std::string() : squeezed.substr(kind_at, 64);
  if (std::regex_search(kind_window, k, kKind))
    r.reason = k[1].str() + " of " + k[2].str() + " bytes";
  return true;
}

// A log without a fault line: one short number-like word is read as an address (saying what is
// wrong with it); anything else is refused naming why.
StatusOr<FaultReport> ParseNoFaultLine(const std::string& text, const std::string& squeezed,
                                       const std::string& field, FaultReport r) {
  if (squeezed.find("illegalmemoryaccess") != std::string::npos)
    return InvalidArgumentError(field,
                                "the log says 'an illegal memory access was encountered' "
                                "but carries no address; attribute it with `mlasim replay`, "
                                "whose prediction names the buffer and rows");
  const size_t first = text.find_first_not_of(" \t\r\n");
  const size_t last = text.find_last_not_of(" \t\r\n");
  if (first == std::string::npos)
    return InvalidArgumentError(field, "holds no text (an empty log: no fault address)");
  const char lead = text[first];
  if (text.size() <= 80 && text.find_first_of(" \t\r\n", first) > last &&
      (std::isdigit(static_cast<unsigned char>(lead)) || lead == '-' || lead == '+')) {
    StatusOr<uint64_t> address = ParseAddressText(text, field);
    if (!address.ok()) return address.status();
    r.address = *address;
    r.source = "address";
    return r;
  }
  return InvalidArgumentError(field,
                              "no fault address found (expected a ROCm 'Memory access "
                              "fault ... on address 0x...' line, compute-sanitizer output "
                              "or a bare 0x address)");
}

}  // namespace

StatusOr<FaultReport> ParseFaultText(const std::string& text, const std::string& field) {
  FaultReport r;
  static const std::regex kBare(R"(^\s*(0[xX][0-9a-fA-F]{1,16})\s*$)");
  std::smatch m;
  if (text.size() <= 64 && std::regex_match(text, m, kBare)) {  // a bare address
    ParseHex(m[1].str().substr(2), &r.address);
    r.source = "address";
    return r;
  }
  const std::string joined = JoinedLines(text);
  const std::string squeezed = Squeezed(joined);
  r.hsa_status = HsaStatuses(text);
  MLASIM_ASSIGN_OR_RETURN(const bool rocm, ParseRocmFault(squeezed, joined, field, r));
  if (rocm || ParseSanitizerFault(squeezed, r)) return r;
  return ParseNoFaultLine(text, squeezed, field, std::move(r));
}

namespace {

// The keys a layout may hold, per object (docs/cli.md "Layout JSON"): any other is refused, so a
// misspelled key ("page_byte", "head") is never silently ignored.
const std::set<std::string> kLayoutKeys = {"allocations",   "accesses", "step",
                                           "call_name",     "call",     "page_bytes",
                                           "segment_bytes", "allocator", "has_violation"};
const std::set<std::string> kAllocationKeys = {"name",       "base",       "bytes", "row_bytes",
                                               "dtype",      "mapped_begin", "mapped_end",
                                               "heads",      "cols",       "elem_bytes"};
const std::set<std::string> kAccessKeys = {"call_index", "step",     "call",      "buffer",
                                           "access",     "first_row", "last_row", "work_items"};

// The element types a layout names and their sizes in bytes: the simulator's (sim/memory.h:
// "bytes" for raw workspaces, the index and plan types, ref/target.h kDTypeNames) and the
// common torch names a hand-written layout may use.
constexpr std::pair<const char*, int64_t> kLayoutDtypes[] = {
    {"bytes", 1}, {"int8", 1},  {"uint8", 1},      {"int16", 2},        {"int32", 4},
    {"int64", 8}, {"uint64", 8}, {"fp8", 1},       {"fp8_e4m3fn", 1},   {"fp8_e4m3fnuz", 1},
    {"bf16", 2},  {"fp16", 2},   {"fp32", 4}};

// "unknown key" for the first key of `obj` outside `allowed`, naming its path.
Status RefuseUnknownKeys(const nlohmann::json& obj, const std::string& path,
                         const std::set<std::string>& allowed) {
  for (auto it = obj.begin(); it != obj.end(); ++it)
    if (!allowed.count(it.key())) {
      std::string list;
      for (const std::string& k : allowed) list += (list.empty() ? "" : ", ") + k;
      return InvalidArgumentError(path + "." + it.key(), "unknown key (expected one of: " + list +
                                                             ")");
    }
  return OkStatus();
}

// The element size of dtype `name`, or 0 for a name the table lacks.
int64_t DtypeBytes(const std::string& name) {
  for (const auto& [n, bytes] : kLayoutDtypes)
    if (name == n) return bytes;
  return 0;
}

// The optional "accesses" array: the replay's rows outside a buffer, per call. `names`: the
// allocations' names (an access names one of them).
Status ValidateAccesses(const nlohmann::json& l, const std::set<std::string>& names) {
  if (!l.contains("accesses")) return OkStatus();
  if (!l.at("accesses").is_array()) return InvalidArgumentError("$.accesses", "must be an array");
  const auto& a = l.at("accesses");
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string p = "$.accesses[" + std::to_string(i) + "]";
    const auto& e = a[i];
    if (!e.is_object()) return InvalidArgumentError(p, "must be an object");
    MLASIM_RETURN_IF_ERROR(RefuseUnknownKeys(e, p, kAccessKeys));
    // Required: buffer, first_row, last_row. Optional: step, call, access, call_index.
    for (const char* k : {"buffer", "step", "call", "access"}) {
      const bool required = std::string(k) == "buffer";
      if ((required || e.contains(k)) && !e.value(k, nlohmann::json()).is_string())
        return InvalidArgumentError(p + "." + k, "must be a string");
    }
    for (const char* k : {"first_row", "last_row", "call_index"}) {
      const bool required = std::string(k) != "call_index";
      if ((required || e.contains(k)) && !IsInt64(e.value(k, nlohmann::json())))
        return InvalidArgumentError(p + "." + k, NotAnIntegerReason(e.value(k, nlohmann::json())));
    }
    const std::string buffer = e.at("buffer").get<std::string>();
    if (!names.count(buffer))
      return InvalidArgumentError(p + ".buffer", "'" + buffer.substr(0, 64) +
                                                     "' names no allocation of the layout");
    if (e.contains("access")) {
      const std::string acc = e.at("access").get<std::string>();
      if (acc != "read" && acc != "write" && acc != "run")
        return InvalidArgumentError(p + ".access", "must be \"read\", \"write\" or \"run\"");
    }
    if (e.contains("call_index") &&
        IntegerRangeReason(e.at("call_index"), 0, INT32_MAX) != "")
      return InvalidArgumentError(p + ".call_index",
                                  IntegerRangeReason(e.at("call_index"), 0, INT32_MAX));
    const int64_t first = e.at("first_row").get<int64_t>();
    const int64_t last = e.at("last_row").get<int64_t>();
    if (first > last)
      return InvalidArgumentError(p + ".first_row", fmt::format("{} is after last_row {}: the rows "
                                                                "are first_row..last_row",
                                                                first, last));
    if (e.contains("work_items")) {
      const auto& w = e.at("work_items");
      if (!w.is_array()) return InvalidArgumentError(p + ".work_items", "must be an array");
      for (size_t j = 0; j < w.size(); ++j)
        if (IntegerRangeReason(w[j], INT32_MIN, INT32_MAX) != "")
          return InvalidArgumentError(
              p + ".work_items[" + std::to_string(j) + "]",
              IsIntegerBeyond64Bits(w[j]) ? NotAnIntegerReason(w[j]) : "must be a 32-bit integer");
    }
  }
  return OkStatus();
}

// The row shape of allocation `e` (path `p`): heads and cols come together, elem_bytes and dtype
// agree, a row is heads x cols x elem_bytes bytes and the buffer holds whole rows. (Without a
// shape a row is row_bytes bytes, the first dimension's stride, and the last row may be partial:
// a strided tensor's span, tools/io/case_plan.h CaseLayout.)
Status ValidateRowShape(const nlohmann::json& e, const std::string& p) {
  for (const char* k : {"heads", "cols"})
    if (e.contains(k))
      if (std::string why = IntegerRangeReason(e.at(k), 1, INT32_MAX); !why.empty())
        return InvalidArgumentError(p + "." + k, why);
  if (e.contains("heads") != e.contains("cols"))
    return InvalidArgumentError(p + (e.contains("heads") ? ".heads" : ".cols"),
                                "heads and cols come together (a row of heads x cols elements)");
  int64_t elem = 0;
  if (e.contains("elem_bytes")) {
    const auto& v = e.at("elem_bytes");
    if (!IsInt64(v) || (v.get<int64_t>() != 1 && v.get<int64_t>() != 2 &&
                        v.get<int64_t>() != 4 && v.get<int64_t>() != 8))
      return InvalidArgumentError(p + ".elem_bytes", Beyond64Or(v, "must be 1, 2, 4 or 8"));
    if (!e.contains("heads"))
      return InvalidArgumentError(p + ".elem_bytes",
                                  "needs heads and cols (the element size of a heads x cols row)");
    elem = v.get<int64_t>();
  }
  if (e.contains("dtype")) {
    if (!e.at("dtype").is_string()) return InvalidArgumentError(p + ".dtype", "must be a string");
    const std::string d = e.at("dtype").get<std::string>();
    const int64_t size = DtypeBytes(d);
    if (size == 0) {
      std::string list;
      for (const auto& [n, bytes] : kLayoutDtypes) list += (list.empty() ? "" : ", ") + std::string(n);
      return InvalidArgumentError(p + ".dtype", "unknown dtype '" + d.substr(0, 64) +
                                                    "' (expected one of: " + list + ")");
    }
    if (elem != 0 && size != elem)
      return InvalidArgumentError(
          p + ".elem_bytes",
          fmt::format("{} disagrees with dtype {} ({} byte{} an element)", elem, d, size,
                      size == 1 ? "" : "s"));
  }
  if (!e.contains("heads")) return OkStatus();
  const int64_t row_bytes = e.at("row_bytes").get<int64_t>();
  const int64_t heads = e.at("heads").get<int64_t>(), cols = e.at("cols").get<int64_t>();
  int64_t product = 0;
  if (__builtin_mul_overflow(heads, cols, &product) ||
      __builtin_mul_overflow(product, elem == 0 ? 1 : elem, &product) || product != row_bytes)
    return InvalidArgumentError(
        p + ".row_bytes",
        fmt::format("{} is not heads x cols x elem_bytes = {} x {} x {}: a row of the buffer is "
                    "its heads' elements",
                    row_bytes, heads, cols, elem == 0 ? 1 : elem));
  const int64_t bytes = e.at("bytes").get<int64_t>();
  if (bytes % row_bytes != 0)
    return InvalidArgumentError(p + ".bytes",
                                fmt::format("{} is not a whole number of rows of {} bytes", bytes,
                                            row_bytes));
  return OkStatus();
}

// One allocation (path `p`): its keys, types and ranges; the mapping holds it; its row shape.
Status ValidateAllocation(const nlohmann::json& e, const std::string& p) {
  static const std::regex kHex(R"(0x[0-9a-f]{1,16})");
  if (!e.is_object()) return InvalidArgumentError(p, "must be an object");
  MLASIM_RETURN_IF_ERROR(RefuseUnknownKeys(e, p, kAllocationKeys));
  for (const char* k : {"name", "base"})
    if (!e.contains(k) || !e.at(k).is_string())
      return InvalidArgumentError(p + "." + k, "must be a string");
  if (e.at("name").get<std::string>().empty())
    return InvalidArgumentError(p + ".name", "must not be empty");
  if (!std::regex_match(e.at("base").get<std::string>(), kHex))
    return InvalidArgumentError(p + ".base", "must be a lowercase 0x hex address");
  for (const char* k : {"bytes", "row_bytes"})
    if (!e.contains(k) || !IsInt64(e.at(k)) || e.at(k).get<int64_t>() < 0)
      return InvalidArgumentError(p + "." + k, Beyond64Or(e.value(k, nlohmann::json()),
                                                          "must be an integer in 0..2^63-1"));
  if (e.at("row_bytes").get<int64_t>() == 0)
    return InvalidArgumentError(p + ".row_bytes", "must be >= 1");
  for (const char* k : {"mapped_begin", "mapped_end"})
    if (e.contains(k) &&
        (!e.at(k).is_string() || !std::regex_match(e.at(k).get<std::string>(), kHex)))
      return InvalidArgumentError(p + "." + k, "must be a lowercase 0x hex address");
  // The mapping must hold the buffer: mapped_begin <= base, base + bytes <= mapped_end.
  const uint64_t base = LayoutHex(e.at("base"));
  const uint64_t bytes = e.at("bytes").get<uint64_t>();
  if (base + bytes < base) return InvalidArgumentError(p + ".bytes", "base + bytes passes 2^64");
  if (e.contains("mapped_begin") && LayoutHex(e.at("mapped_begin")) > base)
    return InvalidArgumentError(p + ".mapped_begin",
                                "lies after base: the mapping must contain the buffer");
  if (e.contains("mapped_end") && LayoutHex(e.at("mapped_end")) < base + bytes)
    return InvalidArgumentError(p + ".mapped_end",
                                "lies before base + bytes: the mapping must contain the buffer");
  return ValidateRowShape(e, p);
}

// Allocations are disjoint: no byte in two of them, no two at one base (a zero-byte one
// included), as every layout the simulator writes (sim/memory.cpp places each buffer after the
// one before). Overlapping ones would make the attribution depend on their order in the list.
// The names are distinct (accesses name their buffer). `names` gets them.
Status ValidateDisjoint(const nlohmann::json& a, std::set<std::string>* names) {
  std::map<std::string, size_t> by_name;
  std::vector<std::pair<uint64_t, size_t>> by_base;
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string name = a[i].at("name").get<std::string>();
    const std::string p = "$.allocations[" + std::to_string(i) + "]";
    if (auto [it, fresh] = by_name.emplace(name, i); !fresh)
      return InvalidArgumentError(
          p + ".name", fmt::format("'{}' repeats $.allocations[{}].name: names are distinct",
                                   name.substr(0, 64), it->second));
    names->insert(name);
    by_base.push_back({LayoutHex(a[i].at("base")), i});
  }
  std::sort(by_base.begin(), by_base.end());
  for (size_t k = 1; k < by_base.size(); ++k) {
    const auto& [lo_base, lo] = by_base[k - 1];
    const auto& [hi_base, hi] = by_base[k];
    const uint64_t lo_end = lo_base + a[lo].at("bytes").get<uint64_t>();
    if (hi_base > lo_base && hi_base >= lo_end) continue;
    const size_t later = std::max(lo, hi), earlier = std::min(lo, hi);
    return InvalidArgumentError(
        "$.allocations[" + std::to_string(later) + "]",
        fmt::format("{} at {} overlaps $.allocations[{}] ({}, bytes 0x{:x}..0x{:x}): allocations "
                    "are disjoint (list a tensor's storage once, not each view of it)",
                    a[later].at("name").get<std::string>().substr(0, 64),
                    a[later].at("base").get<std::string>(), earlier,
                    a[earlier].at("name").get<std::string>().substr(0, 64),
                    LayoutHex(a[earlier].at("base")),
                    LayoutHex(a[earlier].at("base")) + a[earlier].at("bytes").get<uint64_t>()));
  }
  return OkStatus();
}

// The top-level keys besides allocations and accesses.
Status ValidateLayoutHeader(const nlohmann::json& l) {
  for (const char* k : {"step", "call_name"})  // printed by explain-fault
    if (l.contains(k) && !l.at(k).is_string())
      return InvalidArgumentError(std::string("$.") + k, "must be a string");
  if (l.contains("allocator") && l.at("allocator") != "exact" && l.at("allocator") != "caching")
    return InvalidArgumentError("$.allocator", "must be \"exact\" or \"caching\"");
  if (l.contains("call"))
    if (std::string why = IntegerRangeReason(l.at("call"), 0, INT32_MAX); !why.empty())
      return InvalidArgumentError("$.call", why);
  if (l.contains("has_violation") && !l.at("has_violation").is_boolean())
    return InvalidArgumentError("$.has_violation", "must be true or false");
  if (l.contains("page_bytes") &&
      (!IsInt64(l.at("page_bytes")) || l.at("page_bytes").get<int64_t>() < 1 ||
       l.at("page_bytes").get<int64_t>() > (int64_t{1} << 30) ||
       (l.at("page_bytes").get<int64_t>() & (l.at("page_bytes").get<int64_t>() - 1)) != 0))
    return InvalidArgumentError("$.page_bytes",
                                Beyond64Or(l.at("page_bytes"), "must be a power of 2 in 1..2^30"));
  if (l.contains("segment_bytes")) {
    if (std::string why = IntegerRangeReason(l.at("segment_bytes"), 1, int64_t{1} << 40);
        !why.empty())
      return InvalidArgumentError("$.segment_bytes", why);
    const int64_t page = l.value("page_bytes", int64_t{4096});
    if (l.at("segment_bytes").get<int64_t>() % page != 0)
      return InvalidArgumentError("$.segment_bytes", "must be a multiple of page_bytes (" +
                                                         std::to_string(page) + ")");
  }
  return OkStatus();
}

}  // namespace

Status ValidateLayout(const nlohmann::json& l) {
  if (!l.is_object()) return InvalidArgumentError("$", "a layout must be a JSON object");
  MLASIM_RETURN_IF_ERROR(RefuseUnknownKeys(l, "$", kLayoutKeys));
  if (!l.contains("allocations") || !l.at("allocations").is_array())
    return InvalidArgumentError("$.allocations", "must be an array");
  MLASIM_RETURN_IF_ERROR(ValidateLayoutHeader(l));
  const auto& a = l.at("allocations");
  for (size_t i = 0; i < a.size(); ++i)
    MLASIM_RETURN_IF_ERROR(ValidateAllocation(a[i], "$.allocations[" + std::to_string(i) + "]"));
  std::set<std::string> names;
  MLASIM_RETURN_IF_ERROR(ValidateDisjoint(a, &names));
  return ValidateAccesses(l, names);
}

namespace {

constexpr uint64_t kFar = uint64_t{1} << 30;  // farther than this is not an overrun of a buffer

int64_t FloorDiv(int64_t a, int64_t b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}

// The allocations around [address, address + span): the one with the largest base <= address
// (below) and the one with the smallest base > address (above).
struct Neighbours {
  const nlohmann::json* below = nullptr;
  const nlohmann::json* above = nullptr;
  uint64_t below_base = 0, above_base = 0;
  bool mapped = false;
};

Neighbours FindNeighbours(const nlohmann::json& layout, uint64_t address) {
  Neighbours n;
  for (const auto& e : layout.at("allocations")) {
    const uint64_t base = LayoutHex(e.at("base"));
    if (e.contains("mapped_begin") && e.contains("mapped_end") &&
        LayoutHex(e.at("mapped_begin")) <= address && address < LayoutHex(e.at("mapped_end")))
      n.mapped = true;
    if (base <= address && (!n.below || base > n.below_base)) {
      n.below = &e;
      n.below_base = base;
    }
    if (base > address && (!n.above || base < n.above_base)) {
      n.above = &e;
      n.above_base = base;
    }
  }
  return n;
}

// Whether the address reads as an underflow of the allocation above rather than an access past
// the one below: inside the below one never; else the one whose mapping holds [address,
// address + span) wins; else the nearer boundary.
bool IsUnderflow(const Neighbours& n, uint64_t address, uint64_t span, FaultMutant mutant) {
  if (!n.above) return false;
  if (!n.below) return true;
  if (MLASIM_MUTANT(mutant, kAttributeToBufferBelow)) return false;
  const uint64_t below_end = n.below_base + n.below->at("bytes").get<uint64_t>();
  if (address < below_end) return false;
  const auto& a = *n.above;
  const auto& b = *n.below;
  if (a.contains("mapped_begin") && LayoutHex(a.at("mapped_begin")) <= address) return true;
  if (b.contains("mapped_end") && address + span <= LayoutHex(b.at("mapped_end"))) return false;
  const uint64_t past = address - below_end;
  const uint64_t before = n.above_base - std::min(n.above_base, address + span);
  return before < past;
}

// The rows allocation `e` holds: bytes / row_bytes, a partial last row counted (a strided
// tensor's span ends inside its last row's stride).
int64_t RowsOf(const nlohmann::json& e) {
  const int64_t bytes = e.at("bytes").get<int64_t>(), row_bytes = e.at("row_bytes").get<int64_t>();
  return bytes / row_bytes + (bytes % row_bytes != 0 ? 1 : 0);
}

// Head and column of byte `within` (0..row_bytes-1) of a row of `e`.
void HeadAndColumn(const nlohmann::json& e, int64_t within, Attribution& at) {
  at.column = within;
  if (!e.contains("heads") || !e.contains("cols")) return;
  const int64_t elem = e.value("elem_bytes", 1);
  const int64_t head_bytes = e.at("cols").get<int64_t>() * elem;
  at.head = within / head_bytes;
  at.column = (within % head_bytes) / elem;
}

// Rows, head and column of offset `offset` (page mode: the rows of [offset, offset + page)).
void PlaceRows(const nlohmann::json& e, int64_t offset, int64_t page_bytes, Attribution& at) {
  const int64_t row_bytes = e.at("row_bytes").get<int64_t>();
  at.row = FloorDiv(offset, row_bytes);
  at.first_row = at.last_row = at.row;
  if (page_bytes > 0) {
    at.page_bytes = page_bytes;
    at.last_row = FloorDiv(offset + page_bytes - 1, row_bytes);
    return;  // the byte within the page is unknown: no head, no column
  }
  HeadAndColumn(e, offset - at.row * row_bytes, at);
}

std::string RowsText(const Attribution& at) {
  if (at.page_bytes == 0)
    return at.head >= 0 ? fmt::format("row {}, head {}, column {}", at.row, at.head, at.column)
                        : fmt::format("row {}, byte {} of the row", at.row, at.column);
  return fmt::format("the {}-byte page covers rows {}..{}", at.page_bytes, at.first_row,
                     at.last_row);
}

// The layout's replay accesses to the attributed rows.
void MatchAccesses(const nlohmann::json& layout, Attribution& at) {
  if (!layout.contains("accesses")) return;
  for (const auto& a : layout.at("accesses")) {
    if (a.at("buffer").get<std::string>() != at.buffer) continue;
    const int64_t f = a.at("first_row").get<int64_t>(), l = a.at("last_row").get<int64_t>();
    if (l < at.first_row || f > at.last_row) continue;
    LayoutAccess x;
    x.call_index = a.value("call_index", -1);
    x.step = a.value("step", std::string());
    x.call = a.value("call", std::string());
    x.buffer = at.buffer;
    x.access = a.value("access", std::string());
    x.first_row = f;
    x.last_row = l;
    if (a.contains("work_items")) x.work_items = a.at("work_items").get<std::vector<int32_t>>();
    at.accesses.push_back(std::move(x));
  }
}

std::string AccessesText(const Attribution& at) {
  std::string out;
  for (const LayoutAccess& a : at.accesses) {
    std::string w;
    for (size_t i = 0; i < a.work_items.size() && i < 8; ++i)
      w += (i ? "," : "") + std::to_string(a.work_items[i]);
    if (a.work_items.size() > 8) w += fmt::format(",... ({} in all)", a.work_items.size());
    out += fmt::format("; the replay's call {} ({} / {}) {}s rows {}..{}{}", a.call_index, a.step,
                       a.call, a.access, a.first_row, a.last_row,
                       w.empty() ? "" : " (work items " + w + ")");
  }
  return out;
}

Status TooFar(const std::string& field, uint64_t address, uint64_t gap, const std::string& where) {
  return InvalidArgumentError(field, fmt::format("0x{:x} is {} bytes {}: not an overrun of a "
                                                 "buffer",
                                                 address, gap, where));
}

// The reading of `address` against the allocation above (underflow) for the alternative text.
std::string UnderflowWords(const Neighbours& n, uint64_t address) {
  return fmt::format("{} bytes before the start of {}", n.above_base - address,
                     n.above->at("name").get<std::string>());
}

std::string OverrunWords(const Neighbours& n, uint64_t address) {
  const uint64_t end = n.below_base + n.below->at("bytes").get<uint64_t>();
  return fmt::format("{} bytes past the end of {}", address - end,
                     n.below->at("name").get<std::string>());
}

StatusOr<Attribution> Underflow(const Neighbours& n, uint64_t address, int64_t page_bytes,
                                const std::string& field, Attribution at) {
  const auto& e = *n.above;
  const uint64_t gap = n.above_base - address;
  if (gap > kFar) return TooFar(field, address, gap, "before every allocation of the layout");
  at.buffer = e.at("name").get<std::string>();
  at.rows = RowsOf(e);
  at.before_start = true;
  at.offset = -static_cast<int64_t>(gap);
  PlaceRows(e, at.offset, page_bytes, at);
  if (n.below) at.alternative = "or " + OverrunWords(n, address);
  at.text = fmt::format("0x{:x} is {} bytes before the start of {} = {} (an underflow){}", address,
                        gap, at.buffer, RowsText(at),
                        at.mapped ? "" : "; the page is not mapped in this layout");
  return at;
}

StatusOr<Attribution> AtOrPast(const Neighbours& n, uint64_t address, int64_t page_bytes,
                               const std::string& field, Attribution at) {
  const auto& e = *n.below;
  const int64_t bytes = e.at("bytes").get<int64_t>();
  const int64_t row_bytes = e.at("row_bytes").get<int64_t>();
  at.buffer = e.at("name").get<std::string>();
  at.rows = RowsOf(e);
  const uint64_t offset = address - n.below_base;
  at.inside = offset < static_cast<uint64_t>(bytes);
  if (!at.inside && offset - static_cast<uint64_t>(bytes) > kFar)
    return TooFar(field, address, offset - static_cast<uint64_t>(bytes),
                  "past the end of " + at.buffer + ", the nearest allocation below it");
  at.offset = static_cast<int64_t>(offset);
  at.bytes_past_end = at.inside ? 0 : at.offset - bytes;
  PlaceRows(e, at.offset, page_bytes, at);
  if (n.above) {
    at.next_buffer = n.above->at("name").get<std::string>();
    at.bytes_before_next = static_cast<int64_t>(n.above_base - address);
    if (!at.inside) at.alternative = "or " + UnderflowWords(n, address);
  }
  if (at.inside)
    at.text = fmt::format("0x{:x} is inside {} at byte {} of {} = {} (the buffer holds {} rows)",
                          address, at.buffer, at.offset, bytes, RowsText(at), at.rows);
  else
    at.text = fmt::format("0x{:x} is {} bytes past the end of {} ({} rows of {} bytes) = {}{}",
                          address, at.bytes_past_end, at.buffer, at.rows, row_bytes, RowsText(at),
                          at.mapped ? "" : "; the page is not mapped in this layout");
  return at;
}

}  // namespace

StatusOr<Attribution> AttributeAddress(const nlohmann::json& layout, uint64_t address,
                                       const std::string& field, int64_t page_bytes,
                                       FaultMutant mutant) {
  MLASIM_RETURN_IF_ERROR(ValidateLayout(layout));
  if (page_bytes < 0) return InvalidArgumentError(field, "the page size must be >= 0");
  const Neighbours n = FindNeighbours(layout, address);
  if (!n.below && !n.above)
    return InvalidArgumentError(field, fmt::format("0x{:x} lies outside the layout", address));
  Attribution at;
  at.mapped = n.mapped;
  const uint64_t span = page_bytes > 0 ? static_cast<uint64_t>(page_bytes) : 1;
  auto out = IsUnderflow(n, address, span, mutant) ? Underflow(n, address, page_bytes, field, at)
                                                   : AtOrPast(n, address, page_bytes, field, at);
  if (!out.ok()) return out;
  MatchAccesses(layout, *out);
  out->text += AccessesText(*out);
  return out;
}

}  // namespace mlasim::sim
