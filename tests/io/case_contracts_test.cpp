// Tests of the kernel-contract check of case directories (tools/io/case_contracts.h) and of the
// entry point it shares with Python (sim/call_check.h): the padded-batch overrun of the founding
// fault with its exact rows and work items, the fix, underflows, the reduce, variants, --contract
// files, and every error return.
#include "tools/io/case_contracts.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ref/limits.h"
#include "ref/plan_buffers.h"
#include "ref/planner.h"
#include "sim/call_check.h"
#include "tests/cli/case_builders.h"

namespace mlasim::io {
namespace {

using test::Bytes;
using test::CaseBuilder;

// Six real requests padded to eight with zero-KV entries (a CUDA-graph rung), MTP K = 3: four
// q rows per request, so q/o of the real tokens hold 24 rows and the plan covers 32.
ref::PlanRequest PaddedRequest() {
  ref::PlanRequest r;
  r.cu_count = 8;
  r.heads_per_head_k = 16;
  r.qlen = r.max_seqlen_qo = r.uni_seqlen_qo = 4;
  r.kv_indptr = {0};
  r.qo_indptr = {0};
  for (int32_t k : {300, 40, 700, 120, 90, 50, 0, 0}) {
    r.kv_indptr.push_back(r.kv_indptr.back() + k);
    r.qo_indptr.push_back(r.qo_indptr.back() + 4);
    r.kv_last_page_lens.push_back(1);
  }
  return r;
}

ref::Plan PlanOf(const ref::PlanRequest& r) {
  return *ref::PlanMlaMetadata(r, {});
}

// q [rows, 16, 576] and o [rows, 16, 512] bf16.
CaseBuilder& AddQo(CaseBuilder& b, int64_t q_rows, int64_t o_rows) {
  b.Add("q", "bfloat16", {q_rows, 16, 576},
        std::string(static_cast<size_t>(q_rows * 16 * 576 * 2), '\0'));
  return b.Add("o", "bfloat16", {o_rows, 16, 512},
               std::string(static_cast<size_t>(o_rows * 16 * 512 * 2), '\0'));
}

CaseBuilder PaddedCase(int64_t q_rows, int64_t o_rows, const std::string& call = "mla_decode_fwd") {
  const ref::PlanRequest r = PaddedRequest();
  CaseBuilder b(call);
  b.AddRequest(r);
  b.AddPlan(PlanOf(r));
  return AddQo(b, q_rows, o_rows);
}

StatusOr<ContractCheckResult> CheckCase(const CaseBuilder& b, const CaseContractOptions& o = {}) {
  const MemoryCaseFiles files = b.Files();
  StatusOr<CaseManifest> m = OpenCase(files);
  if (!m.ok()) return m.status();
  StatusOr<CasePlanner> p = ReadCasePlanner(files, *m);
  if (!p.ok()) return p.status();
  return CheckCaseContracts(files, *m, *p, o);
}

// The work items of `plan` whose q rows reach row `row` or beyond (what the asm contract makes
// touch rows past a tensor of `row` rows).
std::vector<int32_t> ItemsFrom(const ref::Plan& p, int32_t row) {
  std::vector<int32_t> out;
  for (int32_t w = 0; w < p.derived.num_works; ++w)
    if (p.work(w, ref::kQoEnd) > row) out.push_back(w);
  return out;
}

TEST(CaseContracts, PaddedBatchOverrunNamesRowsAndWorkItems) {
  const auto r = CheckCase(PaddedCase(24, 24));
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(r->checked);
  EXPECT_EQ(r->contract, "aiter-asm-decode (builtin:aiter-decode-asm.json)");
  ASSERT_EQ(r->findings.size(), 2u);
  const std::vector<int32_t> items = {10, 11};  // the padding requests' zero-KV work items
  EXPECT_EQ(ItemsFrom(PlanOf(PaddedRequest()), 24), items);
  const ContractFinding& o = r->findings[0];
  EXPECT_EQ(o.tensor, "o");
  EXPECT_EQ(o.access, "write");
  EXPECT_EQ(o.rows, 24);
  EXPECT_EQ(o.first_row, 24);
  EXPECT_EQ(o.end_row, 32);
  EXPECT_EQ(o.rows_past_end, 8);
  EXPECT_EQ(o.rows_before_start, 0);
  EXPECT_EQ(o.work_items, items);
  EXPECT_EQ(o.work_item_count, 2);
  EXPECT_EQ(o.text,
            "mla_decode_fwd (aiter-asm-decode) writes o rows 24..31 of 24: 8 rows past its end "
            "(2 work items: 10, 11)");
  const ContractFinding& q = r->findings[1];
  EXPECT_EQ(q.tensor, "q");
  EXPECT_EQ(q.access, "read");
  EXPECT_EQ(q.first_row, 24);
  EXPECT_EQ(q.end_row, 32);
  EXPECT_EQ(q.work_items, items);
}

TEST(CaseContracts, OneRowShortIsOneRowPastTheEnd) {
  const auto r = CheckCase(PaddedCase(31, 32));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->findings.size(), 1u);
  EXPECT_EQ(r->findings[0].tensor, "q");
  EXPECT_EQ(r->findings[0].first_row, 31);
  EXPECT_EQ(r->findings[0].rows_past_end, 1);
  EXPECT_EQ(r->findings[0].work_items, std::vector<int32_t>{11});
}

TEST(CaseContracts, QoSizedForThePaddedBatchIsClean) {
  const auto r = CheckCase(PaddedCase(32, 32));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->checked);
  EXPECT_TRUE(r->findings.empty());
}

// A case that captures the KV cache and its page table has the KV rows checked through the
// table's values: a page id past the cache is a contract finding naming kv_cache's rows.
TEST(CaseContracts, ThePageTablesValuesReachTheKvCache) {
  auto with_table = [](int32_t at, int32_t value) {
    CaseBuilder b = PaddedCase(32, 32);
    std::vector<int32_t> table(1300);
    for (int32_t i = 0; i < 1300; ++i) table[i] = 1299 - i;  // every token's own row, reversed
    if (at >= 0) table[at] = value;
    b.Add("kv_buffer", "bfloat16", {1300, 1, 576}, std::string(1300 * 576 * 2, '\0'));
    b.AddInt32("kv_indices", table);
    return CheckCase(b);
  };
  const auto clean = with_table(-1, 0);
  ASSERT_TRUE(clean.ok()) << clean.status().ToString();
  EXPECT_TRUE(clean->findings.empty());
  const auto past = with_table(305, 1300);  // request 1's sixth token
  ASSERT_TRUE(past.ok()) << past.status().ToString();
  ASSERT_EQ(past->findings.size(), 1u);
  EXPECT_EQ(past->findings[0].tensor, "kv_cache");
  EXPECT_EQ(past->findings[0].first_row, 1300);
  EXPECT_EQ(past->findings[0].rows, 1300);
  ASSERT_EQ(past->findings[0].work_item_count, 1);
  const ref::Plan plan = PlanOf(PaddedRequest());
  const int32_t w = past->findings[0].work_items[0];
  EXPECT_EQ(plan.work(w, ref::kBatchIdx), 1);  // the work item of request 1 that holds token 305
  EXPECT_LE(plan.work(w, ref::kKvStart), 305);
  EXPECT_GT(plan.work(w, ref::kKvEnd), 305);
  // A page table of int64 (not what aiter passes) leaves the KV rows unchecked, as before.
  CaseBuilder b = PaddedCase(32, 32);
  b.Add("kv_buffer", "bfloat16", {1300, 1, 576}, std::string(1300 * 576 * 2, '\0'));
  b.Add("kv_indices", "int64", {1300}, std::string(1300 * 8, '\xff'));
  const auto wide = CheckCase(b);
  ASSERT_TRUE(wide.ok()) << wide.status().ToString();
  EXPECT_TRUE(wide->findings.empty());
  EXPECT_EQ(wide->kv_rows_unchecked,
            "kv_indices is int64, not the int32 page table the kernel reads");
  EXPECT_EQ(clean->kv_rows_unchecked, "");
  // A cache whose rows are not whole pages, or not [..., D]: said, not silently skipped.
  auto shaped = [](std::vector<int64_t> shape, int32_t page) {
    ref::PlanRequest r = PaddedRequest();
    r.page_size = page;
    CaseBuilder c("mla_decode_fwd");
    c.AddRequest(r);
    c.AddPlan(PlanOf(r));
    AddQo(c, 32, 32);
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    c.Add("kv_buffer", "bfloat16", shape, std::string(static_cast<size_t>(n * 2), '\0'));
    c.AddInt32("kv_indices", std::vector<int32_t>(1300, 0));
    return CheckCase(c);
  };
  const auto ragged = shaped({1301, 576}, 1);
  ASSERT_TRUE(ragged.ok()) << ragged.status().ToString();
  EXPECT_EQ(ragged->kv_rows_unchecked, "");  // pages of 1: every row count is whole pages
  const auto flat = shaped({1300}, 1);
  ASSERT_TRUE(flat.ok()) << flat.status().ToString();
  EXPECT_EQ(flat->kv_rows_unchecked,
            "kv_buffer is not [..., D] (rank >= 2, D >= 1): its rows are unknown");
  const auto paged = shaped({1300, 1, 576}, 64);
  ASSERT_TRUE(paged.ok()) << paged.status().ToString();
  EXPECT_EQ(paged->kv_rows_unchecked, "kv_buffer's 1300 rows are not whole pages of 64 tokens");
}

TEST(CaseContracts, HkReadsQButWritesNothingForZeroKvItems) {
  CaseBuilder b = PaddedCase(24, 24);
  b.manifest["config"]["kernel"] = "hk";
  const auto r = CheckCase(b);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->contract, "aiter-hk-decode (builtin:aiter-decode-hk.json)");
  ASSERT_EQ(r->findings.size(), 1u);
  EXPECT_EQ(r->findings[0].tensor, "q");
  EXPECT_EQ(r->findings[0].rows_past_end, 8);
}

TEST(CaseContracts, AWorkItemStartingBeforeRowZeroIsAnUnderflow) {
  const ref::PlanRequest req = PaddedRequest();
  ref::Plan p = PlanOf(req);
  p.work_info.data[ref::kQoStart] = -3;  // work item 0 starts 3 rows before q
  CaseBuilder b;
  b.AddRequest(req);
  b.AddPlan(p);
  AddQo(b, 32, 32);
  const auto r = CheckCase(b);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->findings.size(), 2u);
  for (const ContractFinding& f : r->findings) {
    EXPECT_EQ(f.first_row, -3);
    EXPECT_EQ(f.end_row, 0);
    EXPECT_EQ(f.rows_before_start, 3);
    EXPECT_EQ(f.rows_past_end, 0);
    EXPECT_EQ(f.work_items, std::vector<int32_t>{0});
  }
  EXPECT_NE(r->findings[1].text.find("reads q rows -3..-1 of 32: 3 rows before its start"),
            std::string::npos)
      << r->findings[1].text;
}

TEST(CaseContracts, ReduceWritesFinalRowsPastAShortO) {
  // 3 requests, the third split in three (aiter-mla-metadata.md §6.1): tile 2 merges into o row 2.
  ref::PlanRequest req = PaddedRequest();
  req.kv_indptr = {0, 300, 340, 1040};
  req.qo_indptr = {0, 1, 2, 3};
  req.kv_last_page_lens = {1, 1, 1};
  req.qlen = req.max_seqlen_qo = req.uni_seqlen_qo = 1;
  const ref::Plan p = PlanOf(req);
  CaseBuilder b("mla_reduce_v1");
  b.AddRequest(req);
  b.AddPlan(p);
  const int64_t partial = p.reduce_partial_map.size();
  b.Add("o", "bfloat16", {2, 16, 512}, std::string(2 * 16 * 512 * 2, '\0'));
  b.Add("logits", "float32", {partial, 16, 512}, std::string(partial * 16 * 512 * 4, '\0'));
  b.Add("attn_lse", "float32", {partial, 16, 1}, std::string(partial * 16 * 4, '\0'));
  const auto r = CheckCase(b);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->contract, "aiter-mla-reduce-v1 (builtin:aiter-reduce.json)");
  ASSERT_EQ(r->findings.size(), 1u);
  EXPECT_EQ(r->findings[0].tensor, "o");
  EXPECT_EQ(r->findings[0].access, "write");
  EXPECT_EQ(r->findings[0].first_row, 2);
  EXPECT_EQ(r->findings[0].rows_past_end, 1);
  EXPECT_EQ(r->findings[0].work_items, std::vector<int32_t>{2});  // tile 2
  EXPECT_NE(r->findings[0].text.find("(1 tile: 2)"), std::string::npos) << r->findings[0].text;
}

TEST(CaseContracts, ACaseWithoutTheCallsTensorsIsNotChecked) {
  const ref::PlanRequest req = PaddedRequest();
  CaseBuilder b;
  b.AddRequest(req);
  b.AddPlan(PlanOf(req));
  const auto r = CheckCase(b);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->checked);
  EXPECT_EQ(r->reason,
            "the case captures none of the call's tensors (q, o, logits, attn_lse, lse, "
            "kv_indices) and names no kernel (config.kernel) or contract (--contract)");
}

void ExpectError(const StatusOr<ContractCheckResult>& r, const std::string& field,
                 const std::string& message_part) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().field(), field);
  EXPECT_NE(r.status().message().find(message_part), std::string::npos) << r.status().message();
}

TEST(CaseContracts, UnknownCallKindIsAnError) {
  ExpectError(CheckCase(PaddedCase(32, 32, "my_attention")), "manifest.json:call",
              "unknown call kind of call 'my_attention'");
  CaseBuilder b = PaddedCase(32, 32);
  b.manifest["config"]["call_kind"] = "prefill";
  ExpectError(CheckCase(b), "manifest.json:config.call_kind", "prefill");
}

TEST(CaseContracts, UnknownVariantIsAnError) {
  CaseBuilder b = PaddedCase(32, 32);
  b.manifest["config"]["kernel"] = "triton";
  ExpectError(CheckCase(b), "manifest.json:config.kernel", "asm");
}

TEST(CaseContracts, MissingTensorIsAnError) {
  const ref::PlanRequest req = PaddedRequest();
  CaseBuilder b;
  b.AddRequest(req);
  b.AddPlan(PlanOf(req));
  b.Add("q", "bfloat16", {32, 16, 576}, std::string(32 * 16 * 576 * 2, '\0'));
  // Not named: the q was captured for something else (a fault address); said, not an error.
  const auto r = CheckCase(b);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->checked);
  EXPECT_EQ(r->reason,
            "the case lacks tensors.o (missing: a decode call's contract needs its extent); "
            "name the kernel (config.kernel or --contract) to make this an error");
  b.manifest["config"]["kernel"] = "asm";
  ExpectError(CheckCase(b), "manifest.json:tensors.o", "missing");
}

TEST(CaseContracts, MissingPlanBufferIsAnError) {
  CaseBuilder b = PaddedCase(32, 32);
  b.manifest["tensors"].erase("work_info");
  b.files.erase("work_info.npy");
  b.manifest["config"]["kernel"] = "asm";
  ExpectError(CheckCase(b), "manifest.json:tensors.work_info", "missing");
}

class ContractFile : public ::testing::Test {
 protected:
  std::string Write(const std::string& text) {
    path_ = (std::filesystem::temp_directory_path() /
             ("mlasim_case_contract_" + std::to_string(::getpid()) + ".json"))
                .string();
    std::ofstream(path_) << text;
    return path_;
  }
  void TearDown() override {
    if (!path_.empty()) std::filesystem::remove(path_);
  }
  std::string path_;
};

TEST_F(ContractFile, AUserContractReplacesTheBuiltIn) {
  // The asm contract whose zero-KV items skip the kernel: the padded batch is then clean.
  CaseContractOptions o;
  o.contract = Write(R"({"extends": "asm", "name": "skips-zero-kv",
                         "semantics": {"zero_kv": "skips"}})");
  const auto r = CheckCase(PaddedCase(24, 24), o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->contract, "skips-zero-kv (" + path_ + ")");
  EXPECT_TRUE(r->findings.empty());
}

// A relative config.contract is the case directory's file (the case travels as a folder, its
// contract beside it), whatever the working directory; --contract stays the working directory's.
// It was resolved against the working directory (round 12).
TEST(CaseContracts, ARelativeConfigContractIsTheCaseDirectorysFile) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("mlasim_case_relative_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  CaseBuilder b = PaddedCase(24, 24);
  b.manifest["config"]["contract"] = "contracts/skips.json";
  b.WriteTo(dir);
  std::filesystem::create_directories(dir / "contracts");
  std::ofstream(dir / "contracts" / "skips.json")
      << R"({"extends": "asm", "name": "skips-zero-kv", "semantics": {"zero_kv": "skips"}})";
  const DiskCaseFiles files(dir.string());
  StatusOr<CaseManifest> m = OpenCase(files);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  StatusOr<CasePlanner> p = ReadCasePlanner(files, *m);
  ASSERT_TRUE(p.ok());
  const auto r = CheckCaseContracts(files, *m, *p);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->contract, "skips-zero-kv (" + (dir / "contracts/skips.json").string() + ")");
  EXPECT_TRUE(r->findings.empty());  // the user's contract ran, not the built-in asm
  const CaseContractSpec spec = CaseContractSpecOf(files, *m, {});
  EXPECT_EQ(spec.field, (dir / "manifest.json").string() + ":config.contract");
  CaseContractOptions flag;
  flag.contract = "contracts/skips.json";
  EXPECT_EQ(CaseContractSpecOf(files, *m, flag).spec, "contracts/skips.json");
  EXPECT_EQ(CaseContractSpecOf(files, *m, flag).field, "--contract");
  // A built-in name is a name, not a file of the case.
  m->config["contract"] = "hk";
  EXPECT_EQ(CaseContractSpecOf(files, *m, {}).spec, "hk");
  std::filesystem::remove_all(dir);
}

TEST_F(ContractFile, BadContractFilesAreErrors) {
  CaseContractOptions o;
  o.contract = Write("{\"extends\": \"asm\", ");
  ExpectError(CheckCase(PaddedCase(32, 32), o), path_, "");
  o.contract = Write(R"({"extends": "mla_reduce_v1", "name": "r"})");
  ExpectError(CheckCase(PaddedCase(32, 32), o), "--contract",
              "a contract for reduce calls, not decode");
  o.contract = "/nonexistent/contract.json";
  const auto r = CheckCase(PaddedCase(32, 32), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().field(), "--contract");
  EXPECT_EQ(r.status().message(),
            "/nonexistent/contract.json does not exist (there is no folder /nonexistent)");
}

// sim::CheckCall's own error returns (the Python binding maps them to ValueError).
TEST(CheckCall, ErrorsNameTheInput) {
  sim::CallCheckInput in;
  EXPECT_EQ(sim::CheckCall(in).status().field(), "contract");
  in.contract = *sim::BuiltinContract(sim::CallKind::kDecode, "asm", "c");
  in.work_indptr = {0, 1};
  in.work_info = {0, -1, 0, 1, 0, 10, 0, 0};
  in.tensors = {{"q", 1, 16, 576, 2}, {"o", 1, 16, 512, 2}};
  ASSERT_TRUE(sim::CheckCall(in).ok());
  EXPECT_TRUE(sim::CheckCall(in)->empty());
  sim::CallCheckInput bad = in;
  bad.work_info.pop_back();
  EXPECT_EQ(sim::CheckCall(bad).status().field(), "work_info");
  bad = in;
  bad.tensors.push_back({"q", 1, 16, 576, 2});
  EXPECT_EQ(sim::CheckCall(bad).status().field(), "tensors.q");
  bad = in;
  bad.tensors.push_back({"reduce_indptr", 1, 1, 1, 4});
  EXPECT_EQ(sim::CheckCall(bad).status().field(), "tensors.reduce_indptr");
  bad = in;
  bad.tensors[0].heads = 0;
  EXPECT_EQ(sim::CheckCall(bad).status().field(), "tensors.q");
  bad = in;
  bad.fold_ratio = 0;
  EXPECT_EQ(sim::CheckCall(bad).status().field(), "fold_ratio");
  bad = in;
  bad.work_indptr.clear();
  EXPECT_EQ(sim::CheckCall(bad).status().field(), "work_indptr");
  // Boundary: q of 0 rows is one row short of the work item's single row.
  bad = in;
  bad.tensors[0].rows = 0;
  ASSERT_TRUE(sim::CheckCall(bad).ok());
  ASSERT_EQ(sim::CheckCall(bad)->size(), 1u);
  EXPECT_EQ((*sim::CheckCall(bad))[0].rows_past_end, 1);
}

// A work_indptr entry that makes a workgroup walk more work items than loop_trips: the executor
// runs none of them and reports the loop as a hang (class J). CheckCall kept only the
// out-of-bounds findings, so 2^26 + 1 items was clean where 2^26 items (work_info rows 1..2^26 - 1
// past its one row) was a finding; Python's check_call returned None for it.
TEST(CheckCall, AWalkLongerThanLoopTripsIsAFinding) {
  sim::CallCheckInput in;
  in.contract = *sim::BuiltinContract(sim::CallKind::kDecode, "asm", "c");
  in.work_info = {0, -1, 0, 1, 0, 10, 0, 0};
  in.tensors = {{"q", 1, 16, 576, 2}, {"o", 1, 16, 512, 2}};
  auto hang = [&](std::vector<int32_t> work_indptr, int64_t walk, int64_t trips) {
    in.work_indptr = std::move(work_indptr);
    auto v = sim::CheckCall(in);
    ASSERT_TRUE(v.ok());
    ASSERT_EQ(v->size(), 1u) << walk;
    EXPECT_EQ((*v)[0].kind, sim::ViolationKind::kUnboundedLoop);
    EXPECT_EQ((*v)[0].bug_class, sim::BugClass::kJ);
    EXPECT_EQ(sim::CallViolationText("mla_decode_fwd", *in.contract, (*v)[0]),
              "mla_decode_fwd (aiter-asm-decode) does not finish: work -1 would walk " +
                  std::to_string(walk) + " iterations (bound " + std::to_string(trips) +
                  "): above loop_trips, the longest loop mlasim walks; reported as a hang");
  };
  const int64_t loop_trips = ref::Limit(ref::LimitId::kLoopTrips);
  hang({0, INT32_MAX}, INT32_MAX, loop_trips);  // at the default limits
  // Work item 0's KV walk (7 blocks) passes the contract's bound over kv_indices, which the call
  // does not pass (index_rows 0: bound 1): not a finding, and it does not hide workgroup 1's walk.
  in.work_info = {0, -1, 0, 1, 0, 100, 0, 0};
  hang({0, 1, INT32_MAX}, INT32_MAX - 1, loop_trips);
  in.work_info = {0, -1, 0, 1, 0, 10, 0, 0};
  // The boundary, at a lowered loop_trips (the default's walk takes seconds).
  ASSERT_TRUE(ref::SetLimits("loop_trips=1000").ok());
  in.work_indptr = {0, 1000};
  auto at = sim::CheckCall(in);
  ASSERT_TRUE(at.ok());
  ASSERT_EQ(at->size(), 1u);
  EXPECT_EQ((*at)[0].kind, sim::ViolationKind::kOutOfBounds);
  EXPECT_EQ((*at)[0].rows_past_end, 999);
  hang({0, 1001}, 1001, 1000);
  ref::ResetLimits();
}

// The KV cache's extent as the gathers read it, shared by `check` and Python's check_kv: rows are
// every dimension but the last, at 2^26 rows and one past, rank 1 and D = 0 refused; and the one
// rule that tells a contract file from a built-in name.
TEST(CheckCall, KvCacheTensorAndContractFileNames) {
  auto rows = [](std::vector<int64_t> shape) {
    StatusOr<sim::CallTensor> t = sim::KvCacheTensor(shape, 2, "kv");
    return t.ok() ? t->rows : -1;
  };
  EXPECT_EQ(rows({1300, 1, 576}), 1300);
  EXPECT_EQ(rows({20, 64, 1, 576}), 1280);  // pages x page size
  EXPECT_EQ(rows({0, 576}), 0);
  EXPECT_EQ(rows({int64_t{1} << 26, 576}), int64_t{1} << 26);
  EXPECT_EQ(sim::KvCacheTensor({(int64_t{1} << 26) + 1, 576}, 2, "kv").status().ToString(),
            "kv: holds more than 67108864 rows, the most one call's check takes");
  EXPECT_FALSE(sim::KvCacheTensor({(int64_t{1} << 25) + 1, 2, 576}, 2, "kv").ok());
  EXPECT_EQ(sim::KvCacheTensor({int64_t{1} << 40, int64_t{1} << 40, 576}, 2, "kv")
                .status()
                .message(),
            "holds more than 67108864 rows, the most one call's check takes");
  EXPECT_EQ(sim::KvCacheTensor({1300}, 2, "kv").status().ToString(),
            "kv: is not [..., D] (rank >= 2, D >= 1): its rows are unknown");
  EXPECT_FALSE(sim::KvCacheTensor({1300, 0}, 2, "kv").ok());
  const auto t = sim::KvCacheTensor({4, 576}, 1, "kv");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((std::vector<int64_t>{t->heads, t->cols, t->elem_bytes}),
            (std::vector<int64_t>{1, 576, 1}));
  EXPECT_EQ(t->role, "kv_cache");
  for (const char* file : {"a/b", "mine.json", "./hk", "/abs/c.json"})
    EXPECT_TRUE(sim::NamesContractFile(file)) << file;
  for (const char* name : {"hk", "asm", ".json", "json", "", "hk.jsonx"})
    EXPECT_FALSE(sim::NamesContractFile(name)) << name;
}

// One asm decode work item over one request's KV pages [0, pages) (the last page holding
// `last_page_len` tokens), q / o of one row, a page table of `pages` entries and a KV cache of
// `cache_rows` rows: the input the page-table tests vary.
sim::CallCheckInput OneItemOverAPageTable(int32_t pages, int32_t page_size, int32_t last_page_len,
                                          int64_t cache_rows) {
  sim::CallCheckInput in;
  in.contract = *sim::BuiltinContract(sim::CallKind::kDecode, "asm", "c");
  in.work_indptr = {0, 1};
  in.work_info = {0, -1, 0, 1, 0, pages, 0, 0};
  in.kv_indptr = {0, pages};
  in.kv_last_page_lens = {last_page_len};
  in.page_size = page_size;
  in.tensors = {{"q", 1, 16, 576, 2},
                {"o", 1, 16, 512, 2},
                {"kv_indices", pages, 1, 1, 4},
                {"kv_cache", cache_rows, 1, 576, 2}};
  return in;
}

// With the page table's values (a case's captured kv_indices) and the KV cache's extent, the KV
// rows a gather reads are checked: an index past the cache or negative is a read outside it
// (aiter's asm decode: invalid_index = fault, class G), in-range tables of any order are clean,
// and the caller's "no entry" marker (aiter's sparse -1) holds nothing to read. Round 12 found
// such indices read as masked keys by check's numerics, never named.
TEST(CheckCall, CapturedPageTableValuesCheckTheKvRowsTheyName) {
  sim::CallCheckInput in = OneItemOverAPageTable(10, 1, 1, 16);  // KV tokens [0, 10), page 1
  in.kv_indices_values = {15, 3, 4, 5, 0, 9, 8, 7, 14, 1};  // inside the 16-row cache
  auto v = sim::CheckCall(in);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(v->empty());
  auto one = [&](int32_t value) {
    sim::CallCheckInput x = in;
    x.kv_indices_values[6] = value;
    auto r = sim::CheckCall(x);
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : std::vector<sim::Violation>{};
  };
  const std::vector<sim::Violation> past = one(16);  // one row past the cache's end
  ASSERT_EQ(past.size(), 1u);
  EXPECT_EQ(past[0].buffer, "kv_cache");
  EXPECT_EQ(past[0].access, sim::Access::kRead);
  EXPECT_EQ(past[0].first_row, 16);
  EXPECT_EQ(past[0].rows_past_end, 1);
  EXPECT_EQ(past[0].bug_class, sim::BugClass::kG);
  EXPECT_EQ(sim::CallViolationText("mla_decode_fwd", *in.contract, past[0]),
            "mla_decode_fwd (aiter-asm-decode) reads kv_cache rows 16..16 of 16: 1 row past its "
            "end (1 work item: 0)");
  const std::vector<sim::Violation> before = one(-1);
  ASSERT_EQ(before.size(), 1u);
  EXPECT_EQ(before[0].rows_before_start, 1);
  // An index further before the start reads that one row: the span is -5..-5, not -5..-1 (the
  // executor's underflow aggregate started at last = -1 and kept it).
  const std::vector<sim::Violation> far_before = one(-5);
  ASSERT_EQ(far_before.size(), 1u);
  EXPECT_EQ(far_before[0].first_row, -5);
  EXPECT_EQ(far_before[0].last_row, -5);
  EXPECT_EQ(far_before[0].rows_before_start, 5);
  EXPECT_EQ(sim::CallViolationText("mla_decode_fwd", *in.contract, far_before[0]),
            "mla_decode_fwd (aiter-asm-decode) reads kv_cache rows -5..-5 of 16: 5 rows before "
            "its start (1 work item: 0)");
  const std::vector<sim::Violation> int_min = one(INT32_MIN);
  ASSERT_EQ(int_min.size(), 1u);
  EXPECT_EQ(int_min[0].first_row, INT32_MIN);
  EXPECT_EQ(int_min[0].last_row, INT32_MIN);
  EXPECT_TRUE(one(15).empty());  // the last row: the boundary
  EXPECT_EQ(one(INT32_MAX).size(), 1u);
  // The caller's marker holds nothing to read; any other value outside still does.
  in.kv_indices_masked = -1;
  EXPECT_TRUE(one(-1).empty());
  EXPECT_EQ(one(-2).size(), 1u);
  EXPECT_EQ(one(16).size(), 1u);
  // Without the KV cache's extent the values check nothing (as before them).
  sim::CallCheckInput no_cache = in;
  no_cache.tensors.pop_back();
  no_cache.kv_indices_values[6] = 16;
  EXPECT_TRUE(sim::CheckCall(no_cache)->empty());
  // Values of another count than the tensor's elements, or without the tensor: an error.
  sim::CallCheckInput bad = in;
  bad.kv_indices_values.push_back(0);
  EXPECT_EQ(sim::CheckCall(bad).status().ToString(), "kv_indices: 11 values given for 10 elements");
  bad = in;
  bad.tensors.erase(bad.tensors.begin() + 2);
  EXPECT_EQ(sim::CheckCall(bad).status().ToString(),
            "kv_indices: 10 values given for no kv_indices tensor");
}

// A contract whose kernel wraps invalid indices (invalid_index = wrap: value mod pages) over a
// captured KV cache of 0 rows has no row to wrap onto: every index is a read outside the cache.
// `mlasim check` of such a case (config.contract naming a wrap contract, kv_buffer [0, 1, 576])
// died of SIGFPE (a modulo by 0 pages) before session 22's fix.
TEST(CheckCall, AWrappingContractOverAnEmptyKvCacheReadsOutsideIt) {
  sim::Contract wrap = **sim::BuiltinContract(sim::CallKind::kDecode, "asm", "c");
  wrap.semantics.invalid_index = sim::InvalidIndex::kWrap;
  sim::CallCheckInput in = OneItemOverAPageTable(4, 1, 1, 0);
  in.contract = std::make_shared<const sim::Contract>(wrap);
  in.kv_indices_values = {0, 1, 2, 3};
  auto v = sim::CheckCall(in);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_EQ(v->size(), 1u);
  EXPECT_EQ((*v)[0].buffer, "kv_cache");
  EXPECT_EQ((*v)[0].first_row, 0);
  EXPECT_EQ((*v)[0].last_row, 3);
  EXPECT_EQ((*v)[0].rows_past_end, 4);
  // With rows to wrap onto, the same values are inside and clean.
  in.tensors.back().rows = 4;
  EXPECT_TRUE(sim::CheckCall(in)->empty());
}

// Pages of 4 tokens: element p / 4 of the table names the page; a page id past the cache's pages
// is a read outside it, reported at the page's first row the walk reaches (an index value outside
// the cache is reported once per element, as the simulator's hostile index values are).
TEST(CheckCall, PagedTablesNameWholePages) {
  // Pages [0, 3) of the request, the last one full; a cache of 3 pages of 4 tokens.
  sim::CallCheckInput in = OneItemOverAPageTable(3, 4, 4, 12);
  in.kv_indices_values = {2, 0, 1};
  EXPECT_TRUE(sim::CheckCall(in)->empty());
  in.kv_indices_values = {2, 3, 1};  // page 3 of 3
  auto v = sim::CheckCall(in);
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->size(), 1u);
  EXPECT_EQ((*v)[0].first_row, 12);
  EXPECT_EQ((*v)[0].last_row, 12);
  EXPECT_EQ((*v)[0].rows_past_end, 1);
  in.kv_indices_values = {2, 1, 0};
  in.kv_last_page_lens = {2};  // the last page half full: still in the cache
  EXPECT_TRUE(sim::CheckCall(in)->empty());
}

TEST(CheckCall, ShapesFoldQAndOHeadsIntoRows) {
  const auto q = sim::CallTensorFromShape("q", {6, 128, 576}, 2, 8, "q");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->rows, 48);
  EXPECT_EQ(q->heads, 16);
  EXPECT_EQ(q->cols, 576);
  const auto l = sim::CallTensorFromShape("logits", {10, 16, 512}, 4, 8, "logits");
  EXPECT_EQ(l->rows, 10);
  EXPECT_EQ(l->heads, 16);
  const auto k = sim::CallTensorFromShape("kv_indices", {1040}, 4, 8, "kv_indices");
  EXPECT_EQ(k->rows, 1040);
  EXPECT_EQ(k->cols, 1);
  const auto m = sim::CallTensorFromShape("kv_indices", {6, 64}, 4, 8, "kv_indices");
  EXPECT_EQ(m->rows, 384);  // a sparse [tokens, topk] matrix is addressed by element
  EXPECT_EQ(m->cols, 1);
  EXPECT_EQ(sim::CallTensorFromShape("indices", {3, 2, 5}, 4, 1, "indices")->rows, 30);
  EXPECT_EQ(sim::CallTensorFromShape("q", {6, 20, 576}, 2, 8, "q").status().field(), "q");
  EXPECT_EQ(sim::CallTensorFromShape("q", {-1, 16, 576}, 2, 1, "q").status().field(), "q");
  // q and o are [tokens, heads, D]; no dimension past the rows may be empty.
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{}, {6}, {6, 576}, {6, 16, 576, 1}})
    EXPECT_EQ(sim::CallTensorFromShape("o", shape, 2, 1, "o").status().message(),
              "must be [tokens, heads, D]: got " + std::to_string(shape.size()) + " dimension(s)");
  EXPECT_EQ(sim::CallTensorFromShape("q", {3, 0, 576}, 2, 1, "q").status().message(),
            "dimension 1 is 0: rows of no element");
  EXPECT_EQ(sim::CallTensorFromShape("lse", {3, 0}, 4, 1, "lse").status().message(),
            "dimension 1 is 0: rows of no element");
  EXPECT_TRUE(sim::CallTensorFromShape("q", {0, 16, 576}, 2, 1, "q").ok());  // no token: fine
  EXPECT_TRUE(sim::CallTensorFromShape("kv_indices", {6, 0}, 4, 1, "kv_indices").ok());
}

TEST(CheckCall, CallKindsFollowFromNames) {
  EXPECT_EQ(*sim::CallKindOf("mla_decode_fwd", "", "f"), sim::CallKind::kDecode);
  EXPECT_EQ(*sim::CallKindOf("mla_reduce_v1", "", "f"), sim::CallKind::kReduce);
  // aiter's planner entry points are plan calls, "decode" in a name notwithstanding.
  EXPECT_EQ(*sim::CallKindOf("decode_update_mla_metadata_v1", "", "f"),
            sim::CallKind::kPlanUpdate);
  EXPECT_EQ(*sim::CallKindOf("get_mla_metadata_v1", "", "f"), sim::CallKind::kPlanBuild);
  EXPECT_EQ(*sim::CallKindOf("anything", "reduce", "f"), sim::CallKind::kReduce);
  EXPECT_EQ(sim::CallKindOf("fwd", "", "f").status().field(), "f");
  EXPECT_EQ(sim::ResolveCallContract(sim::CallKind::kPlanBuild, "", "f").status().field(), "f");
}

}  // namespace
}  // namespace mlasim::io
