// Numerics of a case directory (tools/io/case_numerics.h): the captured plan run by the CPU
// reference over the captured q and KV cache, compared with the captured o and lse.
#include "tools/io/case_numerics.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "ref/attention.h"
#include "ref/dtypes.h"
#include "ref/numerics.h"

namespace mlasim::io {
namespace {

constexpr size_t kRowsShown = 16;
constexpr int64_t kMaxValues = int64_t{1} << 28;  // BuildMlaInputs' bound on q / KV values

const CaseTensor* FindAny(const CaseManifest& m, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (const CaseTensor* t = m.Find(n)) return t;
  return nullptr;
}

// The storage format of a captured float tensor (fp8 by its torch name, not the target's).
StatusOr<ref::NumFormat> FormatOf(const CaseTensor& t, const std::string& field, bool fp8_ok) {
  if (t.dtype == "bfloat16") return ref::NumFormat::kBf16;
  if (t.dtype == "float16") return ref::NumFormat::kFp16;
  if (t.dtype == "float32") return ref::NumFormat::kFp32;
  if (fp8_ok && t.dtype == "float8_e4m3fn") return ref::NumFormat::kFp8E4m3fn;
  if (fp8_ok && t.dtype == "float8_e4m3fnuz") return ref::NumFormat::kFp8E4m3fnuz;
  return InvalidArgumentError(field, "dtype " + t.dtype + " is not one the numerics reads (" +
                                         (fp8_ok ? "bfloat16, float16, float32, float8_e4m3fn, "
                                                   "float8_e4m3fnuz)"
                                                 : "bfloat16, float16, float32)"));
}

// The tensor's elements as doubles, C order.
StatusOr<std::vector<double>> ReadValues(const CaseFiles& files, const CaseTensor& t,
                                         ref::NumFormat f, const CaseLimits& limits) {
  MLASIM_ASSIGN_OR_RETURN(std::string bytes, ReadTensorData(files, t, limits));
  const size_t n = bytes.size() / static_cast<size_t>(t.itemsize);
  std::vector<double> v(n);
  const unsigned char* p = reinterpret_cast<const unsigned char*>(bytes.data());
  for (size_t i = 0; i < n; ++i) {
    switch (f) {
      case ref::NumFormat::kBf16:
        v[i] = ref::DecodeBf16(uint16_t(p[2 * i] | p[2 * i + 1] << 8));
        break;
      case ref::NumFormat::kFp16:
        v[i] = ref::DecodeFp16(uint16_t(p[2 * i] | p[2 * i + 1] << 8));
        break;
      case ref::NumFormat::kFp32: {
        float x;
        std::memcpy(&x, p + 4 * i, 4);
        v[i] = x;
        break;
      }
      default: v[i] = ref::DecodeFp8(f, p[i]); break;
    }
  }
  return v;
}

// config.numerics: absent, or an object of the scales below (no other key: a misspelt scale
// would silently run with the default).
constexpr const char* kNumericsKeys[] = {"q_scale", "kv_scale", "sm_scale"};
// Real scales are near 1 (fp8 descales) or 1 / sqrt(head dim); a scale this large already makes
// the reference's float scores overflow on ordinary values.
constexpr double kMaxScale = 1e6;

Status CheckNumericsConfig(const CaseManifest& m, const std::string& manifest) {
  const auto cfg = m.config.find("numerics");
  if (cfg == m.config.end()) return OkStatus();
  if (!cfg->is_object())
    return InvalidArgumentError(manifest + ":config.numerics",
                                "must be an object of q_scale, kv_scale, sm_scale");
  for (auto it = cfg->begin(); it != cfg->end(); ++it)
    if (std::find_if(std::begin(kNumericsKeys), std::end(kNumericsKeys), [&](const char* k) {
          return it.key() == k;
        }) == std::end(kNumericsKeys))
      return InvalidArgumentError(manifest + ":config.numerics." + it.key(),
                                  "unknown key (known: q_scale, kv_scale, sm_scale)");
  return OkStatus();
}

StatusOr<double> ConfigScale(const CaseManifest& m, const char* key, double fallback,
                             const std::string& manifest) {
  const auto cfg = m.config.find("numerics");
  if (cfg == m.config.end() || !cfg->contains(key)) return fallback;
  const nlohmann::json& v = cfg->at(key);
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0 ||
      v.get<double>() > kMaxScale)
    return InvalidArgumentError(manifest + ":config.numerics." + key,
                                "must be a finite number > 0 and <= 1e6");
  return v.get<double>();
}

// Real rows: q rows of the leading requests with KV, capped by the captured q and o rows.
int64_t RealRows(const ref::PlanRequest& r, int64_t q_rows, int64_t o_rows) {
  size_t b = 0;
  while (b + 1 < r.kv_indptr.size() && r.kv_indptr[b + 1] > r.kv_indptr[b]) ++b;
  return std::min<int64_t>({r.qo_indptr[b], q_rows, o_rows});
}

// Compares `got` with `want` over `rows` rows of `width` elements.
OutputNumerics Compare(const std::string& name, const std::vector<double>& got,
                       const std::vector<double>& want, int64_t rows, int64_t width,
                       const ref::Tolerance& tol) {
  OutputNumerics r;
  r.tensor = name;
  r.rows_compared = rows;
  r.elements = rows * width;
  r.atol = tol.atol;
  r.rtol = tol.rtol;
  for (int64_t row = 0; row < rows; ++row) {
    bool bad = false;
    for (int64_t k = row * width; k < (row + 1) * width; ++k) {
      const double a = got[k], e = want[k];
      if (!std::isfinite(a)) {
        if (a == e) continue;  // lse of a row with no key: the same infinity
        ++r.nonfinite_elements, bad = true;
        continue;
      }
      if (std::isnan(e)) {
        ++r.reference_nonfinite, bad = true;
        continue;
      }
      if (!std::isfinite(e)) {  // the reference's row has no key (lse +-inf), the capture does
        ++r.elements_outside, bad = true;
        continue;
      }
      const double d = std::fabs(a - e);
      if (d > r.max_abs) r.max_abs = d, r.max_abs_row = row;
      if (e != 0) r.max_rel = std::max(r.max_rel, d / std::fabs(e));
      if (d > tol.atol + tol.rtol * std::fabs(e)) ++r.elements_outside, bad = true;
    }
    if (!bad) continue;
    ++r.rows_differing_count;
    if (r.rows_differing.size() < kRowsShown) r.rows_differing.push_back(row);
  }
  r.passed = r.rows_differing_count == 0;
  return r;
}

struct Captured {
  const CaseTensor *q = nullptr, *kv = nullptr, *idx = nullptr, *o = nullptr, *lse = nullptr;
};

std::string Missing(const Captured& c, const CasePlanner& p) {
  std::vector<std::string> m;
  if (!c.q) m.push_back("q");
  if (!c.kv) m.push_back("kv_buffer (or kv_cache, kv)");
  if (!c.idx) m.push_back("kv_indices");
  if (!c.o) m.push_back("o");
  if (!p.request) m.push_back(p.missing_request);
  if (!p.buffers) m.push_back(p.missing_buffers);
  std::string s;
  for (const std::string& x : m) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// Shapes: q [rows, H, D], o [rows', H, Dv], KV [..., D], lse [rows', H(, 1)].
Status CheckShapes(const Captured& c, const std::string& mf) {
  auto bad = [&](const CaseTensor* t, const std::string& why) {
    return InvalidArgumentError(mf + ":tensors." + t->name + ".shape", why);
  };
  if (c.q->shape.size() != 3) return bad(c.q, "q must be [rows, heads, D]");
  if (c.o->shape.size() != 3) return bad(c.o, "o must be [rows, heads, Dv]");
  if (c.o->shape[1] != c.q->shape[1]) return bad(c.o, "o and q have different head counts");
  if (c.o->shape[2] > c.q->shape[2] || c.o->shape[2] < 1)
    return bad(c.o, "Dv must be 1..D (V is the first Dv columns of a KV row)");
  if (c.kv->shape.size() < 2 || c.kv->shape.back() != c.q->shape[2])
    return bad(c.kv, "the KV cache must be [..., D] with q's D = " + std::to_string(c.q->shape[2]));
  if (c.lse) {
    const auto& s = c.lse->shape;
    if (!((s.size() == 2 || (s.size() == 3 && s[2] == 1)) && s[0] == c.o->shape[0] &&
          s[1] == c.o->shape[1]))
      return bad(c.lse, "lse must be [rows, heads] (or [rows, heads, 1]) like o");
    if (c.lse->dtype != "float32")
      return InvalidArgumentError(mf + ":tensors." + c.lse->name + ".dtype", "must be float32");
  }
  return OkStatus();
}

}  // namespace

namespace {

// aiter-native sparse mode (docs/aiter-mla-metadata.md §8.1): kv_indices is the flattened
// [q rows, topk] matrix of KV-cache rows, row t's first min(kv tokens of its request, topk)
// entries used. Captured as [rows, topk] or flat [rows * topk]; rows the plan covers past the
// captured ones read as -1 (masked: the kernel would read past the tensor, which the contract
// check reports). Errors: a width other than topk, or a flat length that is not whole rows.
StatusOr<std::vector<int32_t>> SparseIndexMatrix(const CaseFiles& files, const CaseTensor& t,
                                                 const ref::PlanRequest& r,
                                                 const CaseLimits& limits) {
  const std::string entry = files.Display(kCaseManifestName) + ":tensors." + t.name + ".shape";
  const int64_t topk = r.topk;
  if (t.shape.size() == 2 && t.shape[1] != topk)
    return InvalidArgumentError(entry, NpyShapeString(t.shape) + " is not [rows, topk = " +
                                           std::to_string(topk) + "]");
  MLASIM_ASSIGN_OR_RETURN(std::vector<int32_t> idx,
                          ReadInt32Tensor(files, t, {1, 2}, "the top-k index matrix", limits));
  if (topk > 0 && idx.size() % topk != 0)
    return InvalidArgumentError(entry, std::to_string(idx.size()) +
                                           " entries are not whole rows of topk = " +
                                           std::to_string(topk));
  idx.resize(static_cast<size_t>(int64_t{r.qo_indptr.back()} * topk), -1);
  return idx;
}

// The reference's inputs: the captured q (rows the plan covers past it hold NaN), KV cache,
// page table and scales.
StatusOr<ref::MlaInputs> BuildInputs(const CaseFiles& files, const CaseManifest& m,
                                     const Captured& c, const ref::PlanRequest& r,
                                     const CaseLimits& limits, ref::NumFormat qf,
                                     ref::NumFormat kf) {
  const std::string mf = files.Display(kCaseManifestName);
  ref::MlaInputs in;
  in.num_heads = static_cast<int32_t>(c.q->shape[1]);
  in.head_dim_qk = static_cast<int32_t>(c.q->shape[2]);
  in.head_dim_v = static_cast<int32_t>(c.o->shape[2]);
  in.page_size = r.page_size;
  int64_t kv_rows = 1;
  for (size_t i = 0; i + 1 < c.kv->shape.size(); ++i) kv_rows *= c.kv->shape[i];
  if (kv_rows % r.page_size != 0)
    return InvalidArgumentError(mf + ":tensors." + c.kv->name + ".shape",
                                std::to_string(kv_rows) + " KV rows are not whole pages of " +
                                    std::to_string(r.page_size) + " tokens");
  in.num_pages = static_cast<int32_t>(kv_rows / r.page_size);
  const int64_t plan_rows = r.qo_indptr.back();
  const int64_t row = int64_t{in.num_heads} * in.head_dim_qk;
  MLASIM_ASSIGN_OR_RETURN(std::vector<double> q, ReadValues(files, *c.q, qf, limits));
  in.q.assign(plan_rows * row, std::numeric_limits<float>::quiet_NaN());
  std::copy(q.begin(), q.begin() + std::min<int64_t>(q.size(), in.q.size()), in.q.begin());
  MLASIM_ASSIGN_OR_RETURN(std::vector<double> kv, ReadValues(files, *c.kv, kf, limits));
  in.kv_cache.assign(kv.begin(), kv.end());
  MLASIM_RETURN_IF_ERROR(CheckNumericsConfig(m, mf));
  MLASIM_ASSIGN_OR_RETURN(in.q_scale, ConfigScale(m, "q_scale", 1.0, mf));
  MLASIM_ASSIGN_OR_RETURN(in.kv_scale, ConfigScale(m, "kv_scale", 1.0, mf));
  MLASIM_ASSIGN_OR_RETURN(in.sm_scale, ConfigScale(m, "sm_scale", 0.0, mf));
  in.is_causal = r.is_causal;
  in.qo_indptr = r.qo_indptr;
  in.kv_indptr = r.kv_indptr;
  in.kv_last_page_lens = r.kv_last_page_lens;
  if (r.topk >= 0) {
    MLASIM_ASSIGN_OR_RETURN(in.topk_indices, SparseIndexMatrix(files, *c.idx, r, limits));
    in.topk = r.topk;
  } else {
    MLASIM_ASSIGN_OR_RETURN(in.kv_indices,
                            ReadInt32Tensor(files, *c.idx, {1}, "the page table", limits));
  }
  if (Status st = ref::ValidateMlaInputs(in); !st.ok())
    return InvalidArgumentError(mf + ":tensors." + st.field(), st.message());
  return in;
}

ref::NumFormat Rounding(ref::NumFormat f) {
  return f == ref::NumFormat::kFp32 ? ref::NumFormat::kFp64 : f;
}

}  // namespace

StatusOr<CaseNumericsResult> CheckCaseNumerics(const CaseFiles& files, const CaseManifest& m,
                                               const CasePlanner& planner,
                                               const ref::Plan* captured,
                                               const CaseLimits& limits) {
  const std::string mf = files.Display(kCaseManifestName);
  const Captured c{m.Find("q"), m.FindKvCache(), m.Find("kv_indices"),
                   m.Find("o"), FindAny(m, {"lse", "attn_lse"})};
  CaseNumericsResult res;
  if (!c.q || !c.kv || !c.idx || !c.o || !planner.request || !captured) {
    res.reason = "the case has no " + Missing(c, planner);
    return res;
  }
  const ref::PlanRequest& r = *planner.request;
  MLASIM_RETURN_IF_ERROR(CheckShapes(c, mf));
  if (c.q->shape[1] != int64_t{r.heads_per_head_k} * r.num_heads_k)
    return InvalidArgumentError(mf + ":tensors.q.shape",
                                "q has " + std::to_string(c.q->shape[1]) +
                                    " heads but config.planner says " +
                                    std::to_string(r.heads_per_head_k * r.num_heads_k));
  MLASIM_ASSIGN_OR_RETURN(ref::NumFormat qf, FormatOf(*c.q, mf + ":tensors.q.dtype", true));
  MLASIM_ASSIGN_OR_RETURN(ref::NumFormat kf,
                          FormatOf(*c.kv, mf + ":tensors." + c.kv->name + ".dtype", true));
  MLASIM_ASSIGN_OR_RETURN(ref::NumFormat of, FormatOf(*c.o, mf + ":tensors.o.dtype", false));
  for (const CaseTensor* t : {c.q, c.kv, c.o})
    if (t->nbytes > limits.max_load_bytes) {
      res.reason = t->name + " holds " + std::to_string(t->nbytes) + " bytes, above the " +
                   std::to_string(limits.max_load_bytes) + " bytes a case tensor may load";
      return res;
    }
  const int64_t kv_values = c.kv->nbytes / c.kv->itemsize;
  const int64_t q_values = int64_t{r.qo_indptr.back()} * c.q->shape[1] * c.q->shape[2];
  if (kv_values > kMaxValues || q_values > kMaxValues) {
    res.reason = "q or the KV cache holds more than 2^28 values: above the reference's bound";
    return res;
  }
  MLASIM_ASSIGN_OR_RETURN(ref::MlaInputs in, BuildInputs(files, m, c, r, limits, qf, kf));
  ref::PlanExecOptions opt;
  opt.precision.p_format = Rounding(kf);
  opt.precision.out_format = Rounding(of);
  StatusOr<ref::PlanDrivenResult> want = ref::RunPlanDriven(in, r, *captured, opt);
  if (!want.ok())
    return InvalidArgumentError(mf + ":" + want.status().field(), want.status().message());
  StatusOr<ref::AttentionOutput> truth = ref::RunMonolithic(in, opt.precision);
  if (!truth.ok())
    return InvalidArgumentError(mf + ":" + truth.status().field(), truth.status().message());
  const ref::OutputTolerances tol = ref::TolerancesFor(in, *truth, opt.precision);
  res.ran = true;
  res.real_rows = RealRows(r, c.q->shape[0], c.o->shape[0]);
  res.heads = in.num_heads, res.head_dim_qk = in.head_dim_qk, res.head_dim_v = in.head_dim_v;
  res.page_size = in.page_size;
  res.q_format = ref::NumFormatName(qf), res.kv_format = ref::NumFormatName(kf);
  res.out_format = ref::NumFormatName(of);
  MLASIM_ASSIGN_OR_RETURN(std::vector<double> o, ReadValues(files, *c.o, of, limits));
  res.o = Compare("o", o, want->out.o, res.real_rows, int64_t{in.num_heads} * in.head_dim_v, tol.o);
  if (c.lse) {
    MLASIM_ASSIGN_OR_RETURN(std::vector<double> lse,
                            ReadValues(files, *c.lse, ref::NumFormat::kFp32, limits));
    res.has_lse = true;
    res.lse = Compare(c.lse->name, lse, want->out.lse, res.real_rows, in.num_heads, tol.lse);
  }
  return res;
}

}  // namespace mlasim::io
