// The metamorphic property of the numerics reference: for random batches and any plan the
// planner makes, plan-driven split + reduce equals monolithic attention within the derived
// tolerances, and nothing is NaN except the documented poison (zero-KV requests that aiter's
// parallel planner gives no work item). Each NumericsMutant must make the property fail.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <sstream>

#include "ref/attention.h"
#include "ref/numerics.h"
#include "ref/planner.h"
#include "tests/ref/plan_builders.h"

namespace mlasim::ref {
namespace {

struct NumericsCase {
  PlanRequest request;
  NumericsOptions options;
};

std::ostream& operator<<(std::ostream& os, const NumericsCase& c) {
  const PlanRequest& r = c.request;
  os << ArchName(r.target) << " heads=" << r.heads_per_head_k << " qlen=" << r.uni_seqlen_qo
     << " page=" << r.page_size << " gran=" << r.kv_granularity << " topk=" << r.topk
     << " causal=" << r.is_causal << " clusters=" << r.cu_count << " msb=" << r.max_split_per_batch
     << " q=" << DTypeName(r.q_dtype) << " kv=" << DTypeName(r.kv_dtype)
     << " rev=" << RevisionName(r.revision) << " kv_indptr=[";
  for (int32_t x : r.kv_indptr) os << x << ",";
  os << "] lpl=[";
  for (int32_t x : r.kv_last_page_lens) os << x << ",";
  const AttentionPrecision& p = c.options.precision;
  os << "] dims=" << c.options.head_dim_qk << "/" << c.options.head_dim_v
     << " acc=" << (p.accumulate == Accumulate::kFp64 ? "fp64" : "fp32")
     << " p=" << NumFormatName(p.p_format) << " out=" << NumFormatName(p.out_format)
     << " seed=" << c.options.seed;
  return os;
}

// Context lengths in tokens, with weight on the edges: 0, 1, shorter than qlen, and just past a
// split boundary (a final piece shorter than qlen: §11.6 for pages > 1).
rc::Gen<int32_t> GenKvTokens(int32_t qlen, int32_t block_tokens, int32_t max_tokens) {
  return rc::gen::weightedOneOf<int32_t>(
      {{1, rc::gen::just<int32_t>(0)},
       {1, rc::gen::just<int32_t>(1)},
       {1, rc::gen::inRange<int32_t>(0, qlen + 1)},
       {3, rc::gen::map(
               rc::gen::pair(rc::gen::inRange<int32_t>(1, std::max(2, max_tokens / block_tokens)),
                             rc::gen::inRange<int32_t>(1, std::max(2, qlen))),
               [=](std::pair<int32_t, int32_t> p) {
                 return std::min(max_tokens, p.first * block_tokens + p.second);
               })},
       {4, rc::gen::inRange<int32_t>(0, max_tokens + 1)}});
}

// The §11.6 edge: pages > 1 with MTP, small granularity and many clusters, so split tiles end
// with a final piece of fewer than qlen tokens (no tail rule for pages > 1): the piece's first
// q rows see no key and must write o = 0, lse = -inf for the reduce to ignore.
rc::Gen<std::pair<PlanRequest, int32_t>> GenPagedShortTail() {
  return rc::gen::exec([] {
    const int32_t page = *rc::gen::element(2, 4, 16);
    const int32_t qlen = *rc::gen::inRange<int32_t>(2, 5);
    const auto kv = *rc::gen::container<std::vector<int32_t>>(
        static_cast<size_t>(*rc::gen::inRange<int32_t>(1, 3)),
        rc::gen::map(
            rc::gen::pair(rc::gen::inRange<int32_t>(2, 24), rc::gen::inRange<int32_t>(1, qlen)),
            [page](std::pair<int32_t, int32_t> p) { return p.first * page + p.second; }));
    PlanRequest r =
        test::DenseRequest(Arch::kGfx942, 16, qlen, kv, *rc::gen::inRange<int32_t>(8, 17), page, 1);
    return std::make_pair(r, qlen);
  });
}

// One random step, sized so that both paths take a few ms: contexts shrink as heads x qlen x
// batch grow.
rc::Gen<NumericsCase> GenCase() {
  return rc::gen::exec([] {
    NumericsCase c;
    const auto target = *rc::gen::element(Arch::kGfx942, Arch::kGfx950, Arch::kSm90);
    const int32_t heads = *rc::gen::weightedElement<int32_t>({{5, 16}, {2, 32}, {2, 64}, {1, 128}});
    const int32_t kind = *rc::gen::weightedElement<int32_t>({{4, 0}, {1, 1}, {1, 2}});
    const bool sparse = kind == 1;
    const int32_t qlen = *rc::gen::inRange<int32_t>(1, sparse ? 4 : 5);
    const int32_t page =
        sparse ? 1 : *rc::gen::weightedElement<int32_t>({{3, 1}, {1, 2}, {1, 4}, {1, 16}});
    const int32_t gran = page == 1 ? *rc::gen::element(16, 32) : *rc::gen::element(1, 2, 16);
    const int32_t batch = *rc::gen::inRange<int32_t>(1, 7);
    const int32_t max_tokens = std::clamp<int32_t>(
        (sparse ? 640000 : 160000) / (heads * qlen * batch), 8, sparse ? 3000 : 1500);
    const auto kv = *rc::gen::container<std::vector<int32_t>>(
        static_cast<size_t>(batch), GenKvTokens(qlen, page * gran, max_tokens));
    const int32_t clusters = *rc::gen::inRange<int32_t>(2, 17);
    if (kind == 2) {
      c.request = (*GenPagedShortTail()).first;
      c.request.target = target;
    } else if (sparse) {
      c.request = test::SparseRequest(target, heads, qlen, kv, *rc::gen::element(8, 64, 256, 1024),
                                      clusters);
    } else {
      c.request = test::DenseRequest(target, heads, qlen, kv, clusters, page, gran);
    }
    PlanRequest& r = c.request;
    r.q_dtype = *rc::gen::element(DType::kBf16, DType::kBf16, DType::kFp8);
    r.kv_dtype = *rc::gen::element(r.q_dtype, r.q_dtype, DType::kBf16, DType::kFp8);
    r.revision =
        *rc::gen::weightedElement<Revision>({{4, Revision::k2026_08}, {1, Revision::k2026_03}});
    // 2026-03 trims per-token q tiles causally even when not causal (§16): a real aiter defect
    // for non-causal attention, kept out of this property.
    r.is_causal = r.revision == Revision::k2026_03 ||
                  *rc::gen::weightedElement<bool>({{5, true}, {1, false}});
    r.max_split_per_batch = *rc::gen::element(-1, -1, 1, 4);
    NumericsOptions& o = c.options;
    o.seed = *rc::gen::arbitrary<uint64_t>();
    const bool wide = *rc::gen::weightedElement<bool>({{1, true}, {4, false}});
    o.head_dim_qk = wide ? 80 : 40;
    o.head_dim_v = wide ? 64 : 32;
    o.precision.accumulate =
        *rc::gen::weightedElement<Accumulate>({{4, Accumulate::kFp32}, {1, Accumulate::kFp64}});
    const NumFormat kv_format = FormatForDType(r.kv_dtype, r.target);
    o.precision.p_format =
        *rc::gen::weightedElement<NumFormat>({{3, NumFormat::kFp64}, {1, kv_format}});
    o.precision.out_format =
        *rc::gen::weightedElement<NumFormat>({{3, NumFormat::kFp64}, {1, NumFormat::kBf16}});
    return c;
  });
}

// Tokens request b attends (dense: its KV length; sparse: min(ctx, topk)).
int64_t RequestKeys(const PlanRequest& r, int32_t b) {
  const int64_t pages = r.kv_indptr[b + 1] - r.kv_indptr[b];
  if (r.topk >= 0) return std::min<int64_t>(pages, r.topk);
  return pages == 0 ? 0 : (pages - 1) * r.page_size + r.kv_last_page_lens[b];
}

// The only poison the contract expects: o rows of zero-KV requests that no work item wrote; with
// zero-KV items skipped (zero_kv = skips), any row that sees no key (also a row before the
// causal diagonal whose tile the planner trimmed to no key: the kernel writes nothing there).
bool PoisonIsExpected(const NumericsCase& c, const PoisonFinding& f) {
  if (f.kind != PoisonKind::kNeverWritten || f.output != NumericsBuffer::kO || f.row_begin < 0)
    return false;
  const PlanRequest& r = c.request;
  const int32_t per = r.topk >= 0 ? r.qo_indptr[1] - r.qo_indptr[0] : r.uni_seqlen_qo;
  const bool skip = c.options.zero_kv == ZeroKvPolicy::kSkip;
  for (int64_t row = f.row_begin; row < f.row_end; ++row)
    if (skip ? RowSeesAKey(r, row) : RequestKeys(r, static_cast<int32_t>(row / per)) != 0)
      return false;
  return true;
}

// A broken variant of the plan-driven path: a code mutant, or kernel semantics that let poison
// through (the contract's empty_rows, invalid_index, masked_keys, zero_kv; sim/contract.h).
struct Variant {
  const char* name;
  NumericsMutant mutant = NumericsMutant::kNone;
  EmptyRowPolicy empty_rows = EmptyRowPolicy::kWriteZero;
  InvalidIndexUse invalid_index = InvalidIndexUse::kMasked;
  bool read_masked_keys = false;
  ZeroKvPolicy zero_kv = ZeroKvPolicy::kRun;
};

// The property body; `v` breaks the plan-driven path.
void PlanDrivenEqualsMonolithic(const Variant& v) {
  NumericsCase c = *GenCase();
  c.options.mutant = v.mutant;
  c.options.empty_rows = v.empty_rows;
  c.options.invalid_index = v.invalid_index;
  c.options.read_masked_keys = v.read_masked_keys;
  c.options.zero_kv = v.zero_kv;
  auto plan = PlanMlaMetadata(c.request);
  if (!plan.ok()) {
    RC_ASSERT(plan.status().field() == "heads_per_head_k");  // aiter refuses the head count
    RC_SUCCEED("shape refused by the planner");
  }
  // Folded heads with pages > 1: aiter's planner reads kv_last_page_lens past its end (§4.5),
  // so some kv_offset is unknowable. The report is poison by design; a dedicated test
  // (NumericsPoison.FoldedPagedPlanReadsLastPageLensPastTheEnd) covers it.
  RC_PRE(plan->input_violations.empty());
  auto rep = RunPlanNumerics(c.request, *plan, c.options);
  RC_ASSERT(rep.ok());
  std::ostringstream why;
  why << c << "\n o: max_abs " << rep->o_unpoisoned.max_abs << " (atol " << rep->tolerance.o.atol
      << ") cos " << rep->o_unpoisoned.cos_diff << " nan/inf mismatches "
      << rep->o_unpoisoned.nan_mismatches << "/" << rep->o_unpoisoned.inf_mismatches
      << " violations " << rep->o_unpoisoned.tolerance_violations << "\n lse: max_abs "
      << rep->lse_unpoisoned.max_abs << " (atol " << rep->tolerance.lse.atol << ") mismatches "
      << rep->lse_unpoisoned.nan_mismatches << "/" << rep->lse_unpoisoned.inf_mismatches
      << " unexplained NaN " << rep->unexplained_nan << " poison " << rep->poison.size();
  for (const PoisonFinding& f : rep->poison)
    if (!PoisonIsExpected(c, f)) why << "\n unexpected poison: " << f.ToString();
  RC_LOG() << why.str();
  RC_CLASSIFY(rep->tiles_reduced > 0, "split");
  RC_CLASSIFY(rep->fold_ratio > 1, "folded");
  RC_CLASSIFY(c.request.topk >= 0, "sparse");
  RC_CLASSIFY(c.request.uni_seqlen_qo > 1 || c.request.qo_indptr[1] > 1, "mtp");
  RC_CLASSIFY(c.request.page_size > 1, "paged");
  RC_CLASSIFY(!rep->poison.empty(), "poison");
  RC_CLASSIFY(rep->partial_rows_without_key > 0, "masked-partial-rows");
  RC_ASSERT(rep->monolithic_nan == 0);
  for (const PoisonFinding& f : rep->poison) RC_ASSERT(PoisonIsExpected(c, f));
  RC_ASSERT(rep->unexplained_nan == 0);
  RC_ASSERT(rep->o_unpoisoned.passed);
  RC_ASSERT(rep->lse_unpoisoned.passed);
}

TEST(AttentionProperties, PlanDrivenEqualsMonolithic) {
  EXPECT_TRUE(rc::check("plan-driven split + reduce == monolithic",
                        [] { PlanDrivenEqualsMonolithic(Variant{"none"}); }));
}

// OPUS's semantics (zero_kv = skips, empty_rows = zero_and_neg_inf_lse): zero-KV items write
// nothing (never-written rows of zero-KV requests, expected), every other row as the reference.
TEST(AttentionProperties, PlanDrivenEqualsMonolithicWhenZeroKvItemsAreSkipped) {
  Variant opus{"opus"};
  opus.zero_kv = ZeroKvPolicy::kSkip;
  EXPECT_TRUE(rc::check("plan-driven == monolithic, zero-KV items skipped",
                        [opus] { PlanDrivenEqualsMonolithic(opus); }));
}

// Test names and failure messages show the variant's name.
void PrintTo(const Variant& v, std::ostream* os) {
  *os << v.name;
}

// One test per broken variant: the property must fail.
class AttentionMutantTest : public ::testing::TestWithParam<Variant> {};

TEST_P(AttentionMutantTest, PropertyFails) {
  const Variant v = GetParam();
  EXPECT_FALSE(rc::check(v.name, [v] { PlanDrivenEqualsMonolithic(v); }))
      << "mutant survived: " << v.name;
}

INSTANTIATE_TEST_SUITE_P(
    AttentionProperties, AttentionMutantTest,
    ::testing::Values(
        Variant{"reduce_merges_piece_twice", NumericsMutant::kMergePieceTwice},
        Variant{"partial_row_off_by_one", NumericsMutant::kPartialRowOffByOne},
        Variant{"unnormalized_partial", NumericsMutant::kUnnormalizedPartial},
        Variant{"causal_off_by_one", NumericsMutant::kCausalOffByOne},
        // aiter #4711: rows with no key written as 0/0 (contract empty_rows = nan)
        Variant{"empty_rows_nan", NumericsMutant::kNone, EmptyRowPolicy::kNan},
        // invalid top-k entries dereferenced (contract invalid_index = fault / clamp / wrap)
        Variant{"invalid_index_fault", NumericsMutant::kNone, EmptyRowPolicy::kWriteZero,
                InvalidIndexUse::kFault},
        Variant{"invalid_index_clamp_to_zero", NumericsMutant::kNone, EmptyRowPolicy::kWriteZero,
                InvalidIndexUse::kClampToZero},
        Variant{"invalid_index_wrap", NumericsMutant::kNone, EmptyRowPolicy::kWriteZero,
                InvalidIndexUse::kWrap},
        // the NaN tail of a request's last page loaded, then masked (masked_keys = read_then_mask)
        Variant{"masked_keys_read_then_mask", NumericsMutant::kNone, EmptyRowPolicy::kWriteZero,
                InvalidIndexUse::kMasked, true},
        // one policy for zero_kv and empty_rows again, under OPUS's semantics: keyless piece
        // rows are skipped like zero-KV items
        Variant{"empty_rows_follow_zero_kv", NumericsMutant::kEmptyRowsFollowZeroKv,
                EmptyRowPolicy::kWriteZero, InvalidIndexUse::kMasked, false, ZeroKvPolicy::kSkip}),
    [](const ::testing::TestParamInfo<Variant>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace mlasim::ref
