// Helpers for building planner requests and reading plans in tests.
#pragma once

#include <map>
#include <vector>

#include "ref/metadata.h"

namespace mlasim::ref::test {

using Rows = std::vector<std::vector<int32_t>>;

// A dense request over `kv_tokens` (tokens per request) in aiter's page layout: pages =
// ceil(tokens / page), last page = tokens - (pages-1)*page (page for an empty request).
inline PlanRequest DenseRequest(Arch target, int32_t heads, int32_t qlen,
                                const std::vector<int32_t>& kv_tokens, int32_t clusters,
                                int32_t page = 1, int32_t gran = 16) {
  PlanRequest r;
  r.target = target;
  r.cu_count = clusters;
  r.heads_per_head_k = heads;
  r.page_size = page;
  r.kv_granularity = gran;
  r.qlen = r.max_seqlen_qo = r.uni_seqlen_qo = qlen;
  r.qo_indptr = {0};
  r.kv_indptr = {0};
  for (int32_t tokens : kv_tokens) {
    const int32_t pages = (tokens + page - 1) / page;
    r.qo_indptr.push_back(r.qo_indptr.back() + qlen);
    r.kv_indptr.push_back(r.kv_indptr.back() + pages);
    r.kv_last_page_lens.push_back(tokens == 0 ? page : tokens - (pages - 1) * page);
  }
  return r;
}

// aiter-native sparse (§8.1): per-request qo_indptr of `tokens` rows, planner sees qlen 1.
inline PlanRequest SparseRequest(Arch target, int32_t heads, int32_t tokens,
                                 const std::vector<int32_t>& ctx, int32_t topk, int32_t clusters) {
  PlanRequest r = DenseRequest(target, heads, tokens, ctx, clusters);
  r.max_seqlen_qo = r.uni_seqlen_qo = 1;
  r.qlen = tokens;
  r.topk = topk;
  return r;
}

inline Rows WorkRows(const Plan& p) {
  Rows rows;
  for (int32_t w = 0; w < p.derived.num_works; ++w)
    rows.emplace_back(p.work_info.data.begin() + w * kWorkInfoWidth,
                      p.work_info.data.begin() + (w + 1) * kWorkInfoWidth);
  return rows;
}

inline std::vector<int32_t> Prefix(const Int32Buffer& b, size_t n) {
  return std::vector<int32_t>(b.data.begin(), b.data.begin() + static_cast<long>(n));
}

inline std::vector<int32_t> WrittenPrefix(const Int32Buffer& b) {
  return Prefix(b, static_cast<size_t>(b.WrittenPrefix()));
}

// Written reduce_final_map rows as {tile, q_start, q_end}.
inline Rows FinalMap(const Plan& p) {
  Rows rows;
  const Int32Buffer& fm = p.reduce_final_map;
  for (int64_t t = 0; t < fm.rows(); ++t) {
    const int64_t row = t * kReduceFinalMapWidth;
    if (fm.written(row + kFinalQoStart))
      rows.push_back(
          {static_cast<int32_t>(t), fm.data[row + kFinalQoStart], fm.data[row + kFinalQoEnd]});
  }
  return rows;
}

}  // namespace mlasim::ref::test
