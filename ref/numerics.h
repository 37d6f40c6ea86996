// File: ref/numerics.h
//
// Numerics checks around ref/attention.h: a deterministic PRNG, the FlashMLA-style tensor
// comparison, the tolerances derived in docs/numerics.md, and the entry point the simulator
// calls for one decode step:
//
//   RunPlanNumerics(request, plan, options)
//     -> BuildMlaInputs: seeded random q and KV cache (values rounded to the request's dtypes on
//        its target, NaN in every unused KV slot and spare page, shuffled page table; sparse:
//        per-token top-k lists with -1 / INT_MAX / INT_MIN / negative / past-the-end entries)
//     -> RunMonolithic (the truth) and RunPlanDriven (the plan's work items + reduce)
//     -> NumericsReport: max abs / rel error and cosine difference of o and lse, plan-driven vs
//        monolithic, and every poison finding.
//
// Sources: aiter-mla-metadata.md §10 (mla_decode_fwd), §11 (kernel contract), §12 (reduce),
// §14 (aiter's test tolerances); FlashMLA's tests (anomaly positions first, then errors).
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "ref/attention.h"
#include "ref/metadata.h"

namespace mlasim::ref {

// SplitMix64 (Steele, Lea, Flood 2014): 64-bit state, one multiply-xorshift output per step.
// Integer ranges by rejection (no modulo bias) and doubles from the top 53 bits, so the stream
// is the same on every platform (no std distributions).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next();
  uint64_t Below(uint64_t bound);                    // uniform in [0, bound); bound >= 1
  double Unit();                                     // uniform in [0, 1), multiples of 2^-53
  double Symmetric() { return 2.0 * Unit() - 1.0; }  // uniform in [-1, 1)
  // An independent stream for component `salt` (q, kv, top-k ...) of the same seed.
  static SplitMix64 Stream(uint64_t seed, uint64_t salt);

 private:
  uint64_t state_;
};

// |actual - expected| <= atol + rtol * |expected| per finite pair, and cos_diff <= cos_diff.
struct Tolerance {
  double atol = 0;
  double rtol = 0;
  double cos_diff = 0;
};

// One comparison, in the order of FlashMLA's tests: first the positions of NaN, +inf and -inf
// must match, then the errors of the finite pairs.
struct CompareResult {
  int64_t elements = 0;                 // compared (not skipped)
  int64_t nan_mismatches = 0;           // exactly one side NaN
  int64_t inf_mismatches = 0;           // one side +-inf and the other not the same infinity
  int64_t first_anomaly_mismatch = -1;  // element index
  double max_abs = 0;                   // over finite pairs
  int64_t max_abs_index = -1;
  double max_rel = 0;  // |x - y| / |y| over finite pairs with y != 0
  int64_t max_rel_index = -1;
  // aiter's cal_diff: 1 - 2 sum(x y) / sum(x^2 + y^2) over finite pairs (0 when all are 0),
  // computed as the equal sum((x - y)^2) / sum(x^2 + y^2), which has no cancellation.
  double cos_diff = 0;
  int64_t tolerance_violations = 0;  // finite pairs outside atol + rtol |y|
  int64_t first_violation = -1;
  bool anomalies_match() const { return nan_mismatches == 0 && inf_mismatches == 0; }
  bool passed = false;  // anomalies match, no violation, cos_diff within tolerance
};

// Compares n elements; `skip` (optional, n flags) excludes elements.
CompareResult CompareTensors(const double* actual, const double* expected, int64_t n,
                             const Tolerance& tol, const uint8_t* skip = nullptr);

// Two comparisons of the same n pairs in one pass, skipping by runs: the pairs form runs of
// `width` (the last one shorter when width does not divide n), and run r is skipped by the
// first comparison when skip_first[r] is set, by the second when skip_second[r] is (each mask
// holds ceil(n / width) flags; width < 1 counts as 1). Returns {CompareTensors(..., first's
// per-pair flags), CompareTensors(..., second's)}, bit for bit: each result takes its own pairs
// in index order. For a tensor compared over two sets of (row, head) pairs of dv elements each
// (all real rows, and the real rows outside poisoned pairs: CompareWithTruth), at about the
// cost of one comparison and without a flag per element.
std::pair<CompareResult, CompareResult> CompareTensorsTwice(const double* actual,
                                                            const double* expected, int64_t n,
                                                            const Tolerance& tol,
                                                            const uint8_t* skip_first,
                                                            const uint8_t* skip_second,
                                                            int64_t width);

// [rows * heads] flags: 1 where a poison finding on o names the (q row, head) pair. Findings
// whose rows are unknown (row_begin < 0) flag nothing; the caller decides what they mean.
std::vector<uint8_t> PoisonPairMask(const std::vector<PoisonFinding>& poison, int32_t rows,
                                    int32_t heads);

// Tolerances of plan-driven vs monolithic for o and lse (derivation: docs/numerics.md).
struct OutputTolerances {
  Tolerance o;
  Tolerance lse;
};
// max_keys: the most keys one q row attends; v_max: max |V| value (stored * kv_scale);
// lse_max: max |lse| of finite monolithic rows.
OutputTolerances DeriveTolerances(const AttentionPrecision& precision, int64_t max_keys,
                                  double v_max, double lse_max);

// DeriveTolerances for one call: max_keys and v_max from `inputs` (the V columns of the cache
// rows, times kv_scale), lse_max from the finite LSE of `truth` (the monolithic result).
OutputTolerances TolerancesFor(const MlaInputs& inputs, const AttentionOutput& truth,
                               const AttentionPrecision& precision);
// The same for inputs whose cache is not on the host: `stored_v_max` is max |stored V| over the
// finite values of the V columns of every cache row (before kv_scale).
OutputTolerances TolerancesFor(const MlaInputs& inputs, const AttentionOutput& truth,
                               const AttentionPrecision& precision, double stored_v_max);

struct NumericsOptions {
  uint64_t seed = 1;
  int32_t head_dim_qk = 576;  // 512 latent + 64 rope; smaller values keep fuzzing fast
  int32_t head_dim_v = 512;
  AttentionPrecision precision;  // default: fp32 accumulate, P and o not rounded
  // Storage formats; unset = the request's q/kv dtypes on its target (FormatForDType).
  std::optional<NumFormat> q_format;
  std::optional<NumFormat> kv_format;
  Fp8Overflow fp8_overflow = Fp8Overflow::kNaN;
  double q_scale = 1.0;  // value = stored * scale
  double kv_scale = 1.0;
  double amplitude = 1.0;                // q and KV values are uniform in [-amplitude, amplitude)
  double sm_scale = 0.0;                 // 0 = 1/sqrt(head_dim_qk)
  int32_t spare_pages = 2;               // NaN-filled pages no request owns
  int32_t invalid_topk_per_mille = 125;  // sparse: share of entries within a token's length
                                         // that are invalid (-1, INT_MAX, negative, ...)
  // The kernel contract's empty_rows and zero_kv (PlanExecOptions; sim/contract.h).
  EmptyRowPolicy empty_rows = EmptyRowPolicy::kWriteZero;
  ZeroKvPolicy zero_kv = ZeroKvPolicy::kRun;
  // The kernel contract's handling of indices outside the cache and of masked keys
  // (PlanExecOptions; sim/contract.h DecodeSemantics).
  InvalidIndexUse invalid_index = InvalidIndexUse::kMasked;
  bool read_masked_keys = false;
  // Poisoning like FlashMLA's tests (docs/numerics.md "Poisoned inputs"): dense page-table slots
  // past the ones in use hold hostile page ids (-1, past the cache, 2147480000, INT_MAX), and page
  // 0 is never given to a request (it holds NaN, so a kernel that clamps an invalid index to
  // slot 0 reads poison). Top-k entries past a token's length always hold hostile values.
  int32_t hostile_table_slots = 0;
  bool reserve_page_zero = false;
  // Explicit index values the engine's index fill left in the slots a kernel reads (the
  // scenario's kv_cache.index_values, sim/step_numerics.h DecodeIndexValues): (element, value)
  // pairs, element = a page-table slot (dense kv_indices) or an element of the flattened
  // [q_rows, topk] matrix (sparse). Elements past the used slots / the matrix are not read by any
  // kernel and are ignored. A value outside the cache (-1, past the cache, INT_MAX) is an invalid
  // index: the reference masks its keys; the plan-driven run does what `invalid_index` says.
  // Errors: InvalidArgument("index_values") for a negative element or a value outside int32.
  std::vector<std::pair<int64_t, int64_t>> index_values;
  // q rows [real_rows, q_rows) belong to padding requests: the engine discards their outputs, so
  // o / lse there are not compared (poison findings there are still reported). -1 = every row.
  int64_t real_rows = -1;
  // The per-tensor scale of an fp8 q (value = stored * q_scale): `q_scale` as given (kStatic), or
  // max |q| / the format's max over every q row, padding rows included (kPerTensorPadded), or
  // over the real rows only (kPerTensorReal). Padding rows hold values `padding_q_amplitude`
  // times larger than real rows (1 = alike). With kPerTensorPadded the monolithic truth uses the
  // real rows' scale, so padding that changes the real rows' quantisation shows as error.
  enum class QScaleMode : uint8_t { kStatic, kPerTensorPadded, kPerTensorReal };
  QScaleMode q_scale_mode = QScaleMode::kStatic;
  double padding_q_amplitude = 1.0;
  NumericsMutant mutant = NumericsMutant::kNone;
  std::optional<OutputTolerances> tolerance;  // unset = DeriveTolerances
  // false: BuildMlaInputs leaves q and kv_cache empty (everything else as usual) and says in its
  // MlaValueSource where their values come from: a device generates them (kernels/gpu_api.h
  // fill_generated) bit for bit as the CPU would.
  bool fill_values = true;
};

// Where BuildMlaInputs takes the values of q and the KV cache from (ref/input_values.h): q
// element i (row-major [q_rows, H, D]) is value i of the q stream, KV cache element (row r,
// column x) is value kv_row_token[r] * D + x of the KV stream or NaN where kv_row_token[r] < 0
// (unused page tails, spare pages); each value is then divided by its scale and rounded to its
// format (ref::Quantize).
struct MlaValueSource {
  uint64_t q_state = 0;   // values::StreamState(seed, q salt)
  uint64_t kv_state = 0;  // values::StreamState(seed, KV salt)
  double amplitude = 1.0;
  NumFormat q_format = NumFormat::kFp32;
  NumFormat kv_format = NumFormat::kFp32;
  int64_t q_values = 0;               // q_rows * num_heads * head_dim_qk
  std::vector<int64_t> kv_row_token;  // [num_pages * page_size]
  // The stored values are values::RoundToFormat(values::StreamValue(...)) alone: scales 1, a
  // static q scale, fp8 overflow to NaN (what a device generator reproduces).
  bool plain = false;
};

struct NumericsReport {
  // Plan-driven vs monolithic over every element of the real rows (NumericsOptions::real_rows).
  CompareResult o;
  CompareResult lse;
  // The same, skipping the (row, head) pairs named by poison findings on o.
  CompareResult o_unpoisoned;
  CompareResult lse_unpoisoned;
  OutputTolerances tolerance;
  std::vector<PoisonFinding> poison;
  int64_t poison_dropped = 0;
  int64_t poisoned_rows = 0;    // (q row, head) pairs named by poison findings on o
  int64_t unexplained_nan = 0;  // plan-driven NaN in o/lse at pairs no finding names
  int64_t monolithic_nan = 0;   // NaN in the monolithic result (always a bug)
  // Inputs and work, for reports.
  NumFormat q_format = NumFormat::kFp32;
  NumFormat kv_format = NumFormat::kFp32;
  int32_t q_rows = 0;
  int64_t rows_compared = 0;  // q rows whose o / lse were compared (real rows)
  int32_t num_heads = 0;
  int64_t max_keys = 0;
  double v_max = 0;
  double lse_max = 0;
  int32_t works_run = 0;
  int32_t tiles_reduced = 0;
  int64_t partial_rows_without_key = 0;  // split-piece rows that saw no key (§11.6)
  int32_t fold_ratio = 1;
  // Padding rows [real_rows, q_rows) of the plan-driven result: o elements that are NaN or +-inf,
  // lse values that are NaN or +inf (-inf is a defined empty row), and (row, head) pairs named
  // by poison findings. Findings when the engine consumes padding (docs/numerics.md).
  int64_t padding_o_nonfinite = 0;
  int64_t padding_lse_bad = 0;
  int64_t padding_poisoned_pairs = 0;
  // q's per-tensor scale as the kernel got it, and the one over the real rows alone (equal
  // unless NumericsOptions::q_scale_mode is kPerTensorPadded and padding rows set the maximum).
  double q_scale = 1.0;
  double q_scale_real = 1.0;
  // Plan-driven agrees with monolithic within tolerance wherever no poison is reported, and
  // every NaN is explained by a finding. Poison itself is in `poison`: the caller decides
  // whether it is expected (e.g. the parallel planner's zero-KV requests).
  bool ok = false;
};

// Deterministic inputs for `request` (shapes from the request: heads, qo_indptr / uni_seqlen_qo,
// kv_indptr in pages, kv_last_page_lens, page_size, topk, is_causal). Errors: those of
// ValidatePlanRequest, InvalidArgument("num_heads_k") unless 1, ("head_dim_qk"/"head_dim_v")
// for bad dims, ("page_size") for sparse with pages > 1, ("qo_indptr") when it is not uniform
// (dense with uni_seqlen_qo <= 0: the request's own rows, from 0),
// ("kv_indptr") when q or the KV cache would exceed 2^28 values (1 GiB): run such scenarios at
// reduced sizes.
StatusOr<MlaInputs> BuildMlaInputs(const PlanRequest& request, const NumericsOptions& options);
// The same, also saying where q's and the cache's values come from (`source`, not null).
StatusOr<MlaInputs> BuildMlaInputs(const PlanRequest& request, const NumericsOptions& options,
                                   MlaValueSource* source);

// Whether caller q row `row` of `request` sees at least one key position in the monolithic
// attention: its request has keys (dense: (pages - 1) * page_size + last page length; sparse:
// min(pages, topk)) and, dense causal, the row's diagonal reaches key 0 (row i of Lq rows sees
// key j iff j <= i + Lk - Lq, §11.3). Rows are the planner's: dense requests hold uni_seqlen_qo
// rows each (uni_seqlen_qo <= 0: their qo_indptr rows), sparse ones qo_indptr[1] - qo_indptr[0]. Such a row's only correct output is o = 0,
// lse = -inf; a kernel that skips zero-KV items (zero_kv = skips) leaves it unwritten. `row` must
// lie in [0, q rows).
bool RowSeesAKey(const PlanRequest& request, int64_t row);

// Runs one decode step both ways and compares. `plan` must be a plan for `request` (typically
// PlanMlaMetadata(request)); a plan with wrong contents is fine (it shows up as errors and
// findings). Errors: those of BuildMlaInputs and RunPlanDriven.
StatusOr<NumericsReport> RunPlanNumerics(const PlanRequest& request, const Plan& plan,
                                         const NumericsOptions& options = {});

}  // namespace mlasim::ref
