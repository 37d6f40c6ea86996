// The third-party kernels' access contracts as data (sim/contracts/flashmla-dense-decode.json,
// flashinfer-fa3-decode.json, reduce-in-decode.json; docs/kernel-under-test.md "FlashMLA adapter"
// and "FlashInfer adapter"), on the CPU: the files are the built-ins the adapters name, one call
// over given extents touches exactly each request's q / o / lse rows and page-list elements (the
// `batch` launch variable, the kernel's qo_indptr), the reduce touches nothing, and a whole engine
// step replayed under FlashMLA's is clean until o is allocated for fewer rows than it writes.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "sim/call_check.h"
#include "sim/contract.h"
#include "sim/replay.h"
#include "sim/scenario_json.h"

namespace mlasim::sim {
namespace {

const std::string kContracts = std::string(MLASIM_SOURCE_DIR) + "/sim/contracts/";
const std::string kCase =
    std::string(MLASIM_SOURCE_DIR) + "/tests/kut/cases/flashmla-dense-page64.json";

std::shared_ptr<const Contract> Decode() {
  auto c = BuiltinContract(CallKind::kDecode, "flashmla_dense", "t");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : nullptr;
}
std::shared_ptr<const Contract> Reduce() {
  auto c = BuiltinContract(CallKind::kReduce, "in_decode", "t");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : nullptr;
}

TEST(FlashMlaContract, TheFilesAreTheBuiltinsTheAdapterNames) {
  auto d = LoadContractFile(kContracts + "flashmla-dense-decode.json");
  auto r = LoadContractFile(kContracts + "reduce-in-decode.json");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_NE(Decode(), nullptr);
  ASSERT_NE(Reduce(), nullptr);
  EXPECT_EQ(d->doc, Decode()->doc);
  EXPECT_EQ(r->doc, Reduce()->doc);
  EXPECT_EQ(d->name, "flashmla-dense-decode");
  EXPECT_EQ(d->semantics.zero_kv, ZeroKv::kReadsQWritesOutput);
  EXPECT_EQ(d->semantics.masked_keys, MaskedKeys::kNeverRead);
  EXPECT_EQ(d->semantics.invalid_index, InvalidIndex::kFault);
  // splitkv_mla.cuh stores lse = +inf for a row without a key (o = 0).
  EXPECT_EQ(d->semantics.empty_rows, EmptyRows::kZeroAndPosInfLse);
  EXPECT_EQ(std::string(EmptyRowsName(d->semantics.empty_rows)), "zero_and_pos_inf_lse");
  EXPECT_NE(d->semantics.sources.at("empty_rows").find("splitkv_mla.cuh"), std::string::npos);
  EXPECT_EQ(d->program.size(), 1u);  // the loop over the requests
  EXPECT_EQ(r->call, CallKind::kReduce);
  EXPECT_TRUE(r->program.empty());
}

// Three requests of two q rows: 2 pages (74 tokens), none, 3 pages (192 tokens); q holds one row
// too few, o two rows too few, kv_indices one element too few: request 2 alone runs past them.
CallCheckInput ShortBuffers() {
  CallCheckInput in;
  in.call = "flashmla";
  in.contract = Decode();
  in.qo_indptr = {0, 2, 4, 6};
  in.kv_indptr = {0, 2, 2, 5};
  in.kv_last_page_lens = {10, 1, 64};
  in.max_seqlen_q = 2;
  in.page_size = 64;
  in.tensors = {{"q", 5, 16, 576, 2},
                {"o", 4, 16, 512, 2},
                {"lse", 6, 16, 1, 4},
                {"kv_indices", 4, 1, 1, 4},
                {"kv_cache", 64 * 8, 1, 576, 2}};
  return in;
}

TEST(FlashMlaContract, OneCallTouchesEachRequestsRowsAndPages) {
  auto v = CheckCall(ShortBuffers());
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_EQ(v->size(), 3u);
  const struct {
    const char* buffer;
    Access access;
    int64_t rows, first, last, past;
  } want[] = {{"q", Access::kRead, 5, 5, 5, 1},
              {"kv_indices", Access::kRead, 4, 4, 4, 1},
              {"o", Access::kWrite, 4, 4, 5, 2}};
  for (const auto& w : want) {
    SCOPED_TRACE(w.buffer);
    auto it = std::find_if(v->begin(), v->end(), [&](const Violation& x) {
      return x.buffer == w.buffer && x.access == w.access;
    });
    ASSERT_NE(it, v->end());
    EXPECT_EQ(it->kind, ViolationKind::kOutOfBounds);
    EXPECT_EQ(it->rows, w.rows);
    EXPECT_EQ(it->first_row, w.first);
    EXPECT_EQ(it->last_row, w.last);
    EXPECT_EQ(it->rows_past_end, w.past);
    EXPECT_EQ(it->work_items, std::vector<int32_t>{2});
  }
  EXPECT_EQ(CallViolationText("flashmla", *Decode(), (*v)[1]),
            "flashmla (flashmla-dense-decode) writes o rows 4..5 of 4: 2 rows past its end (1 work "
            "item: 2)");
  // Buffers as large as the requests need: nothing outside them.
  CallCheckInput fits = ShortBuffers();
  fits.tensors[0].rows = 6, fits.tensors[1].rows = 6, fits.tensors[3].rows = 5;
  auto none = CheckCall(fits);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  // One token fewer in request 2's last page still needs its third page (element 4).
  fits.tensors[3].rows = 4;
  fits.kv_last_page_lens[2] = 1;
  auto page = CheckCall(fits);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->size(), 1u);
  EXPECT_EQ((*page)[0].buffer, "kv_indices");
  // Request 2 with exactly two pages' worth of tokens but a page list of two: fits.
  fits.kv_indptr = {0, 2, 2, 4};
  fits.kv_last_page_lens[2] = 64;
  auto two = CheckCall(fits);
  ASSERT_TRUE(two.ok());
  EXPECT_TRUE(two->empty());
}

TEST(FlashMlaContract, TheReduceTouchesNothingWhereAitersReduceReadsPastThePartials) {
  CallCheckInput in;
  in.call = "reduce";
  in.reduce_indptr = {0, 2};
  in.reduce_final_map = {0, 1};
  in.reduce_partial_map = {0, 5};  // the second piece's partial row is past logits' end
  in.tensors = {{"o", 1, 16, 512, 2},
                {"lse", 1, 16, 1, 4},
                {"logits", 2, 16, 512, 4},
                {"attn_lse", 2, 16, 1, 4}};
  in.contract = Reduce();
  auto none = CheckCall(in);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->empty());
  in.contract = *BuiltinContract(CallKind::kReduce, "mla_reduce_v1", "t");
  auto aiter = CheckCall(in);
  ASSERT_TRUE(aiter.ok());
  EXPECT_EQ(aiter->size(), 2u);  // logits and attn_lse row 5
}

// FlashInfer's fa3 contract (flashinfer-fa3-decode.json, the libmlasim_kut_flashinfer.so one):
// ragged q lengths at page size 1. Request 1 (3 q rows, 2 tokens) runs one row past o and one
// element past kv_indices.
TEST(FlashInferContract, RaggedRequestsAtPageOne) {
  auto file = LoadContractFile(kContracts + "flashinfer-fa3-decode.json");
  auto builtin = BuiltinContract(CallKind::kDecode, "flashinfer_fa3", "t");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  ASSERT_TRUE(builtin.ok());
  EXPECT_EQ(file->doc, (*builtin)->doc);
  CallCheckInput in;
  in.call = "fa3";
  in.contract = *builtin;
  in.qo_indptr = {0, 1, 4};
  in.kv_indptr = {0, 5, 7};
  in.kv_last_page_lens = {1, 1};
  in.max_seqlen_q = 3;
  in.tensors = {{"q", 4, 16, 576, 2},
                {"o", 3, 16, 512, 2},
                {"lse", 4, 16, 1, 4},
                {"kv_indices", 6, 1, 1, 4},
                {"kv_cache", 64, 1, 576, 2}};
  auto v = CheckCall(in);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_EQ(v->size(), 2u);
  EXPECT_EQ((*v)[0].buffer, "kv_indices");
  EXPECT_EQ((*v)[0].access, Access::kRead);
  EXPECT_EQ((*v)[0].first_row, 6);
  EXPECT_EQ((*v)[0].last_row, 6);
  EXPECT_EQ((*v)[1].buffer, "o");
  EXPECT_EQ((*v)[1].access, Access::kWrite);
  EXPECT_EQ((*v)[1].first_row, 3);
  EXPECT_EQ((*v)[1].last_row, 3);
  for (const Violation& x : *v) EXPECT_EQ(x.work_items, std::vector<int32_t>{1});
}

StatusOr<ReplayReport> ReplayUnderFlashMla(Scenario s) {
  s.contracts = {Decode(), Reduce()};
  return Replay(s);
}

const Violation* Find(const ReplayReport& r, const std::string& step, const std::string& buffer,
                      Access access) {
  for (const Violation& v : r.result.violations)
    if (v.kind == ViolationKind::kOutOfBounds && v.step == step && v.buffer == buffer &&
        v.access == access)
      return &v;
  return nullptr;
}

void ExpectRows(const Violation* v, int64_t rows, int64_t first, int64_t last) {
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->rows, rows);
  EXPECT_EQ(v->first_row, first);
  EXPECT_EQ(v->last_row, last);
  EXPECT_EQ(v->work_items, std::vector<int32_t>{3});  // the padding request
}

// The case's step (3 requests padded to the captured 4, Q = 2) under FlashMLA's contracts: the
// verify call is clean; draft step 0 reuses the verify plan over 4 requests x 2 rows with q and
// o of the 6 scheduled rows (docs/findings.md #2, ATOM's dense draft step 0), so FlashMLA, given
// that batch, reads q rows 6..7 and writes o rows 6..7 past both: the known family, predicted
// for FlashMLA too. Eager (no padding request) the whole step is clean.
TEST(FlashMlaContract, AStepReplaysWithDraftStepZerosKnownOverflowOnly) {
  auto s = LoadScenarioFile(kCase);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto r = ReplayUnderFlashMla(*s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  int decodes = 0;
  for (const Call& c : r->trace.calls) {
    if (c.kind != CallKind::kDecode) continue;
    ++decodes;
    EXPECT_EQ(c.kernel, "flashmla_dense");
    EXPECT_EQ(c.page_size, 64);
  }
  EXPECT_EQ(decodes, 2);  // verify and draft_step_0
  EXPECT_EQ(r->result.violations.size(), 2u);
  ExpectRows(Find(*r, "draft_step_0", "q", Access::kRead), 6, 6, 7);
  ExpectRows(Find(*r, "draft_step_0", "o", Access::kWrite), 6, 6, 7);
  s->graph.eager = true;
  auto eager = ReplayUnderFlashMla(*s);
  ASSERT_TRUE(eager.ok());
  EXPECT_TRUE(eager->result.violations.empty()) << eager->result.violations.size();
}

// At 64 heads per rank (tp 2) aiter's planner folds heads (fold_ratio > 1), and aiter's kernels
// view q/o as [rows x fold, heads / fold]. FlashMLA plans by itself and sees [tokens, heads]:
// its calls keep the unfolded view (Call::view_fold 1), so the step shows exactly the draft
// step's overrun in token rows, as FlashMLA showed it on the H200 (docs/gpu-results.md,
// session 4), and no output row of a real token counts as unwritten. Before, the folded view
// gave "o rows 8..23 unwritten" and missed the overrun.
TEST(FlashMlaContract, AHeadFoldedPlanKeepsTheUnfoldedViewForAKernelThatPlansByItself) {
  auto s = LoadScenarioFile(kCase);
  ASSERT_TRUE(s.ok());
  s->parallel.tp = 2;  // 128 heads / 2 = 64 per rank
  auto r = ReplayUnderFlashMla(*s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  int32_t plan_fold = 0;
  for (const Call& c : r->trace.calls) {
    if (c.kind != CallKind::kDecode) continue;
    plan_fold = r->trace.plans.at(c.plan).plan.derived.fold_ratio;
    EXPECT_EQ(c.view_fold, 1);
    for (const TensorArg& a : c.args) {
      if (a.role == "q" || a.role == "o") {
        EXPECT_EQ(a.heads, 64) << a.role;
      }
    }
  }
  ASSERT_GT(plan_fold, 1);  // the case is a folded one
  EXPECT_EQ(r->result.violations.size(), 2u);
  ExpectRows(Find(*r, "draft_step_0", "q", Access::kRead), 6, 6, 7);
  ExpectRows(Find(*r, "draft_step_0", "o", Access::kWrite), 6, 6, 7);
  // aiter's asm kernel walks work_info: its view stays folded.
  s->contracts.clear();
  s->kernel = "asm";
  auto a = Replay(*s);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  for (const Call& c : a->trace.calls) {
    if (c.kind == CallKind::kDecode) {
      EXPECT_EQ(c.view_fold, plan_fold);
    }
  }
}

TEST(FlashMlaContract, OAllocatedForFewerRowsIsWrittenPastItsEnd) {
  auto s = LoadScenarioFile(kCase);
  ASSERT_TRUE(s.ok());
  CallOverride o;
  o.call = "verify.dense_decode";
  o.o_rows = 6;  // the step's 4 requests (3 real, 1 padding) x 2 rows = 8
  s->calls.push_back(o);
  auto r = ReplayUnderFlashMla(*s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectRows(Find(*r, "verify", "o", Access::kWrite), 6, 6, 7);
  EXPECT_EQ(Find(*r, "verify", "q", Access::kRead), nullptr);  // q holds the 8 rows
}

// FlashMLA's sparse fp8 decode (sim/contracts/flashmla-sparse-decode.json, the contract
// libmlasim_kut_flashmla_sparse.so names): the file is the built-in; its semantics skip only -1.
TEST(FlashMlaSparseContract, TheFileIsTheBuiltinTheAdapterNames) {
  auto file = LoadContractFile(kContracts + "flashmla-sparse-decode.json");
  auto builtin = BuiltinContract(CallKind::kDecode, "flashmla_sparse", "t");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  ASSERT_TRUE(builtin.ok()) << builtin.status().ToString();
  EXPECT_EQ(file->doc, (*builtin)->doc);
  EXPECT_EQ(file->name, "flashmla-sparse-fp8-decode");
  EXPECT_EQ(file->semantics.invalid_index, InvalidIndex::kMinusOneMasked);
  EXPECT_EQ(file->semantics.zero_kv, ZeroKv::kReadsQWritesOutput);
  EXPECT_EQ(file->semantics.masked_keys, MaskedKeys::kNeverRead);
  EXPECT_EQ(file->semantics.empty_rows, EmptyRows::kZeroAndPosInfLse);  // measured on the H200
  EXPECT_FALSE(ProgramLoads(file->program, kLoadWorkInfo));  // it plans by itself
}

// Three tokens (s_q 1): 5 index entries, none, 7. q holds 2 rows, the index buffer 11 entries:
// token 2 alone reads q row 2 and index element 11 past their ends; o and lse fit. Index
// entries are elements (page size 1).
TEST(FlashMlaSparseContract, OneCallTouchesEachTokensRowsAndEntries) {
  CallCheckInput in;
  in.call = "flashmla_sparse";
  in.contract = *BuiltinContract(CallKind::kDecode, "flashmla_sparse", "t");
  in.qo_indptr = {0, 1, 2, 3};
  in.kv_indptr = {0, 5, 5, 12};
  in.kv_last_page_lens = {1, 1, 1};
  in.tensors = {{"q", 2, 64, 576, 2},
                {"o", 3, 64, 512, 2},
                {"lse", 3, 64, 1, 4},
                {"kv_indices", 11, 1, 1, 4},
                {"kv_cache", 4096, 1, 576, 1}};
  auto v = CheckCall(in);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_EQ(v->size(), 2u);
  EXPECT_EQ((*v)[0].buffer, "kv_indices");
  EXPECT_EQ((*v)[0].access, Access::kRead);
  EXPECT_EQ((*v)[0].first_row, 11);
  EXPECT_EQ((*v)[0].last_row, 11);
  EXPECT_EQ((*v)[1].buffer, "q");
  EXPECT_EQ((*v)[1].access, Access::kRead);
  EXPECT_EQ((*v)[1].first_row, 2);
  EXPECT_EQ((*v)[1].last_row, 2);
  for (const Violation& x : *v) EXPECT_EQ(x.work_items, std::vector<int32_t>{2});
  // One more row of q and one more entry: nothing outside.
  in.tensors[0].rows = 3;
  in.tensors[3].rows = 12;
  auto none = CheckCall(in);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

// tests/kut/cases/flashmla-sparse-v32.json (the step third_party_kut.sh replays through the
// adapter) under the sparse contract: ATOM's per-token sparse plans (s_q 1) over the 6 scheduled
// tokens, both sparse decodes run FlashMLA's contract, and the step is clean.
TEST(FlashMlaSparseContract, TheAdaptersKnownStepIsClean) {
  auto s = LoadScenarioFile(std::string(MLASIM_SOURCE_DIR) +
                            "/tests/kut/cases/flashmla-sparse-v32.json");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  s->contracts = {*BuiltinContract(CallKind::kDecode, "flashmla_sparse", "t"), Reduce()};
  auto r = Replay(*s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  int decodes = 0;
  for (const Call& c : r->trace.calls) {
    if (c.kind != CallKind::kDecode) continue;
    ++decodes;
    EXPECT_EQ(c.kernel, "flashmla_sparse");
    EXPECT_EQ(r->trace.plans.at(c.plan).request.max_seqlen_qo, 1);
  }
  EXPECT_EQ(decodes, 2);  // verify and draft_step_0
  EXPECT_TRUE(r->result.violations.empty()) << r->result.violations.size();
}

// CheckCall demands aiter's plan buffers only from a contract that names them.
TEST(FlashMlaContract, PlanBuffersAreRequiredOnlyByContractsThatNameThem) {
  CallCheckInput in = ShortBuffers();
  in.contract = *BuiltinContract(CallKind::kDecode, "asm", "t");
  auto asm_ = CheckCall(in);
  EXPECT_EQ(asm_.status().ToString(), "work_indptr: missing (empty): the contract loads from it");
  in.contract = Decode();
  EXPECT_TRUE(CheckCall(in).ok());
}

}  // namespace
}  // namespace mlasim::sim
