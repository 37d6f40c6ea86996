#include "sim/violation.h"

#include <algorithm>
#include <utility>

namespace mlasim::sim {
namespace {

std::string S(int64_t x) {
  return std::to_string(x);
}

// The one table of class letters and their short meanings (docs/bug-classes.md, in our words).
struct BugClassRow {
  BugClass id;
  const char* letter;
  const char* meaning;
};
constexpr BugClassRow kBugClasses[kBugClassCount] = {
    {BugClass::kA, "A", "a plan or launch covers graph-padded rows the kernel's buffers lack"},
    {BugClass::kB, "B", "zero-KV, zero-length or tiny-tail work items (q read, o written, 0/0)"},
    {BugClass::kC, "C", "a read or write past a buffer's end (row width, stride or tile too big)"},
    {BugClass::kD, "D", "metadata or workspace sizing disagrees with the kernel actually run"},
    {BugClass::kE, "E", "stale metadata or workspace reused (graph replay, lengths changed)"},
    {BugClass::kF, "F", "a wrong split-KV reduce mapping, or garbage partials merged"},
    {BugClass::kG, "G", "an index out of range or an invalid sentinel (-1, INT_MAX) used"},
    {BugClass::kH, "H", "an unsupported shape silently dispatched (wrong result, no error)"},
    {BugClass::kI, "I", "NaN or garbage spreading from poisoned or uninitialised memory"},
    {BugClass::kJ, "J", "a hang: a loop bound that underflows"},
};

const BugClassRow& Row(BugClass c) {
  return kBugClasses[static_cast<int>(c)];
}

constexpr const char* kConsequenceNames[] = {
    "unobserved",        "fault",           "corrupts",         "reads",           "stale_read",
    "refused",           "undefined_value", "plan_invalid",     "stale_output",    "hang",
    "clamped_to_slot_0", "wrapped",         "consumed_padding", "poisoned_output", "wrong_output"};

// The class of each plan checker diagnostic: the invariant it names.
struct PlanDiagClassRow {
  ref::PlanDiag diag;
  BugClass cls;
};
constexpr PlanDiagClassRow kPlanDiagClasses[] = {
    // Tiny tails and rows that see no key: the zero-length work items of class B (a piece
    // shorter than qlen is aiter #2106's tail rule; the planner mutant without it is class B).
    {ref::PlanDiag::kPieceShorterThanQlen, BugClass::kB},
    {ref::PlanDiag::kTileEmptyKvRange, BugClass::kB},
    {ref::PlanDiag::kUpdateLeftEmptyPiece, BugClass::kB},
    // decode_update deciding another head fold than the planner: a shape it does not support.
    {ref::PlanDiag::kUpdateFoldMismatch, BugClass::kH},
    // Every other broken invariant is one of the split/reduce structure (class F).
};

}  // namespace

const char* BugClassLetter(BugClass c) {
  return Row(c).letter;
}

const char* BugClassMeaning(BugClass c) {
  return Row(c).meaning;
}

StatusOr<BugClass> ParseBugClass(const std::string& letter, const std::string& field) {
  for (const BugClassRow& r : kBugClasses)
    if (letter == r.letter) return r.id;
  return InvalidArgumentError(field, "'" + letter + "' is not a bug class (A..J)");
}

const char* AccessName(Access a) {
  return a == Access::kWrite ? "write" : a == Access::kRun ? "run" : "read";
}

StatusOr<Access> ParseAccess(const std::string& name, const std::string& field) {
  if (name == "read") return Access::kRead;
  if (name == "write") return Access::kWrite;
  if (name == "run") return Access::kRun;
  return InvalidArgumentError(field, "must be \"read\", \"write\" or \"run\", got '" + name + "'");
}

const char* ConsequenceName(Consequence c) {
  const auto i = static_cast<size_t>(c);
  return i < std::size(kConsequenceNames) ? kConsequenceNames[i] : "?";
}

std::string ConsequenceText(const Violation& v) {
  std::string s = ConsequenceName(v.consequence);
  if (!v.consequence_of.empty()) s += ":" + v.consequence_of;
  return s;
}

bool IsSignatureName(std::string_view name, bool dots) {
  return !name.empty() && name.size() <= 128 &&
         std::all_of(name.begin(), name.end(), [dots](char c) {
           return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '-' || (dots && c == '.');
         });
}

std::string ViolationSignature(const Violation& v) {
  return v.step + "|" + v.call + "|" + v.buffer + "|" + AccessName(v.access) + "|" + ClassLabel(v);
}

bool IsKernelKind(ViolationKind k) {
  return k == ViolationKind::kKernelContract || k == ViolationKind::kKernelNumerics ||
         k == ViolationKind::kKernelFault;
}

const char* ClassLabel(const Violation& v) {
  switch (v.kind) {
    case ViolationKind::kKernelContract: return "KUT-contract";
    case ViolationKind::kKernelNumerics: return "KUT-numerics";
    case ViolationKind::kKernelFault: return "KUT-fault";
    default: return BugClassLetter(v.bug_class);
  }
}

const char* ViolationKindName(ViolationKind k) {
  switch (k) {
    case ViolationKind::kOutOfBounds: return "out_of_bounds";
    case ViolationKind::kUninitializedRead: return "uninitialized_read";
    case ViolationKind::kPlanInvalid: return "plan_invalid";
    case ViolationKind::kPlannerInputRead: return "planner_input_read";
    case ViolationKind::kUnwrittenOutput: return "unwritten_output";
    case ViolationKind::kGuardRefused: return "guard_refused";
    case ViolationKind::kUnboundedLoop: return "unbounded_loop";
    case ViolationKind::kInvalidIndex: return "invalid_index";
    case ViolationKind::kPoisonedOutput: return "poisoned_output";
    case ViolationKind::kWrongOutput: return "wrong_output";
    case ViolationKind::kKernelContract: return "kernel_contract";
    case ViolationKind::kKernelNumerics: return "kernel_numerics";
    case ViolationKind::kKernelFault: return "kernel_fault";
  }
  return "?";
}

BugClass PlanDiagClass(ref::PlanDiag diag) {
  for (const PlanDiagClassRow& r : kPlanDiagClasses)
    if (r.diag == diag) return r.cls;
  return BugClass::kF;
}

BugClass OutOfBoundsClass(const std::string& buffer, bool plan_exceeds_rows) {
  if (buffer == "q" || buffer == "o") return plan_exceeds_rows ? BugClass::kA : BugClass::kC;
  if (buffer == "kv_cache") return BugClass::kG;
  return BugClass::kC;
}

namespace {

Violation Base(ViolationKind kind, BugClass c, const RowSpan& span, Access a, Consequence q) {
  Violation v;
  v.kind = kind;
  v.bug_class = c;
  v.buffer = span.buffer;
  v.access = a;
  v.rows = span.rows;
  v.row_bytes = span.row_bytes;
  v.first_row = span.first;
  v.last_row = span.last;
  v.consequence = q;
  return v;
}

void PastEnd(Violation& v) {
  v.rows_past_end = v.last_row + 1 - v.rows;
  v.bytes_past_end = v.rows_past_end * v.row_bytes;
}

}  // namespace

Violation MakeOutOfBounds(BugClass c, const RowSpan& span, Access a, std::vector<int32_t> works,
                          std::string detail) {
  Violation v = Base(ViolationKind::kOutOfBounds, c, span, a, Consequence::kUnobserved);
  const bool before = span.first < 0;
  if (before) {
    v.rows_before_start = -span.first;
    v.bytes_before_start = v.rows_before_start * span.row_bytes;
  } else {
    PastEnd(v);
  }
  v.work_items = std::move(works);
  v.detail = !detail.empty() ? std::move(detail)
                             : std::string(a == Access::kWrite ? "writes " : "reads ") +
                                   span.buffer + " rows " + S(span.first) + ".." + S(span.last) +
                                   " of " + S(span.rows) + (before ? " (before its start)" : "");
  return v;
}

void WithFault(Violation& v, uint64_t address) {
  v.consequence = Consequence::kFault;
  v.consequence_of.clear();
  v.first_bad_address = address;
}

void WithOverlap(Violation& v, const std::string& other) {
  v.consequence = v.access == Access::kWrite ? Consequence::kCorrupts : Consequence::kReads;
  v.consequence_of = other;
}

Violation MakePlanBufferOverflow(const RowSpan& span) {
  Violation v = MakeOutOfBounds(
      BugClass::kD, span, Access::kWrite, {},
      "the planner stores past " + span.buffer + " as sized by get_mla_metadata_info_v1");
  v.consequence = Consequence::kRefused;  // the sizing disagreement; the store is modelled away
  return v;
}

Violation MakeUninitializedRead(const RowSpan& span, std::vector<int32_t> works) {
  Violation v = Base(ViolationKind::kUninitializedRead, BugClass::kE, span, Access::kRead,
                     Consequence::kStaleRead);
  v.work_items = std::move(works);
  v.detail = "reads " + span.buffer + " rows " + S(span.first) + ".." + S(span.last) +
             " that no call wrote this step";
  return v;
}

Violation MakePlanInvalid(ref::PlanDiag diag, const RowSpan& span, int32_t work,
                          std::string message) {
  Violation v = Base(ViolationKind::kPlanInvalid, PlanDiagClass(diag), span, Access::kWrite,
                     Consequence::kPlanInvalid);
  v.consequence_of = ref::PlanDiagName(diag);
  if (work >= 0) v.work_items.push_back(work);
  v.detail = std::move(message);
  return v;
}

Violation MakeDialectPlanInvalid(BugClass c, const std::string& diag, const RowSpan& span,
                                 int32_t request, std::string message) {
  Violation v = Base(ViolationKind::kPlanInvalid, c, span, Access::kRead,
                     Consequence::kPlanInvalid);
  v.consequence_of = diag;
  if (request >= 0) v.work_items.push_back(request);
  v.detail = std::move(message);
  return v;
}

Violation MakeInconsistentBatch(const std::string& buffer, int64_t qo_entries, int64_t kv_entries) {
  RowSpan span{buffer, std::min(qo_entries, kv_entries), 0, std::min(qo_entries, kv_entries),
               std::max(qo_entries, kv_entries) - 1};
  Violation v = Base(ViolationKind::kPlanInvalid, BugClass::kA, span, Access::kRead,
                     Consequence::kPlanInvalid);
  v.rows_past_end = v.last_row + 1 - v.rows;
  v.consequence_of = "inconsistent_batch";
  v.detail = "the planner receives qo_indptr of " + S(qo_entries) + " entries but " +
             "kv_indptr of " + S(kv_entries) + ": one describes padded rows the other lacks";
  return v;
}

Violation MakePlannerInputRead(const std::string& array, int64_t size, int64_t index,
                               int32_t work_row, const std::string& kernel) {
  Violation v = Base(ViolationKind::kPlannerInputRead, BugClass::kG, {array, size, 4, index, index},
                     Access::kRead, Consequence::kUndefinedValue);
  PastEnd(v);
  if (work_row >= 0) v.work_items.push_back(work_row);
  v.detail = kernel + " reads " + array + "[" + S(index) + "] of " + S(size) + " entries";
  return v;
}

Violation MakeUnwrittenOutput(const RowSpan& span, bool padding) {
  Violation v =
      Base(ViolationKind::kUnwrittenOutput, padding ? BugClass::kI : BugClass::kB, span,
           Access::kWrite, padding ? Consequence::kConsumedPadding : Consequence::kStaleOutput);
  v.detail = padding ? span.buffer +
                           " rows of padding that no work item or reduce wrote: they keep stale "
                           "memory, and the engine's next layer reads them (padding consumed)"
                     : span.buffer +
                           " rows of real tokens that no work item or reduce wrote: they keep "
                           "stale memory";
  return v;
}

Violation MakeGuardRefused(int64_t q_rows, int64_t plan_rows) {
  Violation v = Base(ViolationKind::kGuardRefused, BugClass::kA,
                     {"q", q_rows, 0, q_rows, plan_rows - 1}, Access::kRead, Consequence::kRefused);
  v.rows_past_end = plan_rows - q_rows;
  v.detail = "_forward_decode refuses a sparse MTP plan of " + S(plan_rows) + " rows for q of " +
             S(q_rows) + " rows (the #2715 guard)";
  return v;
}

Violation MakeUnboundedLoop(const RowSpan& span, int32_t who, int64_t trips, int64_t bound,
                            const std::string& what, const std::string& why) {
  Violation v =
      Base(ViolationKind::kUnboundedLoop, BugClass::kJ, span, Access::kRead, Consequence::kHang);
  if (who >= 0) v.work_items.push_back(who);
  v.detail = "work " + S(who) + " would walk " + S(trips) + " " + what + " (bound " + S(bound) +
             "): " + (why.empty() ? "its loop bound exceeds what the buffers hold" : why);
  return v;
}

Violation MakeInvalidIndex(const RowSpan& span, std::vector<int32_t> works, bool clamp,
                           int64_t count, int64_t first_value, int64_t first_element) {
  Violation v = Base(ViolationKind::kInvalidIndex, BugClass::kG, span, Access::kRead,
                     clamp ? Consequence::kClampedToSlot0 : Consequence::kWrapped);
  v.work_items = std::move(works);
  v.detail = S(count) + " index value(s) outside the KV cache (first " + S(first_value) +
             " at element " + S(first_element) + ") read " + (clamp ? "slot 0" : "a wrapped slot") +
             " instead: another token's KV";
  return v;
}

Violation MakePoisonedOutput(BugClass c, const RowSpan& span, std::vector<int32_t> works,
                             std::string detail) {
  Violation v =
      Base(ViolationKind::kPoisonedOutput, c, span, Access::kWrite, Consequence::kPoisonedOutput);
  v.work_items = std::move(works);
  v.detail = std::move(detail);
  return v;
}

Violation MakeWrongOutput(BugClass c, const RowSpan& span, std::string detail) {
  Violation v =
      Base(ViolationKind::kWrongOutput, c, span, Access::kWrite, Consequence::kWrongOutput);
  v.detail = std::move(detail);
  return v;
}

}  // namespace mlasim::sim
