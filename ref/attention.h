// File: ref/attention.h
//
// The CPU numerics reference of MLA decode in the absorbed form: what the numbers must be.
//
//   RunMonolithic(inputs)                 whole KV of each request at once: the truth
//   RunPlanDriven(inputs, request, plan)  aiter's persistent decode: every work item of a
//                                         ref::Plan over its KV range (§11), then the split-KV
//                                         reduce (§12), with poison tracking (bug classes B, F, I)
//   RunPlanStructure(...)                 the same walk and poison, no arithmetic (which
//                                         outputs a plan defines)
//
// Both use Eigen matrix products per block (Q tile x K^T, masked softmax, P x V), accumulate in
// fp32 (aiter) or fp64 (a reference for references), and give o [q_rows, heads, head_dim_v] and
// the natural-log LSE [q_rows, heads] in the caller's layout.
//
// Shapes (H = num_heads, D = head_dim_qk, Dv = head_dim_v; MLA: D = 576 = 512 latent + 64 rope,
// Dv = 512, one KV head; tests may shrink D and Dv):
//   q            [q_rows, H, D]                         q_rows = qo_indptr[B]
//   kv_cache     [num_pages, page_size, D]              K = all D columns, V = the first Dv
//   dense:  kv_indptr [B+1] pages, kv_indices [>= kv_indptr[B]] page ids,
//           kv_last_page_lens [B] tokens in each request's last page
//   sparse (topk >= 0, page_size 1): topk_indices [q_rows, topk] KV-cache rows per q token;
//           token t of request b uses entries [0, min(kv_indptr[b+1] - kv_indptr[b], topk)) of
//           its row (the planner's per-token length, §8.1); an entry outside [0, num_pages) is
//           masked and never read (-1, INT_MAX, INT_MIN, any negative or past-the-end value).
//
// Semantics (aiter-mla-metadata.md §10, §11):
//   logits  s[j] = (q . k_j) * sm_scale * q_scale * kv_scale      (values = stored * scale)
//   causal (dense, is_causal): q row i of a request with Lq rows and Lk keys sees key j iff
//           j <= i + Lk - Lq (bottom-right aligned, §11.3); sparse attention is not causal
//           (the reference of test_mla_sparse.py, §14).
//   o       = sum_j softmax(s)_j * v_j * kv_scale;  lse = max_j s_j + ln(sum_j exp(s_j - max))
//   Empty or fully masked rows (no visible key): o = 0 and lse = -inf, never NaN. (The
//           recommended kernel behaviour of §11.5; OPUS writes lowest-float, HK writes nothing:
//           EmptyRowPolicy::kSkip models the latter.)
//
// Plan-driven execution (§11.2, §11.4, §12):
//   * q/o rows live in the planner's q space. With head folding (R = fold_ratio > 1, 16-head
//     groups) virtual batch v = b*R + f owns head group f; the folded row of (token t, group f)
//     is t*R + f for qlen 1 and sparse, (b*R + f)*L + s for dense qlen L > 1 (token t = b*L+s),
//     exactly the re-layout of mla_decode_fwd (§10.3); results are mapped back.
//   * work item w reads q rows [qo_start, qo_end) and the KV token positions
//     [kv_start*page, kv_end_tok) with kv_end_tok = kv_end*page if kv_offset != 0 or page == 1,
//     else (kv_end-1)*page + kv_last_page_lens[b]; physical row = kv_indices[p/page]*page +
//     p%page. Sparse: positions index the flattened [q_rows, topk] index matrix. Request b is
//     batch_idx / R (dense), batch_idx (sparse, 2026-08) or batch_idx / ori / R (sparse, 2026-03).
//     NOTE: for folded dense plans with page_size > 1 we read kv_last_page_lens at the real
//     request b; a kernel indexing it by the virtual batch would read the wrong entry (§4.5).
//   * partial_qo_loc < 0: final o/lse rows (o rounded to precision.out_format). Otherwise the
//     NORMALIZED partial o (accumulate type: fp32 as aiter's logits buffer) and its LSE at
//     partial rows partial_qo_loc + r. Partial buffers hold reduce_partial_map.size() *
//     max_seqlen_qo rows (the allocation of mla_decode_fwd, §10.4).
//   * reduce (§12): every tile with >= 2 pieces; M = max lse_i, S = sum exp(lse_i - M),
//     L = (S == 0 or NaN) ? +inf : M + ln S, O = sum exp(lse_i - L) * partial_i; final lse = L.
//     aiter's formula exactly: a row with no visible key in any piece gets O = 0 and lse = +inf
//     (not -inf), and a NaN partial times a zero weight is NaN (aiter #4711). Two-pass form for
//     every group size (aiter's online form for n < 4 differs only by rounding).
//
// Poison (bug class I): every row of o, lse and the partial buffers that no call wrote this step
// holds NaN, and reads of metadata cells the planner never wrote, of positions past a buffer's
// end, or of KV rows outside the cache give NaN. Every output row whose value depends on such a
// read is listed in PlanDrivenResult::poison with the buffer and rows it came from.
//
// Determinism: no threads; one fixed order of operations. The bytes depend only on the inputs
// and the binary (Eigen's GEMM blocking follows the CPU's cache sizes, so another CPU model may
// round the last bit differently).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ref/dtypes.h"
#include "ref/metadata.h"
#include "ref/status.h"

namespace mlasim::ref {

// One decode step's tensors, already rounded to their storage formats (see ref/dtypes.h):
// value = stored * scale per tensor.
struct MlaInputs {
  int32_t num_heads = 16;     // q heads (one KV head)
  int32_t head_dim_qk = 576;  // D: K and q width (512 latent + 64 rope)
  int32_t head_dim_v = 512;   // Dv: V = the first Dv columns of each KV row
  int32_t page_size = 1;      // tokens per page, >= 1
  int32_t num_pages = 0;
  std::vector<float> q;         // [q_rows, num_heads, head_dim_qk] stored values
  std::vector<float> kv_cache;  // [num_pages, page_size, head_dim_qk] stored values
  double q_scale = 1.0;         // per-tensor dequantisation scales, finite and > 0
  double kv_scale = 1.0;
  double sm_scale = 0.0;                   // softmax scale; 0 = 1/sqrt(head_dim_qk)
  bool is_causal = true;                   // dense only
  std::vector<int32_t> qo_indptr;          // [B+1] q rows (tokens) per request, from 0
  std::vector<int32_t> kv_indptr;          // [B+1] pages per request, from 0
  std::vector<int32_t> kv_indices;         // dense: page ids at kv_indptr positions
  std::vector<int32_t> kv_last_page_lens;  // dense: [B] tokens in the last page (0..page_size)
  int32_t topk = -1;                       // >= 0: sparse top-k mode (page_size must be 1)
  std::vector<int32_t> topk_indices;       // sparse: [q_rows, topk] KV-cache rows

  int32_t num_requests() const { return static_cast<int32_t>(qo_indptr.size()) - 1; }
  int32_t q_rows() const { return qo_indptr.empty() ? 0 : qo_indptr.back(); }
  double effective_sm_scale() const;
};

enum class Accumulate : uint8_t { kFp32, kFp64 };

struct AttentionPrecision {
  Accumulate accumulate = Accumulate::kFp32;
  // Format P (the unnormalised softmax weights exp(s - max)) is rounded to before P x V, as the
  // kernels feed P to their MFMA in the KV dtype (bf16, or fp8 for fp8 kernels). The row sum
  // uses the unrounded weights. kFp64 = no rounding.
  NumFormat p_format = NumFormat::kFp64;
  // Format of the final o rows (aiter writes bf16). Partial rows stay in the accumulate type
  // and the final lse in fp32/fp64. kFp64 = no rounding.
  NumFormat out_format = NumFormat::kFp64;
};

// Output in the caller's layout. Rows no call wrote hold NaN (poison).
struct AttentionOutput {
  int32_t q_rows = 0;
  int32_t num_heads = 0;
  int32_t head_dim_v = 0;
  std::vector<double> o;    // [q_rows, num_heads, head_dim_v]
  std::vector<double> lse;  // [q_rows, num_heads], natural log; -inf for rows with no key
};

// Checks shapes and values; errors are InvalidArgument naming the field ("kv_indices[7]",
// "topk_indices", "head_dim_v", ...). Every call below validates first.
Status ValidateMlaInputs(const MlaInputs& inputs);
// The same without the sizes of q and kv_cache: for inputs whose values live on a device
// (NumericsOptions::fill_values false), checked before they are generated there.
Status ValidateMlaShape(const MlaInputs& inputs);

// The monolithic reference: for every request, attention of all its q rows over all its KV at
// once. Errors: those of ValidateMlaInputs.
StatusOr<AttentionOutput> RunMonolithic(const MlaInputs& inputs,
                                        const AttentionPrecision& precision = {});

// Deliberately broken variants of the plan-driven path (injected with MLASIM_MUTANT, ref/mutant.h).
// Each exists so that a property can be shown to fail on it; kNone is the contract above. The
// monolithic path never uses them. Bugs a kernel contract can state (a NaN for an empty row, an
// invalid index dereferenced) are not mutants here but the semantics of PlanExecOptions.
enum class NumericsMutant : uint8_t {
  kNone = 0,
  kMergePieceTwice,      // the reduce merges the first piece of every group twice
  kPartialRowOffByOne,   // split pieces write partial rows at partial_qo_loc + r + 1
  kUnnormalizedPartial,  // split pieces write sum_j p_j v_j without dividing by sum_j p_j
  kCausalOffByOne,       // the causal rule lets row i see key i + Lk - Lq + 1
  // One policy for two contract fields again: rows with no visible key follow zero_kv (skipped
  // wherever zero-KV items are), as the numerics did before zero_kv had its own knob.
  kEmptyRowsFollowZeroKv,
  // The uniform view on a ragged batch: every request's q length taken as max_seqlen_qo in the
  // causal rule (its diagonal shifts for a request shorter than the maximum).
  kIgnoreQLens,
  kCount,
};
const char* NumericsMutantName(NumericsMutant m);

// What a kernel does with a row that has no visible key (a fully masked row, a piece row before
// the causal diagonal, every row of a zero-KV item that runs): the contract's empty_rows
// (sim/contract.h EmptyRows).
enum class EmptyRowPolicy : uint8_t {
  kWriteZero,  // o = 0, lse = -inf (our contract; §11.5 recommendation)
  kSkip,       // writes nothing (HK's fully masked warps, §11.4); the rows stay poison
  kNan,        // 0 / 0: o = NaN, lse = -inf; a split piece's NaN reaches the reduce (aiter #4711)
  kWriteZeroPosInfLse,  // o = 0, lse = +inf in o's rows (FlashMLA); a split piece's partial row
                        // gets lse = -inf (FlashMLA's lse_accum), so a tile of keyless pieces
                        // reduces to +inf as well
};

// What a zero-KV work item (kv_end <= kv_start: no key position at all) does: the contract's
// zero_kv (sim/contract.h ZeroKv). Independent of EmptyRowPolicy: OPUS skips zero-KV items but
// writes O = 0 for the masked rows of the items it runs.
enum class ZeroKvPolicy : uint8_t {
  kRun,   // runs like any item (asm, reads_q_writes_output): every row has no key, so it holds
          // what the EmptyRowPolicy says
  kSkip,  // writes nothing (skips, reads_q_only: OPUS, HK, §11.5); its rows stay poison
};

// What a kernel does with an index outside the KV cache (a sparse top-k entry, or a page id of a
// page-table slot past the ones in use): the contract's invalid_index (sim/contract.h).
enum class InvalidIndexUse : uint8_t {
  kMasked,          // recognised and skipped (the reference)
  kFault,           // dereferenced as is: a row outside the cache (NaN: poison)
  kClampToZero,     // row 0 read instead
  kWrap,            // row (index mod cache rows) read instead
  kMinusOneMasked,  // -1 masked, any other index dereferenced as is (FlashMLA's sparse decode)
};

struct PlanExecOptions {
  AttentionPrecision precision;
  EmptyRowPolicy empty_rows = EmptyRowPolicy::kWriteZero;
  NumericsMutant mutant = NumericsMutant::kNone;
  InvalidIndexUse invalid_index = InvalidIndexUse::kMasked;
  // The contract's masked_keys: true = read then mask (keys past a request's last token in its
  // last page, and rows an invalid index was clamped or wrapped to, are loaded and multiplied by
  // a zero weight, so a NaN there reaches the output through 0 x NaN); false = never read.
  bool read_masked_keys = false;
  ZeroKvPolicy zero_kv = ZeroKvPolicy::kRun;
};

// Buffers named in poison findings.
enum class NumericsBuffer : uint8_t {
  kO,            // final o and final lse rows (caller layout: q row = token, heads)
  kPartialO,     // fp32 partial o + partial lse rows (aiter's logits / attn_lse)
  kKvCache,      // KV cache rows (page * page_size + slot)
  kKvIndices,    // the page table (dense) positions
  kTopkIndices,  // the flattened [q_rows, topk] index matrix (sparse) positions
  kKvIndptr,     // request index (batch_idx) outside the batch
  kWorkIndptr,
  kWorkInfo,  // element w*8 + field
  kReduceIndptr,
  kReduceFinalMap,  // element t*2 + {0,1}
  kReducePartialMap,
};
const char* NumericsBufferName(NumericsBuffer b);

enum class PoisonKind : uint8_t {
  kUnwrittenRead,    // read an element no call wrote this step (a poison value)
  kOutOfRangeRead,   // read past a buffer's end or before its start (a poison value)
  kOutOfRangeWrite,  // a store outside the buffer (not performed; the intended rows stay poison)
  kNeverWritten,     // an output row that no call wrote this step
  kTaintedRead,      // read a row whose value already depends on poison
  kHostileIndex,     // used a key an invalid index (-1, past the cache, INT_MAX) was mapped to
  kMaskedNaN,        // a masked key's NaN reached the output through 0 x NaN (read then mask)
  kEmptyRowNaN,      // a row with no visible key written as 0 / 0 (empty_rows = nan)
  kRacingWrite,      // a row two work items (or two reduce tiles) of one launch both write: the
                     // value that lands depends on their order on hardware, which is not defined
};
const char* PoisonKindName(PoisonKind k);

// One output range whose values depend on poison, and where the poison came from.
struct PoisonFinding {
  PoisonKind kind;
  NumericsBuffer output;   // buffer holding the poison-dependent values
  int64_t row_begin = -1;  // rows [row_begin, row_end) of `output`; -1: unknown rows
  int64_t row_end = -1;    //   (kO: caller q rows; kPartialO: partial rows)
  int32_t head_begin = 0;  // heads [head_begin, head_end) of those rows (caller heads for kO)
  int32_t head_end = 0;
  NumericsBuffer source = NumericsBuffer::kO;  // where the poison was read (kO: never written)
  int64_t source_index = -1;                   // element or row read; first of a contiguous run
  int32_t work = -1;                           // work item involved, -1 if none
  int32_t tile = -1;                           // reduce tile involved, -1 if none
  // The contract semantics that let the poison through ("invalid_index = clamp_to_zero",
  // "masked_keys = read_then_mask", "empty_rows = nan"); empty when none did.
  std::string via = "";
  bool has_value = false;  // source_value holds the hostile index value read at source_index
  int64_t source_value = 0;
  std::string ToString() const;
};

struct PlanDrivenResult {
  AttentionOutput out;                // caller layout; poison rows are NaN
  std::vector<PoisonFinding> poison;  // empty when nothing depends on poison
  int64_t poison_dropped = 0;         // findings past the first 4096, counted, not stored
  int32_t works_run = 0;
  int32_t tiles_reduced = 0;  // reduce groups with >= 2 pieces
  int64_t partial_rows = 0;   // rows of the partial buffers
  int64_t partial_rows_written = 0;
  int64_t partial_rows_without_key = 0;  // split-piece rows with no visible key (§11.6)
  int32_t fold_ratio = 1;
};

// The truth a kernel of `policy` is held to: the monolithic `truth` with every lse of a row
// without a visible key (-inf) replaced by +inf under EmptyRowPolicy::kWriteZeroPosInfLse (o stays
// 0); unchanged under every other policy. Shapes: truth.lse [rows x heads], fp64.
void ApplyEmptyRowLse(EmptyRowPolicy policy, AttentionOutput& truth);

// Runs `plan` (made by the planner for `request`, or any plan: every value is range-checked and
// bad ones become findings, never crashes) over `inputs`. The request must describe the same
// batch: heads, page size, kv_indptr, topk, is_causal, uni_seqlen_qo (dense: qo_indptr[b] ==
// b * uni_seqlen_qo). Errors: ValidateMlaInputs; InvalidArgument naming the request field that
// disagrees with the inputs ("request.heads_per_head_k", ...) or "plan.derived.fold_ratio" when
// it does not divide the heads.
StatusOr<PlanDrivenResult> RunPlanDriven(const MlaInputs& inputs, const PlanRequest& request,
                                         const Plan& plan, const PlanExecOptions& options = {});

// RunPlanDriven without the arithmetic (no scores, softmax, P x V or merge): the same poison
// findings (never written, racing write, out-of-range and unwritten reads, ...), works_run,
// tiles_reduced and partial row counts, for any values of q and the KV cache; `out` holds its
// shape and no values (o and lse empty). A row has no visible key when its causal limit or its
// masked keys leave it none (a score of -inf from infinite values is not modelled). q and the
// KV cache need no values (NumericsOptions::fill_values false) unless options.read_masked_keys,
// whose masked-NaN findings read the cache. Errors: those of RunPlanDriven, with
// ValidateMlaShape for ValidateMlaInputs, and InvalidArgument("kv_cache") when
// read_masked_keys is set and the cache holds no values.
StatusOr<PlanDrivenResult> RunPlanStructure(const MlaInputs& inputs, const PlanRequest& request,
                                            const Plan& plan, const PlanExecOptions& options = {});

}  // namespace mlasim::ref
