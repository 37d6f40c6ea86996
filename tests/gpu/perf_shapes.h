// tests/gpu/perf_shapes.h - the decode shapes the GPU performance runs time, shared by the perf
// tests (gpu_perf_test.cpp) and the FlashMLA side-by-side benchmark (flashmla_bench.cu): uniform
// batches, fast deterministic inputs (identity page table, values in [-1, 1) exact in bf16 or
// e4m3fn) and the bytes / operations each shape must move / do.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ref/attention.h"
#include "ref/dtypes.h"
#include "ref/metadata.h"

namespace mlasim::perf {

struct DecodeShape {
  std::string name;
  int32_t batch = 128, ctx = 8192, qlen = 1;
  int32_t topk = -1;  // >= 0: sparse top-k (one list per token)
  int32_t heads = 16;
  int32_t clusters = 132;    // cu_count the plan is made for (one workgroup per SM on the H200)
  int32_t page = 1;          // tokens per page (dense; ctx a multiple of it): 64 is FlashMLA's
  bool topk_window = false;  // sparse: each token's list is one run of consecutive rows
  ref::NumFormat kv_format = ref::NumFormat::kBf16;
  ref::NumFormat q_format = ref::NumFormat::kBf16;  // fp8_e4m3fn: with fp8 KV (ATOM#287's q)
};

// B requests of `ctx` tokens and `qlen` q rows each, pages of `page` tokens. Other head counts than 16 are
// planned with gfx950's rules, under which bf16 plans any head count natively: gfx942's rules
// fold 128 heads into 8 x 16 (aiter-mla-metadata.md §4.5), and run_mla_decode runs no folded plan.
inline ref::PlanRequest UniformRequest(const DecodeShape& s) {
  ref::PlanRequest r;
  if (s.heads != 16) r.target = ref::Arch::kGfx950;
  r.cu_count = s.clusters;
  r.heads_per_head_k = s.heads;
  r.qlen = r.max_seqlen_qo = r.uni_seqlen_qo = s.qlen;
  r.topk = s.topk;
  if (s.topk >= 0) r.uni_seqlen_qo = r.max_seqlen_qo = 1;  // sparse plans are per token
  r.page_size = s.page;
  r.qo_indptr = {0};
  r.kv_indptr = {0};
  for (int32_t i = 0; i < s.batch; ++i) {
    r.kv_indptr.push_back(r.kv_indptr.back() + s.ctx / s.page);
    r.kv_last_page_lens.push_back(s.page);
    r.qo_indptr.push_back(r.qo_indptr.back() + s.qlen);
  }
  return r;
}

// Inputs for the shape: values in [-1, 1) rounded to bf16 (an LCG, seed fixed), identity page
// table, no NaN filling; sparse lists are a fixed hash of (token, slot) within the token's
// request (or, topk_window, token t's slot j is row (j + topk (t % qlen)) % ctx of it). fp8 KV
// (and fp8 q): e4m3fn values with |v| < 2 (the fraction and sign bits of the draws).
inline ref::MlaInputs FastInputs(const ref::PlanRequest& r, const DecodeShape& s) {
  ref::MlaInputs in;
  in.num_heads = s.heads;
  in.page_size = s.page;
  in.num_pages = r.kv_indptr.back();
  in.qo_indptr = r.qo_indptr;
  in.kv_indptr = r.kv_indptr;
  in.kv_last_page_lens = r.kv_last_page_lens;
  in.kv_indices.resize(static_cast<size_t>(in.num_pages));
  for (int32_t i = 0; i < in.num_pages; ++i) in.kv_indices[i] = i;
  uint32_t x = 12345;
  auto next = [&] {
    x = x * 1664525u + 1013904223u;
    return static_cast<float>(static_cast<int32_t>(x >> 16) - 32768) / 32768.f;
  };
  in.q.resize(static_cast<size_t>(in.q_rows()) * s.heads * 576);
  for (auto& v : in.q) v = next();
  in.kv_cache.resize(static_cast<size_t>(in.num_pages) * s.page * 576);
  for (auto& v : in.kv_cache) v = next();
  const auto to_e4m3fn = [](std::vector<float>& values) {
    for (float& v : values) {
      uint32_t u;
      std::memcpy(&u, &v, 4);
      v = static_cast<float>(ref::DecodeFp8(ref::NumFormat::kFp8E4m3fn,
                                            static_cast<uint8_t>(((u >> 13) & 0x87u) | 0x30u)));
    }
  };
  if (s.kv_format == ref::NumFormat::kFp8E4m3fn) to_e4m3fn(in.kv_cache);
  if (s.q_format == ref::NumFormat::kFp8E4m3fn) to_e4m3fn(in.q);
  if (s.topk >= 0) {
    in.topk = s.topk;
    in.topk_indices.resize(static_cast<size_t>(in.q_rows()) * s.topk);
    for (int32_t t = 0; t < in.q_rows(); ++t) {
      const int32_t req = t / s.qlen;
      for (int32_t j = 0; j < s.topk; ++j)
        in.topk_indices[static_cast<size_t>(t) * s.topk + j] =
            req * s.ctx +
            static_cast<int32_t>((s.topk_window ? j + t % s.qlen * s.topk : j * 2654435761u + t) %
                                 s.ctx);
    }
  }
  return in;
}

// The KV-cache rows a decode of `in` reads, once each, in the order of its keys: every
// request's pages row by row (dense), every token's top-k list (sparse; -1 entries skipped).
inline std::vector<int32_t> KvRowsRead(const ref::MlaInputs& in) {
  std::vector<int32_t> rows;
  if (in.topk >= 0) {
    for (int32_t r : in.topk_indices)
      if (r >= 0) rows.push_back(r);
    return rows;
  }
  for (int32_t b = 0; b < in.num_requests(); ++b) {
    const int32_t first = in.kv_indptr[b], pages = in.kv_indptr[b + 1] - first;
    for (int32_t p = 0; p < pages; ++p) {
      const int32_t n = p + 1 < pages ? in.page_size : in.kv_last_page_lens[b];
      for (int32_t j = 0; j < n; ++j) rows.push_back(in.kv_indices[first + p] * in.page_size + j);
    }
  }
  return rows;
}

// What a shape must move and compute at least: each request's KV rows once (dense; sparse: each
// token's top-k rows once), q and o once; 2 x rows x keys x (576 + 512) flops.
struct Traffic {
  double bytes = 0, flops = 0;
};
inline Traffic DecodeTraffic(const DecodeShape& s) {
  const double tokens = double(s.batch) * s.qlen;
  const double elem = s.kv_format == ref::NumFormat::kFp8E4m3fn ? 1 : 2;
  const double q_elem = s.q_format == ref::NumFormat::kFp8E4m3fn ? 1 : 2;
  const double keys_per_token = s.topk >= 0 ? s.topk : s.ctx;
  const double kv =
      s.topk >= 0 ? tokens * s.topk * 576 * elem : double(s.batch) * s.ctx * 576 * elem;
  Traffic t;
  t.bytes = kv + tokens * s.heads * 576 * q_elem + tokens * s.heads * 512 * 2;
  t.flops = 2.0 * tokens * s.heads * keys_per_token * (576 + 512);
  return t;
}

}  // namespace mlasim::perf
