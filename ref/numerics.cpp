#include "ref/numerics.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <utility>

#include "ref/input_values.h"
#include "ref/limits.h"
#include "ref/planner.h"

namespace mlasim::ref {
namespace {

std::string S(int64_t x) {
  return std::to_string(x);
}

// Component salts for SplitMix64::Stream.
enum Salt : uint64_t { kSaltQ = 1, kSaltKv = 2, kSaltPages = 3, kSaltTopk = 4 };

// Rounding-error multiplier of the probabilistic bounds (docs/numerics.md): an error sum of n
// independent roundings stays below lambda * sqrt(n) * u except with probability ~exp(-lambda^2/2).
constexpr double kLambda = 8.0;

// Largest q or KV tensor BuildMlaInputs makes (2^25 floats = 128 MiB at the default).
// Values of one tensor: ref/limits.h tensor_values.
int64_t MaxTensorElements() {
  return Limit(LimitId::kTensorValues);
}

bool IsUniform(const std::vector<int32_t>& indptr, int32_t per) {
  for (size_t b = 0; b < indptr.size(); ++b)
    if (indptr[b] != static_cast<int64_t>(b) * per) return false;
  return true;
}

// Values [first, first + n) of the stream whose state is `state` (ref/input_values.h).
std::vector<float> RandomValues(uint64_t state, int64_t first, int64_t n, double amplitude) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[i] = values::StreamValue(state, static_cast<uint64_t>(first + i), amplitude);
  return v;
}

Status CheckOptions(const PlanRequest& r, const NumericsOptions& o) {
  if (r.num_heads_k != 1) return InvalidArgumentError("num_heads_k", "MLA decode has one KV head");
  if (o.head_dim_qk < 1) return InvalidArgumentError("head_dim_qk", "must be >= 1");
  if (o.head_dim_v < 1 || o.head_dim_v > o.head_dim_qk)
    return InvalidArgumentError("head_dim_v", "must be in 1..head_dim_qk");
  if (o.spare_pages < 0) return InvalidArgumentError("spare_pages", "must be >= 0");
  if (o.hostile_table_slots < 0 || o.hostile_table_slots > 4096)
    return InvalidArgumentError("hostile_table_slots", "must be in 0..4096");
  if (!(std::isfinite(o.padding_q_amplitude) && o.padding_q_amplitude > 0))
    return InvalidArgumentError("padding_q_amplitude", "must be finite and > 0");
  if (o.invalid_topk_per_mille < 0 || o.invalid_topk_per_mille > 1000)
    return InvalidArgumentError("invalid_topk_per_mille", "must be in 0..1000");
  if (!(std::isfinite(o.amplitude) && o.amplitude > 0))
    return InvalidArgumentError("amplitude", "must be finite and > 0");
  if (r.topk >= 0 && r.page_size != 1)
    return InvalidArgumentError("page_size", "sparse top-k numerics are modelled for page_size 1");
  for (const auto& [element, value] : o.index_values)
    if (element < 0 || value < INT_MIN || value > INT_MAX)
      return InvalidArgumentError("index_values", "element " + S(element) + " value " + S(value) +
                                                      ": elements are >= 0 and values int32");
  return OkStatus();
}

// The engine's explicit index values (NumericsOptions::index_values) over `table`, for the
// elements below `used` (the slots a kernel reads).
void ApplyIndexValues(const NumericsOptions& opt, int64_t used, std::vector<int32_t>& table) {
  for (const auto& [element, value] : opt.index_values)
    if (element < used && element < static_cast<int64_t>(table.size()))
      table[static_cast<size_t>(element)] = static_cast<int32_t>(value);
}

// True when page-table slot `slot` names a page of the cache (an engine-written invalid id does
// not: its tokens are never filled, its keys masked by the reference).
bool SlotNamesAPage(const MlaInputs& in, int64_t slot) {
  return in.kv_indices[slot] >= 0 && in.kv_indices[slot] < in.num_pages;
}

// The q row layout: dense requests hold uni_seqlen_qo rows each, or with non-uniform q lengths
// (uni_seqlen_qo <= 0) their own qo_indptr rows; sparse ones the request's per-request token
// count (uniform, §8.1).
StatusOr<std::vector<int32_t>> QoIndptr(const PlanRequest& r) {
  const int32_t batch = static_cast<int32_t>(r.kv_indptr.size()) - 1;
  if (r.topk < 0 && r.uni_seqlen_qo < 1) {
    if (r.qo_indptr.empty() || r.qo_indptr[0] != 0)
      return InvalidArgumentError("qo_indptr", "numerics need qo_indptr to start at 0");
    return r.qo_indptr;  // B+1 entries, non-decreasing: ValidatePlanRequest
  }
  const int32_t per = r.topk >= 0 ? r.qo_indptr[1] - r.qo_indptr[0] : r.uni_seqlen_qo;
  if (!r.qo_indptr.empty() &&
      (static_cast<int32_t>(r.qo_indptr.size()) != batch + 1 || !IsUniform(r.qo_indptr, per)))
    return InvalidArgumentError(
        "qo_indptr", "numerics need " + S(per) + " q rows per request (uniform) and B+1 entries");
  std::vector<int32_t> out(static_cast<size_t>(batch) + 1);
  for (int32_t b = 0; b <= batch; ++b) out[b] = b * per;
  return out;
}

// Shuffled distinct page ids for the used pages (Fisher-Yates on the whole cache). With
// `reserve_zero` (and a spare page) page 0 is swapped out of the used ones: it stays NaN.
std::vector<int32_t> PageTable(SplitMix64& rng, int32_t used, int32_t num_pages,
                               bool reserve_zero) {
  std::vector<int32_t> ids(static_cast<size_t>(num_pages));
  for (int32_t i = 0; i < num_pages; ++i) ids[i] = i;
  for (int32_t i = num_pages - 1; i > 0; --i)
    std::swap(ids[i], ids[static_cast<int32_t>(rng.Below(static_cast<uint64_t>(i) + 1))]);
  if (reserve_zero && used < num_pages)
    for (int32_t i = 0; i < used; ++i)
      if (ids[i] == 0) std::swap(ids[i], ids[used]);
  ids.resize(static_cast<size_t>(used));
  return ids;
}

// Hostile index values of unused slots (FlashMLA's tests): -1, past the cache, 2147480000,
// INT_MAX, cycled by slot.
int32_t HostileIndex(int64_t slot, int64_t rows) {
  const int64_t values[] = {-1, rows, 2147480000, INT_MAX};
  return static_cast<int32_t>(std::min<int64_t>(values[slot % 4], INT_MAX));
}

// Top-k lists (§8.1): token t of request b holds min(ctx_b, topk) entries, mostly distinct
// context tokens of b, some invalid; entries past that length are garbage that must not be read
// (alternately a hostile value -- -1, past the cache, 2147480000, INT_MAX -- and the row of a NaN
// spare slot).
void FillTopk(SplitMix64& rng, const NumericsOptions& opt, MlaInputs& in) {
  const int64_t rows = int64_t{in.num_pages} * in.page_size;
  const int64_t sentinels[] = {-1, INT_MAX, INT_MIN, -2, rows, rows + 1000};
  const int64_t used_rows = in.kv_indptr.back();
  in.topk_indices.assign(static_cast<size_t>(int64_t{in.q_rows()} * in.topk), -1);
  std::vector<int32_t> ctx_rows;
  for (int32_t b = 0; b < in.num_requests(); ++b) {
    const int32_t ctx = in.kv_indptr[b + 1] - in.kv_indptr[b];
    const int32_t len = std::min(ctx, in.topk);
    for (int32_t t = in.qo_indptr[b]; t < in.qo_indptr[b + 1]; ++t) {
      ctx_rows.resize(static_cast<size_t>(ctx));
      for (int32_t j = 0; j < ctx; ++j) ctx_rows[j] = in.kv_indices[in.kv_indptr[b] + j];
      int32_t* row = in.topk_indices.data() + int64_t{t} * in.topk;
      for (int32_t e = 0; e < in.topk; ++e) {
        if (e < len) {
          const auto pick = e + static_cast<int32_t>(rng.Below(static_cast<uint64_t>(ctx - e)));
          std::swap(ctx_rows[e], ctx_rows[pick]);  // a partial Fisher-Yates: distinct entries
          const bool invalid = static_cast<int64_t>(rng.Below(1000)) < opt.invalid_topk_per_mille;
          row[e] = invalid ? static_cast<int32_t>(sentinels[rng.Below(std::size(sentinels))])
                           : ctx_rows[e];
        } else if (used_rows < rows && (e & 1)) {
          row[e] =
              static_cast<int32_t>(used_rows + static_cast<int64_t>(rng.Below(rows - used_rows)));
        } else {
          row[e] = HostileIndex(e / 2, rows);
        }
      }
    }
  }
}

// Max |V| over finite stored values of the cache, times kv_scale.
double VMax(const MlaInputs& in) {
  double m = 0;
  for (int64_t row = 0; row < int64_t{in.num_pages} * in.page_size; ++row) {
    const float* v = in.kv_cache.data() + row * in.head_dim_qk;
    for (int32_t x = 0; x < in.head_dim_v; ++x)
      if (std::isfinite(v[x])) m = std::max(m, std::fabs(static_cast<double>(v[x])));
  }
  return m * in.kv_scale;
}

int64_t MaxKeys(const MlaInputs& in) {
  int64_t m = 0;
  for (int32_t b = 0; b < in.num_requests(); ++b) {
    const int64_t pages = in.kv_indptr[b + 1] - in.kv_indptr[b];
    m = std::max(m, in.topk >= 0
                        ? std::min<int64_t>(pages, in.topk)
                        : (pages == 0 ? 0 : (pages - 1) * in.page_size + in.kv_last_page_lens[b]));
  }
  return m;
}

}  // namespace

uint64_t SplitMix64::Next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t SplitMix64::Below(uint64_t bound) {
  MLASIM_ASSERT(bound >= 1, "SplitMix64::Below needs bound >= 1");
  // Reject the top partial copy of [0, bound) so every value is equally likely.
  const uint64_t limit =
      std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % bound;
  for (;;) {
    const uint64_t x = Next();
    if (x < limit) return x % bound;
  }
}

double SplitMix64::Unit() {
  return static_cast<double>(Next() >> 11) * 0x1p-53;
}

SplitMix64 SplitMix64::Stream(uint64_t seed, uint64_t salt) {
  SplitMix64 mix(seed ^ (salt * 0xD1B54A32D192ED03ull));
  return SplitMix64(mix.Next());
}

namespace {

// Whether d / a <= m surely, without the division (CompareTensors' max_rel scan divides only
// where this cannot tell): t = m * a * (1 - 2^-50), rounded twice, is below m * a * (1 - 2^-51)
// when it is a normal double, so d <= t gives d / a < m * (1 - 2^-51), more than two units of m
// below m: the rounded quotient cannot exceed m. d, a > 0 finite, m >= 0. (An overflowing m * a
// says yes rightly: d is finite; a subnormal t says no, and the quotient decides.)
bool BelowMaxRel(double d, double a, double m) {
  const double t = m * a * (1.0 - 0x1p-50);
  return t >= std::numeric_limits<double>::min() && d <= t;
}

}  // namespace

namespace {

// One comparison's running figures: CompareTensors' loop body, split so that one pass over the
// pairs can feed two comparisons that skip different elements (CompareTensorsTwice). A pair is
// finite (both sides finite) or anomalous; what both comparisons share of a finite pair (|x - y|,
// |y|, the tolerance test, the two sums' terms) is computed once, by the caller.
class Comparison {
 public:
  void Anomalous(int64_t i, double x, double y) {
    ++r_.elements;
    const bool xn = std::isnan(x), yn = std::isnan(y);
    // A NaN on one side only, or two non-NaN values of which one is infinite and they differ;
    // the same anomaly on both sides is no mismatch and no error.
    if (xn == yn && (xn || x == y)) return;
    (xn != yn ? r_.nan_mismatches : r_.inf_mismatches)++;
    if (r_.first_anomaly_mismatch < 0) r_.first_anomaly_mismatch = i;
  }
  // d = |x - y|, ay = |y|, dd = (x - y)^2, ss = x^2 + y^2.
  void Finite(int64_t i, double y, double d, double ay, bool violates, double dd, double ss) {
    ++r_.elements;
    if (d > r_.max_abs) r_.max_abs = d, r_.max_abs_index = i;
    if (y != 0 && !BelowMaxRel(d, ay, r_.max_rel) && d / ay > r_.max_rel)
      r_.max_rel = d / ay, r_.max_rel_index = i;
    if (violates) {
      ++r_.tolerance_violations;
      if (r_.first_violation < 0) r_.first_violation = i;
    }
    sdd_ += dd;
    sxx_yy_ += ss;
  }
  CompareResult Done(const Tolerance& tol) {
    r_.cos_diff = sxx_yy_ > 0 ? sdd_ / sxx_yy_ : 0.0;
    r_.passed = r_.anomalies_match() && r_.tolerance_violations == 0 && r_.cos_diff <= tol.cos_diff;
    return r_;
  }

 private:
  CompareResult r_;
  // 1 - 2 sum(xy) / sum(x^2 + y^2) == sum((x - y)^2) / sum(x^2 + y^2): the same value
  // without the cancellation that leaves ~1e-16 of noise in the first form.
  double sdd_ = 0, sxx_yy_ = 0;
};

// Feeds pairs [i, end) to the comparisons `to`, each pair to all of them.
// (The comparisons are copied in and out: running on locals, which no store through `actual`
// or `expected` could reach, their figures stay in registers across the loop.)
template <int kCount>
void CompareRun(const double* actual, const double* expected, int64_t i, int64_t end,
                const Tolerance& tol, Comparison* const (&to)[kCount]) {
  Comparison c[kCount];
  for (int k = 0; k < kCount; ++k) c[k] = *to[k];
  const double atol = tol.atol, rtol = tol.rtol;
  for (; i < end; ++i) {
    const double x = actual[i], y = expected[i];
    if (!std::isfinite(x) || !std::isfinite(y)) {
      for (Comparison& one : c) one.Anomalous(i, x, y);
      continue;
    }
    const double d = std::fabs(x - y), ay = std::fabs(y);
    const bool violates = d > atol + rtol * ay;
    const double dd = (x - y) * (x - y), ss = x * x + y * y;
    for (Comparison& one : c) one.Finite(i, y, d, ay, violates, dd, ss);
  }
  for (int k = 0; k < kCount; ++k) *to[k] = c[k];
}

}  // namespace

CompareResult CompareTensors(const double* actual, const double* expected, int64_t n,
                             const Tolerance& tol, const uint8_t* skip) {
  Comparison c;
  Comparison* const to[1] = {&c};
  if (!skip) {
    CompareRun(actual, expected, 0, n, tol, to);
    return c.Done(tol);
  }
  for (int64_t i = 0; i < n;) {  // each run of elements not skipped in one call
    if (skip[i]) {
      ++i;
      continue;
    }
    int64_t end = i + 1;
    while (end < n && !skip[end]) ++end;
    CompareRun(actual, expected, i, end, tol, to);
    i = end;
  }
  return c.Done(tol);
}

std::pair<CompareResult, CompareResult> CompareTensorsTwice(const double* actual,
                                                            const double* expected, int64_t n,
                                                            const Tolerance& tol,
                                                            const uint8_t* skip_first,
                                                            const uint8_t* skip_second,
                                                            int64_t width) {
  Comparison first, second;
  Comparison* const both[2] = {&first, &second};
  Comparison* const first_only[1] = {&first};
  Comparison* const second_only[1] = {&second};
  const int64_t w = std::max<int64_t>(width, 1);
  const int64_t runs = n > 0 ? (n - 1) / w + 1 : 0;
  if (std::equal(skip_first, skip_first + runs, skip_second)) {  // the same pairs: one result
    for (int64_t run = 0, i = 0; i < n; ++run, i += w)
      if (!skip_first[run]) CompareRun(actual, expected, i, std::min(n, i + w), tol, first_only);
    const CompareResult r = first.Done(tol);
    return {r, r};
  }
  for (int64_t run = 0, i = 0; i < n; ++run, i += w) {
    const int64_t end = std::min(n, i + w);
    if (!skip_first[run] && !skip_second[run])
      CompareRun(actual, expected, i, end, tol, both);
    else if (!skip_first[run])
      CompareRun(actual, expected, i, end, tol, first_only);
    else if (!skip_second[run])
      CompareRun(actual, expected, i, end, tol, second_only);
  }
  return {first.Done(tol), second.Done(tol)};
}

OutputTolerances DeriveTolerances(const AttentionPrecision& p, int64_t max_keys, double v_max,
                                  double lse_max) {
  const double u_acc = p.accumulate == Accumulate::kFp64 ? 0x1p-53 : 0x1p-24;
  const double u_p = p.p_format == NumFormat::kFp64 ? 0 : GetFormatInfo(p.p_format).unit_roundoff;
  const double u_out =
      p.out_format == NumFormat::kFp64 ? 0 : GetFormatInfo(p.out_format).unit_roundoff;
  const double sqrt_n = std::sqrt(static_cast<double>(std::max<int64_t>(max_keys, 1)));
  const double vm = std::max(v_max, std::numeric_limits<double>::min());
  OutputTolerances t;
  // Both sides accumulate sum_j p_j v_j (sqrt(n) roundings each) and exponentiate scores of
  // magnitude <= lse_max; the reduce weighs pieces by exp(lse_i - L). P rounding: each side
  // rounds every weight once (relative u_p, at most u_p * v_max per output after
  // normalisation). Output rounding: each side rounds once (relative u_out).
  t.o.atol = vm * (kLambda * u_acc * (sqrt_n + 4.0 + 4.0 * lse_max) + 2.0 * u_p);
  t.o.rtol = 2.0 * u_out + kLambda * u_acc;
  t.lse.atol = kLambda * u_acc * (sqrt_n + 4.0 + 4.0 * lse_max);
  t.lse.rtol = 0;
  // cal_diff ~ |x - y|^2 / (2 |y|^2) per element: bounded by the square of the relative bound.
  const double rel = t.o.atol / vm + t.o.rtol;
  t.o.cos_diff = rel * rel;
  t.lse.cos_diff = std::pow(t.lse.atol / std::max(lse_max, 1.0), 2);
  return t;
}

namespace {

// q values (the padding rows `padding_q_amplitude` times larger), quantised with q's scale: the
// given one, or max |q| / the format's max over all rows or over the real rows only. Rows past
// the real ones never exceed the real rows' range when the scale comes from those alone.
Status QuantizeQ(const NumericsOptions& opt, NumFormat qf, int64_t q_elems, MlaInputs& in) {
  std::vector<float> values =
      RandomValues(values::StreamState(opt.seed, kSaltQ), 0, q_elems, opt.amplitude);
  using Mode = NumericsOptions::QScaleMode;
  const bool fp8 = qf == NumFormat::kFp8E4m3fn || qf == NumFormat::kFp8E4m3fnuz;
  double scale = opt.q_scale;
  if (opt.q_scale_mode != Mode::kStatic && fp8) {
    const int64_t row_elems = int64_t{in.num_heads} * in.head_dim_qk;
    const int64_t real =
        opt.real_rows < 0 ? in.q_rows() : std::min<int64_t>(opt.real_rows, in.q_rows());
    for (int64_t i = real * row_elems; i < q_elems; ++i)
      values[i] = static_cast<float>(values[i] * opt.padding_q_amplitude);
    const int64_t over = opt.q_scale_mode == Mode::kPerTensorPadded ? q_elems : real * row_elems;
    double amax = 0;
    for (int64_t i = 0; i < over; ++i) amax = std::max(amax, std::fabs(double{values[i]}));
    scale = amax > 0 ? amax / GetFormatInfo(qf).max_finite : 1.0;
    for (int64_t i = over; i < q_elems; ++i)  // rows outside the scale's range: clipped to it
      values[i] = static_cast<float>(std::clamp<double>(values[i], -amax, amax));
  }
  in.q_scale = scale;
  MLASIM_ASSIGN_OR_RETURN(QuantizedTensor q, Quantize(values, qf, scale, opt.fp8_overflow));
  in.q = std::move(q.stored);
  return OkStatus();
}

}  // namespace

StatusOr<MlaInputs> BuildMlaInputs(const PlanRequest& request, const NumericsOptions& opt) {
  MlaValueSource source;
  return BuildMlaInputs(request, opt, &source);
}

namespace {

// The shapes of the inputs (no values): heads, dims, scales, the request's indptrs and last-page
// lengths.
StatusOr<MlaInputs> InputShapes(const PlanRequest& request, const NumericsOptions& opt) {
  MlaInputs in;
  in.num_heads = request.heads_per_head_k;
  in.head_dim_qk = opt.head_dim_qk;
  in.head_dim_v = opt.head_dim_v;
  in.page_size = request.page_size;
  in.q_scale = opt.q_scale;
  in.kv_scale = opt.kv_scale;
  in.sm_scale = opt.sm_scale;
  in.is_causal = request.is_causal;
  in.topk = request.topk;
  in.kv_indptr = request.kv_indptr;
  if (in.kv_indptr[0] != 0)
    return InvalidArgumentError("kv_indptr[0]", "numerics need kv_indptr to start at 0");
  MLASIM_ASSIGN_OR_RETURN(in.qo_indptr, QoIndptr(request));
  if (in.topk < 0) {
    if (static_cast<int32_t>(request.kv_last_page_lens.size()) != in.num_requests())
      return InvalidArgumentError("kv_last_page_lens", "needs one entry per request");
    in.kv_last_page_lens = request.kv_last_page_lens;
  }
  return in;
}

// The page table: shuffled distinct ids for the used pages, the engine's index values, then the
// hostile slots.
void FillPageTable(const NumericsOptions& opt, int64_t used_pages, MlaInputs& in) {
  SplitMix64 page_rng = SplitMix64::Stream(opt.seed, kSaltPages);
  in.kv_indices =
      PageTable(page_rng, static_cast<int32_t>(used_pages), in.num_pages, opt.reserve_page_zero);
  if (in.topk < 0) ApplyIndexValues(opt, used_pages, in.kv_indices);
  for (int32_t i = 0; i < opt.hostile_table_slots; ++i)
    in.kv_indices.push_back(HostileIndex(i, in.num_pages));
}

// Which KV stream token each cache row holds (-1: none): each request's tokens, the stream's
// rows in token order (a later token overwrites an earlier one in the same row).
std::vector<int64_t> KvRowTokens(const MlaInputs& in, int64_t pages) {
  std::vector<int64_t> row_token(static_cast<size_t>(pages * in.page_size), -1);
  int64_t token = 0;
  for (int32_t b = 0; b < in.num_requests(); ++b) {
    const int64_t np = in.kv_indptr[b + 1] - in.kv_indptr[b];
    const int64_t tokens =
        in.topk >= 0 ? np : (np == 0 ? 0 : (np - 1) * in.page_size + in.kv_last_page_lens[b]);
    for (int64_t j = 0; j < tokens; ++j) {
      if (!SlotNamesAPage(in, in.kv_indptr[b] + j / in.page_size)) continue;
      const int64_t row =
          int64_t{in.kv_indices[in.kv_indptr[b] + j / in.page_size]} * in.page_size +
          j % in.page_size;
      row_token[static_cast<size_t>(row)] = token + j;
    }
    token += std::max<int64_t>(tokens, 0);
  }
  return row_token;
}

// The cache's values: NaN everywhere (unused page tails, spare pages), then the stream value of
// each row's token, rounded to the KV format at the KV scale.
void FillKvCache(const NumericsOptions& opt, NumFormat kf, const MlaValueSource& source,
                 int64_t pages, MlaInputs& in) {
  const int32_t d = in.head_dim_qk;
  in.kv_cache.assign(static_cast<size_t>(pages * in.page_size * d), std::nanf(""));
  const bool unit = opt.kv_scale == 1.0;  // v / 1 is v: no division per element
  const Rounder round(kf, opt.fp8_overflow);
  for (size_t row = 0; row < source.kv_row_token.size(); ++row) {
    const int64_t t = source.kv_row_token[row];
    if (t < 0) continue;
    float* out = in.kv_cache.data() + row * d;
    for (int32_t x = 0; x < d; ++x) {
      const float v =
          values::StreamValue(source.kv_state, static_cast<uint64_t>(t * d + x), opt.amplitude);
      const double scaled = unit ? static_cast<double>(v) : static_cast<double>(v) / opt.kv_scale;
      out[x] = static_cast<float>(round(scaled));
    }
  }
}

}  // namespace

StatusOr<MlaInputs> BuildMlaInputs(const PlanRequest& request, const NumericsOptions& opt,
                                   MlaValueSource* source) {
  MLASIM_RETURN_IF_ERROR(ValidatePlanRequest(request));
  MLASIM_RETURN_IF_ERROR(CheckOptions(request, opt));
  MLASIM_ASSIGN_OR_RETURN(MlaInputs in, InputShapes(request, opt));
  const NumFormat qf = opt.q_format.value_or(FormatForDType(request.q_dtype, request.target));
  const NumFormat kf = opt.kv_format.value_or(FormatForDType(request.kv_dtype, request.target));
  const int64_t used_pages = in.kv_indptr.back();
  const int64_t pages = used_pages + opt.spare_pages;
  const int64_t kv_elems = pages * in.page_size * in.head_dim_qk;
  const int64_t q_elems = int64_t{in.q_rows()} * in.num_heads * in.head_dim_qk;
  if (kv_elems > MaxTensorElements() || q_elems > MaxTensorElements())
    return InvalidArgumentError("kv_indptr", "the step needs " + S(std::max(kv_elems, q_elems)) +
                                                 " values in one tensor, more than the numerics "
                                                 "limit of " +
                                                 S(MaxTensorElements()) +
                                                 "; run it at reduced sizes (fewer heads, shorter "
                                                 "contexts, smaller head dims) or raise it with "
                                                 "--limit tensor_values=N");
  in.num_pages = static_cast<int32_t>(pages);
  FillPageTable(opt, used_pages, in);
  source->q_state = values::StreamState(opt.seed, kSaltQ);
  source->kv_state = values::StreamState(opt.seed, kSaltKv);
  source->amplitude = opt.amplitude;
  source->q_format = qf;
  source->kv_format = kf;
  source->q_values = q_elems;
  source->plain = opt.q_scale == 1.0 && opt.kv_scale == 1.0 &&
                  opt.q_scale_mode == NumericsOptions::QScaleMode::kStatic &&
                  opt.fp8_overflow == Fp8Overflow::kNaN && qf != NumFormat::kFp64 &&
                  kf != NumFormat::kFp64;
  if (opt.fill_values) MLASIM_RETURN_IF_ERROR(QuantizeQ(opt, qf, q_elems, in));
  source->kv_row_token = KvRowTokens(in, pages);
  // ref::Quantize's errors (a bad scale or format), as when each request's tokens were quantised
  if (in.num_requests() > 0)
    MLASIM_RETURN_IF_ERROR(Quantize({}, kf, opt.kv_scale, opt.fp8_overflow).status());
  if (opt.fill_values) FillKvCache(opt, kf, *source, pages, in);
  if (in.topk >= 0) {
    SplitMix64 topk_rng = SplitMix64::Stream(opt.seed, kSaltTopk);
    FillTopk(topk_rng, opt, in);
    ApplyIndexValues(opt, static_cast<int64_t>(in.topk_indices.size()), in.topk_indices);
  }
  return in;
}

namespace {

// (row, head) pairs of o named by poison findings.
}  // namespace

std::vector<uint8_t> PoisonPairMask(const std::vector<PoisonFinding>& poison, int32_t rows,
                                    int32_t heads) {
  std::vector<uint8_t> mask(static_cast<size_t>(int64_t{rows} * heads), 0);
  for (const PoisonFinding& f : poison) {
    if (f.output != NumericsBuffer::kO || f.row_begin < 0) continue;
    for (int64_t r = std::max<int64_t>(f.row_begin, 0); r < std::min<int64_t>(f.row_end, rows); ++r)
      for (int32_t h = std::max(f.head_begin, 0); h < std::min(f.head_end, heads); ++h)
        mask[r * heads + h] = 1;
  }
  return mask;
}

OutputTolerances TolerancesFor(const MlaInputs& inputs, const AttentionOutput& truth,
                               const AttentionPrecision& precision) {
  double lse_max = 0;
  for (double l : truth.lse)
    if (std::isfinite(l)) lse_max = std::max(lse_max, std::fabs(l));
  return DeriveTolerances(precision, MaxKeys(inputs), VMax(inputs), lse_max);
}

OutputTolerances TolerancesFor(const MlaInputs& inputs, const AttentionOutput& truth,
                               const AttentionPrecision& precision, double stored_v_max) {
  double lse_max = 0;
  for (double l : truth.lse)
    if (std::isfinite(l)) lse_max = std::max(lse_max, std::fabs(l));
  return DeriveTolerances(precision, MaxKeys(inputs), stored_v_max * inputs.kv_scale, lse_max);
}

namespace {

// Padding rows [real_rows, q_rows) of the plan-driven result: what an engine that consumes them
// would read (non-finite o, NaN or +inf lse, poisoned pairs).
void CheckPadding(const AttentionOutput& got, const std::vector<uint8_t>& pair_mask,
                  size_t real_pairs, int32_t dv, NumericsReport& rep) {
  for (size_t i = real_pairs; i < got.lse.size(); ++i) {
    rep.padding_lse_bad += std::isnan(got.lse[i]) || got.lse[i] == HUGE_VAL;
    rep.padding_poisoned_pairs += pair_mask[i];
    for (int32_t x = 0; x < dv; ++x) rep.padding_o_nonfinite += !std::isfinite(got.o[i * dv + x]);
  }
}

}  // namespace

bool RowSeesAKey(const PlanRequest& r, int64_t row) {
  int64_t per = r.topk >= 0 ? r.qo_indptr[1] - r.qo_indptr[0] : r.uni_seqlen_qo;
  int64_t b = row / std::max<int64_t>(per, 1), first = b * per;
  if (r.topk < 0 && r.uni_seqlen_qo < 1) {  // non-uniform: the request whose rows hold `row`
    b = std::upper_bound(r.qo_indptr.begin(), r.qo_indptr.end(), row) - r.qo_indptr.begin() - 1;
    first = r.qo_indptr[b];
    per = r.qo_indptr[b + 1] - first;
  }
  const int64_t pages = int64_t{r.kv_indptr[b + 1]} - r.kv_indptr[b];
  if (r.topk >= 0) return std::min<int64_t>(pages, r.topk) > 0;
  const int64_t keys = pages == 0 ? 0 : (pages - 1) * r.page_size + r.kv_last_page_lens[b];
  if (keys <= 0) return false;
  return !r.is_causal || row - first + keys - per >= 0;
}

namespace {

PlanExecOptions ExecOptionsOf(const NumericsOptions& options) {
  PlanExecOptions exec;
  exec.precision = options.precision;
  exec.empty_rows = options.empty_rows;
  exec.zero_kv = options.zero_kv;
  exec.mutant = options.mutant;
  exec.invalid_index = options.invalid_index;
  exec.read_masked_keys = options.read_masked_keys;
  return exec;
}

// The report's figures that need no comparison: formats, shapes, tolerances, the plan run's
// counters.
NumericsReport ReportShape(const PlanRequest& request, const NumericsOptions& options,
                           const MlaInputs& in, const MlaInputs& truth_in,
                           const AttentionOutput& mono, const PlanDrivenResult& driven) {
  NumericsReport rep;
  rep.q_scale = in.q_scale;
  rep.q_scale_real = truth_in.q_scale;
  rep.q_format = options.q_format.value_or(FormatForDType(request.q_dtype, request.target));
  rep.kv_format = options.kv_format.value_or(FormatForDType(request.kv_dtype, request.target));
  rep.q_rows = in.q_rows();
  rep.num_heads = in.num_heads;
  rep.max_keys = MaxKeys(in);
  rep.v_max = VMax(in);
  for (double l : mono.lse)
    if (std::isfinite(l)) rep.lse_max = std::max(rep.lse_max, std::fabs(l));
  rep.tolerance = options.tolerance.value_or(
      DeriveTolerances(options.precision, rep.max_keys, rep.v_max, rep.lse_max));
  rep.works_run = driven.works_run;
  rep.tiles_reduced = driven.tiles_reduced;
  rep.partial_rows_without_key = driven.partial_rows_without_key;
  rep.fold_ratio = driven.fold_ratio;
  rep.poison_dropped = driven.poison_dropped;
  rep.rows_compared =
      options.real_rows < 0 ? rep.q_rows : std::min<int64_t>(options.real_rows, rep.q_rows);
  return rep;
}

// Plan-driven against monolithic over the real rows: everywhere, and outside the (row, head)
// pairs poison findings name; NaN the truth does not explain; the padding rows.
void CompareWithTruth(const AttentionOutput& mono, PlanDrivenResult& driven, NumericsReport& rep) {
  const int32_t heads = rep.num_heads, dv = mono.head_dim_v;
  const size_t real_pairs = static_cast<size_t>(rep.rows_compared) * heads;
  // pair_mask: (row, head) pairs named by poison findings; pad_mask: pairs of padding rows.
  const std::vector<uint8_t> pair_mask = PoisonPairMask(driven.poison, rep.q_rows, heads);
  std::vector<uint8_t> pad_mask(pair_mask.size()), skip_pairs(pair_mask.size());
  for (size_t i = 0; i < pair_mask.size(); ++i) {
    pad_mask[i] = i >= real_pairs;
    skip_pairs[i] = pair_mask[i] | pad_mask[i];
    rep.poisoned_rows += pair_mask[i];
  }
  // o: each pair's flags hold for its dv elements (runs of dv in CompareTensorsTwice).
  const auto& got = driven.out;
  const int64_t n_o = static_cast<int64_t>(mono.o.size()),
                n_lse = static_cast<int64_t>(mono.lse.size());
  const int64_t width = std::max(dv, 1);
  std::tie(rep.o, rep.o_unpoisoned) = CompareTensorsTwice(
      got.o.data(), mono.o.data(), n_o, rep.tolerance.o, pad_mask.data(), skip_pairs.data(), width);
  std::tie(rep.lse, rep.lse_unpoisoned) = CompareTensorsTwice(
      got.lse.data(), mono.lse.data(), n_lse, rep.tolerance.lse, pad_mask.data(),
      skip_pairs.data(), 1);
  for (int64_t run = 0, i = 0; i < n_o; ++run) {
    for (const int64_t end = std::min(n_o, i + width); i < end; ++i) {
      rep.monolithic_nan += std::isnan(mono.o[i]);
      rep.unexplained_nan += std::isnan(got.o[i]) && !skip_pairs[run];
    }
  }
  for (size_t i = 0; i < mono.lse.size(); ++i) {
    rep.monolithic_nan += std::isnan(mono.lse[i]);
    rep.unexplained_nan += std::isnan(got.lse[i]) && !skip_pairs[i];
  }
  CheckPadding(got, pair_mask, real_pairs, dv, rep);
  rep.poison = std::move(driven.poison);
  rep.ok = rep.o_unpoisoned.passed && rep.lse_unpoisoned.passed && rep.unexplained_nan == 0 &&
           rep.monolithic_nan == 0;
}

}  // namespace

StatusOr<NumericsReport> RunPlanNumerics(const PlanRequest& request, const Plan& plan,
                                         const NumericsOptions& options) {
  MLASIM_ASSIGN_OR_RETURN(const MlaInputs in, BuildMlaInputs(request, options));
  // The truth sees q as the real rows alone would scale it.
  MlaInputs real_scaled;
  const MlaInputs* truth_in = &in;
  if (options.q_scale_mode == NumericsOptions::QScaleMode::kPerTensorPadded) {
    NumericsOptions truth_options = options;
    truth_options.q_scale_mode = NumericsOptions::QScaleMode::kPerTensorReal;
    MLASIM_ASSIGN_OR_RETURN(real_scaled, BuildMlaInputs(request, truth_options));
    truth_in = &real_scaled;
  }
  MLASIM_ASSIGN_OR_RETURN(AttentionOutput mono, RunMonolithic(*truth_in, options.precision));
  ApplyEmptyRowLse(options.empty_rows, mono);
  MLASIM_ASSIGN_OR_RETURN(PlanDrivenResult driven,
                          RunPlanDriven(in, request, plan, ExecOptionsOf(options)));
  NumericsReport rep = ReportShape(request, options, in, *truth_in, mono, driven);
  CompareWithTruth(mono, driven, rep);
  return rep;
}

}  // namespace mlasim::ref
