// The plan-driven path: aiter's persistent decode stage 1 (every work item of every cluster,
// §11) and stage 2 (mla_reduce_v1, §12) over the planner's (possibly folded) q space, with
// poison tracking. Every value read from the plan is range-checked: a bad value becomes a
// PoisonFinding, never an out-of-bounds access.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>

#include "ref/attention.h"
#include "ref/attention_block.h"
#include "ref/mutant.h"

namespace mlasim::ref {
namespace {

using internal::AttendBlock;
using internal::BlockBuffers;
using internal::BlockParams;

std::string S(int64_t x) {
  return std::to_string(x);
}

using internal::kMaxScoreElements;
constexpr size_t kMaxFindings = 4096;  // further findings are counted, not stored

enum class RowState : uint8_t { kUnwritten = 0, kWritten, kTainted };

// Batch geometry shared by the validation and the executor.
struct Geometry {
  int32_t batch = 0;               // real requests
  int32_t heads = 0;               // H (caller)
  int32_t fold = 1;                // R
  int32_t group_heads = 0;         // H' = H / R: heads per planner row
  int32_t rows_per_unit = 1;       // dense: uni_seqlen_qo; sparse: 1
  int32_t tokens_per_request = 1;  // sparse ori
  int32_t max_q = 1;               // request.max_seqlen_qo
  int64_t q_rows = 0;              // caller q rows (tokens)
  int64_t folded_rows = 0;         // q_rows * R
  int64_t partial_rows = 0;
  bool sparse = false;
  bool sparse_batch_is_request = true;  // 2026-08 (#3310); 2026-03: the virtual index
};

// Planner row -> (token, head group): the re-layout of mla_decode_fwd (§10.3).
struct Unfolded {
  int64_t token;
  int32_t group;
};
Unfolded UnfoldRow(const Geometry& g, int64_t row) {
  const int64_t v = row / g.rows_per_unit, s = row % g.rows_per_unit;
  return {(v / g.fold) * g.rows_per_unit + s, static_cast<int32_t>(v % g.fold)};
}

StatusOr<Geometry> MakeGeometry(const MlaInputs& in, const PlanRequest& req, const Plan& plan) {
  Geometry g;
  g.batch = in.num_requests();
  g.heads = in.num_heads;
  g.sparse = in.topk >= 0;
  g.q_rows = in.q_rows();
  if (req.num_heads_k != 1)
    return InvalidArgumentError("request.num_heads_k", "MLA decode has one KV head");
  if (req.heads_per_head_k != in.num_heads)
    return InvalidArgumentError(
        "request.heads_per_head_k",
        S(req.heads_per_head_k) + " heads but the inputs hold " + S(in.num_heads));
  if (req.page_size != in.page_size)
    return InvalidArgumentError("request.page_size", "differs from the inputs' page_size");
  if (req.topk != in.topk)
    return InvalidArgumentError("request.topk", "differs from the inputs' topk");
  if (req.kv_indptr != in.kv_indptr)
    return InvalidArgumentError("request.kv_indptr", "differs from the inputs' kv_indptr");
  if (!g.sparse && req.kv_last_page_lens != in.kv_last_page_lens)
    return InvalidArgumentError("request.kv_last_page_lens", "differs from the inputs'");
  if (!g.sparse && req.is_causal != in.is_causal)
    return InvalidArgumentError("request.is_causal", "differs from the inputs' is_causal");
  if (req.max_seqlen_qo < 1) return InvalidArgumentError("request.max_seqlen_qo", "must be >= 1");
  const int32_t fold = plan.derived.fold_ratio;
  if (fold < 1 || in.num_heads % fold != 0)
    return InvalidArgumentError("plan.derived.fold_ratio",
                                S(fold) + " does not divide the " + S(in.num_heads) + " heads");
  g.fold = fold;
  g.group_heads = in.num_heads / fold;
  if (plan.derived.planner_heads != g.group_heads)
    return InvalidArgumentError(
        "plan.derived.planner_heads",
        S(plan.derived.planner_heads) + ", expected heads / fold_ratio = " + S(g.group_heads));
  if (g.sparse) {
    g.rows_per_unit = 1;
    g.tokens_per_request = g.batch > 0 ? in.qo_indptr[1] - in.qo_indptr[0] : 1;
    g.sparse_batch_is_request = GetRevisionRules(req.revision).sparse_batch_idx_is_request;
  } else if (req.uni_seqlen_qo < 1) {
    // Non-uniform q lengths (aiter's kUniSeqlenQo = -1 path): the plan names request b's rows
    // [qo_indptr[b], qo_indptr[b + 1]) itself; planner rows are the caller's (no folding).
    if (fold != 1)
      return InvalidArgumentError(
          "plan.derived.fold_ratio",
          "non-uniform q lengths are planned without folding, got " + S(fold));
    if (req.qo_indptr != in.qo_indptr)
      return InvalidArgumentError("request.qo_indptr", "differs from the inputs' qo_indptr");
    g.max_q = req.max_seqlen_qo;
    g.folded_rows = g.q_rows;
    g.partial_rows = plan.reduce_partial_map.size() * int64_t{req.max_seqlen_qo};
    return g;
  } else {
    g.rows_per_unit = req.uni_seqlen_qo;
    g.tokens_per_request = req.uni_seqlen_qo;
  }
  g.max_q = req.max_seqlen_qo;
  for (int32_t b = 0; b <= g.batch; ++b)
    if (in.qo_indptr[b] != int64_t{b} * g.tokens_per_request)
      return InvalidArgumentError("qo_indptr[" + S(b) + "]",
                                  "plans need " + S(g.tokens_per_request) +
                                      " q rows per request (uniform), got " + S(in.qo_indptr[b]));
  g.folded_rows = g.q_rows * fold;
  g.partial_rows = plan.reduce_partial_map.size() * int64_t{req.max_seqlen_qo};
  return g;
}

// A read of one int32 metadata cell.
struct CellRead {
  int32_t value = 0;
  bool ok = false;
  PoisonKind kind = PoisonKind::kUnwrittenRead;
};
CellRead ReadCell(const Int32Buffer& b, int64_t i) {
  if (i < 0 || i >= b.size()) return {Plan::kPoison, false, PoisonKind::kOutOfRangeRead};
  if (b.cells[i] == Cell::kUnwritten) return {b.data[i], false, PoisonKind::kUnwrittenRead};
  if (b.cells[i] == Cell::kUndefined) return {b.data[i], false, PoisonKind::kOutOfRangeRead};
  return {b.data[i], true, PoisonKind::kUnwrittenRead};
}

// The first poison a work item or reduce row read, if any.
struct PoisonSource {
  bool any = false;
  PoisonKind kind = PoisonKind::kUnwrittenRead;
  NumericsBuffer buffer = NumericsBuffer::kO;
  int64_t index = -1;
  const char* via = nullptr;  // the contract semantics that let it through, if any
  bool has_value = false;
  int64_t value = 0;  // the hostile index value read at `index`
  void Note(PoisonKind k, NumericsBuffer b, int64_t i) {
    if (any) return;
    any = true, kind = k, buffer = b, index = i;
  }
  void NoteVia(PoisonKind k, NumericsBuffer b, int64_t i, const char* why, bool with_value,
               int64_t v) {
    if (any) return;
    Note(k, b, i);
    via = why, has_value = with_value, value = v;
  }
};

const char* InvalidIndexVia(InvalidIndexUse u) {
  switch (u) {
    case InvalidIndexUse::kMasked: return "invalid_index = masked";
    case InvalidIndexUse::kFault: return "invalid_index = fault";
    case InvalidIndexUse::kClampToZero: return "invalid_index = clamp_to_zero";
    case InvalidIndexUse::kWrap: return "invalid_index = wrap";
    case InvalidIndexUse::kMinusOneMasked: return "invalid_index = minus_one_masked";
  }
  return "?";
}
constexpr const char* kReadThenMask = "masked_keys = read_then_mask";
// A hostile index mapped to a row that is loaded and then masked: both fields let it through.
const char* MappedThenMaskedVia(InvalidIndexUse u) {
  return u == InvalidIndexUse::kClampToZero
             ? "invalid_index = clamp_to_zero, masked_keys = read_then_mask"
             : "invalid_index = wrap, masked_keys = read_then_mask";
}

template <typename T>
std::vector<T>& ThreadPartialScratch() {
  thread_local std::vector<T> scratch;
  return scratch;
}

template <typename T>
class PlanExecutor {
 public:
  // `structure`: RunPlanStructure's walk (poison and row states, no arithmetic, no values).
  PlanExecutor(const MlaInputs& in, const Plan& plan, const PlanExecOptions& opt, const Geometry& g,
               PlanDrivenResult& res, bool structure = false)
      : in_(in),
        plan_(plan),
        opt_(opt),
        g_(g),
        res_(res),
        empty_rows_(EmptyRows(opt)),
        structure_(structure) {}

  // The policy of rows without a visible key: the contract's empty_rows, independent of zero_kv
  // (kEmptyRowsFollowZeroKv: one policy for both fields, taken from zero_kv).
  static EmptyRowPolicy EmptyRows(const PlanExecOptions& opt) {
    if (MLASIM_MUTANT(opt.mutant, kEmptyRowsFollowZeroKv))
      return opt.zero_kv == ZeroKvPolicy::kSkip ? EmptyRowPolicy::kSkip
                                                : EmptyRowPolicy::kWriteZero;
    return opt.empty_rows;
  }

  void Run() {
    if (!structure_) {
      const int64_t row_elems = int64_t{g_.group_heads} * in_.head_dim_v;
      o_.assign(static_cast<size_t>(g_.folded_rows * row_elems), T(0));
      lse_.assign(static_cast<size_t>(g_.folded_rows * g_.group_heads), T(0));
    }
    o_state_.assign(static_cast<size_t>(g_.folded_rows), RowState::kUnwritten);
    o_writer_.assign(static_cast<size_t>(g_.folded_rows), kNoWriter);
    ReservePartialSlots(SplitRowsInPlan());
    RunClusters();
    Reduce();
    Unfold();
    res_.partial_rows = g_.partial_rows;
    res_.partial_rows_written = static_cast<int64_t>(part_slot_.size());
    res_.fold_ratio = g_.fold;
  }

 private:
  // ---- findings ------------------------------------------------------------------------------
  void AddFinding(PoisonFinding f) {
    auto& list = res_.poison;
    if (!list.empty()) {
      PoisonFinding& last = list.back();
      const bool same = last.kind == f.kind && last.output == f.output && last.source == f.source &&
                        last.work == f.work && last.tile == f.tile &&
                        last.head_begin == f.head_begin && last.head_end == f.head_end &&
                        last.via == f.via && last.row_begin >= 0 && last.row_end == f.row_begin;
      const int64_t span = last.row_end - last.row_begin;
      const bool source_run = f.source_index < 0 ? last.source_index < 0
                                                 : (f.source_index == last.source_index ||
                                                    f.source_index == last.source_index + span);
      if (same && source_run && f.row_end > f.row_begin) {
        last.row_end = f.row_end;
        return;
      }
    }
    if (list.size() >= kMaxFindings) {
      ++dropped_;
      return;
    }
    list.push_back(f);
  }

  // A finding whose output is folded row `row` of o (reported in caller coordinates).
  // A finding on o: `row` (a folded q row) names one row and its head group; without it,
  // `rows` (folded rows [first, last)) names the tokens they cover, every head.
  void AddOFinding(PoisonKind kind, int64_t row, const PoisonSource& src, int32_t work,
                   int32_t tile, std::pair<int64_t, int64_t> rows = {-1, -1}) {
    PoisonFinding f{kind, NumericsBuffer::kO};
    if (row >= 0) {
      const Unfolded u = UnfoldRow(g_, row);
      f.row_begin = u.token;
      f.row_end = u.token + 1;
      f.head_begin = u.group * g_.group_heads;
      f.head_end = f.head_begin + g_.group_heads;
    } else if (rows.first >= 0) {
      f.row_begin = UnfoldRow(g_, rows.first).token;
      f.row_end = UnfoldRow(g_, rows.second - 1).token + 1;
      f.head_end = g_.heads;
    } else {
      f.head_end = g_.heads;
    }
    f.source = src.buffer;
    f.source_index = src.index;
    f.work = work;
    f.tile = tile;
    if (src.via) f.via = src.via;
    f.has_value = src.has_value;
    f.source_value = src.value;
    AddFinding(f);
  }

  void AddPartialFinding(PoisonKind kind, int64_t prow, const PoisonSource& src, int32_t work) {
    PoisonFinding f{kind, NumericsBuffer::kPartialO};
    f.row_begin = prow;
    f.row_end = prow + 1;
    f.head_end = g_.group_heads;
    f.source = src.buffer;
    f.source_index = src.index;
    f.work = work;
    if (src.via) f.via = src.via;
    f.has_value = src.has_value;
    f.source_value = src.value;
    AddFinding(f);
  }

  // ---- partial buffers: only written rows take memory ----------------------------------------
  // Each written partial row gets a slot of H' x (Dv + 1) values (o, then lse) in `part_`, a
  // per-thread scratch reused across calls; a slot is only read after its row state says it
  // was written in this call.
  int64_t SlotWidth() const { return int64_t{g_.group_heads} * (in_.head_dim_v + 1); }
  T* PartialO(int64_t slot) { return part_.data() + slot * SlotWidth(); }
  T* PartialLse(int64_t slot) { return PartialO(slot) + int64_t{g_.group_heads} * in_.head_dim_v; }
  int64_t PartialSlotForWrite(int64_t prow) {
    auto [it, fresh] = part_slot_.emplace(prow, static_cast<int64_t>(part_state_.size()));
    if (fresh) {
      part_state_.push_back(RowState::kUnwritten);
      part_writer_.push_back(kNoWriter);
      if (static_cast<int64_t>(part_state_.size()) > part_capacity_)
        ReservePartialSlots(std::max<int64_t>(2 * part_capacity_, 16));
    }
    return it->second;
  }
  void ReservePartialSlots(int64_t slots) {
    if (slots <= part_capacity_) return;
    const auto elements = static_cast<size_t>(slots * SlotWidth());
    // keeps the slots written so far; the structure walk stores no values
    if (!structure_ && part_.size() < elements) part_.resize(elements);
    part_capacity_ = slots;
  }
  // Partial rows the plan's split works would write (an estimate that is exact for planner
  // plans), so the storage is allocated once.
  int64_t SplitRowsInPlan() const {
    const Int32Buffer& wi = plan_.work_info;
    int64_t rows = 0;
    for (int64_t w = 0; w * 8 + 7 < wi.size(); ++w) {
      const CellRead loc = ReadCell(wi, w * 8 + kPartialQoLoc);
      const CellRead q0 = ReadCell(wi, w * 8 + kQoStart), q1 = ReadCell(wi, w * 8 + kQoEnd);
      if (loc.ok && q0.ok && q1.ok && loc.value >= 0 && q1.value > q0.value)
        rows += std::min<int64_t>(int64_t{q1.value} - q0.value, g_.folded_rows);
    }
    // A garbage plan may claim far more rows than it writes: reserve at most 64k slots up
    // front; real writes beyond that grow the storage.
    return std::min({rows, g_.partial_rows, int64_t{1} << 16});
  }

  // ---- stage 1 -------------------------------------------------------------------------------
  void RunClusters() {
    const Int32Buffer& wi = plan_.work_indptr;
    const int64_t rows = plan_.work_info.size() / 8;
    for (int64_t c = 0; c + 1 < wi.size(); ++c) {
      const CellRead a = ReadCell(wi, c), b = ReadCell(wi, c + 1);
      if (!a.ok || !b.ok) {
        AddOFinding(a.ok ? b.kind : a.kind, -1,
                    PoisonSource{true, a.ok ? b.kind : a.kind, NumericsBuffer::kWorkIndptr,
                                 a.ok ? c + 1 : c},
                    -1, -1);
        continue;
      }
      for (int64_t w = std::max(0, a.value); w < b.value; ++w) {
        if (w >= rows) {
          AddOFinding(
              PoisonKind::kOutOfRangeRead, -1,
              PoisonSource{true, PoisonKind::kOutOfRangeRead, NumericsBuffer::kWorkInfo, w * 8},
              static_cast<int32_t>(w), -1);
          break;
        }
        RunWork(static_cast<int32_t>(w));
      }
    }
  }

  // KV token positions of a work item (§11.2) and the request they belong to.
  struct WorkKv {
    int32_t request = 0;
    int64_t p0 = 0, p1 = 0;  // positions [p0, p1)
    int64_t valid_end = 0;   // positions >= this are loaded but masked (read then mask)
  };

  bool ReadWork(int32_t w, int32_t f[7]) {
    for (int32_t i = 0; i < 7; ++i) {
      const CellRead c = ReadCell(plan_.work_info, int64_t{w} * 8 + i);
      if (!c.ok) {
        AddOFinding(c.kind, -1,
                    PoisonSource{true, c.kind, NumericsBuffer::kWorkInfo, int64_t{w} * 8 + i}, w,
                    -1, WorkRows(w));
        return false;
      }
      f[i] = c.value;
    }
    return true;
  }

  // The q rows [qo_start, qo_end) of work w when both cells are defined and in range, so a
  // finding about its other fields still names the rows it poisons; {-1, -1} otherwise.
  std::pair<int64_t, int64_t> WorkRows(int32_t w) {
    const CellRead a = ReadCell(plan_.work_info, int64_t{w} * 8 + kQoStart);
    const CellRead b = ReadCell(plan_.work_info, int64_t{w} * 8 + kQoEnd);
    if (!a.ok || !b.ok || a.value < 0 || b.value <= a.value || b.value > g_.folded_rows)
      return {-1, -1};
    return {a.value, b.value};
  }

  void RunWork(int32_t w) {
    int32_t f[7];
    if (!ReadWork(w, f)) return;
    ++res_.works_run;
    // A zero-KV item (no key position at all) returns before touching q or o when its
    // contract's zero_kv says so; otherwise it runs, and its rows (none sees a key) hold what
    // empty_rows says.
    if (f[kKvEnd] <= f[kKvStart] && opt_.zero_kv == ZeroKvPolicy::kSkip) return;
    const int64_t q0 = f[kQoStart], q1 = f[kQoEnd];
    const PoisonSource work_field = {true, PoisonKind::kOutOfRangeRead, NumericsBuffer::kWorkInfo,
                                     int64_t{w} * 8};
    if (q0 < 0 || q1 > g_.folded_rows || q1 < q0) {
      PoisonSource src = work_field;
      src.index += kQoStart;
      AddOFinding(PoisonKind::kOutOfRangeRead, -1, src, w, -1);
      return;
    }
    WorkKv kv;
    if (!ResolveKv(w, f, &kv)) return;
    PoisonSource poison;
    const int64_t n = GatherKeys(kv, &poison);
    const int64_t rows = (q1 - q0) * g_.group_heads;
    const int64_t chunk =
        std::max<int64_t>(g_.group_heads, kMaxScoreElements / std::max<int64_t>(n, 1) /
                                              g_.group_heads * g_.group_heads);
    const bool split = f[kPartialQoLoc] >= 0;
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
      const int64_t m = std::min(chunk, rows - r0);
      const int64_t first_row = q0 + r0 / g_.group_heads;
      const int64_t nrows = m / g_.group_heads;
      if (structure_) {
        BlockStructure(q0, r0, m, n, kv);
      } else {
        buf_.Resize(m, n, in_.head_dim_qk, in_.head_dim_v);
        GatherQueries(q0, r0, m, n, kv);
        Attend(m, n, split);
      }
      if (split) {
        WritePartial(w, f[kPartialQoLoc], q0, first_row, nrows, poison);
      } else {
        WriteFinal(w, first_row, nrows, poison);
      }
    }
  }

  // Scores, softmax and P x V of the gathered block (AttendBlock).
  void Attend(int64_t m, int64_t n, bool split) {
    BlockParams p;
    p.m = m;
    p.n = n;
    p.head_dim_qk = in_.head_dim_qk;
    p.head_dim_v = in_.head_dim_v;
    p.has_invalid_cols = has_invalid_;
    p.v_scale = in_.kv_scale;
    p.p_format = opt_.precision.p_format;
    p.normalize = !(split && MLASIM_MUTANT(opt_.mutant, kUnnormalizedPartial));
    p.empty_rows_nan = empty_rows_ == EmptyRowPolicy::kNan;
    AttendBlock(buf_, p);
  }

  // The structure walk's block: each row's causal limit and whether it sees a key at all (no
  // valid key below its limit: AttendBlock's row_empty for finite scores).
  void BlockStructure(int64_t q0, int64_t r0, int64_t m, int64_t n, const WorkKv& kv) {
    if (static_cast<int64_t>(buf_.row_limit.size()) < m) buf_.row_limit.resize(m);
    if (static_cast<int64_t>(buf_.row_empty.size()) < m) buf_.row_empty.resize(m);
    SetRowLimits(q0, r0, m, n, kv);
    int64_t first_valid = 0;
    while (first_valid < n && !buf_.col_valid[first_valid]) ++first_valid;
    for (int64_t r = 0; r < m; ++r)
      buf_.row_empty[r] = std::clamp<int64_t>(buf_.row_limit[r], 0, n) <= first_valid;
  }

  bool ResolveKv(int32_t w, const int32_t f[7], WorkKv* kv) {
    const int32_t batch = f[kBatchIdx];
    int64_t b = batch;
    if (!g_.sparse) {
      b = batch / g_.fold;
    } else if (!g_.sparse_batch_is_request) {
      b = batch / std::max(1, g_.tokens_per_request) / g_.fold;
    }
    if (batch < 0 || b >= g_.batch) {
      AddOFinding(PoisonKind::kOutOfRangeRead, -1,
                  PoisonSource{true, PoisonKind::kOutOfRangeRead, NumericsBuffer::kKvIndptr, b + 1},
                  w, -1);
      return false;
    }
    kv->request = static_cast<int32_t>(b);
    const int64_t page = in_.page_size;
    if (g_.sparse) {
      kv->p0 = f[kKvStart];
      kv->p1 = f[kKvEnd];
    } else {
      kv->p0 = int64_t{f[kKvStart]} * page;
      kv->p1 = (f[kKvOffset] != 0 || page == 1)
                   ? int64_t{f[kKvEnd]} * page
                   : int64_t{f[kKvEnd] - 1} * page + in_.kv_last_page_lens[b];
    }
    if (kv->p1 < kv->p0) kv->p1 = kv->p0;
    kv->valid_end = kv->p1;
    // A kernel that reads masked keys loads the whole last page: the slots past the request's
    // last token are loaded, then masked (their NaN multiplies a zero weight).
    if (!g_.sparse && opt_.read_masked_keys && page > 1)
      kv->p1 = std::max(kv->p1, (kv->p1 + page - 1) / page * page);
    return true;
  }

  // Fills buf_.k with the work's keys; positions outside the page table / index matrix or the
  // cache become NaN rows (poison), an invalid index is handled as the contract's invalid_index
  // says, and keys the kernel loads only to mask them are masked. Returns the number of keys.
  int64_t GatherKeys(const WorkKv& kv, PoisonSource* poison) {
    const int32_t d = in_.head_dim_qk;
    const int64_t page = in_.page_size;
    const int64_t table = g_.sparse ? static_cast<int64_t>(in_.topk_indices.size())
                                    : static_cast<int64_t>(in_.kv_indices.size()) * page;
    // Bound the work: one position past the table already makes every output row poison.
    int64_t n = kv.p1 - kv.p0;
    if (kv.p0 < 0 || kv.p1 > table) n = std::min<int64_t>(n, table + 1);
    if (structure_) {  // no key values: only which keys are valid
      if (static_cast<int64_t>(buf_.col_valid.size()) < n) buf_.col_valid.resize(n);
    } else {
      buf_.Resize(0, n, d, in_.head_dim_v);
    }
    has_invalid_ = false;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t p = kv.p0 + j;
      T* dst = structure_ ? nullptr : buf_.k.data() + j * d;
      buf_.col_valid[j] = 1;
      if (p < 0 || p >= table) {
        poison->Note(PoisonKind::kOutOfRangeRead,
                     g_.sparse ? NumericsBuffer::kTopkIndices : NumericsBuffer::kKvIndices,
                     g_.sparse ? p : (p < 0 ? -1 : p / page));
        FillKey(dst, std::numeric_limits<T>::quiet_NaN());
        continue;
      }
      const int64_t index = g_.sparse ? in_.topk_indices[p] : in_.kv_indices[p / page];
      const int64_t slot = g_.sparse ? p : p / page;
      const int64_t row = g_.sparse ? index : index * page + p % page;
      LoadKey(row, index, slot, dst, j, poison);
      if (p >= kv.valid_end) MaskLoaded(row, j, poison);
    }
    key_first_ = g_.sparse ? 0 : kv.p0 - int64_t{in_.kv_indptr[kv.request]} * page;
    return n;
  }

  // Sets the d values of key row `dst` (none in the structure walk: dst is null).
  void FillKey(T* dst, T value) const {
    if (dst) std::fill(dst, dst + in_.head_dim_qk, value);
  }

  bool RowIsNaN(int64_t row) const {
    return row >= 0 && row < int64_t{in_.num_pages} * in_.page_size &&
           std::isnan(in_.kv_cache[row * in_.head_dim_qk]);
  }

  // Loads the key of cache row `row` (named by `index` at table slot `slot`) into block column
  // `j`: an index outside the cache is handled as the contract's invalid_index says.
  void LoadKey(int64_t row, int64_t index, int64_t slot, T* dst, int64_t j, PoisonSource* poison) {
    const int32_t d = in_.head_dim_qk;
    const int64_t cache_rows = int64_t{in_.num_pages} * in_.page_size;
    const NumericsBuffer table =
        g_.sparse ? NumericsBuffer::kTopkIndices : NumericsBuffer::kKvIndices;
    int64_t r = row;
    if (row < 0 || row >= cache_rows) {
      // minus_one_masked: -1 is skipped as masked is, any other value read as fault reads it.
      const InvalidIndexUse declared = opt_.invalid_index;
      const InvalidIndexUse use = declared != InvalidIndexUse::kMinusOneMasked ? declared
                                  : index == -1 ? InvalidIndexUse::kMasked
                                                : InvalidIndexUse::kFault;
      if (use == InvalidIndexUse::kMasked) {  // recognised, never read
        FillKey(dst, T(0));
        buf_.col_valid[j] = 0;
        has_invalid_ = true;
        return;
      }
      if (use == InvalidIndexUse::kFault) {  // a row outside the cache: no defined value
        poison->NoteVia(PoisonKind::kOutOfRangeRead, table, slot, InvalidIndexVia(declared), true,
                        index);
        FillKey(dst, std::numeric_limits<T>::quiet_NaN());
        return;
      }
      const int64_t in_page = g_.sparse ? 0 : row - index * in_.page_size;
      const int64_t pages = std::max<int32_t>(in_.num_pages, 1);
      const int64_t page_id =
          use == InvalidIndexUse::kClampToZero ? 0 : ((index % pages) + pages) % pages;
      r = page_id * in_.page_size + in_page;
      if (!opt_.read_masked_keys) {  // another token's key, used as if it were valid
        poison->NoteVia(PoisonKind::kHostileIndex, table, slot, InvalidIndexVia(use), true, index);
      } else {  // loaded, then recognised and masked: a NaN row there still reaches o (0 x NaN)
        if (RowIsNaN(r))
          poison->NoteVia(PoisonKind::kMaskedNaN, table, slot, MappedThenMaskedVia(use), true,
                          index);
        MaskLoaded(r, j, poison);
      }
    }
    if (!dst) return;
    const float* src = in_.kv_cache.data() + r * d;
    std::copy(src, src + d, dst);
  }

  // Column `j` (cache row `row`) was loaded only to be masked: a NaN there still reaches the
  // output through 0 x NaN.
  void MaskLoaded(int64_t row, int64_t j, PoisonSource* poison) {
    buf_.col_valid[j] = 0;
    has_invalid_ = true;
    if (RowIsNaN(row))
      poison->NoteVia(PoisonKind::kMaskedNaN, NumericsBuffer::kKvCache, row, kReadThenMask, false,
                      0);
  }

  // Rows [r0, r0 + m) of the work's block: block row r is planner row q0 + r / H', head r % H'.
  void GatherQueries(int64_t q0, int64_t r0, int64_t m, int64_t n, const WorkKv& kv) {
    const int32_t d = in_.head_dim_qk, hg = g_.group_heads;
    const T scale = static_cast<T>(in_.effective_sm_scale() * in_.q_scale * in_.kv_scale);
    for (int64_t r = 0; r < m; r += hg) {
      const Unfolded u = UnfoldRow(g_, q0 + (r0 + r) / hg);
      const float* src = in_.q.data() + (u.token * g_.heads + int64_t{u.group} * hg) * d;
      T* dst = buf_.q.data() + r * d;
      for (int64_t i = 0; i < int64_t{hg} * d; ++i) dst[i] = static_cast<T>(src[i]) * scale;
    }
    SetRowLimits(q0, r0, m, n, kv);
  }

  // The causal limit of block rows [r0, r0 + m) (keys [0, limit) visible) in buf_.row_limit.
  void SetRowLimits(int64_t q0, int64_t r0, int64_t m, int64_t n, const WorkKv& kv) {
    const int32_t hg = g_.group_heads;
    const int64_t lq = MLASIM_MUTANT(opt_.mutant, kIgnoreQLens)
                           ? g_.max_q
                           : in_.qo_indptr[kv.request + 1] - in_.qo_indptr[kv.request];
    const int64_t lk = RequestKeys(kv.request);
    const int64_t off_by_one = MLASIM_MUTANT(opt_.mutant, kCausalOffByOne) ? 1 : 0;
    const bool causal = in_.is_causal && !g_.sparse;
    for (int64_t r = 0; r < m; r += hg) {
      const Unfolded u = UnfoldRow(g_, q0 + (r0 + r) / hg);
      int64_t limit = std::numeric_limits<int32_t>::max();
      if (causal) {
        const int64_t i = u.token - in_.qo_indptr[kv.request];  // row index within the request
        limit = i + lk - lq + 1 + off_by_one - key_first_;
      }
      const int32_t lim =
          static_cast<int32_t>(std::clamp<int64_t>(limit, 0, std::max<int64_t>(n, 0)));
      for (int32_t h = 0; h < hg; ++h) buf_.row_limit[r + h] = lim;
    }
  }

  int64_t RequestKeys(int32_t b) const {
    const int64_t pages = in_.kv_indptr[b + 1] - in_.kv_indptr[b];
    if (g_.sparse) return std::min<int64_t>(pages, in_.topk);
    return pages == 0 ? 0 : (pages - 1) * in_.page_size + in_.kv_last_page_lens[b];
  }

  // True when every head of block row group i had no visible key.
  bool GroupEmpty(int64_t i) const {
    for (int32_t h = 0; h < g_.group_heads; ++h)
      if (!buf_.row_empty[i * g_.group_heads + h]) return false;
    return true;
  }

  // `poison`, or (when the contract writes 0/0 for rows with no key) the NaN of block row group
  // i's empty heads.
  PoisonSource WithEmptyRowNaN(const PoisonSource& poison, int64_t i) const {
    if (poison.any || empty_rows_ != EmptyRowPolicy::kNan) return poison;
    PoisonSource src = poison;
    for (int32_t h = 0; h < g_.group_heads; ++h)
      if (buf_.row_empty[i * g_.group_heads + h])
        src.NoteVia(PoisonKind::kEmptyRowNaN, NumericsBuffer::kO, -1, "empty_rows = nan", false, 0);
    return src;
  }

  // The lse o's row gets for block row x head `k`: the block's, or +inf for a row without a key
  // under EmptyRowPolicy::kWriteZeroPosInfLse (a split piece keeps the block's -inf).
  T FinalLse(int64_t k) const {
    if (empty_rows_ == EmptyRowPolicy::kWriteZeroPosInfLse && buf_.row_empty[k])
      return std::numeric_limits<T>::infinity();
    return buf_.lse[k];
  }

  void WriteFinal(int32_t w, int64_t first_row, int64_t nrows, const PoisonSource& poison) {
    const int32_t hg = g_.group_heads, dv = in_.head_dim_v;
    const NumFormat out = opt_.precision.out_format;
    for (int64_t i = 0; i < nrows; ++i) {
      const int64_t row = first_row + i;
      if (GroupEmpty(i) && empty_rows_ == EmptyRowPolicy::kSkip) continue;
      if (!structure_) {
        T* dst = o_.data() + row * hg * dv;
        std::copy(buf_.o.begin() + i * hg * dv, buf_.o.begin() + (i + 1) * hg * dv, dst);
        RoundOutput(dst, int64_t{hg} * dv, out);
        for (int32_t h = 0; h < hg; ++h) lse_[row * hg + h] = FinalLse(i * hg + h);
      }
      PoisonSource src = WithEmptyRowNaN(poison, i);
      NoteRacingWrite(&o_writer_[row], w, &src);
      o_state_[row] = src.any ? RowState::kTainted : RowState::kWritten;
      if (src.any) AddOFinding(src.kind, row, src, w, -1);
    }
  }

  void WritePartial(int32_t w, int32_t loc, int64_t q0, int64_t first_row, int64_t nrows,
                    const PoisonSource& poison) {
    const int32_t hg = g_.group_heads, dv = in_.head_dim_v;
    const int64_t shift = MLASIM_MUTANT(opt_.mutant, kPartialRowOffByOne) ? 1 : 0;
    for (int64_t i = 0; i < nrows; ++i) {
      const int64_t prow = int64_t{loc} + (first_row + i - q0) + shift;
      if (prow < 0 || prow >= g_.partial_rows) {
        AddPartialFinding(PoisonKind::kOutOfRangeWrite, prow,
                          PoisonSource{true, PoisonKind::kOutOfRangeWrite,
                                       NumericsBuffer::kWorkInfo, int64_t{w} * 8 + kPartialQoLoc},
                          w);
        continue;
      }
      if (GroupEmpty(i)) {
        ++res_.partial_rows_without_key;
        if (empty_rows_ == EmptyRowPolicy::kSkip) continue;
      }
      const int64_t slot = PartialSlotForWrite(prow);
      if (!structure_) {
        std::copy(buf_.o.begin() + i * hg * dv, buf_.o.begin() + (i + 1) * hg * dv, PartialO(slot));
        std::copy(buf_.lse.begin() + i * hg, buf_.lse.begin() + (i + 1) * hg, PartialLse(slot));
      }
      PoisonSource src = WithEmptyRowNaN(poison, i);
      NoteRacingWrite(&part_writer_[slot], w, &src);
      part_state_[slot] = src.any ? RowState::kTainted : RowState::kWritten;
      if (src.any) AddPartialFinding(src.kind, prow, src, w);
    }
  }

  static void RoundOutput(T* x, int64_t n, NumFormat format) {
    if (format == NumFormat::kFp64 || (format == NumFormat::kFp32 && sizeof(T) == sizeof(float)))
      return;
    const Rounder round(format);
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<T>(round(static_cast<double>(x[i])));
  }

  // ---- stage 2: mla_reduce_v1 ---------------------------------------------------------------
  void Reduce() {
    const Int32Buffer& ri = plan_.reduce_indptr;
    for (int64_t t = 0; t + 1 < ri.size(); ++t) ReduceTile(static_cast<int32_t>(t));
  }

  void ReduceTile(int32_t t) {
    const CellRead g0 = ReadCell(plan_.reduce_indptr, t), g1 = ReadCell(plan_.reduce_indptr, t + 1);
    if (!g0.ok || !g1.ok) {
      const PoisonKind k = g0.ok ? g1.kind : g0.kind;
      AddOFinding(k, -1, PoisonSource{true, k, NumericsBuffer::kReduceIndptr, g0.ok ? t + 1 : t},
                  -1, t);
      return;
    }
    int64_t n = int64_t{g1.value} - g0.value;
    if (n <= 1) return;  // unsplit tiles: the attention kernel wrote them
    n = std::min<int64_t>(n, plan_.reduce_partial_map.size() + 1);
    ++res_.tiles_reduced;
    const CellRead f0 = ReadCell(plan_.reduce_final_map, int64_t{t} * 2);
    const CellRead f1 = ReadCell(plan_.reduce_final_map, int64_t{t} * 2 + 1);
    if (!f0.ok || !f1.ok) {
      const PoisonKind k = f0.ok ? f1.kind : f0.kind;
      AddOFinding(
          k, -1,
          PoisonSource{true, k, NumericsBuffer::kReduceFinalMap, int64_t{t} * 2 + (f0.ok ? 1 : 0)},
          -1, t);
      return;
    }
    if (f0.value < 0 || f1.value > g_.folded_rows || f1.value < f0.value) {
      AddOFinding(PoisonKind::kOutOfRangeWrite, -1,
                  PoisonSource{true, PoisonKind::kOutOfRangeWrite, NumericsBuffer::kReduceFinalMap,
                               int64_t{t} * 2},
                  -1, t);
      return;
    }
    struct Piece {
      CellRead loc;
      int64_t map_index;
    };
    std::vector<Piece> pieces;
    for (int64_t i = 0; i < n; ++i)
      pieces.push_back({ReadCell(plan_.reduce_partial_map, g0.value + i), g0.value + i});
    if (MLASIM_MUTANT(opt_.mutant, kMergePieceTwice)) pieces.insert(pieces.begin(), pieces.front());
    for (int64_t s = f0.value; s < f1.value; ++s) ReduceRow(t, s, s - f0.value, pieces);
  }

  template <typename PieceVec>
  void ReduceRow(int32_t t, int64_t row, int64_t offset, const PieceVec& pieces) {
    const int32_t hg = g_.group_heads, dv = in_.head_dim_v;
    constexpr T kNaN = std::numeric_limits<T>::quiet_NaN();
    constexpr T kInf = std::numeric_limits<T>::infinity();
    PoisonSource poison;
    PoisonKind out_kind = PoisonKind::kUnwrittenRead;
    pl_.assign(pieces.size(), nullptr);
    pl_o_.assign(pieces.size(), nullptr);
    for (size_t i = 0; i < pieces.size(); ++i) {
      if (!pieces[i].loc.ok) {
        poison.Note(pieces[i].loc.kind, NumericsBuffer::kReducePartialMap, pieces[i].map_index);
        continue;
      }
      const int64_t prow = int64_t{pieces[i].loc.value} + offset;
      auto it = prow >= 0 && prow < g_.partial_rows ? part_slot_.find(prow) : part_slot_.end();
      if (prow < 0 || prow >= g_.partial_rows) {
        poison.Note(PoisonKind::kOutOfRangeRead, NumericsBuffer::kPartialO, prow);
        continue;
      }
      if (it == part_slot_.end() || part_state_[it->second] == RowState::kUnwritten) {
        poison.Note(PoisonKind::kUnwrittenRead, NumericsBuffer::kPartialO, prow);
        continue;
      }
      if (part_state_[it->second] == RowState::kTainted) {
        poison.Note(PoisonKind::kTaintedRead, NumericsBuffer::kPartialO, prow);
        out_kind = PoisonKind::kTaintedRead;
      }
      if (structure_) continue;
      pl_[i] = PartialLse(it->second);
      pl_o_[i] = PartialO(it->second);
    }
    if (poison.any && out_kind != PoisonKind::kTaintedRead) out_kind = poison.kind;
    for (int32_t h = 0; h < hg && !structure_; ++h) {
      // §12: M = max lse (NaN ignored, as fmax), S = sum exp(lse - M), L = +inf if S is 0 or NaN.
      T mx = -kInf;
      for (size_t i = 0; i < pieces.size(); ++i) {
        const T l = pl_[i] ? pl_[i][h] : kNaN;
        if (!std::isnan(l)) mx = std::max(mx, l);
      }
      T sum = 0;
      for (size_t i = 0; i < pieces.size(); ++i) sum += std::exp((pl_[i] ? pl_[i][h] : kNaN) - mx);
      const T big_l = (sum == 0 || std::isnan(sum)) ? kInf : mx + std::log(sum);
      T* out = o_.data() + (row * hg + h) * dv;
      std::fill(out, out + dv, T(0));
      for (size_t i = 0; i < pieces.size(); ++i) {
        const T wgt = std::exp((pl_[i] ? pl_[i][h] : kNaN) - big_l);
        const T* part = pl_o_[i] ? pl_o_[i] + int64_t{h} * dv : nullptr;
        for (int32_t x = 0; x < dv; ++x) out[x] += wgt * (part ? part[x] : kNaN);
      }
      RoundOutput(out, dv, opt_.precision.out_format);
      lse_[row * hg + h] = big_l;
    }
    // The decode launch ended before the reduce began: overwriting a decode's row is ordered; a
    // row two tiles of this launch write is not.
    int32_t* writer = &o_writer_[row];
    if (*writer >= 0) *writer = kNoWriter;
    NoteRacingWrite(writer, TileWriter(t), &poison, FinalMapIndex(t));
    if (poison.any && poison.kind == PoisonKind::kRacingWrite) out_kind = PoisonKind::kRacingWrite;
    o_state_[row] = poison.any ? RowState::kTainted : RowState::kWritten;
    if (poison.any) AddOFinding(out_kind, row, poison, -1, t);
  }

  // ---- rows written twice in one launch ------------------------------------------------------
  // Who wrote a row last in the current launch: a work item (w >= 0), a reduce tile
  // (TileWriter(t) < -1), or nobody (kNoWriter). A second, different writer in the same launch
  // makes the row's value depend on the hardware's order (a racing write): the row is tainted,
  // whatever value this sequential run leaves in it. The finding names the later writer's
  // work_info row or reduce_final_map entry (unless the row already read other poison, which
  // stays its first cause).
  static constexpr int32_t kNoWriter = -1;
  static int32_t TileWriter(int32_t t) { return -2 - t; }
  static int64_t FinalMapIndex(int32_t t) { return int64_t{t} * 2; }
  void NoteRacingWrite(int32_t* writer, int32_t who, PoisonSource* src, int64_t source_index = -1) {
    const bool race = *writer != kNoWriter && *writer != who;
    *writer = who;
    if (!race) return;
    const bool tile = who < kNoWriter;
    src->Note(PoisonKind::kRacingWrite,
              tile ? NumericsBuffer::kReduceFinalMap : NumericsBuffer::kWorkInfo,
              tile ? source_index : int64_t{who} * 8);
  }

  // ---- back to the caller's layout -----------------------------------------------------------
  void Unfold() {
    const int32_t hg = g_.group_heads, dv = in_.head_dim_v;
    AttentionOutput& out = res_.out;
    constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
    for (int64_t row = 0; row < g_.folded_rows; ++row) {
      const Unfolded u = UnfoldRow(g_, row);
      const int64_t head0 = u.token * g_.heads + int64_t{u.group} * hg;
      if (o_state_[row] == RowState::kUnwritten) {
        if (!structure_) {
          std::fill(out.o.begin() + head0 * dv, out.o.begin() + (head0 + hg) * dv, kNaN);
          std::fill(out.lse.begin() + head0, out.lse.begin() + head0 + hg, kNaN);
        }
        AddOFinding(PoisonKind::kNeverWritten, row,
                    PoisonSource{true, PoisonKind::kNeverWritten, NumericsBuffer::kO, u.token}, -1,
                    -1);
        continue;
      }
      if (structure_) continue;
      for (int64_t x = 0; x < int64_t{hg} * dv; ++x)
        out.o[head0 * dv + x] = static_cast<double>(o_[row * hg * dv + x]);
      for (int32_t h = 0; h < hg; ++h) out.lse[head0 + h] = static_cast<double>(lse_[row * hg + h]);
    }
    res_.poison_dropped = dropped_;
  }

  const MlaInputs& in_;
  const Plan& plan_;
  const PlanExecOptions& opt_;
  const Geometry& g_;
  PlanDrivenResult& res_;
  const EmptyRowPolicy empty_rows_;  // EmptyRows(opt_)
  const bool structure_;             // RunPlanStructure: no arithmetic, no values
  BlockBuffers<T>& buf_ = internal::ThreadBlockBuffers<T>();
  bool has_invalid_ = false;
  int64_t key_first_ = 0;   // request key index of the work's first key (dense)
  std::vector<T> o_, lse_;  // folded final buffers [folded_rows, H', Dv], [folded_rows, H']
  std::vector<RowState> o_state_;
  std::vector<int32_t> o_writer_;  // NoteRacingWrite's last writer of each folded row
  std::unordered_map<int64_t, int64_t> part_slot_;    // partial row -> storage slot
  std::vector<T>& part_ = ThreadPartialScratch<T>();  // partial o + lse slots
  int64_t part_capacity_ = 0;                         // slots usable in this call
  std::vector<RowState> part_state_;
  std::vector<int32_t> part_writer_;  // NoteRacingWrite's last writer of each partial slot
  std::vector<const T*> pl_, pl_o_;
  int64_t dropped_ = 0;
};

}  // namespace

void ApplyEmptyRowLse(EmptyRowPolicy policy, AttentionOutput& truth) {
  if (policy != EmptyRowPolicy::kWriteZeroPosInfLse) return;
  for (double& l : truth.lse)
    if (l == -HUGE_VAL) l = HUGE_VAL;
}

StatusOr<PlanDrivenResult> RunPlanDriven(const MlaInputs& inputs, const PlanRequest& request,
                                         const Plan& plan, const PlanExecOptions& options) {
  MLASIM_RETURN_IF_ERROR(ValidateMlaInputs(inputs));
  MLASIM_ASSIGN_OR_RETURN(const Geometry g, MakeGeometry(inputs, request, plan));
  PlanDrivenResult res;
  res.out.q_rows = inputs.q_rows();
  res.out.num_heads = inputs.num_heads;
  res.out.head_dim_v = inputs.head_dim_v;
  res.out.o.assign(
      static_cast<size_t>(int64_t{res.out.q_rows} * inputs.num_heads * inputs.head_dim_v), 0.0);
  res.out.lse.assign(static_cast<size_t>(int64_t{res.out.q_rows} * inputs.num_heads), 0.0);
  if (options.precision.accumulate == Accumulate::kFp64) {
    PlanExecutor<double>(inputs, plan, options, g, res).Run();
  } else {
    PlanExecutor<float>(inputs, plan, options, g, res).Run();
  }
  return res;
}

StatusOr<PlanDrivenResult> RunPlanStructure(const MlaInputs& inputs, const PlanRequest& request,
                                            const Plan& plan, const PlanExecOptions& options) {
  MLASIM_RETURN_IF_ERROR(ValidateMlaShape(inputs));
  const int64_t kv_elems = int64_t{inputs.num_pages} * inputs.page_size * inputs.head_dim_qk;
  if (options.read_masked_keys && static_cast<int64_t>(inputs.kv_cache.size()) != kv_elems)
    return InvalidArgumentError("kv_cache",
                                "read_masked_keys needs the cache's values (whether a masked key "
                                "is NaN): must hold " +
                                    S(kv_elems) + " values, got " + S(inputs.kv_cache.size()));
  MLASIM_ASSIGN_OR_RETURN(const Geometry g, MakeGeometry(inputs, request, plan));
  PlanDrivenResult res;
  res.out.q_rows = inputs.q_rows();
  res.out.num_heads = inputs.num_heads;
  res.out.head_dim_v = inputs.head_dim_v;
  PlanExecutor<float>(inputs, plan, options, g, res, /*structure=*/true).Run();
  return res;
}

}  // namespace mlasim::ref
