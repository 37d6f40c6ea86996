#include "sim/step_numerics.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <tuple>

#include "sim/kernel_request.h"

namespace mlasim::sim {
namespace {

constexpr int32_t kSmallLatent = 64;  // small dims: 64 latent (V) + 16 rope columns
constexpr int32_t kSmallRope = 16;

bool IsIndexSource(ref::NumericsBuffer b) {
  return b == ref::NumericsBuffer::kKvIndices || b == ref::NumericsBuffer::kTopkIndices ||
         b == ref::NumericsBuffer::kKvCache || b == ref::NumericsBuffer::kKvIndptr;
}

bool ViaInvalidIndex(const ref::PoisonFinding& f) {
  return f.via.rfind("invalid_index", 0) == 0;
}

// A finding on o rows that all belong to padding requests (rows from `first_padding_row` on):
// the engine's padding policy decides whether it matters. Anything else, or rows unknown, is real.
void Classify(DecodeNumerics& c, int64_t first_padding_row) {
  for (size_t i = 0; i < c.rep.poison.size(); ++i) {
    const ref::PoisonFinding& f = c.rep.poison[i];
    const bool padding = f.output == ref::NumericsBuffer::kO && f.row_begin >= 0 &&
                         f.row_begin >= first_padding_row && f.row_end >= f.row_begin;
    if (padding) {
      ++c.padding_findings;
      c.padding_rows += (f.row_end - f.row_begin) * (f.head_end - f.head_begin);
      if (c.first_padding < 0) c.first_padding = static_cast<int32_t>(i);
    } else {
      ++c.real_findings;
      if (c.first_real < 0) c.first_real = static_cast<int32_t>(i);
    }
  }
}

Violation WithCall(Violation v, const Call& c) {
  v.step = c.step;
  v.call = c.name;
  v.call_index = c.index;
  v.table_row = c.table_row;
  v.kernel = c.kernel;
  return v;
}

// The violations of a classified call (DecodeNumerics::violations).
void AddViolations(DecodeNumerics& c, int64_t first_padding_row) {
  const int64_t q_rows = c.rep.q_rows;
  auto is_padding = [&](const ref::PoisonFinding& f) {
    return f.output == ref::NumericsBuffer::kO && f.row_begin >= 0 &&
           f.row_begin >= first_padding_row && f.row_end >= f.row_begin;
  };
  // A tainted read is a consequence of poison already reported (the chain is reported link by
  // link): it takes the class of the call's first untainted finding.
  std::optional<BugClass> root;
  for (const ref::PoisonFinding& f : c.rep.poison)
    if (!root && !is_padding(f) && f.kind != ref::PoisonKind::kTaintedRead)
      root = PoisonFindingClass(f);
  // Classes in the order of their first finding (work items before the reduce).
  std::vector<std::pair<BugClass, std::pair<const ref::PoisonFinding*, int64_t>>> by_class;
  for (const ref::PoisonFinding& f : c.rep.poison) {
    if (is_padding(f)) continue;
    const BugClass cls =
        f.kind == ref::PoisonKind::kTaintedRead && root ? *root : PoisonFindingClass(f);
    auto it = std::find_if(by_class.begin(), by_class.end(),
                           [&](const auto& x) { return x.first == cls; });
    if (it == by_class.end()) it = by_class.insert(by_class.end(), {cls, {&f, 0}});
    ++it->second.second;
  }
  for (const auto& [cls, first] : by_class) {
    const ref::PoisonFinding& f = *first.first;
    RowSpan span{ref::NumericsBufferName(f.output), q_rows, 0, f.row_begin,
                 f.row_end > f.row_begin ? f.row_end - 1 : f.row_begin};
    std::vector<int32_t> works;
    if (f.work >= 0) works.push_back(f.work);
    c.violations.push_back(WithCall(
        MakePoisonedOutput(cls, span, std::move(works),
                           fmt::format("{} poison finding(s) of class {} in real rows; first: {}",
                                       first.second, BugClassLetter(cls), f.ToString())),
        *c.call));
  }
  if (c.padding_consumed_bad()) {
    RowSpan span{"o", q_rows, 0, std::min(first_padding_row, q_rows), q_rows - 1};
    c.violations.push_back(WithCall(
        MakePoisonedOutput(
            BugClass::kI, span, {},
            fmt::format("the engine consumes padding rows and they hold {} poison "
                        "finding(s), {} non-finite o values, {} NaN/+inf lse values",
                        c.padding_findings, c.rep.padding_o_nonfinite, c.rep.padding_lse_bad)),
        *c.call));
  }
  if (!c.rep.ok) {
    RowSpan span{"o", q_rows, 0, 0, std::max<int64_t>(c.rep.rows_compared - 1, 0)};
    c.violations.push_back(WithCall(
        MakeWrongOutput(
            BugClass::kF, span,
            fmt::format("real rows outside the tolerance of the monolithic truth: {} "
                        "o elements beyond atol {:.2e}, {} NaN/inf position "
                        "mismatches, {} unexplained NaN",
                        c.rep.o_unpoisoned.tolerance_violations, c.rep.tolerance.o.atol,
                        c.rep.o_unpoisoned.nan_mismatches + c.rep.o_unpoisoned.inf_mismatches,
                        c.rep.unexplained_nan)),
        *c.call));
  }
}

// The index buffer `decode` reads (the allocation behind its kv_indices argument).
std::string IndexBuffer(const Call& decode) {
  for (const TensorArg& a : decode.args)
    if (a.role == "kv_indices") return a.buffer;
  return "";
}

}  // namespace

NumericsReduction ReduceForNumerics(Scenario& s, int32_t max_context, bool small_dims) {
  NumericsReduction red;
  red.max_context = max_context;
  red.requests = static_cast<int32_t>(s.requests.size());
  const int32_t q = s.mtp_k + 1;
  for (RequestSpec& r : s.requests) {
    red.longest_before = std::max(red.longest_before, r.context);
    const int32_t cap = std::max(max_context, q + r.rejected_prev);
    if (r.context > cap) {
      r.context = cap;
      ++red.contexts_capped;
    }
    red.longest_after = std::max(red.longest_after, r.context);
  }
  red.topk_before = s.model.topk;
  s.model.topk = std::min(s.model.topk, max_context);
  red.topk_after = s.model.topk;
  red.small_dims = small_dims;
  if (small_dims) {
    s.model.kv_lora_rank = kSmallLatent;
    s.model.rope_dim = kSmallRope;
  }
  red.head_dim_qk = s.model.kv_lora_rank + s.model.rope_dim;
  red.head_dim_v = s.model.kv_lora_rank;
  return red;
}

void ApplyDecodeSemantics(const DecodeSemantics& s, ref::NumericsOptions* o) {
  switch (s.invalid_index) {
    case InvalidIndex::kFault: o->invalid_index = ref::InvalidIndexUse::kFault; break;
    case InvalidIndex::kClampToZero: o->invalid_index = ref::InvalidIndexUse::kClampToZero; break;
    case InvalidIndex::kWrap: o->invalid_index = ref::InvalidIndexUse::kWrap; break;
    case InvalidIndex::kMasked: o->invalid_index = ref::InvalidIndexUse::kMasked; break;
    case InvalidIndex::kMinusOneMasked:
      o->invalid_index = ref::InvalidIndexUse::kMinusOneMasked;
      break;
  }
  o->read_masked_keys = s.masked_keys == MaskedKeys::kReadThenMask;
  o->empty_rows = EmptyRowPolicyOf(s.empty_rows);
  o->zero_kv = ZeroKvPolicyOf(s.zero_kv);
}

ref::EmptyRowPolicy EmptyRowPolicyOf(EmptyRows e) {
  switch (e) {
    case EmptyRows::kZeroAndNegInfLse: return ref::EmptyRowPolicy::kWriteZero;
    case EmptyRows::kNan: return ref::EmptyRowPolicy::kNan;
    case EmptyRows::kUnwritten: return ref::EmptyRowPolicy::kSkip;
    case EmptyRows::kZeroAndPosInfLse: return ref::EmptyRowPolicy::kWriteZeroPosInfLse;
  }
  return ref::EmptyRowPolicy::kWriteZero;
}

ref::ZeroKvPolicy ZeroKvPolicyOf(ZeroKv z) {
  return z == ZeroKv::kReadsQWritesOutput ? ref::ZeroKvPolicy::kRun : ref::ZeroKvPolicy::kSkip;
}

std::vector<std::pair<int64_t, int64_t>> DecodeIndexValues(const Trace& t, const Call& decode) {
  const std::string buffer = IndexBuffer(decode);
  std::map<int64_t, int64_t> values;
  if (buffer.empty()) return {};
  for (const Call& c : t.calls) {
    if (c.index >= decode.index) break;
    if (c.kind != CallKind::kIndexFill || c.args.empty() || c.args[0].buffer != buffer ||
        !c.fill_content)
      continue;
    for (const IndexSegment& sg : c.fill_content->segments)  // plain slots replace old values
      values.erase(values.lower_bound(sg.begin), values.lower_bound(sg.end));
    for (const auto& [element, value] : c.fill_content->values) values[element] = value;
  }
  return {values.begin(), values.end()};
}

BugClass PoisonFindingClass(const ref::PoisonFinding& f) {
  using K = ref::PoisonKind;
  using B = ref::NumericsBuffer;
  switch (f.kind) {
    case K::kHostileIndex: return BugClass::kG;
    case K::kMaskedNaN: return ViaInvalidIndex(f) ? BugClass::kG : BugClass::kI;
    case K::kEmptyRowNaN: return BugClass::kF;
    case K::kRacingWrite: return BugClass::kF;
    case K::kNeverWritten: return BugClass::kB;
    case K::kTaintedRead: return BugClass::kF;
    case K::kOutOfRangeWrite: return f.output == B::kPartialO ? BugClass::kF : BugClass::kC;
    case K::kOutOfRangeRead:
      if (ViaInvalidIndex(f) || IsIndexSource(f.source)) return BugClass::kG;
      return f.source == B::kPartialO ? BugClass::kF : BugClass::kC;
    case K::kUnwrittenRead: return f.source == B::kPartialO ? BugClass::kF : BugClass::kE;
  }
  return BugClass::kI;
}

int64_t NumericsTensorValues(const ref::PlanRequest& r, const ref::NumericsOptions& o) {
  if (r.kv_indptr.empty() || r.qo_indptr.empty()) return 0;
  const int64_t pages = int64_t{r.kv_indptr.back()} + o.spare_pages;
  const int64_t kv = pages * std::max(r.page_size, 1) * o.head_dim_qk;
  const int64_t q = int64_t{r.qo_indptr.back()} * r.heads_per_head_k * o.head_dim_qk;
  return std::max(kv, q);
}

std::vector<DecodeNumerics> RunStepNumerics(const Scenario& s, const Trace& t,
                                            const StepNumericsOptions& o) {
  using P = EngineProfile::Padding;
  // One run per (plan snapshot, semantics, index values): draft step 0 reusing the verify plan
  // gets the same report.
  using Key = std::tuple<int32_t, int, bool, int, int, std::vector<std::pair<int64_t, int64_t>>>;
  std::map<Key, size_t> done;
  std::vector<DecodeNumerics> out;
  for (const Call& call : t.calls) {
    if (call.kind != CallKind::kDecode) continue;
    if (call.plan < 0 || call.plan >= static_cast<int32_t>(t.plans.size())) continue;
    DecodeNumerics r;
    r.call = &call;
    r.snap = &t.plans[call.plan];
    const ref::PlanRequest req = KernelRequest(r.snap->request);
    const int64_t pad_row = FirstPaddingRow(req, r.snap->real_requests);
    const bool padded = pad_row != std::numeric_limits<int64_t>::max();
    r.o_padding_consumed = padded && s.engine.o_padding == P::kConsumed;
    r.lse_padding_consumed = padded && s.engine.lse_padding == P::kConsumed;
    if (call.guard_refused) {
      r.launched = false;
      out.push_back(std::move(r));
      continue;
    }
    ref::NumericsOptions opt = o.numerics;
    if (call.contract) ApplyDecodeSemantics(call.contract->semantics, &opt);
    if (o.override.invalid_index) opt.invalid_index = *o.override.invalid_index;
    if (o.override.read_masked_keys) opt.read_masked_keys = *o.override.read_masked_keys;
    if (o.override.empty_rows) opt.empty_rows = *o.override.empty_rows;
    if (o.override.zero_kv) opt.zero_kv = *o.override.zero_kv;
    opt.index_values = DecodeIndexValues(t, call);
    if (padded) opt.real_rows = pad_row;
    r.invalid_index = opt.invalid_index;
    r.read_masked_keys = opt.read_masked_keys;
    r.empty_rows = opt.empty_rows;
    r.zero_kv = opt.zero_kv;
    r.index_values = static_cast<int64_t>(opt.index_values.size());
    const Key key{call.plan,
                  static_cast<int>(opt.invalid_index),
                  opt.read_masked_keys,
                  static_cast<int>(opt.empty_rows),
                  static_cast<int>(opt.zero_kv),
                  opt.index_values};
    if (const auto it = done.find(key); it != done.end()) {
      r.rep = out[it->second].rep;
      r.error = out[it->second].error;
    } else {
      auto rep = ref::RunPlanNumerics(req, r.snap->plan, opt);
      if (rep.ok())
        r.rep = std::move(*rep);
      else  // a request the numerics cannot model (a decreasing kv_indptr, ...): the call's
        r.error = rep.status().ToString();  // finding, not bad input
      done[key] = out.size();
    }
    if (r.error.empty()) {
      Classify(r, pad_row);
      AddViolations(r, pad_row);
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace mlasim::sim
