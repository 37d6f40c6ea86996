// File: sim/violation.h
//
// What mlasim reports: one Violation per finding, built by one factory per ViolationKind, with the
// bug class (A..J of docs/bug-classes.md), the access and the consequence on hardware as enums.
// Strings exist only at the edges (the JSON and text reports, fuzz signatures and finding files):
// each enum has one name table here. The short meaning of every class letter is kept in one
// table (BugClassMeaning) that every report prints from.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ref/plan_check.h"
#include "ref/status.h"

namespace mlasim::sim {

// Bug classes of docs/bug-classes.md (the project's definition; ../shared/spec/bug-classes.md is
// its source).
enum class BugClass : uint8_t { kA, kB, kC, kD, kE, kF, kG, kH, kI, kJ };
inline constexpr int kBugClassCount = 10;
// "A".."J".
const char* BugClassLetter(BugClass c);
// One line: what goes wrong in this class (docs/bug-classes.md has the long form and examples).
const char* BugClassMeaning(BugClass c);
// Errors: InvalidArgument(field) unless `letter` is one of A..J.
StatusOr<BugClass> ParseBugClass(const std::string& letter, const std::string& field);

// kRun: a kernel under test that crashed, hung or failed as a whole (no single access).
enum class Access : uint8_t { kRead, kWrite, kRun };
const char* AccessName(Access a);  // "read" | "write" | "run"
StatusOr<Access> ParseAccess(const std::string& name, const std::string& field);

// What a violation does on hardware. Some carry an object (Violation::consequence_of): the
// buffer a stray access corrupts or reads, or the plan diagnostic of an invalid plan.
enum class Consequence : uint8_t {
  kUnobserved,       // lands in mapped memory nobody else uses: silent
  kFault,            // an unmapped page: a GPU memory access fault (first_bad_address)
  kCorrupts,         // a stray write lands in another live allocation (consequence_of)
  kReads,            // a stray read sees another live allocation (consequence_of)
  kStaleRead,        // reads bytes no call wrote this step
  kRefused,          // the engine or the planner model refuses: no memory access happens
  kUndefinedValue,   // a planner read its own input past the end: the value is undefined
  kPlanInvalid,      // the plan a call consumes is invalid (consequence_of: the diagnostic)
  kStaleOutput,      // output rows of real tokens keep stale memory
  kHang,             // a loop that does not end on hardware
  kClampedToSlot0,   // an invalid index read KV slot 0 instead: another token's KV
  kWrapped,          // an invalid index read (index mod cache): another token's KV
  kConsumedPadding,  // garbage in padding rows that the next layer reads (padding consumed)
  kPoisonedOutput,   // NaN or a hostile value reached real rows of o or lse (numerics)
  kWrongOutput,      // real rows of o or lse outside the tolerance of the truth (numerics)
};
const char* ConsequenceName(Consequence c);

// What one finding is.
enum class ViolationKind : uint8_t {
  kOutOfBounds,        // rows touched past a buffer's end or before its start (classes A, C, D, G)
  kUninitializedRead,  // bytes of a buffer that no call wrote this step (class E)
  kPlanInvalid,        // the plan checker rejects a plan a call consumes (classes A, B, F, H)
  kPlannerInputRead,   // a planner/update read its own input past the end (class G)
  kUnwrittenOutput,    // output rows no call wrote: real tokens (B), consumed padding (I)
  kGuardRefused,       // the engine's plan-rows guard refused a call (no memory access)
  kUnboundedLoop,      // a work item's loop bound underflows: a hang on hardware (class J)
  kInvalidIndex,       // an index outside the KV cache that the kernel clamps or wraps (class G)
  kPoisonedOutput,     // numerics: NaN / a hostile value reaches real rows of o or lse (B, G, I)
  kWrongOutput,        // numerics: real rows of o or lse differ from the truth (classes F, I)
  // Observed on a kernel under test (fuzz/kut_check.h, docs/kernel-under-test.md), not predicted
  // by a contract:
  kKernelContract,  // the kernel touched memory its declared contract does not allow (or did not
                    // touch what it predicts)
  kKernelNumerics,  // the kernel's outputs differ from the numerics reference
  kKernelFault,     // the kernel crashed, hung or returned an error
};
const char* ViolationKindName(ViolationKind k);
// True for the kinds observed on a kernel under test (kKernelContract, kKernelNumerics,
// kKernelFault): they are not predictions of a bug class.
bool IsKernelKind(ViolationKind k);

struct Violation {
  ViolationKind kind = ViolationKind::kOutOfBounds;
  BugClass bug_class = BugClass::kC;
  std::string step;  // "verify", "draft_step_0", ...
  std::string call;  // call name, "sparse_decode"
  int32_t call_index = -1;
  std::string table_row;  // atom-mtp-flow.md §6 row
  std::string kernel;
  std::string buffer;
  Access access = Access::kRead;
  int64_t rows = 0;  // rows the buffer holds
  int64_t row_bytes = 0;
  int64_t first_row = -1;  // first and last row touched out of bounds / unwritten
  int64_t last_row = -1;
  int64_t rows_past_end = 0;
  int64_t bytes_past_end = 0;
  int64_t rows_before_start = 0;   // an access below row 0 (an underflow): rows / bytes before
  int64_t bytes_before_start = 0;  // the buffer's start
  // The scenario's overrides of this call (docs/scenario.md "calls"): the disagreement that
  // causes the finding, in words. Empty for calls the engine makes as it is.
  std::string cause;
  std::vector<int32_t> work_items;  // responsible work items (or tiles for the reduce)
  Consequence consequence = Consequence::kUnobserved;
  std::string consequence_of;  // kCorrupts / kReads: the buffer; kPlanInvalid: the diagnostic
  uint64_t first_bad_address = 0;
  std::string detail;  // one sentence
  // kUnboundedLoop: the walk passed mlasim's own bounds (loop_trips, call_trips: ref/limits.h),
  // not a bound the contract states; sim::CheckCall reports only these.
  bool beyond_limits = false;
};

// The class column of reports and signatures: the bug class letter ("A".."J"), or for a finding
// observed on a kernel under test "KUT-contract", "KUT-numerics" or "KUT-fault"
// (docs/kernel-under-test.md).
const char* ClassLabel(const Violation& v);

// The consequence as reports print it: "fault", "corrupts:<buffer>", "plan_invalid:<diag>", ...
std::string ConsequenceText(const Violation& v);

// "step|call|buffer|access|class": how campaigns deduplicate findings and how known bugs are
// recognised (fuzz::Signature is this).
std::string ViolationSignature(const Violation& v);

// Whether `name` may stand in a signature: 1..128 of [A-Za-z0-9_-] (a step or call), with `dots`
// also '.' (a buffer). Campaigns name finding files after signatures, and `fuzz --resume` and
// `fuzz merge` refuse any other (fuzz::CheckSignature); the call tables hold their names to it.
bool IsSignatureName(std::string_view name, bool dots);

// Rows [first, last] of a buffer of `rows` rows of `row_bytes` bytes, as a factory takes them.
struct RowSpan {
  std::string buffer;
  int64_t rows = 0;
  int64_t row_bytes = 0;
  int64_t first = -1, last = -1;
};

// ---- One factory per ViolationKind --------------------------------------------------------
// Each sets kind, class, access, the row fields, the consequence and the detail sentence; the
// executor adds the call's identity (step, call, kernel, cause).

// Rows outside a buffer: before its start when span.first < 0 (rows/bytes_before_start), else
// past its end (rows/bytes_past_end). Consequence kUnobserved: the caller places it in the
// address space (WithFault / WithOverlap). `detail` "" = "reads <buffer> rows a..b of n".
Violation MakeOutOfBounds(BugClass c, const RowSpan& span, Access a, std::vector<int32_t> works,
                          std::string detail = "");
// The class of a kernel's access outside `buffer`: q / o when the plan covers rows the engine did
// not allocate (`plan_exceeds_rows`: A) or when the plan fits and the row width or stride
// overruns (C), the KV cache through an index (G), any other buffer (C).
BugClass OutOfBoundsClass(const std::string& buffer, bool plan_exceeds_rows);
// The out-of-bounds access hits an unmapped page at `address`; or lands in `other` (kCorrupts
// for a write, kReads for a read).
void WithFault(Violation& v, uint64_t address);
void WithOverlap(Violation& v, const std::string& other);
// The planner stores past a buffer get_mla_metadata_info_v1 sized (class D; the store itself is
// modelled away: kRefused).
Violation MakePlanBufferOverflow(const RowSpan& span);

// Bytes no call wrote this step read (class E, kStaleRead).
Violation MakeUninitializedRead(const RowSpan& span, std::vector<int32_t> works);

// A FlashMLA or FlashInfer plan checker's diagnostic `diag` ("NumSplitsShape", ...) on a plan
// a call consumes (sim/trace.h DialectFinding): class `c` (A: planned for another batch than
// launched; E: built at capture for another batch; D: larger than its buffer), consequence
// plan_invalid:<diag>; `request` (-1: none) becomes the work item listed.
Violation MakeDialectPlanInvalid(BugClass c, const std::string& diag, const RowSpan& span,
                                 int32_t request, std::string message);

// The plan checker's diagnostic `diag` on a plan a call consumes (class PlanDiagClass(diag)).
Violation MakePlanInvalid(ref::PlanDiag diag, const RowSpan& span, int32_t work,
                          std::string message);
// Plan inputs whose batch sizes disagree (qo_indptr vs kv_indptr entries; class A).
Violation MakeInconsistentBatch(const std::string& buffer, int64_t qo_entries, int64_t kv_entries);
// The class of a plan checker diagnostic: tiny tails and rows that see no key (B), decode_update
// folding differently from the planner (H), every other broken invariant of the split/reduce
// structure (F). One table (violation.cpp), used by replay, fuzz signatures and the mutant
// registry.
BugClass PlanDiagClass(ref::PlanDiag diag);

// A planner or decode_update reading element `index` of its input `array` of `size` entries
// (class G, kUndefinedValue). `work_row` < 0: no work item.
Violation MakePlannerInputRead(const std::string& array, int64_t size, int64_t index,
                               int32_t work_row, const std::string& kernel);

// Output rows no call wrote: of real tokens (class B, kStaleOutput) or of padding rows the next
// layer reads (class I, kConsumedPadding; docs/numerics.md "Padding policy").
Violation MakeUnwrittenOutput(const RowSpan& span, bool padding);

// The engine's plan-rows guard refused a decode of `plan_rows` rows over q of `q_rows` (class A).
Violation MakeGuardRefused(int64_t q_rows, int64_t plan_rows);

// A loop of work item `who` that runs `trips` times against a bound of `bound` (class J, kHang).
Violation MakeUnboundedLoop(const RowSpan& span, int32_t who, int64_t trips, int64_t bound,
                            const std::string& what, const std::string& why);

// `count` index values outside the KV cache that the kernel clamped to slot 0 (`clamp`) or
// wrapped, the first `first_value` at element `first_element` (class G).
Violation MakeInvalidIndex(const RowSpan& span, std::vector<int32_t> works, bool clamp,
                           int64_t count, int64_t first_value, int64_t first_element);

// Numerics: poison (NaN, a hostile index) that reaches rows [first, last] of `output` ("o" or
// "lse"). `c` is the class of its source (G: a hostile index, B: a key of an empty or masked
// range, I: NaN from memory nobody wrote); `detail` names the slot, the work item and the
// contract field that let it through.
Violation MakePoisonedOutput(BugClass c, const RowSpan& span, std::vector<int32_t> works,
                             std::string detail);
// Numerics: real rows of `output` outside the tolerance of the monolithic truth (F: a wrong
// split/reduce, I: padding rows that changed a shared fp8 scale).
Violation MakeWrongOutput(BugClass c, const RowSpan& span, std::string detail);

}  // namespace mlasim::sim
