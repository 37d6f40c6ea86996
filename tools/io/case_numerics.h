// File: tools/io/case_numerics.h
//
// Numerics inside `mlasim check CASE_DIR` (issue 14: "runs the numerics when q, KV and o were
// captured"): the project's CPU reference (ref/attention.h) runs the captured plan over the
// captured q and KV cache, and the captured o (and lse, when captured) is compared with it over
// the real rows, element by element, within the tolerances of docs/numerics.md ("Tolerances")
// for fp32 accumulation with P rounded to the KV format and o to the captured o's format.
//
// What a case must hold (else the section says "not run" and why, never "passed"):
//   q          [rows, heads, D]      bfloat16 | float16 | float32 | float8_e4m3fn(uz)
//   kv_buffer  [..., D]              the KV cache (also "kv_cache" or "kv"); its leading
//                                    dimensions flatten to pages x page_size token rows
//   kv_indices [n] int32             the page table (dense)
//   o          [rows', heads, Dv]    bfloat16 | float16 | float32; Dv <= D (V = the first Dv
//                                    columns of each KV row)
//   lse        [rows', heads] float32 (optional; also "attn_lse", also [rows', heads, 1])
//   the planner request (config.planner + qo_indptr, kv_indptr, kv_last_page_lens) and the five
//   plan buffers. Dequantisation: config.numerics.q_scale / kv_scale (default 1) and
//   config.numerics.sm_scale (default 1/sqrt(D)).
// Real rows: q rows of the leading requests with KV (padding requests have none), and at most
// the rows q and o hold. q rows the plan covers past the captured q read NaN (poison) in the
// reference; they belong to padding and are not compared.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ref/metadata.h"
#include "ref/status.h"
#include "tools/io/case_dir.h"
#include "tools/io/case_plan.h"

namespace mlasim::io {

// One captured output against the reference.
struct OutputNumerics {
  std::string tensor;  // the captured tensor's name ("o", "lse", "attn_lse")
  int64_t rows_compared = 0;
  int64_t elements = 0;
  double max_abs = 0, max_rel = 0;  // over finite pairs
  int64_t max_abs_row = -1;         // the row of max_abs
  double atol = 0, rtol = 0;
  int64_t elements_outside = 0;         // finite pairs outside atol + rtol |reference|
  int64_t nonfinite_elements = 0;       // NaN / Inf in the captured real rows
  int64_t reference_nonfinite = 0;      // NaN in the reference's real rows (poison: a plan bug)
  std::vector<int64_t> rows_differing;  // real rows with any of the above, first 16, ascending
  int64_t rows_differing_count = 0;
  bool passed = false;
};

struct CaseNumericsResult {
  bool ran = false;
  std::string reason;  // why not, when !ran
  int64_t real_rows = 0;
  int32_t heads = 0, head_dim_qk = 0, head_dim_v = 0, page_size = 1;
  std::string q_format, kv_format, out_format;
  OutputNumerics o;
  bool has_lse = false;
  OutputNumerics lse;
  bool passed() const { return ran && o.passed && (!has_lse || lse.passed); }
};

// Runs the reference over the captured tensors with the captured plan and compares. Errors
// (InvalidArgument, exit 2), naming "CASE/manifest.json:tensors.NAME.FIELD" or
// "...:config.numerics.KEY": a tensor of the wrong rank, dtype or width (q and o heads that
// differ, a KV width other than D, Dv > D), kv_indices not int32, a KV row count that is not a
// multiple of the page size, non-finite or non-positive scales, tensors above the case limits.
// `captured` is the captured plan (io::PlanFromBuffers); null: not run.
StatusOr<CaseNumericsResult> CheckCaseNumerics(const CaseFiles& files, const CaseManifest& manifest,
                                               const CasePlanner& planner,
                                               const ref::Plan* captured,
                                               const CaseLimits& limits = {});

}  // namespace mlasim::io
