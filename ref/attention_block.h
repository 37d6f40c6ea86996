// File: ref/attention_block.h (internal to ref/attention*.cpp)
//
// One attention block with Eigen: m query rows against n keys. The caller gathers the q rows
// (already multiplied by the logit scale) and the key rows (V = the first Dv columns), sets the
// per-row causal limit and the per-key validity, and reads back the normalised (or not) o rows,
// the natural-log LSE and which rows had no visible key.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "ref/dtypes.h"

namespace mlasim::ref::internal {

// Scores of one block are capped at this many elements; larger blocks run in row chunks.
inline constexpr int64_t kMaxScoreElements = int64_t{1} << 22;

template <typename T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using RowMatMap = Eigen::Map<RowMat<T>>;

// Growable scratch, reused across blocks so a fuzzing loop does not allocate per work item.
template <typename T>
struct BlockBuffers {
  std::vector<T> q;                // m x D, scaled by the logit scale
  std::vector<T> k;                // n x D
  std::vector<T> s;                // m x n: scores, then P
  std::vector<T> o;                // m x Dv
  std::vector<uint8_t> col_valid;  // n: 0 = masked key (sparse invalid entry, zero row)
  std::vector<int32_t> row_limit;  // m: keys [0, limit) pass the causal rule
  std::vector<T> lse;              // m
  std::vector<T> row_sum;          // m
  std::vector<uint8_t> row_empty;  // m: no visible key

  void Resize(int64_t m, int64_t n, int32_t d, int32_t dv) {
    auto grow = [](auto& v, int64_t size) {
      if (static_cast<int64_t>(v.size()) < size) v.resize(static_cast<size_t>(size));
    };
    grow(q, m * d);
    grow(k, n * d);
    grow(s, m * n);
    grow(o, m * dv);
    grow(col_valid, n);
    grow(row_limit, m);
    grow(lse, m);
    grow(row_sum, m);
    grow(row_empty, m);
  }
};

// Per-thread scratch reused across calls: a fuzzing loop then pays the allocation and the first
// touch of its pages once. Nothing is carried between calls: every element is written before it
// is read.
template <typename T>
BlockBuffers<T>& ThreadBlockBuffers() {
  thread_local BlockBuffers<T> buffers;
  return buffers;
}

struct BlockParams {
  int64_t m = 0;  // query rows
  int64_t n = 0;  // keys
  int32_t head_dim_qk = 0;
  int32_t head_dim_v = 0;
  bool has_invalid_cols = false;  // consult col_valid
  double v_scale = 1.0;           // kv_scale, applied to o
  NumFormat p_format = NumFormat::kFp64;
  bool normalize = true;        // false: o = sum_j p_j v_j (NumericsMutant::kUnnormalizedPartial)
  bool empty_rows_nan = false;  // true: empty rows get 0/0 = NaN (EmptyRowPolicy::kNan)
};

// Rounds every element of p to `format` (no-op for formats at least as wide as T).
template <typename T>
void RoundWeights(T* p, int64_t n, NumFormat format) {
  if (format == NumFormat::kFp64) return;
  if (format == NumFormat::kFp32 && sizeof(T) == sizeof(float)) return;
  if (format == NumFormat::kBf16 && sizeof(T) == sizeof(float)) {
    // Ties-to-even on the float bits; the weights are finite and >= 0.
    for (int64_t j = 0; j < n; ++j) {
      uint32_t u;
      std::memcpy(&u, &p[j], sizeof(u));
      u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
      std::memcpy(&p[j], &u, sizeof(u));
    }
    return;
  }
  const Rounder round(format);
  for (int64_t j = 0; j < n; ++j) p[j] = static_cast<T>(round(static_cast<double>(p[j])));
}

// Scores, masked softmax and P x V for one block. Rows with no visible key get o = 0 and
// lse = -inf (row_empty = 1). A NaN score (poisoned key) makes its row NaN, by design.
template <typename T>
void AttendBlock(BlockBuffers<T>& b, const BlockParams& p) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  const int64_t m = p.m, n = p.n;
  RowMatMap<T> q(b.q.data(), m, p.head_dim_qk);
  RowMatMap<T> k(b.k.data(), n, p.head_dim_qk);
  RowMatMap<T> s(b.s.data(), m, n);
  RowMatMap<T> o(b.o.data(), m, p.head_dim_v);
  if (n > 0) s.noalias() = q * k.transpose();
  for (int64_t r = 0; r < m; ++r) {
    const int64_t c = std::clamp<int64_t>(b.row_limit[r], 0, n);
    T* row = s.data() + r * n;
    if (p.has_invalid_cols)
      for (int64_t j = 0; j < c; ++j)
        if (!b.col_valid[j]) row[j] = kNegInf;
    T mx = kNegInf;
    if (c > 0) mx = s.row(r).head(c).template maxCoeff<Eigen::PropagateNaN>();
    if (c == 0 || mx == kNegInf) {
      s.row(r).setZero();
      b.row_empty[r] = 1;
      b.lse[r] = kNegInf;
      b.row_sum[r] = 0;
      continue;
    }
    b.row_empty[r] = 0;
    s.row(r).head(c) = (s.row(r).head(c).array() - mx).exp();
    // Eigen's vectorised exp gives ~1e-39, not 0, for -inf: masked keys are zeroed explicitly.
    if (p.has_invalid_cols)
      for (int64_t j = 0; j < c; ++j)
        if (!b.col_valid[j]) row[j] = 0;
    if (c < n) s.row(r).tail(n - c).setZero();
    const T l = s.row(r).head(c).sum();
    b.row_sum[r] = l;
    b.lse[r] = mx + std::log(l);
    RoundWeights(row, c, p.p_format);
  }
  if (n > 0) {
    o.noalias() = s * k.leftCols(p.head_dim_v);
  } else {
    o.setZero();
  }
  const T v_scale = static_cast<T>(p.v_scale);
  for (int64_t r = 0; r < m; ++r) {
    if (b.row_empty[r]) {
      o.row(r).setConstant(p.empty_rows_nan ? std::numeric_limits<T>::quiet_NaN() : T(0));
      continue;
    }
    o.row(r) *= p.normalize ? v_scale / b.row_sum[r] : v_scale;
  }
}

}  // namespace mlasim::ref::internal
