// File: sim/step_numerics.h
//
// The CPU numerics (ref/numerics.h) of every decode call of an engine step, as `mlasim numerics`
// and the engine-step numerics property (fuzz/properties.h NumericsViolations) run them: one
// description for both. Each decode call runs ref::RunPlanNumerics on the plan snapshot it
// consumes, with
//   - its kernel contract's semantics (docs/contracts.md "Semantics"): invalid_index, masked_keys,
//     empty_rows and zero_kv decide what the plan-driven run does where the kernel meets an
//     invalid index, a masked key, a row without keys or a zero-KV work item
//     (ApplyDecodeSemantics);
//   - the index values the step's index fills left in the buffer it reads (the scenario's
//     kv_cache.index_values: -1, past the cache, INT_MAX in slots the kernel reads;
//     DecodeIndexValues);
//   - the engine profile's padding policy (o_padding / lse_padding).
// Findings become violations (sim/violation.h kPoisonedOutput, kWrongOutput) whose class comes
// from one table (PoisonFindingClass). docs/numerics.md "Contract semantics on engine steps".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ref/numerics.h"
#include "sim/contract.h"
#include "sim/scenario.h"
#include "sim/trace.h"
#include "sim/violation.h"

namespace mlasim::sim {

// What ReduceForNumerics changed, for reports.
struct NumericsReduction {
  int32_t max_context = 0;
  int32_t requests = 0;
  int32_t contexts_capped = 0;
  int32_t longest_before = 0;
  int32_t longest_after = 0;
  int32_t topk_before = 0;
  int32_t topk_after = 0;
  int32_t head_dim_qk = 0;
  int32_t head_dim_v = 0;
  bool small_dims = true;
  // kv_cache.index_values[i] the reduced step has no slot for (past its contexts or top-k), set
  // by the caller once the reduced step is expanded (sim::UnplacedIndexValues).
  std::vector<int32_t> index_values_left_out;
};

// Reduces `s` to numerics sizes: every context capped at max(max_context, Q + rejected_prev)
// tokens (the step stays valid), top-k at max_context; with `small_dims` the head dims become 64
// latent + 16 rope (80/64). Heads, K, batch, padding, target and flags are kept (the plan's shape
// depends on them).
NumericsReduction ReduceForNumerics(Scenario& s, int32_t max_context, bool small_dims);

// The numerics knobs of a decode contract's semantics, every field (one description, read by the
// simulator, the GPU runner and these numerics): invalid_index (kFault / kClampToZero / kWrap /
// kMasked), masked_keys = read_then_mask, empty_rows (zero_and_neg_inf_lse -> kWriteZero, nan ->
// kNan, unwritten -> kSkip) and zero_kv (reads_q_writes_output -> kRun, reads_q_only and skips
// -> kSkip: neither writes). A SemanticsOverride replaces fields afterwards.
void ApplyDecodeSemantics(const DecodeSemantics& s, ref::NumericsOptions* o);

// The CPU numerics' policies for a contract's empty_rows and zero_kv (ApplyDecodeSemantics).
ref::EmptyRowPolicy EmptyRowPolicyOf(EmptyRows e);
ref::ZeroKvPolicy ZeroKvPolicyOf(ZeroKv z);

// The explicit values (element, value) that the index fills of `t` before `decode` left in the
// index buffer `decode` reads as kv_indices (the newest fill of an element decides; an element a
// later fill wrote as a plain slot holds no explicit value). Elements are those of the engine's
// buffer, which the numerics' page table shares (kv_indptr of the plan request).
std::vector<std::pair<int64_t, int64_t>> DecodeIndexValues(const Trace& t, const Call& decode);

// The bug class of a numerics finding in real rows (docs/bug-classes.md), one table: a hostile
// index mapped to a key or dereferenced (G), a masked key's NaN (I; G when an invalid index
// was mapped to it), a row with no key written as 0/0 (F), an output row nobody wrote (B), a
// partial row read unwritten, out of range or tainted (F), plan metadata read unwritten (E) or
// out of range (C). In a call's violations a tainted read takes the class of the call's first
// untainted finding (the poison it carries).
BugClass PoisonFindingClass(const ref::PoisonFinding& f);

// Semantics that replace a contract's (a semantics mutant, `mlasim numerics --mutant`,
// `--empty-rows`, `--zero-kv`); unset fields keep the contract's.
struct SemanticsOverride {
  std::optional<ref::InvalidIndexUse> invalid_index;
  std::optional<bool> read_masked_keys;
  std::optional<ref::EmptyRowPolicy> empty_rows;
  std::optional<ref::ZeroKvPolicy> zero_kv;
};

struct StepNumericsOptions {
  // Seed, head dims, precision, poisoning; the semantics fields are set per call from its decode
  // contract (ApplyDecodeSemantics), then `override`.
  ref::NumericsOptions numerics;
  SemanticsOverride override;
};

// One decode call's numerics.
struct DecodeNumerics {
  const Call* call = nullptr;  // into the Trace given to RunStepNumerics
  const PlanSnapshot* snap = nullptr;
  bool launched = true;  // false: the engine's plan-rows guard refused the call
  std::string error;     // non-empty: the numerics refuse the request the engine hands the call
  ref::NumericsReport rep;
  ref::InvalidIndexUse invalid_index = ref::InvalidIndexUse::kMasked;  // the semantics it ran
  bool read_masked_keys = false;
  ref::EmptyRowPolicy empty_rows = ref::EmptyRowPolicy::kWriteZero;
  ref::ZeroKvPolicy zero_kv = ref::ZeroKvPolicy::kRun;
  int64_t index_values = 0;      // explicit index values placed in its page table
  int64_t padding_findings = 0;  // findings whose o rows all belong to padding requests
  int64_t real_findings = 0;     // every other finding
  int64_t padding_rows = 0;      // (q row, head) pairs of padding findings
  bool o_padding_consumed = false, lse_padding_consumed = false;
  int32_t first_padding = -1, first_real = -1;  // indices into rep.poison
  // What fails the call: one kPoisonedOutput per class of real findings, in the order of their
  // first finding (named in its detail), one of class I for consumed padding, one kWrongOutput (F) when the
  // real rows are outside tolerance. Empty when the call passes or did not run.
  std::vector<Violation> violations;
  bool padding_consumed_bad() const {
    return (o_padding_consumed && (padding_findings > 0 || rep.padding_o_nonfinite > 0)) ||
           (lse_padding_consumed && rep.padding_lse_bad > 0);
  }
  bool passed() const {
    return !launched || (error.empty() && rep.ok && real_findings == 0 && rep.poison_dropped == 0 &&
                         !padding_consumed_bad());
  }
};

// Values of the largest tensor (q or KV cache) the numerics of `r` build (ref/limits.h
// tensor_values bounds it).
int64_t NumericsTensorValues(const ref::PlanRequest& r, const ref::NumericsOptions& o);

// Runs the numerics of every decode call of `t` (the expansion of `s`), in call order; calls
// that consume the same plan snapshot with the same semantics share one run. Never fails: a
// request the numerics refuse is the call's `error`.
std::vector<DecodeNumerics> RunStepNumerics(const Scenario& s, const Trace& t,
                                            const StepNumericsOptions& o);

}  // namespace mlasim::sim
