// Input validation and the monolithic reference: every request's q rows against its whole KV.
#include "ref/attention.h"

#include <cmath>
#include <limits>
#include <string>

#include "ref/attention_block.h"
#include "ref/indptr.h"

namespace mlasim::ref {
namespace {

using internal::AttendBlock;
using internal::BlockBuffers;
using internal::BlockParams;

std::string S(int64_t x) {
  return std::to_string(x);
}
std::string At(const char* name, int64_t i) {
  return std::string(name) + "[" + S(i) + "]";
}

using internal::kMaxScoreElements;

Status CheckDims(const MlaInputs& in) {
  if (in.num_heads < 1) return InvalidArgumentError("num_heads", "must be >= 1");
  if (in.head_dim_qk < 1) return InvalidArgumentError("head_dim_qk", "must be >= 1");
  if (in.head_dim_v < 1 || in.head_dim_v > in.head_dim_qk)
    return InvalidArgumentError(
        "head_dim_v", "must be in 1..head_dim_qk (V is a prefix of K), got " + S(in.head_dim_v));
  if (in.page_size < 1) return InvalidArgumentError("page_size", "must be >= 1");
  if (in.num_pages < 0) return InvalidArgumentError("num_pages", "must be >= 0");
  for (auto [name, v] :
       {std::pair<const char*, double>{"q_scale", in.q_scale}, {"kv_scale", in.kv_scale}})
    if (!(std::isfinite(v) && v > 0)) return InvalidArgumentError(name, "must be finite and > 0");
  if (!(std::isfinite(in.sm_scale) && in.sm_scale >= 0))
    return InvalidArgumentError("sm_scale", "must be finite and >= 0 (0 = 1/sqrt(head_dim_qk))");
  return OkStatus();
}

Status CheckDenseKv(const MlaInputs& in) {
  const int32_t batch = in.num_requests();
  if (static_cast<int32_t>(in.kv_last_page_lens.size()) != batch)
    return InvalidArgumentError("kv_last_page_lens", "must hold one entry per request (" +
                                                         S(batch) + "), got " +
                                                         S(in.kv_last_page_lens.size()));
  for (int32_t b = 0; b < batch; ++b) {
    const int32_t len = in.kv_last_page_lens[b];
    if (len < 0 || len > in.page_size)
      return InvalidArgumentError(
          At("kv_last_page_lens", b),
          "must be in 0..page_size (" + S(in.page_size) + "), got " + S(len));
  }
  const int64_t used = in.kv_indptr.back();
  if (static_cast<int64_t>(in.kv_indices.size()) < used)
    return InvalidArgumentError("kv_indices", "holds " + S(in.kv_indices.size()) +
                                                  " entries but kv_indptr uses " + S(used));
  // A page id outside the cache (-1, past the cache, INT_MAX) in a used slot is an invalid
  // index the engine wrote: its keys are masked, never read (the sparse rule, per page).
  return OkStatus();
}

Status CheckSparseKv(const MlaInputs& in) {
  if (in.page_size != 1)
    return InvalidArgumentError("page_size",
                                "sparse top-k mode is modelled for page_size 1 only "
                                "(aiter's test_mla_sparse.py, §8.1)");
  const int64_t want = int64_t{in.q_rows()} * in.topk;
  if (static_cast<int64_t>(in.topk_indices.size()) != want)
    return InvalidArgumentError("topk_indices", "must hold q_rows * topk = " + S(want) +
                                                    " entries, got " + S(in.topk_indices.size()));
  return OkStatus();
}

// Tokens of request b (dense): (pages - 1) * page_size + last page length, 0 without pages.
int64_t DenseKvTokens(const MlaInputs& in, int32_t b) {
  const int64_t pages = in.kv_indptr[b + 1] - in.kv_indptr[b];
  return pages == 0 ? 0 : (pages - 1) * in.page_size + in.kv_last_page_lens[b];
}

template <typename T>
class Monolithic {
 public:
  Monolithic(const MlaInputs& in, const AttentionPrecision& prec, AttentionOutput& out)
      : in_(in), prec_(prec), out_(out) {}

  void Run() {
    const int32_t batch = in_.num_requests();
    for (int32_t b = 0; b < batch; ++b) {
      if (in_.topk >= 0) {
        for (int32_t t = in_.qo_indptr[b]; t < in_.qo_indptr[b + 1]; ++t) SparseToken(b, t);
      } else {
        DenseRequest(b);
      }
    }
  }

 private:
  // Keys [0, n) of request b; a key whose page id is outside the cache is masked (never read).
  // Returns true when one was.
  bool GatherDenseKeys(int32_t b, int64_t n) {
    const int32_t d = in_.head_dim_qk, page = in_.page_size;
    const int64_t base = in_.kv_indptr[b];
    bool invalid = false;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t id = in_.kv_indices[base + j / page];
      T* dst = buf_.k.data() + j * d;
      buf_.col_valid[j] = id >= 0 && id < in_.num_pages;
      if (!buf_.col_valid[j]) {
        std::fill(dst, dst + d, T(0));
        invalid = true;
        continue;
      }
      const float* src = in_.kv_cache.data() + (id * page + j % page) * d;
      std::copy(src, src + d, dst);
    }
    return invalid;
  }

  // Rows [r0, r1) of the block whose row r is (token q_first + r / H, head r % H).
  void GatherQ(int64_t q_first, int64_t r0, int64_t r1) {
    const int32_t d = in_.head_dim_qk;
    const T scale = static_cast<T>(in_.effective_sm_scale() * in_.q_scale * in_.kv_scale);
    const float* src = in_.q.data() + (q_first * in_.num_heads + r0) * d;
    T* dst = buf_.q.data();
    for (int64_t i = 0; i < (r1 - r0) * d; ++i) dst[i] = static_cast<T>(src[i]) * scale;
  }

  void Emit(int64_t q_first, int64_t r0, int64_t m) {
    const int32_t dv = in_.head_dim_v;
    const NumFormat f = prec_.out_format;
    const bool exact =
        f == NumFormat::kFp64 || (f == NumFormat::kFp32 && sizeof(T) == sizeof(float));
    const Rounder round(f);
    for (int64_t r = 0; r < m; ++r) {
      const int64_t out_row = q_first * in_.num_heads + r0 + r;
      double* dst = out_.o.data() + out_row * dv;
      const T* src = buf_.o.data() + r * dv;
      for (int32_t x = 0; x < dv; ++x)
        dst[x] = exact ? static_cast<double>(src[x]) : round(static_cast<double>(src[x]));
      out_.lse[out_row] = static_cast<double>(buf_.lse[r]);
    }
  }

  // Runs rows [0, rows) of the block in chunks that keep the score matrix bounded; `limit(r)`
  // gives the causal limit of block row r.
  template <typename LimitFn>
  void RunRows(int64_t q_first, int64_t rows, int64_t n, bool invalid_cols, LimitFn limit) {
    const int64_t chunk = std::max<int64_t>(1, kMaxScoreElements / std::max<int64_t>(n, 1));
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
      const int64_t m = std::min(chunk, rows - r0);
      buf_.Resize(m, n, in_.head_dim_qk, in_.head_dim_v);
      GatherQ(q_first, r0, r0 + m);
      for (int64_t r = 0; r < m; ++r) buf_.row_limit[r] = limit(r0 + r);
      BlockParams p;
      p.m = m;
      p.n = n;
      p.head_dim_qk = in_.head_dim_qk;
      p.head_dim_v = in_.head_dim_v;
      p.has_invalid_cols = invalid_cols;
      p.v_scale = in_.kv_scale;
      p.p_format = prec_.p_format;
      AttendBlock(buf_, p);
      Emit(q_first, r0, m);
    }
  }

  void DenseRequest(int32_t b) {
    const int64_t lq = in_.qo_indptr[b + 1] - in_.qo_indptr[b];
    const int64_t lk = DenseKvTokens(in_, b);
    if (lq == 0) return;
    buf_.Resize(0, lk, in_.head_dim_qk, in_.head_dim_v);
    const bool invalid = GatherDenseKeys(b, lk);
    const int32_t heads = in_.num_heads;
    const bool causal = in_.is_causal;
    RunRows(in_.qo_indptr[b], lq * heads, lk, invalid, [&](int64_t r) -> int32_t {
      const int64_t i = r / heads;
      const int64_t lim = causal ? i + lk - lq + 1 : lk;
      return static_cast<int32_t>(std::clamp<int64_t>(lim, 0, lk));
    });
  }

  void SparseToken(int32_t b, int32_t t) {
    const int64_t n = std::min<int64_t>(in_.kv_indptr[b + 1] - in_.kv_indptr[b], in_.topk);
    const int64_t rows_in_cache = int64_t{in_.num_pages} * in_.page_size;
    const int32_t d = in_.head_dim_qk;
    buf_.Resize(0, n, d, in_.head_dim_v);
    bool invalid = false;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t idx = in_.topk_indices[int64_t{t} * in_.topk + j];
      T* dst = buf_.k.data() + j * d;
      if (idx < 0 || idx >= rows_in_cache) {  // masked, never read
        std::fill(dst, dst + d, T(0));
        buf_.col_valid[j] = 0;
        invalid = true;
        continue;
      }
      buf_.col_valid[j] = 1;
      const float* src = in_.kv_cache.data() + idx * d;
      std::copy(src, src + d, dst);
    }
    RunRows(t, in_.num_heads, n, invalid, [n](int64_t) { return static_cast<int32_t>(n); });
  }

  const MlaInputs& in_;
  const AttentionPrecision& prec_;
  AttentionOutput& out_;
  BlockBuffers<T>& buf_ = internal::ThreadBlockBuffers<T>();
};

}  // namespace

double MlaInputs::effective_sm_scale() const {
  return sm_scale > 0 ? sm_scale : 1.0 / std::sqrt(static_cast<double>(head_dim_qk));
}

namespace {
Status ValidateMla(const MlaInputs& in, bool values);
}  // namespace

Status ValidateMlaInputs(const MlaInputs& in) {
  return ValidateMla(in, true);
}
Status ValidateMlaShape(const MlaInputs& in) {
  return ValidateMla(in, false);
}

namespace {
Status ValidateMla(const MlaInputs& in, bool values) {
  MLASIM_RETURN_IF_ERROR(CheckDims(in));
  IndptrRule from_zero;
  from_zero.starts_at_zero = true;  // offsets into this call's own q and page arrays
  MLASIM_RETURN_IF_ERROR(CheckIndptr(in.qo_indptr, "qo_indptr", from_zero));
  MLASIM_RETURN_IF_ERROR(CheckIndptr(in.kv_indptr, "kv_indptr", from_zero));
  if (in.kv_indptr.size() != in.qo_indptr.size())
    return InvalidArgumentError(
        "kv_indptr", "must have as many entries as qo_indptr (B+1 = " + S(in.qo_indptr.size()) +
                         "), got " + S(in.kv_indptr.size()));
  const int64_t q_elems = int64_t{in.q_rows()} * in.num_heads * in.head_dim_qk;
  if (values && static_cast<int64_t>(in.q.size()) != q_elems)
    return InvalidArgumentError("q", "must hold q_rows * num_heads * head_dim_qk = " + S(q_elems) +
                                         " values, got " + S(in.q.size()));
  const int64_t kv_elems = int64_t{in.num_pages} * in.page_size * in.head_dim_qk;
  if (values && static_cast<int64_t>(in.kv_cache.size()) != kv_elems)
    return InvalidArgumentError("kv_cache",
                                "must hold num_pages * page_size * head_dim_qk = " + S(kv_elems) +
                                    " values, got " + S(in.kv_cache.size()));
  if (in.topk < -1) return InvalidArgumentError("topk", "must be -1 (dense) or >= 0 (sparse)");
  return in.topk >= 0 ? CheckSparseKv(in) : CheckDenseKv(in);
}
}  // namespace

StatusOr<AttentionOutput> RunMonolithic(const MlaInputs& inputs,
                                        const AttentionPrecision& precision) {
  MLASIM_RETURN_IF_ERROR(ValidateMlaInputs(inputs));
  AttentionOutput out;
  out.q_rows = inputs.q_rows();
  out.num_heads = inputs.num_heads;
  out.head_dim_v = inputs.head_dim_v;
  out.o.assign(static_cast<size_t>(int64_t{out.q_rows} * out.num_heads * out.head_dim_v),
               std::numeric_limits<double>::quiet_NaN());
  out.lse.assign(static_cast<size_t>(int64_t{out.q_rows} * out.num_heads),
                 std::numeric_limits<double>::quiet_NaN());
  if (precision.accumulate == Accumulate::kFp64) {
    Monolithic<double>(inputs, precision, out).Run();
  } else {
    Monolithic<float>(inputs, precision, out).Run();
  }
  return out;
}

const char* NumericsMutantName(NumericsMutant m) {
  switch (m) {
    case NumericsMutant::kNone: return "none";
    case NumericsMutant::kMergePieceTwice: return "reduce-merges-piece-twice";
    case NumericsMutant::kPartialRowOffByOne: return "partial-row-off-by-one";
    case NumericsMutant::kUnnormalizedPartial: return "unnormalized-partial";
    case NumericsMutant::kCausalOffByOne: return "causal-off-by-one";
    case NumericsMutant::kIgnoreQLens: return "numerics-ignores-q-lens";
    case NumericsMutant::kEmptyRowsFollowZeroKv: return "empty-rows-follow-zero-kv";
    case NumericsMutant::kCount: break;
  }
  return "?";
}

const char* NumericsBufferName(NumericsBuffer b) {
  switch (b) {
    case NumericsBuffer::kO: return "o";
    case NumericsBuffer::kPartialO: return "partial_o";
    case NumericsBuffer::kKvCache: return "kv_cache";
    case NumericsBuffer::kKvIndices: return "kv_indices";
    case NumericsBuffer::kTopkIndices: return "topk_indices";
    case NumericsBuffer::kKvIndptr: return "kv_indptr";
    case NumericsBuffer::kWorkIndptr: return "work_indptr";
    case NumericsBuffer::kWorkInfo: return "work_info";
    case NumericsBuffer::kReduceIndptr: return "reduce_indptr";
    case NumericsBuffer::kReduceFinalMap: return "reduce_final_map";
    case NumericsBuffer::kReducePartialMap: return "reduce_partial_map";
  }
  return "?";
}

const char* PoisonKindName(PoisonKind k) {
  switch (k) {
    case PoisonKind::kUnwrittenRead: return "unwritten_read";
    case PoisonKind::kOutOfRangeRead: return "out_of_range_read";
    case PoisonKind::kOutOfRangeWrite: return "out_of_range_write";
    case PoisonKind::kNeverWritten: return "never_written";
    case PoisonKind::kTaintedRead: return "tainted_read";
    case PoisonKind::kHostileIndex: return "hostile_index";
    case PoisonKind::kMaskedNaN: return "masked_nan";
    case PoisonKind::kEmptyRowNaN: return "empty_row_nan";
    case PoisonKind::kRacingWrite: return "racing_write";
  }
  return "?";
}

std::string PoisonFinding::ToString() const {
  std::string s = std::string(PoisonKindName(kind)) + ": " + NumericsBufferName(output) + " rows ";
  s += row_begin < 0 ? std::string("?") : "[" + S(row_begin) + "," + S(row_end) + ")";
  s += " heads [" + S(head_begin) + "," + S(head_end) + ") from " + NumericsBufferName(source);
  if (source_index >= 0) s += "[" + S(source_index) + "]";
  if (has_value) s += " = " + S(source_value);
  if (work >= 0) s += " work " + S(work);
  if (tile >= 0) s += " tile " + S(tile);
  if (!via.empty()) s += " (" + via + ")";
  return s;
}

}  // namespace mlasim::ref
