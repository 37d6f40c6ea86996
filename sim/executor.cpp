#include "sim/executor.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string_view>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "ref/limits.h"
#include "ref/plan_check.h"
#include "sim/contract.h"
#include "sim/flat.h"
#include "sim/kernel_request.h"

namespace mlasim::sim {
namespace {

using ref::Cell;

// Out-of-bounds or unwritten rows of one (buffer, access, kind), merged over work items.
struct Aggregate {
  ViolationKind kind;
  std::string buffer;
  Access access = Access::kRead;
  int64_t rows = 0;
  int64_t row_bytes = 0;
  int64_t first = INT64_MAX;
  int64_t last = -1;
  std::vector<int32_t> works;
};

// An int32 buffer a contract's expressions load from: its values, which of them were written,
// and the tensor it is (for reporting a bad load as a read of that tensor).
struct LoadSource {
  const int32_t* data = nullptr;
  const Cell* cells = nullptr;          // null: every element of `data` was written
  int64_t size = 0;                     // elements held (data's length)
  int64_t alloc = 0;                    // elements allocated (>= size: the rest is stale memory)
  int32_t width = 1;                    // elements per row
  const std::string* buffer = nullptr;  // allocation name
};

// Whether element `e` of `l` loads without a finding: in the buffer, and written (a cell the
// planner wrote from an out-of-range input read, Cell::kUndefined, holds the value the model
// computed; the read that made it is reported with the planner call).
inline bool Loadable(const LoadSource& l, int64_t e) {
  return e >= 0 && e < l.size && (!l.cells || l.cells[e] != Cell::kUnwritten);
}

// Aggregate keys of underflows: kept apart from overruns of the same buffer.
constexpr int kBefore = 100;

int64_t FloorDiv(int64_t a, int64_t b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}

// The roles the executor names itself (Bind's launch variables, the unwritten-output and
// invalid-index reports): each one's index in CallRoles(kind), -1 where the kind has no such role.
// Found once per kind, not by a scan of string compares on every call.
struct NamedRoles {
  int8_t q = -1, o = -1, logits = -1, kv_indices = -1, indices = -1, kv_cache = -1;
};
const NamedRoles& NamedRolesOf(CallKind kind) {
  constexpr size_t kKinds = static_cast<size_t>(CallKind::kReduce) + 1;  // (the last kind)
  static const std::array<NamedRoles, kKinds> table = [] {
    std::array<NamedRoles, kKinds> t{};
    for (size_t k = 0; k < kKinds; ++k) {
      const std::vector<std::string>& names = CallRoles(static_cast<CallKind>(k));
      const auto find = [&](std::string_view role) {
        for (size_t i = 0; i < names.size(); ++i)
          if (names[i] == role) return static_cast<int8_t>(i);
        return int8_t{-1};
      };
      t[k] = {find("q"),          find("o"),       find("logits"),
              find("kv_indices"), find("indices"), find("kv_cache")};
    }
    return t;
  }();
  return table[static_cast<size_t>(kind)];
}

// The plan buffers as tensors (work_indptr, work_info, reduce_indptr, reduce_final_map,
// reduce_partial_map) of each plan of a trace, built at the plan's first call (`built`).
struct PlanTensors {
  std::vector<std::array<TensorArg, 5>> args;
  std::vector<uint8_t> built;
};

class CallExecutor {
 public:
  CallExecutor(const Scenario& s, const Trace& t, const ExecuteOptions& opt, AddressSpace& as,
               ExecutionResult& out, PlanTensors& plan_tensors)
      : s_(s), t_(t), opt_(opt), as_(as), out_(out), plan_tensors_(plan_tensors) {
    plan_tensors_.built.assign(t.plans.size(), 0);
    if (plan_tensors_.args.size() < t.plans.size()) plan_tensors_.args.resize(t.plans.size());
    for (const auto& [buffer, content] : t.index_contents) contents_[buffer].push_back(content);
  }

  void Run(const Call& c);
  void Finish() {
    if (out_.layout_call < 0 && last_kernel_call_) CaptureLayout(*last_kernel_call_, false);
  }

 private:
  // Plan builds and updates (the reference planner's writes, its input reads, the checker).
  void PlanCall(const Call& c);
  void MarkPlanWrites(const PlanSnapshot& snap);
  void ReportPlanOverflow(const Call& c, const PlanSnapshot& snap);
  void ReportPlannerInputReads(const Call& c, const ref::Plan& p);
  void ReportInconsistentBatch(const Call& c, const PlanSnapshot& snap);
  void ReportPlanCheck(const Call& c, const PlanSnapshot& snap);
  void ReportRaggedUniPlan(const Call& c, const PlanSnapshot& snap);
  // Kernel calls: the contract's program over the call's tensors.
  void KernelCall(const Call& c);
  void ReportDialectFindings(const Call& c);
  void AllocateTensors(const Call& c);
  void ReportGuardRefusal(const Call& c);
  void ReportUnwrittenOutput(const Call& c);
  void CaptureLayout(const Call& c, bool has_violation);

  // The program interpreter.
  void Bind(const Call& c);
  void Exec(const std::vector<Statement>& body);
  void ExecAccess(const Statement& st);
  void ExecGather(const Statement& st);
  void ExecLoop(const Statement& st);
  // Rows [b, e) of role `role` in `unit`s, read or written (what an access statement does once
  // its rows are evaluated).
  [[gnu::always_inline]] inline void TouchRows(int32_t role, bool write, AccessUnit unit,
                                               int64_t b, int64_t e);
  // A gather over token positions [p0, p1) with pages of `page` tokens, all three evaluated.
  [[gnu::always_inline]] inline void GatherAt(int32_t role, int32_t index_role, int64_t p0,
                                              int64_t p1, int64_t page);
  // The iterations of a loop whose range [from, to) is evaluated and defined: the hang checks,
  // then `body()` per iteration with the loop variable set (ExecLoop's semantics, shared by the
  // interpreter and the compiled bodies). `bound(&defined)` gives the trip bound (has_bound);
  // `stmt()` the loop statement, for a hang report.
  template <class Bound, class Stmt, class Body>
  void LoopOver(int64_t from, int64_t to, bool has_bound, Bound&& bound, Stmt&& stmt,
                bool empty_body, const CsrWalk* csr, int32_t slot, LoopAttribution attribute,
                Body&& body);
  // The loop statement of record r (a kLoop), by its path in `body`; a hang report of it.
  const Statement& FlatStatement(const FlatBody& f, const std::vector<Statement>& body,
                                 const FlatRecord& r) const;
  [[gnu::noinline, gnu::cold]] void FlatHang(const FlatBody& f, const std::vector<Statement>& body,
                                             const FlatRecord& r, int64_t trips, int64_t bound);
  // Compiled bodies (sim/flat.h): records [i, end) of `f`, compiled from `body`.
  void RunFlat(const FlatBody& f, const std::vector<Statement>& body, int32_t i, int32_t end);
  // One record (records[i]); returns the next record's index. kChecked: some variable slot is
  // undefined, so every form checks the definedness of the slots it names.
  template <bool kChecked>
  [[gnu::always_inline]] inline int32_t FlatStep(const FlatBody& f,
                                                 const std::vector<Statement>& body, int32_t i);
  // A decode work item (FlatRecord::decode_item) whose records start at `a`, while every slot
  // is defined: false, having done nothing, when its work_info row is not all written (or not
  // inside the buffer); then the records run one by one.
  [[gnu::always_inline]] inline bool DecodeItem(const FlatBody& f,
                                                const std::vector<Statement>& body, int32_t a);
  // The body of a loop with FlatRecord::load_then_accesses, records [a, a + 3), while every slot
  // is defined: the let's load (a failed one leaves the accesses to the records, checked).
  [[gnu::always_inline]] inline void LoadThenAccesses(const FlatBody& f,
                                                      const std::vector<Statement>& body,
                                                      int32_t a);
  // A kAccess record in the unchecked mode (FlatStep<false>'s case, its `when` included).
  [[gnu::always_inline]] inline void AccessUnchecked(const FlatBody& f, const FlatRecord& r);
  template <bool kChecked>
  [[gnu::noinline]] void FlatLoop(const FlatBody& f, const std::vector<Statement>& body,
                                  const FlatRecord& r, int32_t at);
  template <bool kChecked>
  [[gnu::always_inline]] inline int64_t LinValue(const FlatLin& l, bool* defined) const;
  template <bool kChecked>
  [[gnu::always_inline]] inline bool CmpHolds(const FlatCmp& c, bool* defined) const;
  template <bool kChecked>
  [[gnu::always_inline]] inline bool CondHolds(const FlatCond& c, bool* defined) const;
  // A value of a compiled body: a select out of line (it recurses), the other kinds inline.
  template <bool kChecked>
  [[gnu::always_inline]] inline int64_t FlatValueOf(const FlatBody& f, const FlatValue& v,
                                                    bool* defined);
  template <bool kChecked>
  [[gnu::noinline]] int64_t FlatSelect(const FlatBody& f, const FlatValue& v, bool* defined);
  // FlatValueOf with a select's first level inline (FlatSelect's body): the decode's gather end.
  template <bool kChecked>
  [[gnu::always_inline]] inline int64_t FlatValueSelectInline(const FlatBody& f,
                                                              const FlatValue& v, bool* defined);
  void EvalHoisted();
  void ExecLetRow(const LetRow& r);
  inline bool CsrIdle(const CsrWalk& w, int64_t v) const;
  // The first iteration in [v, to) of a CSR walk that is not idle (CsrIdle), else `to`.
  int64_t CsrNextBusy(const CsrWalk& w, int64_t v, int64_t to) const;
  // An expression's value (*defined: whether it has one); constants and lone variables inline.
  int64_t Eval(const Expr& e, bool* defined) {
    int64_t v;
    if (e.EvalSimple(vars_.data(), defined_.data(), &v, defined)) return v;
    return EvalShapes(e, defined);
  }
  int64_t EvalShapes(const Expr& e, bool* defined);
  inline LoadResult Load(int32_t slot, int64_t element);
  // The bound call's tensor of role index `role` (NamedRoles), null when -1 or not passed.
  const TensorArg* Tensor(int8_t role) const { return role >= 0 ? roles_[role] : nullptr; }
  void BindRole(const TensorArg& a);
  [[gnu::noinline]] LoadResult BadLoad(const LoadSource& l, int64_t element);  // the cold path
  void ReportHang(const Statement& st, int64_t trips, int64_t bound);
  void ReportHang(const Statement& st, int64_t trips, int64_t bound, const std::string& what,
                  const std::string& why, bool beyond_limits);
  void ReportCallTrips(const Statement& st, int64_t trips);
  // The KV rows a gather reads through a modelled index buffer (docs/contracts.md "gather").
  void GatherRows(int32_t role, int32_t index_role, const TensorArg& index, int64_t e0, int64_t e1, int64_t p0,
                  int64_t p1, int64_t page);
  // The fills of an index buffer (contents_), looked up once per call and role.
  const std::vector<std::shared_ptr<const IndexContent>>* ContentsOf(int32_t index_role,
                                                                    const TensorArg& index);
  void GatherValue(int64_t element, int64_t value, int64_t row_in_page, int64_t page);
  void FlushInvalid(const Call& c);

  // Touch rows [r0, r1) of the tensor `a` (a view of its allocation).
  void Touch(const TensorArg& a, bool write, int64_t r0, int64_t r1, int32_t who);
  // Same, with the tensor's allocation already looked up (null: not in the address space).
  // Rows inside the tensor that are written, or read and already written, are all there is to
  // do for most accesses: inline; anything else (a read of unwritten bytes, rows outside the
  // tensor, no allocation) goes to TouchOut, which does everything TouchIn did.
  void TouchIn(Allocation* alloc, const TensorArg& a, bool write, int64_t r0, int64_t r1,
               int32_t who) {
    if (r1 <= r0) return;
    if (alloc && r0 >= 0 && r1 <= a.rows) {
      const int64_t b0 = r0 * a.row_bytes, b1 = r1 * a.row_bytes;
      if (write) return alloc->written.Add(b0, b1);
      if (alloc->written.Covers(b0, b1)) return;
    }
    TouchOut(alloc, a, write, r0, r1, who);
  }
  [[gnu::noinline]] void TouchOut(Allocation* alloc, const TensorArg& a, bool write, int64_t r0,
                                  int64_t r1, int32_t who);
  void Flush(const Call& c);
  void Add(const Call& c, Violation v);

  const Scenario& s_;
  const Trace& t_;
  const ExecuteOptions& opt_;
  AddressSpace& as_;
  ExecutionResult& out_;
  std::map<std::pair<std::string, int>, Aggregate> agg_;  // (buffer, kind*2 + write)
  bool skip_reduce_ = false;
  const Call* last_kernel_call_ = nullptr;

  // Interpreter state of the current kernel call.
  const Call* call_ = nullptr;
  const Contract* contract_ = nullptr;
  const std::vector<std::string>* role_names_ = nullptr;  // CallRoles(call_->kind)
  const NamedRoles* named_ = nullptr;                     // NamedRolesOf(call_->kind)
  // The call's tensors by role id (CallRoles of its kind): its args, and the plan buffers.
  const TensorArg* roles_[kMaxRoles] = {};
  Allocation* role_allocs_[kMaxRoles] = {};  // their allocations, looked up once per call
  // contents_ of the index buffer of each role, looked up at its first gather of the call.
  const std::vector<std::shared_ptr<const IndexContent>>* role_contents_[kMaxRoles] = {};
  bool role_contents_found_[kMaxRoles] = {};
  PlanTensors& plan_tensors_;              // per trace plan, built at its first call
  std::string name_scratch_;               // a plan buffer's name (MarkPlanWrites), its memory kept
  std::vector<int32_t> kernel_qo_indptr_;  // the bound call's qo_indptr (sim/kernel_request.h)
  LoadSource loads_[kLoadSlotCount];
  std::vector<int64_t> vars_;
  std::vector<uint8_t> defined_;
  int32_t undefined_ = 0;  // slots whose defined_ is 0 (compiled bodies skip the checks at 0)
  // The trips a loop may run before it is a hang (ref/limits.h), read once per execution (the
  // limits are set before a campaign or command runs, not while a scenario executes).
  const int64_t max_loop_trips_ = ref::Limit(ref::LimitId::kLoopTrips);
  // What is left of the call's trips in all (ref::LimitId::kCallTrips), reset per kernel call:
  // each loop's trip count is charged when it starts, so nested loops cannot multiply past it.
  const int64_t max_call_trips_ = ref::Limit(ref::LimitId::kCallTrips);
  int64_t call_trips_left_ = 0;
  // What the last kAccess record with feeds_next evaluated: its when held and its rows were
  // defined (access_runs_), and the rows; the record after it (same_as_prev) uses them.
  bool access_runs_ = false;
  int64_t access_b_ = 0, access_e_ = 0;
  // Sets a variable slot, keeping undefined_.
  void SetVar(int32_t slot, int64_t value, bool defined) {
    vars_[slot] = value;
    if (defined_[slot] == static_cast<uint8_t>(defined)) return;
    undefined_ += defined ? -1 : 1;
    defined_[slot] = defined;
  }
  int32_t who_ = -1;
  // What each index buffer holds, fill after fill (the kv_cache model): latest last.
  std::map<std::string, std::vector<std::shared_ptr<const IndexContent>>> contents_;
  // Invalid indices a kernel clamped or wrapped this call: (index buffer, element, value).
  struct InvalidUse {
    int64_t element, value;
    int32_t who;
  };
  std::vector<InvalidUse> pending_;
  // A hang stops the GPU: only the first one of a step is reported (later calls never run on
  // hardware; the simulator still applies their accesses). A walk past mlasim's own bounds
  // (loop_trips, call_trips) is reported once on its own: a contract bound's hang before it (a
  // KV-block bound over an index buffer sim::CheckCall was not given) does not hide it.
  bool hang_reported_ = false;
  bool limit_hang_reported_ = false;
};

// ---------------------------------------------------------------------------------------------
// Touch / aggregates / violations
// ---------------------------------------------------------------------------------------------

void CallExecutor::Add(const Call& c, Violation v) {
  v.step = c.step;
  v.call = c.name;
  v.call_index = c.index;
  v.table_row = c.table_row;
  v.kernel = c.kernel;
  if (v.cause.empty())
    for (const std::string& o : c.overrides) v.cause += (v.cause.empty() ? "" : "; ") + o;
  out_.violations.push_back(std::move(v));
}

void CallExecutor::Touch(const TensorArg& a, bool write, int64_t r0, int64_t r1, int32_t who) {
  if (r1 <= r0) return;
  TouchIn(as_.FindMutable(a.buffer), a, write, r0, r1, who);
}

void CallExecutor::TouchOut(Allocation* alloc, const TensorArg& a, bool write, int64_t r0,
                            int64_t r1, int32_t who) {
  const int64_t in_end = std::min(r1, a.rows);
  if (alloc && r0 < in_end) {
    const int64_t b0 = std::max<int64_t>(r0, 0) * a.row_bytes, b1 = in_end * a.row_bytes;
    if (write) {
      alloc->written.Add(b0, b1);
    } else if (!alloc->written.Covers(b0, b1)) {
      const auto gap = alloc->written.FirstGap(b0, b1);
      Aggregate& g = agg_[{a.buffer, static_cast<int>(ViolationKind::kUninitializedRead) * 2}];
      g.kind = ViolationKind::kUninitializedRead;
      g.buffer = a.buffer;
      g.access = Access::kRead;
      g.rows = a.rows;
      g.row_bytes = a.row_bytes;
      g.first = std::min(g.first, gap.first / a.row_bytes);
      g.last = std::max(g.last, (gap.second - 1) / a.row_bytes);
      if (g.works.empty() || g.works.back() != who) g.works.push_back(who);
    }
  }
  if (r0 < 0) {  // an underflow: rows before the buffer's start (reported apart from overruns)
    Aggregate& g =
        agg_[{a.buffer, static_cast<int>(ViolationKind::kOutOfBounds) * 2 + write + kBefore}];
    g.kind = ViolationKind::kOutOfBounds;
    g.buffer = a.buffer;
    g.access = write ? Access::kWrite : Access::kRead;
    g.rows = a.rows;
    g.row_bytes = a.row_bytes;
    // A fresh aggregate's last (-1) is no row touched: rows -5..-5 stay -5..-5, not -5..-1.
    const int64_t last = std::min<int64_t>(r1, 0) - 1;
    g.last = g.first == INT64_MAX ? last : std::max(g.last, last);
    g.first = std::min(g.first, r0);
    if (g.works.empty() || g.works.back() != who) g.works.push_back(who);
  }
  if (r1 > a.rows) {
    Aggregate& g = agg_[{a.buffer, static_cast<int>(ViolationKind::kOutOfBounds) * 2 + write}];
    g.kind = ViolationKind::kOutOfBounds;
    g.buffer = a.buffer;
    g.access = write ? Access::kWrite : Access::kRead;
    g.rows = a.rows;
    g.row_bytes = a.row_bytes;
    g.first = std::min(g.first, std::max(r0, a.rows));
    g.last = std::max(g.last, r1 - 1);
    if (g.works.empty() || g.works.back() != who) g.works.push_back(who);
  }
}

void CallExecutor::Flush(const Call& c) {
  for (auto& [key, g] : agg_) {
    const RowSpan span{g.buffer, g.rows, g.row_bytes, g.first, g.last};
    if (g.kind != ViolationKind::kOutOfBounds) {
      Add(c, MakeUninitializedRead(span, g.works));
      continue;
    }
    // q / o: class A when the plan covers rows the engine did not allocate, C when the plan fits
    // and the kernel's row width or stride overruns.
    const int32_t alloc_rows = g.buffer == "q" ? c.q_rows : c.o_rows;
    Violation v = MakeOutOfBounds(OutOfBoundsClass(g.buffer, c.plan_rows > alloc_rows), span,
                                  g.access, g.works);
    if (const Allocation* a = as_.Find(g.buffer)) {
      // (Unsigned wrap-around gives the address below the base for an underflow.)
      const uint64_t begin = a->base + static_cast<uint64_t>(g.first * g.row_bytes);
      const uint64_t end = a->base + static_cast<uint64_t>((g.last + 1) * g.row_bytes);
      const uint64_t bad = as_.FirstUnmapped(begin, end);
      if (bad < end) {
        WithFault(v, bad);
      } else {
        const auto hits = as_.Overlapping(begin, end, a);
        if (!hits.empty()) WithOverlap(v, hits[0]->name);
      }
    }
    Add(c, std::move(v));
  }
  agg_.clear();
  pending_.clear();
}

// ---------------------------------------------------------------------------------------------
// Plan builds and updates
// ---------------------------------------------------------------------------------------------

// A plan's buffers with their names (a snapshot's allocations: its buffer_prefix + the name).
std::array<std::pair<const char*, const ref::Int32Buffer*>, 5> PlanBuffers(const ref::Plan& p) {
  return {{{"work_indptr", &p.work_indptr},
           {"work_info", &p.work_info},
           {"reduce_indptr", &p.reduce_indptr},
           {"reduce_final_map", &p.reduce_final_map},
           {"reduce_partial_map", &p.reduce_partial_map}}};
}

// Calls f(begin, end) for each run of elements of `b` whose cell is not kUnwritten, in order.
// Plan buffers are allocated at capacity size and mostly unwritten: no element at or past
// `dirty_end` was written (every writer of an Int32Buffer keeps it past its stores, and no plan
// is mid-rewrite here: Int32Buffer::Prepare restores only [0, dirty_end) for the same reason),
// so the scan stops there; before it, unwritten cells are skipped 64 (SSE2; else 32), then eight
// at a time; a written run ends at the next kUnwritten byte (memchr).
template <class F>
void ForEachWrittenRun(const ref::Int32Buffer& b, F&& f) {
  static_assert(sizeof(Cell) == 1 && static_cast<int>(Cell::kUnwritten) == 0,
                "cells are bytes, kUnwritten is 0");
  const auto* c = reinterpret_cast<const unsigned char*>(b.cells.data());
  const int64_t n = std::min<int64_t>(std::min<int64_t>(b.size(), b.dirty_end),
                                      static_cast<int64_t>(b.cells.size()));
  for (int64_t i = 0; i < n;) {
#if defined(__SSE2__)
    for (; i + 64 <= n; i += 64) {  // 64 at a time through the long unwritten stretches
      const auto* p = reinterpret_cast<const __m128i*>(c + i);
      const __m128i any =
          _mm_or_si128(_mm_or_si128(_mm_loadu_si128(p), _mm_loadu_si128(p + 1)),
                       _mm_or_si128(_mm_loadu_si128(p + 2), _mm_loadu_si128(p + 3)));
      if (_mm_movemask_epi8(_mm_cmpeq_epi8(any, _mm_setzero_si128())) != 0xffff) break;
    }
#else
    for (; i + 32 <= n; i += 32) {  // 32 at a time through the long unwritten stretches
      uint64_t w[4];
      std::memcpy(w, c + i, 32);
      if ((w[0] | w[1] | w[2] | w[3]) != 0) break;
    }
#endif
    for (uint64_t word = 0; i + 8 <= n; i += 8) {
      std::memcpy(&word, c + i, 8);
      if (word != 0) break;
    }
    while (i < n && c[i] == 0) ++i;
    if (i >= n) break;
    const void* zero = std::memchr(c + i, 0, static_cast<size_t>(n - i));
    const int64_t j = zero ? static_cast<const unsigned char*>(zero) - c : n;
    f(i, j);
    i = j;
  }
}

void CallExecutor::MarkPlanWrites(const PlanSnapshot& snap) {
  for (const auto& [name, b] : PlanBuffers(snap.plan)) {
    name_scratch_.assign(snap.buffer_prefix).append(name);  // no allocation once it has grown
    Allocation* alloc = as_.FindMutable(name_scratch_);
    if (!alloc) continue;
    ForEachWrittenRun(*b, [&](int64_t i, int64_t j) { alloc->written.Add(i * 4, j * 4); });
  }
}

void CallExecutor::ReportPlanOverflow(const Call& c, const PlanSnapshot& snap) {
  for (const auto& [name, b] : PlanBuffers(snap.plan)) {
    if (b->oob_writes == 0) continue;
    Add(c, MakePlanBufferOverflow({snap.buffer_prefix + name, b->size() / b->row_width,
                                   int64_t{b->row_width} * 4, b->first_oob_index / b->row_width,
                                   b->last_oob_index / b->row_width}));
  }
}

void CallExecutor::ReportPlannerInputReads(const Call& c, const ref::Plan& p) {
  for (const ref::InputViolation& iv : p.input_violations) {
    Violation v = MakePlannerInputRead(iv.array, iv.size, iv.index, iv.work_row, c.kernel);
    // Merge repeated reads of the same array in one call.
    bool merged = false;
    for (Violation& prev : out_.violations) {
      if (prev.call_index == c.index && prev.kind == v.kind && prev.buffer == v.buffer) {
        prev.first_row = std::min(prev.first_row, v.first_row);
        prev.last_row = std::max(prev.last_row, v.last_row);
        prev.rows_past_end = prev.last_row + 1 - prev.rows;
        prev.bytes_past_end = prev.rows_past_end * 4;
        if (iv.work_row >= 0) prev.work_items.push_back(iv.work_row);
        merged = true;
        break;
      }
    }
    if (!merged) Add(c, std::move(v));
  }
}

// Inputs that disagree on the batch size: the planner takes the count from kv_indptr and never
// notices (atom-mtp-flow.md §6 row D0c, fixed by slicing in #2715).
void CallExecutor::ReportInconsistentBatch(const Call& c, const PlanSnapshot& snap) {
  const size_t qn = snap.request.qo_indptr.size(), kn = snap.request.kv_indptr.size();
  if (qn == kn) return;
  Add(c, MakeInconsistentBatch(qn > kn ? "sparse_cu_seqlens_q" : "kv_indptr",
                               static_cast<int64_t>(qn), static_cast<int64_t>(kn)));
}

// The plan checker, restricted to tiles of real requests: padding rows are dropped anyway.
void CallExecutor::ReportPlanCheck(const Call& c, const PlanSnapshot& snap) {
  const ref::Plan& p = snap.plan;
  const ref::PlanCheckReport report =
      ref::CheckPlan(snap.request, p, ref::PlanCheckScope::kErrors);  // (the errors are read)
  std::vector<ref::ExpectedTile> tiles;  // computed for the first error naming a tile
  bool have_tiles = false;
  // A plan kept for other lengths (a reuse, or metadata built elsewhere: plan_from) breaks its
  // invariants because it is stale: class E (docs/bug-classes.md), whatever invariant the
  // checker names, as the mutants that make such plans are labelled.
  const bool stale = c.kind == CallKind::kPlanUpdate &&
                     (c.kernel == "(reuse)" || c.kernel.rfind("(stale", 0) == 0);
  std::map<ref::PlanDiag, Violation> first;
  for (const ref::PlanDiagnostic& d : report.diagnostics) {
    if (d.severity != ref::Severity::kError || d.code == ref::PlanDiag::kInputReadOutOfRange ||
        d.code == ref::PlanDiag::kBufferOverflow)
      continue;
    if (d.tile >= 0 && !have_tiles) {
      tiles = ref::ExpectedTiles(snap.request, p.derived);
      have_tiles = true;
    }
    if (d.tile >= 0 && d.tile < static_cast<int32_t>(tiles.size()) &&
        tiles[d.tile].request >= snap.real_requests)
      continue;
    auto it = first.find(d.code);
    if (it != first.end()) {
      if (d.work >= 0) it->second.work_items.push_back(d.work);
      continue;
    }
    Violation v = MakePlanInvalid(d.code, {snap.buffer_prefix + d.buffer, 0, 0, d.index, d.index},
                                  d.work, d.message);
    if (stale) v.bug_class = BugClass::kE;
    first.emplace(d.code, std::move(v));
  }
  for (auto& [code, v] : first) Add(c, std::move(v));
}

// The dialect plan checker's findings on a FlashMLA / FlashInfer plan (sim/trace.h).
// One finding per diagnostic code: the first one's sentence, rows first..last over all of
// them, every row (scheduler row, work or request) among the work items.
void CallExecutor::ReportDialectFindings(const Call& c) {
  std::map<std::string, Violation> first;
  std::vector<std::string> order;
  for (const DialectFinding& f : c.dialect_findings) {
    auto it = first.find(f.code);
    if (it == first.end()) {
      order.push_back(f.code);
      first.emplace(f.code, MakeDialectPlanInvalid(f.bug_class, f.code,
                                                   {f.buffer, 0, 0, f.row, f.row}, -1, f.message));
      it = first.find(f.code);
    }
    Violation& v = it->second;
    if (f.row >= 0) {
      v.work_items.push_back(static_cast<int32_t>(f.row));
      v.first_row = v.first_row < 0 ? f.row : std::min(v.first_row, f.row);
      v.last_row = std::max(v.last_row, f.row);
    }
  }
  for (const std::string& code : order) Add(c, std::move(first.at(code)));
}

void CallExecutor::PlanCall(const Call& c) {
  const PlanSnapshot& snap = t_.plans[c.plan];
  if (snap.dialect) {  // aiter's buffers and checker do not apply
    ReportDialectFindings(c);
    return;
  }
  MarkPlanWrites(snap);
  ReportPlanOverflow(c, snap);
  ReportPlannerInputReads(c, snap.plan);
  ReportInconsistentBatch(c, snap);
  ReportPlanCheck(c, snap);
}

// ---------------------------------------------------------------------------------------------
// Kernel calls
// ---------------------------------------------------------------------------------------------

void CallExecutor::AllocateTensors(const Call& c) {
  as_.BeginCall();
  for (const ExtraAllocation& x : s_.allocator.live_before_call) {
    TensorShape sh;
    sh.rows = x.bytes;
    sh.row_bytes = 1;
    sh.dtype = "bytes";
    as_.AllocateTransient(x.name, sh);
    as_.FindMutable(x.name)->written.Add(0, x.bytes);
  }
  for (const TensorArg& a : c.args) {
    if (!a.transient) continue;
    TensorShape sh;
    sh.rows = a.rows;
    sh.row_bytes = a.row_bytes;
    if (a.alloc_bytes >= 0) {  // a view whose rows do not match the allocation's
      sh.rows = a.alloc_bytes;
      sh.row_bytes = 1;
    }
    sh.heads = a.heads;
    sh.cols = a.cols;
    sh.elem_bytes = a.elem_bytes;
    sh.dtype = a.dtype;
    as_.AllocateTransient(a.buffer, sh);
  }
  // q is the previous op's output: written in full before the call.
  if (Allocation* q = as_.FindMutable("q")) q->written.Add(0, q->bytes);
}

void CallExecutor::ReportGuardRefusal(const Call& c) {
  Add(c, MakeGuardRefused(c.q_rows, c.plan_rows));
}

// Output rows that neither kernel wrote: of real tokens (class B), and of padding when the
// engine's next layer reads them (EngineProfile::o_padding consumed: class I). Padding rows the
// engine drops are counted only.
void CallExecutor::ReportUnwrittenOutput(const Call& c) {
  const Allocation* oa = as_.Find("o");
  const TensorArg* o = Tensor(named_->o);
  if (!oa || !o) return;
  const PlanSnapshot& snap = t_.plans[c.plan];
  const int32_t fold = c.view_fold;
  const int64_t real_rows =
      int64_t{std::min(c.q_rows, snap.real_requests * (c.max_seqlen_q > 1 ? c.max_seqlen_q : 1))} *
      fold;
  // Every row written (the common step): no row to look at one by one.
  if (o->rows > 0 && oa->written.Covers(0, o->rows * o->row_bytes)) return;
  int64_t first = -1, last = -1, pad_first = -1, pad_last = -1;
  const auto unwritten = [&](int64_t r) {  // rows in increasing order, each once
    int64_t& f = r < real_rows ? first : pad_first;
    (r < real_rows ? last : pad_last) = r;
    if (f < 0) f = r;
    if (r >= real_rows) ++out_.unwritten_pad_rows;
  };
  if (o->row_bytes > 0) {
    oa->written.ForEachRowNotCovered(o->rows, o->row_bytes, unwritten);
  } else {  // (rows of no bytes: each covered, looked at one by one as ever)
    for (int64_t r = 0; r < o->rows; ++r)
      if (!oa->written.Covers(r * o->row_bytes, (r + 1) * o->row_bytes)) unwritten(r);
  }
  if (first >= 0) Add(c, MakeUnwrittenOutput({"o", o->rows, o->row_bytes, first, last}, false));
  if (pad_first >= 0 && s_.engine.o_padding == EngineProfile::Padding::kConsumed)
    Add(c, MakeUnwrittenOutput({"o", o->rows, o->row_bytes, pad_first, pad_last}, true));
}

// A dense plan built with uni_seqlen_qo > 0 tiles request b at rows [b x uni, (b + 1) x uni)
// whatever qo_indptr says (aiter-mla-metadata.md §4.3); a ragged qo_indptr (batch.q_lens) puts
// some real request's q rows elsewhere: the kernel then reads and writes other requests' rows,
// silently (class H: a shape the uniform path does not support, dispatched without an error).
void CallExecutor::ReportRaggedUniPlan(const Call& c, const PlanSnapshot& snap) {
  const ref::PlanRequest& r = snap.request;
  const int32_t uni = r.uni_seqlen_qo;
  if (r.topk >= 0 || uni <= 0) return;
  // The step's real requests (a plan built at capture counts the capture batch's as real).
  const int32_t real = std::min({snap.real_requests, t_.shape.B,
                                 static_cast<int32_t>(r.qo_indptr.size()) - 1});
  std::vector<int32_t> differ;
  for (int32_t b = 0; b < real; ++b)
    if (r.qo_indptr[b] != b * uni || r.qo_indptr[b + 1] - r.qo_indptr[b] != uni)
      differ.push_back(b);
  if (differ.empty()) return;
  const int32_t b = differ.front();
  const std::string u = std::to_string(uni);
  Violation v = MakeDialectPlanInvalid(
      BugClass::kH, "uni_seqlen_qo_ragged", {"qo_indptr", int64_t{real} + 1, 4, b, differ.back()},
      -1,
      "the plan tiles uni_seqlen_qo = " + u + " q rows per request at b x " + u +
          "; qo_indptr gives request " + std::to_string(b) + " rows [" +
          std::to_string(r.qo_indptr[b]) + ", " + std::to_string(r.qo_indptr[b + 1]) + ") (" +
          std::to_string(differ.size()) + " of " + std::to_string(real) +
          " real requests differ)");
  v.work_items = std::move(differ);
  Add(c, std::move(v));
}

void CallExecutor::KernelCall(const Call& c) {
  if (c.kind == CallKind::kDecode) {
    AllocateTensors(c);
    if (c.plan >= 0 && !t_.plans[c.plan].dialect) ReportRaggedUniPlan(c, t_.plans[c.plan]);
    skip_reduce_ = false;
    if (c.guard_refused) {
      ReportGuardRefusal(c);
      skip_reduce_ = true;
      return;
    }
  }
  if (c.kind == CallKind::kReduce && skip_reduce_) return;
  MLASIM_ASSERT(c.contract != nullptr, "a kernel call without a contract: " + c.name);
  Bind(c);
  bool defined = true;
  const int64_t grid = c.launch_grid >= 0 ? c.launch_grid : Eval(contract_->grid, &defined);
  vars_[kVarGrid] = defined ? grid : 0;
  if (c.launch_grid >= 0) vars_[kVarCapturedGrid] = c.launch_grid;
  if (c.kind == CallKind::kIndexFill && c.fill_content) {
    for (const TensorArg& a : c.args)
      if (a.role == "indices") contents_[a.buffer].push_back(c.fill_content);
  }
  EvalHoisted();
  call_trips_left_ = max_call_trips_;
  Exec(contract_->program);
  FlushInvalid(c);
  Flush(c);
  ReportDialectFindings(c);
  if (c.kind == CallKind::kReduce) ReportUnwrittenOutput(c);
}

// ---------------------------------------------------------------------------------------------
// The contract interpreter
// ---------------------------------------------------------------------------------------------

void CallExecutor::BindRole(const TensorArg& a) {
  // A kind's role names are distinct (CallRoles.EveryKindNamesDistinctRolesWithinTheRoleArrays):
  // the first match is the role. Names of one length differ in their first character ("q" / "o",
  // "attn_lse" / "kv_cache"): tested before the bytes, no memcmp call but the match's.
  const std::vector<std::string>& names = *role_names_;
  const size_t n = a.role.size();
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& name = names[i];
    if (name.size() != n || (n > 0 && name[0] != a.role[0]) || name != a.role) continue;
    roles_[i] = &a;
    role_allocs_[i] = as_.FindMutable(a.buffer);
    return;
  }
}

// Binds the call's tensors, loadable buffers and launch variables.
void CallExecutor::Bind(const Call& c) {
  call_ = &c;
  role_names_ = &CallRoles(c.kind);
  named_ = &NamedRolesOf(c.kind);
  contract_ = c.contract.get();
  who_ = -1;
  for (int i = 0; i < kMaxRoles; ++i) {
    roles_[i] = nullptr;
    role_allocs_[i] = nullptr;
    role_contents_[i] = nullptr;
    role_contents_found_[i] = false;
  }
  for (const TensorArg& a : c.args) BindRole(a);
  for (LoadSource& l : loads_) l = LoadSource();
  vars_.assign(contract_->num_slots, 0);
  defined_.assign(contract_->num_slots, 1);
  undefined_ = 0;
  auto plan_load = [&](LoadSlot slot, const std::string& name, const ref::Int32Buffer& b) {
    loads_[slot] = {b.data.data(), b.cells.data(), b.size(), b.size(), b.row_width, &name};
  };
  // Names of the buffers whose contents come from vectors (static: LoadSource keeps pointers).
  static const std::string kQoIndptr = "qo_indptr", kKvIndptr = "kv_indptr",
                           kLastPage = "kv_last_page_lens";
  auto vec_load = [&](LoadSlot slot, const std::string& name, const std::vector<int32_t>& v) {
    loads_[slot] = {
        v.data(), nullptr, static_cast<int64_t>(v.size()), static_cast<int64_t>(v.size()),
        1,        &name};
  };
  if (c.plan >= 0) {
    const PlanSnapshot& snap = t_.plans[c.plan];
    const ref::Plan& p = snap.plan;
    const std::string& pre = snap.buffer_prefix;
    const std::pair<LoadSlot, std::pair<const char*, const ref::Int32Buffer*>> bufs[] = {
        {kLoadWorkIndptr, {"work_indptr", &p.work_indptr}},
        {kLoadWorkInfo, {"work_info", &p.work_info}},
        {kLoadReduceIndptr, {"reduce_indptr", &p.reduce_indptr}},
        {kLoadReduceFinalMap, {"reduce_final_map", &p.reduce_final_map}},
        {kLoadReducePartialMap, {"reduce_partial_map", &p.reduce_partial_map}}};
    std::array<TensorArg, 5>& pt = plan_tensors_.args[c.plan];
    const bool built = plan_tensors_.built[c.plan];
    plan_tensors_.built[c.plan] = 1;
    for (size_t i = 0; i < 5; ++i) {
      const auto& [slot, rb] = bufs[i];
      if (!built) {  // (its strings assigned: the memory of an earlier step's kept)
        pt[i].role = rb.first;
        pt[i].buffer.assign(pre).append(rb.first);
        pt[i].rows = rb.second->size() / rb.second->row_width;
        pt[i].row_bytes = int64_t{rb.second->row_width} * 4;
        pt[i].dtype = "int32";
      }
      BindRole(pt[i]);
      plan_load(slot, pt[i].buffer, *rb.second);
    }
    KernelQoIndptr(snap.request, &kernel_qo_indptr_);  // q rows as the kernel addresses them
    vec_load(kLoadQoIndptr, kQoIndptr, kernel_qo_indptr_);
    vec_load(kLoadKvIndptr, kKvIndptr, snap.request.kv_indptr);
    vec_load(kLoadKvLastPageLens, kLastPage, snap.request.kv_last_page_lens);
    vars_[kVarClusters] = p.derived.num_clusters;
    vars_[kVarWorks] = p.derived.num_works;
    vars_[kVarFold] = std::max(p.derived.fold_ratio, 1);
    vars_[kVarCapturedGrid] = c.captured_grid > 0 ? c.captured_grid : p.derived.num_clusters;
    vars_[kVarWorkIndptrRows] = p.work_indptr.size();
    vars_[kVarWorkInfoRows] = p.work_info.size() / 8;
    vars_[kVarReduceIndptrRows] = p.reduce_indptr.size();
    vars_[kVarReduceFinalMapRows] = p.reduce_final_map.size() / 2;
    vars_[kVarReducePartialMapRows] = p.reduce_partial_map.size();
    vars_[kVarBatch] = std::max<int64_t>(0, int64_t(snap.request.kv_indptr.size()) - 1);
  }
  if (c.kind == CallKind::kIndexFill) {
    vec_load(kLoadIndptr, c.fill_indptr_buffer, c.fill_indptr);
    vars_[kVarTokens] = c.fill_tokens;
  }
  auto rows = [&](int8_t role) -> int64_t {
    const TensorArg* a = Tensor(role);
    return a ? a->rows : 0;
  };
  const NamedRoles& n = *named_;
  const TensorArg* q = Tensor(n.q);
  vars_[kVarHeads] = q ? q->heads : 0;
  vars_[kVarMaxSeqlenQ] = c.max_seqlen_q;
  vars_[kVarPageSize] = c.page_size;
  vars_[kVarQRows] = rows(n.q);
  vars_[kVarORows] = rows(n.o);
  vars_[kVarPartialRows] = rows(n.logits);
  vars_[kVarIndexRows] = c.kind == CallKind::kIndexFill ? rows(n.indices) : rows(n.kv_indices);
  vars_[kVarKvCacheRows] = rows(n.kv_cache);
}

// Flattened: the interpreter's fast shapes and the loads inline into one function per call site
// (the stack machine, Expr::EvalStack, stays out of line).
[[gnu::flatten]] int64_t CallExecutor::EvalShapes(const Expr& e, bool* defined) {
  return e.EvalWith(
      vars_.data(), defined_.data(),
      [this](int32_t slot, int64_t element) { return Load(slot, element); }, defined);
}

LoadResult CallExecutor::Load(int32_t slot, int64_t element) {
  const LoadSource& l = loads_[slot];
  if (Loadable(l, element)) return {l.data[element], true};
  return BadLoad(l, element);
}

// A load of an element no call wrote, or outside the buffer: recorded as that read.
LoadResult CallExecutor::BadLoad(const LoadSource& l, int64_t element) {
  if (!l.data && l.alloc == 0) return {};  // a buffer this call does not pass
  const int64_t row = FloorDiv(element, l.width);
  TensorArg a;
  a.buffer = *l.buffer;
  a.rows = l.alloc / l.width;
  a.row_bytes = int64_t{l.width} * 4;
  if (element < 0 || element >= l.alloc) {
    Touch(a, false, row, row + 1, who_);  // reported as a read outside the buffer
    return {};
  }
  if (element >= l.size || (l.cells && l.cells[element] == Cell::kUnwritten)) {
    Aggregate& g = agg_[{*l.buffer, static_cast<int>(ViolationKind::kUninitializedRead) * 2}];
    g.kind = ViolationKind::kUninitializedRead;
    g.buffer = *l.buffer;
    g.access = Access::kRead;
    g.rows = a.rows;
    g.row_bytes = a.row_bytes;
    g.first = std::min(g.first, row);
    g.last = std::max(g.last, row);
    if (g.works.empty() || g.works.back() != who_) g.works.push_back(who_);
  }
  return {};
}

void CallExecutor::Exec(const std::vector<Statement>& body) {
  const size_t n = body.size();
  for (size_t i = 0; i < n; ++i) {
    const Statement& st = body[i];
    if (!st.when.empty()) {
      if (st.when.is_constant()) {
        if (st.when.constant_value() == 0) continue;
      } else {
        bool defined = true;
        const int64_t w = Eval(st.when, &defined);
        if (!defined || w == 0) continue;
      }
    }
    switch (st.kind) {
      case Statement::Kind::kLet: {
        if (!st.let_row.slot_field.empty()) {
          ExecLetRow(st.let_row);
          i += st.let_row.slot_field.size() - 1;  // the run's other lets
          break;
        }
        bool defined = true;
        const int64_t v = Eval(st.value, &defined);
        SetVar(st.slot, v, defined);
        break;
      }
      case Statement::Kind::kIf: {
        bool defined = true;
        const int64_t cond = Eval(st.value, &defined);
        if (defined && cond != 0) Exec(st.body);
        break;
      }
      case Statement::Kind::kRead:
      case Statement::Kind::kWrite: ExecAccess(st); break;
      case Statement::Kind::kGather: ExecGather(st); break;
      case Statement::Kind::kLoop: ExecLoop(st); break;
    }
  }
}

// The lets of a LetRow, loaded in their order (each load of a bad element is recorded as it
// would be one let at a time).
void CallExecutor::ExecLetRow(const LetRow& r) {
  const bool index_defined = defined_[r.index_slot] != 0;
  const int64_t base = vars_[r.index_slot] * r.width;
  const LoadSource& src = loads_[r.buffer];
  if (index_defined && base >= 0 && base <= src.size - r.width) {
    // The whole row is inside the buffer: each field is loadable when its cell was written.
    const auto* fields = r.slot_field.data();
    const size_t n = r.slot_field.size();
    if (r.cell_mask != 0 && src.cells) {
      // A work_info row: every field's cell written (no zero byte under the mask) loads them all.
      if (!ref::AnyUnwritten8(ref::LoadCells8(src.cells + base) | ~r.cell_mask)) {
        for (size_t k = 0; k < n; ++k)
          SetVar(fields[k].first, src.data[base + fields[k].second], true);
        return;
      }
    }
    size_t k = 0;
    for (; k < n; ++k) {
      const int64_t e = base + fields[k].second;
      if (e >= src.size || (src.cells && src.cells[e] == Cell::kUnwritten)) break;
      SetVar(fields[k].first, src.data[e], true);
    }
    if (k == n) return;
    for (; k < n; ++k) {  // from the first unwritten one on, one load at a time
      const LoadResult l = Load(r.buffer, base + fields[k].second);
      SetVar(fields[k].first, l.defined ? l.value : 0, l.defined);
    }
    return;
  }
  for (const auto& [slot, field] : r.slot_field) {
    const LoadResult l = index_defined ? Load(r.buffer, base + field) : LoadResult{};
    SetVar(slot, l.defined ? l.value : 0, l.defined);
  }
}

void CallExecutor::ExecAccess(const Statement& st) {
  if (!roles_[st.role]) return;  // a buffer this call does not pass (lse without return_lse, ...)
  bool d1 = true, d2 = true;
  const int64_t b = Eval(st.begin, &d1);
  const int64_t e = Eval(st.end, &d2);
  if (!d1 || !d2) return;
  TouchRows(st.role, st.kind == Statement::Kind::kWrite, st.unit, b, e);
}

inline void CallExecutor::TouchRows(int32_t role, bool write, AccessUnit unit, int64_t b,
                                    int64_t e) {
  const TensorArg* a = roles_[role];
  // To the tensor's rows: a partly touched row counts as touched.
  int64_t per_row = 1;
  switch (unit) {
    case AccessUnit::kRows: break;
    case AccessUnit::kHeadRows: per_row = std::max<int64_t>(a->heads, 1); break;
    case AccessUnit::kElements:
      per_row = std::max<int64_t>(a->row_bytes / std::max(a->elem_bytes, 1), 1);
      break;
    case AccessUnit::kBytes: per_row = std::max<int64_t>(a->row_bytes, 1); break;
  }
  if (per_row > 1) {
    b = FloorDiv(b, per_row);
    e = FloorDiv(e + per_row - 1, per_row);
  }
  TouchIn(role_allocs_[role], *a, write, b, e, who_);
}

void CallExecutor::ExecGather(const Statement& st) {
  bool d1 = true, d2 = true, d3 = true;
  const int64_t p0 = Eval(st.begin, &d1);
  const int64_t p1 = Eval(st.end, &d2);
  const int64_t page = Eval(st.page_size, &d3);
  if (!d1 || !d2 || !d3) return;
  GatherAt(st.role, st.index_role, p0, p1, page);
}

inline void CallExecutor::GatherAt(int32_t role, int32_t index_role, int64_t p0, int64_t p1,
                            int64_t page) {
  if (p1 <= p0 || page <= 0) return;
  const TensorArg* index = roles_[index_role];
  if (!index) return;
  // (Pages of one token, the common gather: no division.)
  const int64_t e0 = page == 1 ? p0 : FloorDiv(p0, page);
  const int64_t e1 = page == 1 ? p1 : FloorDiv(p1 - 1, page) + 1;
  TouchIn(role_allocs_[index_role], *index, false, e0, e1, who_);
  if (roles_[role]) GatherRows(role, index_role, *index, e0, e1, p0, p1, page);
}

const std::vector<std::shared_ptr<const IndexContent>>* CallExecutor::ContentsOf(
    int32_t index_role, const TensorArg& index) {
  if (index_role < 0 || index_role >= kMaxRoles || roles_[index_role] != &index) {
    const auto it = contents_.find(index.buffer);
    return it == contents_.end() ? nullptr : &it->second;
  }
  if (!role_contents_found_[index_role]) {
    const auto it = contents_.find(index.buffer);
    role_contents_[index_role] = it == contents_.end() ? nullptr : &it->second;
    role_contents_found_[index_role] = true;
  }
  return role_contents_[index_role];
}

// Index elements [e0, e1) hold the pages of token positions [p0, p1): the KV rows they name are
// read. Runs of plain slots become one range; explicit values are checked one by one.
void CallExecutor::GatherRows(int32_t role, int32_t index_role, const TensorArg& index, int64_t e0,
                              int64_t e1, int64_t p0, int64_t p1, int64_t page) {
  const auto* fills = ContentsOf(index_role, index);
  if (!fills) return;  // never filled: the index read reports the stale read
  const TensorArg& kv = *roles_[role];
  Allocation* kv_alloc = role_allocs_[role];
  for (int64_t e = e0; e < e1;) {
    // The newest fill that wrote element e decides its value.
    int64_t next = e1;
    bool done = false;
    for (auto c = fills->rbegin(); c != fills->rend() && !done; ++c) {
      const IndexContent& ct = **c;
      const auto v =
          std::lower_bound(ct.values.begin(), ct.values.end(), std::make_pair(e, INT64_MIN));
      if (v != ct.values.end() && v->first == e) {
        GatherValue(e, v->second, e == e0 ? p0 % page : 0, page);
        next = e + 1;
        done = true;
        break;
      }
      const IndexSegment* held = SegmentHolding(ct, e);
      if (held) {
        const IndexSegment& sg = *held;
        int64_t stop = std::min(sg.end, e1);
        if (v != ct.values.end()) stop = std::min(stop, v->first);
        const int64_t first_pos = std::max(p0, e * page), last_pos = std::min(p1, stop * page);
        const int64_t r0 = (sg.base + (e - sg.begin)) * page + (first_pos - e * page);
        TouchIn(kv_alloc, kv, false, r0, r0 + (last_pos - first_pos), who_);
        next = stop;
        done = true;
        break;
      }
    }
    e = done ? next : e + 1;  // an element no fill wrote: its read is reported as stale
  }
}

// One explicit index value: in range, the row it names is read; out of range (-1, past the
// cache, INT_MAX), what happens is the contract's invalid_index.
void CallExecutor::GatherValue(int64_t element, int64_t value, int64_t row_in_page, int64_t page) {
  const TensorArg& kv = *Tensor(named_->kv_cache);
  Allocation* alloc = as_.FindMutable(kv.buffer);
  const int64_t pages = kv.rows / page;
  if (value >= 0 && value < pages) {
    TouchIn(alloc, kv, false, value * page + row_in_page, value * page + row_in_page + 1, who_);
    return;
  }
  switch (contract_->semantics.invalid_index) {
    case InvalidIndex::kMinusOneMasked:
      if (value == -1) return;
      [[fallthrough]];  // any other value is dereferenced as is
    case InvalidIndex::kFault:
      TouchIn(alloc, kv, false, value * page + row_in_page, value * page + row_in_page + 1, who_);
      return;
    case InvalidIndex::kMasked: return;
    case InvalidIndex::kClampToZero:
      TouchIn(alloc, kv, false, row_in_page, row_in_page + 1, who_);
      break;
    case InvalidIndex::kWrap: {
      if (pages < 1) {  // an empty cache (a captured KV cache of 0 rows): no row to wrap onto
        TouchIn(alloc, kv, false, value * page + row_in_page, value * page + row_in_page + 1, who_);
        return;
      }
      const int64_t w = ((value % pages) + pages) % pages;
      TouchIn(alloc, kv, false, w * page + row_in_page, w * page + row_in_page + 1, who_);
      break;
    }
  }
  pending_.push_back({element, value, who_});
}

// Invalid indices the kernel clamped or wrapped: no fault, but a KV row of another token.
void CallExecutor::FlushInvalid(const Call& c) {
  if (pending_.empty()) return;
  const TensorArg* index = Tensor(named_->kv_indices);
  int64_t first = INT64_MAX, last = -1;
  std::vector<int32_t> works;
  for (const InvalidUse& u : pending_) {
    first = std::min(first, u.element);
    last = std::max(last, u.element);
    if (u.who >= 0 && (works.empty() || works.back() != u.who)) works.push_back(u.who);
  }
  const bool clamp = contract_->semantics.invalid_index == InvalidIndex::kClampToZero;
  Add(c, MakeInvalidIndex(
             {index ? index->buffer : "kv_indices", index ? index->rows : 0, 4, first, last},
             std::move(works), clamp, static_cast<int64_t>(pending_.size()), pending_.front().value,
             pending_.front().element));
  pending_.clear();
}

void CallExecutor::ReportHang(const Statement& st, int64_t trips, int64_t bound) {
  ReportHang(st, trips, bound, st.bound_what, st.exceeded, false);
}

void CallExecutor::ReportHang(const Statement& st, int64_t trips, int64_t bound,
                              const std::string& what, const std::string& why, bool beyond_limits) {
  bool& reported = beyond_limits ? limit_hang_reported_ : hang_reported_;
  if (reported) return;
  reported = true;
  const TensorArg* a = st.hang_role >= 0 ? roles_[st.hang_role] : nullptr;
  bool defined = true;
  const int64_t row = st.hang_row.empty() ? 0 : Eval(st.hang_row, &defined);
  Violation v = MakeUnboundedLoop({a ? a->buffer : st.hang_buffer, a ? a->rows : 0, 0, row, row},
                                  who_, trips, bound, what, why);
  v.beyond_limits = beyond_limits;
  Add(*call_, std::move(v));
}

// A loop that would take the call past its trips in all (nested loops each within loop_trips).
void CallExecutor::ReportCallTrips(const Statement& st, int64_t trips) {
  const int64_t left = call_trips_left_;
  call_trips_left_ = 0;  // the call stops here: no later loop of it runs either
  if (limit_hang_reported_) return;
  ReportHang(st, trips, left, "iterations",
             "with the iterations before it, the call's loops would pass call_trips (" +
                 std::to_string(max_call_trips_) + ": nested loops multiply); reported as a hang",
             true);
}

void CallExecutor::ExecLoop(const Statement& st) {
  bool d1 = true, d2 = true;
  const int64_t from = Eval(st.begin, &d1);
  const int64_t to = Eval(st.end, &d2);
  if (!d1 || !d2 || to <= from) return;
  auto bound = [&](bool* defined) { return Eval(st.bound, defined); };
  auto stmt = [&]() -> const Statement& { return st; };
  const CsrWalk* csr = st.csr.loads > 0 ? &st.csr : nullptr;
  if (st.flat && opt_.flat) {
    const FlatBody& f = *st.flat;
    const int32_t n = static_cast<int32_t>(f.records.size());
    // A body that is one loop with no `when` (the decode's workgroup: its work-item loop) runs
    // that loop directly while every slot is defined: FlatStep<false> would do just that.
    const FlatRecord* only_loop = n > 0 && f.records[0].kind == FlatRecord::Kind::kLoop &&
                                          f.records[0].when < 0 && !f.records[0].empty_body &&
                                          f.records[0].body_end == n
                                      ? &f.records[0]
                                      : nullptr;
    LoopOver(from, to, !st.bound.empty(), bound, stmt, st.body.empty(), csr, st.slot,
             st.attribute, [&] {
               ++out_.flat_iterations;
               if (only_loop && undefined_ == 0)
                 FlatLoop<false>(f, st.body, *only_loop, 0);
               else
                 RunFlat(f, st.body, 0, n);
             });
    return;
  }
  LoopOver(from, to, !st.bound.empty(), bound, stmt, st.body.empty(), csr, st.slot, st.attribute,
           [&] { Exec(st.body); });
}

template <class Bound, class Stmt, class Body>
void CallExecutor::LoopOver(int64_t from, int64_t to, bool has_bound, Bound&& bound, Stmt&& stmt,
                            bool empty_body, const CsrWalk* csr, int32_t slot,
                            LoopAttribution attribute, Body&& body) {
  // to - from in unsigned arithmetic: exact for any to > from (a contract's bounds are any int64,
  // e.g. from = -2^63 + 1, where the signed difference overflows, read negative and the loop
  // below would run ~2^63 times); saturated at INT64_MAX for the report.
  const uint64_t span = static_cast<uint64_t>(to) - static_cast<uint64_t>(from);
  const int64_t trips = span > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX
                                                                : static_cast<int64_t>(span);
  if (has_bound) {
    bool db = true;
    const int64_t b = bound(&db);
    if (db && trips > b) return ReportHang(stmt(), trips, b);
  }
  if (empty_body) return;
  // Every loop is bounded: a walk longer than any buffer the simulator models is a hang.
  const int64_t max_trips = max_loop_trips_;
  if (trips > max_trips)
    return ReportHang(stmt(), trips, max_trips, "iterations",
                      "above loop_trips, the longest loop mlasim walks; reported as a hang", true);
  if (trips > call_trips_left_) return ReportCallTrips(stmt(), trips);
  call_trips_left_ -= trips;
  const int32_t saved_who = who_;
  const bool walk = csr && opt_.csr_walks;
  const bool attributed =
      attribute == LoopAttribution::kWorkItem || attribute == LoopAttribution::kTile;
  for (int64_t i = from; i < to; ++i) {
    if (walk) {
      const int64_t busy = CsrNextBusy(*csr, i, to);
      out_.csr_skipped += busy - i;
      i = busy;
      if (i >= to) break;
    }
    SetVar(slot, i, true);
    if (attributed) who_ = static_cast<int32_t>(i);
    body();
  }
  who_ = saved_who;
}

// ---------------------------------------------------------------------------------------------
// Compiled bodies (sim/flat.h): the interpreter's semantics, record by record. A record runs
// unchecked (no definedness work at all) while every variable slot is defined (undefined_ == 0,
// the common case), checked otherwise; a load can still be undefined either way.
// ---------------------------------------------------------------------------------------------

template <bool kChecked>
int64_t CallExecutor::LinValue(const FlatLin& l, bool* defined) const {
  const int64_t* v = vars_.data();
  const auto u = [](int64_t x) { return static_cast<uint64_t>(x); };
  if (kChecked) {
    const uint8_t* d = defined_.data();
    if ((d[l.d[0]] & d[l.d[1]] & d[l.d[2]] & d[l.d[3]]) == 0) {
      *defined = false;
      return 0;
    }
  }
  *defined = true;
  if (l.form == FlatLin::Form::kVar) return static_cast<int64_t>(u(l.c) + u(v[l.x[0]]));
  if (l.form == FlatLin::Form::kConst) return l.c;
  if (l.form == FlatLin::Form::kOne)
    return static_cast<int64_t>(u(l.c) + u(l.k[0]) * u(v[l.x[0]]) * u(v[l.y[0]]));
  return static_cast<int64_t>(u(l.c) + u(l.k[0]) * u(v[l.x[0]]) * u(v[l.y[0]]) +
                              u(l.k[1]) * u(v[l.x[1]]) * u(v[l.y[1]]) +
                              u(l.k[2]) * u(v[l.x[2]]) * u(v[l.y[2]]));
}

template <bool kChecked>
bool CallExecutor::CmpHolds(const FlatCmp& c, bool* defined) const {
  if (!kChecked && c.slot >= 0) {  // a variable against a constant, as data (FlatCmp::outcomes)
    *defined = true;
    const int64_t x = static_cast<int64_t>(static_cast<uint64_t>(c.xc) +
                                           static_cast<uint64_t>(vars_[c.slot]));
    return (c.outcomes >> ((x > c.k) - (x < c.k) + 1)) & 1;
  }
  bool dl = true, dr = true;
  const int64_t l = LinValue<kChecked>(c.l, &dl);
  const int64_t r = c.r.form == FlatLin::Form::kConst ? c.r.c : LinValue<kChecked>(c.r, &dr);
  *defined = dl && dr;
  return (c.eq ? l == r : l < r) != c.neg;
}

// && and ||: the right comparison matters only when the left one does not decide (it loads
// nothing, so evaluating it anyway changes nothing).
template <bool kChecked>
bool CallExecutor::CondHolds(const FlatCond& c, bool* defined) const {
  if (!kChecked) {  // every slot defined: so is every comparison; the right one as && / || ask
    *defined = true;
    bool d = true;
    const bool a = CmpHolds<false>(c.a, &d);
    if (c.join == FlatCond::Join::kOne) return a;
    return c.join == FlatCond::Join::kAnd ? a && CmpHolds<false>(c.b, &d)
                                          : a || CmpHolds<false>(c.b, &d);
  }
  bool da = true;
  const bool a = CmpHolds<kChecked>(c.a, &da);
  if (c.join == FlatCond::Join::kOne) {
    *defined = da;
    return a;
  }
  bool db = true;
  const bool b = CmpHolds<kChecked>(c.b, &db);
  if (c.join == FlatCond::Join::kAnd) {
    *defined = da && (!a || db);
    return a && b;
  }
  *defined = da && (a || db);
  return a || b;
}

template <bool kChecked>
inline int64_t CallExecutor::FlatValueOf(const FlatBody& f, const FlatValue& v, bool* defined) {
  switch (v.kind) {
    case FlatValue::Kind::kLin: return LinValue<kChecked>(v.lin, defined);
    case FlatValue::Kind::kPost: {
      const int64_t a = LinValue<kChecked>(v.lin, defined);
      if (!*defined) return 0;
      const int64_t k = v.divisor;  // neither 0 nor -1: always defined
      if (a >= 0 && k > 0 && (k & (k - 1)) == 0) {  // (cdiv(kv_len, 16): shifts, no division)
        const int64_t q = a >> __builtin_ctzll(static_cast<uint64_t>(k)), r = a & (k - 1);
        return v.post == Expr::Op::kDiv ? q : v.post == Expr::Op::kMod ? r : q + (r != 0);
      }
      if (v.post == Expr::Op::kDiv) return a / k;
      if (v.post == Expr::Op::kMod) return a % k;
      return a / k + ((a % k != 0) && ((a > 0) == (k > 0)));
    }
    case FlatValue::Kind::kLoad: {
      bool d_other = true, d_index = true;
      const int64_t other = LinValue<kChecked>(v.lin, &d_other);
      const int64_t idx = LinValue<kChecked>(v.index, &d_index);
      if ((v.other_first && !d_other) || !d_index) {  // nothing is loaded
        *defined = false;
        return 0;
      }
      const LoadResult r = Load(v.buffer, idx * v.width + v.field);
      *defined = r.defined && d_other;
      if (!*defined) return 0;
      return static_cast<int64_t>(static_cast<uint64_t>(other) +
                                  static_cast<uint64_t>(v.sign) *
                                      static_cast<uint64_t>(int64_t{r.value}));
    }
    case FlatValue::Kind::kSelect: return FlatSelect<kChecked>(f, v, defined);
  }
  *defined = false;
  return 0;
}

template <bool kChecked>
inline int64_t CallExecutor::FlatValueSelectInline(const FlatBody& f, const FlatValue& v,
                                                   bool* defined) {
  if (v.kind != FlatValue::Kind::kSelect) return FlatValueOf<kChecked>(f, v, defined);
  bool dc = true;
  const bool c = CondHolds<kChecked>(f.conds[v.cond], &dc);
  if (!dc) {
    *defined = false;
    return 0;
  }
  return FlatValueOf<kChecked>(f, f.values[c ? v.then_value : v.else_value], defined);
}

template <bool kChecked>
int64_t CallExecutor::FlatSelect(const FlatBody& f, const FlatValue& v, bool* defined) {
  bool dc = true;
  const bool c = CondHolds<kChecked>(f.conds[v.cond], &dc);
  if (!dc) {
    *defined = false;
    return 0;
  }
  return FlatValueOf<kChecked>(f, f.values[c ? v.then_value : v.else_value], defined);
}

template <bool kChecked>
inline int32_t CallExecutor::FlatStep(const FlatBody& f, const std::vector<Statement>& body, int32_t i) {
  const FlatRecord& r = f.records[i];
  if (r.when >= 0 && !r.same_as_prev) {
    bool defined = true;
    const bool holds = CondHolds<kChecked>(f.conds[r.when], &defined);
    if (!(defined && holds)) {
      if (r.feeds_next) access_runs_ = false;
      return r.kind == FlatRecord::Kind::kLoop || r.kind == FlatRecord::Kind::kIf ? r.body_end
                                                                                 : i + 1;
    }
  }
  switch (r.kind) {
    case FlatRecord::Kind::kLetRow: ExecLetRow(f.rows[r.row]); break;
    case FlatRecord::Kind::kLetLin: {
      bool defined = true;
      const int64_t v = LinValue<kChecked>(r.begin, &defined);
      SetVar(r.slot, v, defined);
      break;
    }
    case FlatRecord::Kind::kLetValue: {
      bool defined = true;
      const int64_t v = FlatValueOf<kChecked>(f, f.values[r.v[0]], &defined);
      SetVar(r.slot, v, defined);
      break;
    }
    case FlatRecord::Kind::kAccess: {
      if (r.same_as_prev) {  // the record before evaluated this record's when and rows
        if (access_runs_ && roles_[r.role])
          TouchRows(r.role, r.write, static_cast<AccessUnit>(r.unit), access_b_, access_e_);
        break;
      }
      if (r.feeds_next) {  // rows evaluated for the next record even without this buffer
        bool d1 = true, d2 = true;
        access_b_ = LinValue<kChecked>(r.begin, &d1);
        access_e_ = LinValue<kChecked>(r.end, &d2);
        access_runs_ = d1 && d2;
        if (access_runs_ && roles_[r.role])
          TouchRows(r.role, r.write, static_cast<AccessUnit>(r.unit), access_b_, access_e_);
        break;
      }
      if (!roles_[r.role]) break;  // a buffer this call does not pass
      bool d1 = true, d2 = true;
      const int64_t b = LinValue<kChecked>(r.begin, &d1), e = LinValue<kChecked>(r.end, &d2);
      if (d1 && d2) TouchRows(r.role, r.write, static_cast<AccessUnit>(r.unit), b, e);
      break;
    }
    case FlatRecord::Kind::kAccessValue: {
      if (!roles_[r.role]) break;
      bool d1 = true, d2 = true;
      const int64_t b = FlatValueOf<kChecked>(f, f.values[r.v[0]], &d1);
      const int64_t e = FlatValueOf<kChecked>(f, f.values[r.v[1]], &d2);
      if (d1 && d2) TouchRows(r.role, r.write, static_cast<AccessUnit>(r.unit), b, e);
      break;
    }
    case FlatRecord::Kind::kGather: {
      bool d1 = true, d2 = true, d3 = true;
      const int64_t p0 = FlatValueOf<kChecked>(f, f.values[r.v[0]], &d1);
      const int64_t p1 = FlatValueOf<kChecked>(f, f.values[r.v[1]], &d2);
      const int64_t page = FlatValueOf<kChecked>(f, f.values[r.v[2]], &d3);
      if (d1 && d2 && d3) GatherAt(r.role, r.index_role, p0, p1, page);
      break;
    }
    case FlatRecord::Kind::kLoop:
      if (r.empty_body) {  // only its hang check can do anything: inline
        bool d1 = true, d2 = true;
        const int64_t from = FlatValueOf<kChecked>(f, f.values[r.v[0]], &d1);
        const int64_t to = FlatValueOf<kChecked>(f, f.values[r.v[1]], &d2);
        if (!d1 || !d2 || to <= from || r.v[2] < 0) return r.body_end;
        const uint64_t span = static_cast<uint64_t>(to) - static_cast<uint64_t>(from);
        const int64_t trips = span > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX
                                                                      : static_cast<int64_t>(span);
        bool db = true;
        const int64_t bound = FlatValueOf<kChecked>(f, f.values[r.v[2]], &db);
        if (db && trips > bound) FlatHang(f, body, r, trips, bound);
        return r.body_end;
      }
      FlatLoop<kChecked>(f, body, r, i);
      return r.body_end;
    case FlatRecord::Kind::kIf: {
      bool defined = true;
      const bool c = CondHolds<kChecked>(f.conds[r.cond], &defined);
      if (!defined || !c) return r.body_end;
      break;  // the body's records follow
    }
  }
  return i + 1;
}

void CallExecutor::RunFlat(const FlatBody& f, const std::vector<Statement>& body, int32_t i,
                           int32_t end) {
  while (i < end) i = undefined_ == 0 ? FlatStep<false>(f, body, i) : FlatStep<true>(f, body, i);
}

template <bool kChecked>
void CallExecutor::FlatLoop(const FlatBody& f, const std::vector<Statement>& body,
                            const FlatRecord& r, int32_t at) {
  bool d1 = true, d2 = true;
  const int64_t from = FlatValueOf<kChecked>(f, f.values[r.v[0]], &d1);
  const int64_t to = FlatValueOf<kChecked>(f, f.values[r.v[1]], &d2);
  if (!d1 || !d2 || to <= from) return;
  // The bound is evaluated after from and to, as the interpreter does; a let of neither can
  // have changed since, so the same check mode applies.
  auto bound = [&](bool* defined) { return FlatValueOf<kChecked>(f, f.values[r.v[2]], defined); };
  auto stmt = [&]() -> const Statement& { return FlatStatement(f, body, r); };
  LoopOver(from, to, r.v[2] >= 0, bound, stmt, r.empty_body, r.csr >= 0 ? &f.csrs[r.csr] : nullptr,
           r.slot, static_cast<LoopAttribution>(r.attribute),
           [&] {
             if (undefined_ == 0 && r.load_then_accesses)
               LoadThenAccesses(f, body, at + 1);
             else if (!r.decode_item || undefined_ != 0 || !DecodeItem(f, body, at + 1))
               RunFlat(f, body, at + 1, r.body_end);
           });
}

void CallExecutor::AccessUnchecked(const FlatBody& f, const FlatRecord& r) {
  bool defined = true;
  if (r.same_as_prev) {
    if (access_runs_ && roles_[r.role])
      TouchRows(r.role, r.write, static_cast<AccessUnit>(r.unit), access_b_, access_e_);
    return;
  }
  if (r.when >= 0 && (!CondHolds<false>(f.conds[r.when], &defined) || !defined)) {
    if (r.feeds_next) access_runs_ = false;
    return;
  }
  if (r.feeds_next) {
    access_b_ = LinValue<false>(r.begin, &defined);
    access_e_ = LinValue<false>(r.end, &defined);
    access_runs_ = true;
    if (roles_[r.role])
      TouchRows(r.role, r.write, static_cast<AccessUnit>(r.unit), access_b_, access_e_);
    return;
  }
  if (!roles_[r.role]) return;
  const int64_t b = LinValue<false>(r.begin, &defined), e = LinValue<false>(r.end, &defined);
  TouchRows(r.role, r.write, static_cast<AccessUnit>(r.unit), b, e);
}

// FlatStep<false> of the three records in their order: the let (FlatValueOf's kLoad with a
// constant other side), then, when it loaded, the two accesses as AccessUnchecked runs them;
// when it did not, its slot is undefined and the records run checked, as they would.
inline void CallExecutor::LoadThenAccesses(const FlatBody& f, const std::vector<Statement>& body,
                                           int32_t a) {
  const FlatRecord* r = &f.records[a];
  const FlatValue& v = f.values[r[0].v[0]];
  bool defined = true;
  const int64_t idx = LinValue<false>(v.index, &defined);
  const LoadResult l = Load(v.buffer, idx * v.width + v.field);
  if (!l.defined) {
    SetVar(r[0].slot, 0, false);
    RunFlat(f, body, a + 1, a + 3);
    return;
  }
  const uint64_t loaded = static_cast<uint64_t>(int64_t{l.value});
  const uint64_t value = static_cast<uint64_t>(v.lin.c) + static_cast<uint64_t>(v.sign) * loaded;
  SetVar(r[0].slot, static_cast<int64_t>(value), true);
  AccessUnchecked(f, r[1]);
  AccessUnchecked(f, r[2]);
}

// The records of the item in their order, as FlatStep<false> runs them, with what their shape
// fixes decided once: the row of lets and the let of batch_idx (a field of the same row) load
// without a finding when the row is inside the buffer and the cells of all their fields are
// written (else nothing is done here, and the records run one by one: the loads that fail are
// recorded in their order); every slot stays defined, so the rest is the unchecked records'.
inline bool CallExecutor::DecodeItem(const FlatBody& f, const std::vector<Statement>& body,
                                     int32_t a) {
  const FlatRecord* r = &f.records[a];
  const LetRow& row = f.rows[r[0].row];
  const FlatValue& batch = f.values[r[6].v[0]];
  int64_t* v = vars_.data();
  const int64_t base = v[row.index_slot] * 8;
  const LoadSource& src = loads_[row.buffer];
  if (!src.cells || base < 0 || base > src.size - 8) return false;
  const uint64_t mask = row.cell_mask | (uint64_t{0xff} << (8 * batch.field));
  if (ref::AnyUnwritten8(ref::LoadCells8(src.cells + base) | ~mask)) return false;
  const FlatItemRow& fixed = f.item_rows[r[-1].item_row];
  if (fixed.n > 0) {
    const int32_t* data = src.data + base;
    const int32_t* s = fixed.slot;
    const int32_t* x = fixed.field;
    switch (fixed.n) {  // lets n - 1 .. 0 of the row (their slots differ: any order)
      case 8: v[s[7]] = data[x[7]]; [[fallthrough]];
      case 7: v[s[6]] = data[x[6]]; [[fallthrough]];
      case 6: v[s[5]] = data[x[5]]; [[fallthrough]];
      case 5: v[s[4]] = data[x[4]]; [[fallthrough]];
      case 4: v[s[3]] = data[x[3]]; [[fallthrough]];
      case 3: v[s[2]] = data[x[2]]; [[fallthrough]];
      case 2: v[s[1]] = data[x[1]]; [[fallthrough]];
      default: v[s[0]] = data[x[0]];
    }
  } else {
    for (const auto& [slot, field] : row.slot_field) v[slot] = src.data[base + field];
  }
  bool defined = true;
  v[r[1].slot] = LinValue<false>(r[1].begin, &defined);
  AccessUnchecked(f, r[2]);
  AccessUnchecked(f, r[3]);
  AccessUnchecked(f, r[4]);
  AccessUnchecked(f, r[5]);
  const int64_t batch_value = src.data[base + batch.field];  // its cell is written (the mask)
  v[r[6].slot] = static_cast<int64_t>(static_cast<uint64_t>(batch.lin.c) +
                                      static_cast<uint64_t>(batch.sign) *
                                          static_cast<uint64_t>(batch_value));
  {
    const FlatRecord& g = r[7];
    bool d1 = true, d2 = true, d3 = true;
    const int64_t p0 = FlatValueOf<false>(f, f.values[g.v[0]], &d1);
    const int64_t p1 = FlatValueSelectInline<false>(f, f.values[g.v[1]], &d2);
    const int64_t page = FlatValueOf<false>(f, f.values[g.v[2]], &d3);
    if (d1 && d2 && d3) GatherAt(g.role, g.index_role, p0, p1, page);
  }
  {
    const FlatRecord& l = r[8];
    bool d1 = true, d2 = true;
    const int64_t from = FlatValueOf<false>(f, f.values[l.v[0]], &d1);
    const int64_t to = FlatValueOf<false>(f, f.values[l.v[1]], &d2);
    if (!d1 || !d2 || to <= from || l.v[2] < 0) return true;
    const uint64_t span = static_cast<uint64_t>(to) - static_cast<uint64_t>(from);
    const int64_t trips = span > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX
                                                                  : static_cast<int64_t>(span);
    bool db = true;
    const int64_t bound = FlatValueOf<false>(f, f.values[l.v[2]], &db);
    if (db && trips > bound) FlatHang(f, body, l, trips, bound);
  }
  return true;
}

const Statement& CallExecutor::FlatStatement(const FlatBody& f, const std::vector<Statement>& body,
                                             const FlatRecord& r) const {
  const std::vector<int32_t>& path = f.paths[r.stmt];
  const Statement* s = &body[path[0]];
  for (size_t k = 1; k < path.size(); ++k) s = &s->body[path[k]];
  return *s;
}

void CallExecutor::FlatHang(const FlatBody& f, const std::vector<Statement>& body,
                            const FlatRecord& r, int64_t trips, int64_t bound) {
  ReportHang(FlatStatement(f, body, r), trips, bound);
}

// The contract's per-call sub-expressions (Contract::hoisted), before its program runs.
void CallExecutor::EvalHoisted() {
  if (contract_->one_slot >= 0) SetVar(contract_->one_slot, 1, true);
  for (const auto& [slot, e] : contract_->hoisted) {
    bool defined = true;
    const int64_t v = Eval(e, &defined);
    SetVar(slot, v, defined);
  }
}

// Whether iteration `v` of a CSR walk would only load its elements (CsrWalk): each of them
// loadable, and the gate <= 0. The element index as Expr computes it.
bool CallExecutor::CsrIdle(const CsrWalk& w, int64_t v) const {
  const LoadSource& l = loads_[w.buffer];
  int64_t gate = w.constant;
  for (int32_t k = 0; k < w.loads; ++k) {
    const int64_t index = static_cast<int64_t>(static_cast<uint64_t>(v) +
                                               static_cast<uint64_t>(w.offset[k]));
    const int64_t e = index * w.width + w.field;
    if (!Loadable(l, e)) return false;
    gate += w.coef[k] * l.data[e];
  }
  return gate <= 0;
}

int64_t CallExecutor::CsrNextBusy(const CsrWalk& w, int64_t v, int64_t to) const {
  const LoadSource& l = loads_[w.buffer];
  // The common walk: elements v + a and v + a + 1 of a plain int32 buffer (work_indptr[c],
  // work_indptr[c + 1]), scanned in one tight loop; the element indices as CsrIdle computes them.
  if (w.loads == 2 && w.width == 1 && w.field == 0 && w.offset[1] == w.offset[0] + 1 && l.cells) {
    const int32_t* data = l.data;
    const Cell* cells = l.cells;
    const int64_t size = l.size, c0 = w.coef[0], c1 = w.coef[1], k = w.constant;
    // Whether iteration u is busy: an element outside the buffer or unwritten, or a gate above 0.
    const auto busy_at = [&](int64_t u) {
      const int64_t e0 = static_cast<int64_t>(static_cast<uint64_t>(u) +
                                              static_cast<uint64_t>(w.offset[0]));
      const int64_t e1 = static_cast<int64_t>(static_cast<uint64_t>(u) +
                                              static_cast<uint64_t>(w.offset[1]));
      return e0 < 0 || e0 >= size || e1 < 0 || e1 >= size || cells[e0] == Cell::kUnwritten ||
             cells[e1] == Cell::kUnwritten || k + c0 * data[e0] + c1 * data[e1] > 0;
    };
    // The iteration asked for first: most often busy (a workgroup with work), which ends the
    // walk here, before the block scans below (which would find the same first busy one).
    if (v < to && busy_at(v)) return v;
    // Four iterations at a time while elements e0 .. e0 + 4 are all inside the buffer: their
    // five cells written (no zero byte) and no gate above 0; else one at a time below.
    const int64_t a = w.offset[0];
    if (a >= 0 && a < size) {
#if defined(__SSE2__)
      // A walk whose gate is k for two equal elements (c0 = -c1) and k <= 0: iterations over
      // equal, written elements are idle, as the loop below would find them (the long constant
      // tail of a capacity-sized indptr). Eight at a time: elements e0 .. e0 + 8 all written
      // and all equal; any other block goes on below.
      if (static_cast<uint64_t>(c0) + static_cast<uint64_t>(c1) == 0 && k <= 0) {
        for (; v + 8 <= to && v >= 0 && v <= size - 9 - a; v += 8) {
          const int64_t e = v + a;
          const bool unwritten =
              ref::AnyUnwritten8(ref::LoadCells8(cells + e)) || cells[e + 8] == Cell::kUnwritten;
          const auto* p = reinterpret_cast<const __m128i*>(data + e);
          const auto* q = reinterpret_cast<const __m128i*>(data + e + 1);
          const __m128i same =
              _mm_and_si128(_mm_cmpeq_epi32(_mm_loadu_si128(p), _mm_loadu_si128(q)),
                            _mm_cmpeq_epi32(_mm_loadu_si128(p + 1), _mm_loadu_si128(q + 1)));
          if (unwritten || _mm_movemask_epi8(same) != 0xffff) break;
        }
      }
#endif
      for (; v + 4 <= to && v >= 0 && v <= size - 5 - a; v += 4) {
        const int64_t e = v + a;
        uint32_t c4 = 0;
        std::memcpy(&c4, cells + e, 4);
        const bool unwritten = ((c4 - 0x01010101u) & ~c4 & 0x80808080u) != 0 ||
                               cells[e + 4] == Cell::kUnwritten;
        const int64_t x0 = data[e], x1 = data[e + 1], x2 = data[e + 2], x3 = data[e + 3],
                      x4 = data[e + 4];
        const bool busy = (k + c0 * x0 + c1 * x1 > 0) | (k + c0 * x1 + c1 * x2 > 0) |
                          (k + c0 * x2 + c1 * x3 > 0) | (k + c0 * x3 + c1 * x4 > 0);
        if (unwritten || busy) break;
      }
    }
    for (; v < to; ++v)
      if (busy_at(v)) return v;
    return v;
  }
  for (; v < to; ++v)
    if (!CsrIdle(w, v)) return v;
  return v;
}

void CallExecutor::CaptureLayout(const Call& c, bool has_violation) {
  if (!opt_.capture_layout) {
    out_.layout_call = c.index;
    return;
  }
  out_.layout = as_.LayoutJson();
  out_.layout["call"] = c.index;
  out_.layout["step"] = c.step;
  out_.layout["call_name"] = c.name;
  out_.layout["has_violation"] = has_violation;
  out_.layout_call = c.index;
}

void CallExecutor::Run(const Call& c) {
  const size_t before = out_.violations.size();
  switch (c.kind) {
    case CallKind::kPlanBuild:
    case CallKind::kPlanUpdate: PlanCall(c); break;
    case CallKind::kIndexFill:
    case CallKind::kDecode:
    case CallKind::kReduce: KernelCall(c); break;
  }
  // The layout to write out: the first kernel call with a violation (else, at the end, the
  // last kernel call's, which the address space still holds).
  const bool kernel = c.kind == CallKind::kDecode || c.kind == CallKind::kReduce;
  if (kernel && out_.violations.size() > before && out_.layout_call < 0) CaptureLayout(c, true);
  if (kernel) last_kernel_call_ = &c;
}

}  // namespace

void AllocatePersistent(const Trace& trace, AddressSpace& as) {
  for (const PersistentBuffer& p : trace.persistent) {
    TensorShape sh;
    sh.rows = p.rows;
    sh.row_bytes = p.row_bytes;
    sh.dtype = p.dtype;
    as.Allocate(p.name, sh);
  }
}

namespace {

// A T lent for one Execute: the thread's spare one (its memory kept from the steps before: a
// campaign executes step after step on each worker), or a new one when the thread has none left
// (a nested Execute). The borrower resets what it reads.
template <class T>
class Lent {
 public:
  template <class... Args>
  explicit Lent(Args&&... make_args) {
    std::vector<std::unique_ptr<T>>& spares = Spares();
    if (spares.empty()) {
      value_ = std::make_unique<T>(std::forward<Args>(make_args)...);
    } else {
      value_ = std::move(spares.back());
      spares.pop_back();
    }
  }
  ~Lent() { Spares().push_back(std::move(value_)); }
  Lent(const Lent&) = delete;
  Lent& operator=(const Lent&) = delete;
  T& operator*() { return *value_; }

 private:
  static std::vector<std::unique_ptr<T>>& Spares() {
    thread_local std::vector<std::unique_ptr<T>> spares;
    return spares;
  }
  std::unique_ptr<T> value_;
};

}  // namespace

ExecutionResult Execute(const Scenario& s, const Trace& trace, const ExecuteOptions& opt) {
  ExecutionResult out;
  Lent<AddressSpace> lent_space(s.allocator);
  AddressSpace& as = *lent_space;
  as.Reset(s.allocator);
  AllocatePersistent(trace, as);
  // Host-prepared inputs are written before any kernel runs.
  // (Names made once: FindMutable takes a std::string, and two of them are too long to build
  // without an allocation.)
  static const std::string kHostInputs[] = {"kv_indptr", "kv_last_page_lens", "sparse_kv_indptr",
                                            "sparse_cu_seqlens_q", "sparse_kv_last_page_lens"};
  static const std::string kKvCache = "kv_cache";
  for (const std::string& host : kHostInputs) {
    if (Allocation* a = as.FindMutable(host)) a->written.Add(0, a->bytes);
  }
  if (Allocation* kv = as.FindMutable(kKvCache))
    for (const auto& [b, e] : trace.kv_written)
      kv->written.Add(b * kv->row_bytes, e * kv->row_bytes);
  Lent<PlanTensors> lent_tensors;
  CallExecutor ex(s, trace, opt, as, out, *lent_tensors);
  for (const Call& c : trace.calls) ex.Run(c);
  ex.Finish();
  return out;
}

}  // namespace mlasim::sim
