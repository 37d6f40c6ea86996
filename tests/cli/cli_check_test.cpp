// Tests of `mlasim check CASE_DIR` (tools/mlasim/cmd_check.cpp), run in-process: the exact report
// of a clean case (aiter-mla-metadata.md §6.1's worked example), the first diverging element and
// the checker's errors for a corrupted plan, the planner input that reproduces a plan made with
// other inputs (cu_count, dispatch, dtypes), stores past a too-small buffer, stale
// work_metadata_ptrs, fault attribution, --json, and every bad-input exit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "ref/planner.h"
#include "tests/cli/case_builders.h"
#include "tools/mlasim/cli.h"

namespace mlasim::cli {
namespace {

namespace fs = std::filesystem;
using io::test::Bytes;
using io::test::CaseBuilder;
using nlohmann::json;

struct CliResult {
  int exit_code = -1;
  std::string out, err;
};

CliResult Check(std::vector<std::string> args) {
  args.insert(args.begin(), "check");
  std::ostringstream out, err;
  CliResult r;
  r.exit_code = RunMlasim(args, out, err);
  r.out = out.str();
  r.err = err.str();
  return r;
}

ref::PlanRequest Request(std::vector<int32_t> kv = {300, 40, 700}, int32_t cu = 8,
                         int32_t heads = 16) {
  ref::PlanRequest r;
  r.cu_count = cu;
  r.heads_per_head_k = heads;
  r.kv_indptr = {0};
  r.qo_indptr = {0};
  for (int32_t k : kv) {
    r.kv_indptr.push_back(r.kv_indptr.back() + k);
    r.qo_indptr.push_back(r.qo_indptr.back() + 1);
    r.kv_last_page_lens.push_back(1);
  }
  return r;
}

ref::Plan PlanOf(const ref::PlanRequest& r,
                 ref::PlannerChoice choice = ref::PlannerChoice::kAiterDispatch) {
  ref::PlannerOptions o;
  o.choice = choice;
  return *ref::PlanMlaMetadata(r, o);
}

class CheckCli : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           (std::string("mlasim_check_") + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // Writes `b` as the case directory and returns its path.
  std::string Write(const CaseBuilder& b) {
    b.WriteTo(dir_);
    return dir_.string();
  }
  std::string File(const std::string& name, const std::string& text) {
    const fs::path p = dir_.string() + "-" + name;
    std::ofstream(p) << text;
    extra_.push_back(p);
    return p.string();
  }
  ~CheckCli() override {
    for (const fs::path& p : extra_) fs::remove(p);
  }
  fs::path dir_;
  std::vector<fs::path> extra_;
};

CaseBuilder CleanCase() {
  const ref::PlanRequest r = Request();
  CaseBuilder b;
  b.AddRequest(r);
  b.AddPlan(PlanOf(r));
  return b;
}

TEST_F(CheckCli, ACleanCaseReportsIdenticalPlanAndExitsZero) {
  const std::string dir = Write(CleanCase());
  const CliResult r = Check({dir});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(
      r.out,
      "case " + dir +
          ": call mla_decode_fwd, captured by mlasim 0.1.0 (numpy 1.24.2)\n"
          "tensors: 9 (kv_indptr int32 (4,), kv_last_page_lens int32 (3,), qo_indptr int32 "
          "(4,), reduce_final_map int32 (3, 2), reduce_indptr int32 (4,), reduce_partial_map "
          "int32 (10,), work_indptr int32 (9,), work_info int32 (10, 8), work_metadata_ptrs "
          "uint64 (2,))\n"
          "\n"
          "plan: re-planned from config.planner and the captured arrays\n"
          "  request    3 requests, 16 q heads x 1 KV heads, max_seqlen_qo 1, page 1, "
          "granularity 16, bf16/bf16, gfx942 2026-08, cu_count 8\n"
          "  decisions  num_clusters 8  fold_ratio 1  pack 128  qo_split no  planner parallel  "
          "num_splits 8  works 6  payload 31\n"
          "  sizes      work_indptr 9/9  work_info 10/10 rows  reduce_indptr 4/4  "
          "reduce_final_map 3/3 rows  reduce_partial_map 10/10  (captured/info_v1)\n"
          "  diff       identical: the 70 cells the planner writes agree\n"
          "  pointers   work_metadata_ptrs holds 0, 0 (mlasim plan --npy's modelled offsets): "
          "not compared with the data_ptrs\n"
          "  check      ok (0 errors, 0 warnings)\n"
          "\n"
          "contracts: not checked: the case captures none of the call's tensors (q, o, "
          "logits, attn_lse, lse, kv_indices) and names no kernel (config.kernel) or contract "
          "(--contract)\n"
          "\n"
          "numerics: not run: the case has no q, kv_buffer (or kv_cache, kv), kv_indices, o\n"
          "\n"
          "verdict: ok\n");
}

TEST_F(CheckCli, ACorruptedCellIsTheFirstDifferenceAndTheCheckerSaysWhy) {
  const ref::PlanRequest r = Request();
  ref::Plan p = PlanOf(r);
  p.work_info.data[3 * 8 + ref::kKvEnd] += 20;  // work 3 ends at 600 instead of 580
  CaseBuilder b;
  b.AddRequest(r);
  b.AddPlan(p);
  const CliResult out = Check({Write(b)});
  EXPECT_EQ(out.exit_code, 1) << out.err;
  EXPECT_NE(out.out.find("  diff       1 of 70 cells differ; first: work_info[3].kv_end (element "
                         "29): captured 600, re-planned 580\n"
                         "  not reproduced by changing cu_count, the planner dispatch, the q/kv "
                         "dtypes or the revision\n"),
            std::string::npos)
      << out.out;
  EXPECT_NE(out.out.find("  check      FAILED (2 errors, 0 warnings)\n"
                         "    error kv_offset_mismatch: tile 2 (batch 2, q [2,3)): work 3 has "
                         "kv_offset 460, expected 440\n"
                         "    error tile_kv_not_covered: tile 2 (batch 2, q [2,3)): piece 1 (work "
                         "4) starts at 580, expected 600 (overlap)\n"),
            std::string::npos)
      << out.out;
  EXPECT_NE(out.out.find("\nverdict: FAILED (3 findings)\n"), std::string::npos) << out.out;
}

TEST_F(CheckCli, APlanMadeWithAnotherCuCountIsReproducedAndNamed) {
  const ref::PlanRequest r = Request();
  CaseBuilder b;
  b.AddRequest(r);                                // the case says cu_count 8 ...
  b.AddPlan(PlanOf(Request({300, 40, 700}, 4)));  // ... the engine planned for 4
  const CliResult out = Check({Write(b)});
  EXPECT_EQ(out.exit_code, 1) << out.err;
  EXPECT_NE(out.out.find(
                "  diff       the re-plan makes 5 store(s) past the end of the captured "
                "work_indptr (5 elements; the first at index 5)\n"
                "  diff       42 of 66 cells differ; first: work_indptr[2]: captured 3, "
                "re-planned 2\n"
                "  decision   seen in the captured buffers: num_clusters: captured 4, re-planned "
                "8\n"
                "  decision   seen in the captured buffers: num_works: captured 5, re-planned 6\n"
                "  reproduced with cu_count = 4 (the case says 8)\n"
                "  decision   num_clusters: captured 4, re-planned 8\n"
                "  decision   num_splits: captured 4, re-planned 8\n"
                "  decision   num_works: captured 5, re-planned 6\n"
                "  decision   payload: captured 45, re-planned 31\n"),
            std::string::npos)
      << out.out;
  EXPECT_NE(out.out.find("    error work_indptr_shape: work_indptr holds 5 entries but the "
                         "planner uses 8 clusters and needs 9\n"),
            std::string::npos)
      << out.out;
}

TEST_F(CheckCli, TheOtherDispatchAndOtherDtypesAreFound) {
  // A zero-KV request: the serial planner gives it a work item, the parallel one does not.
  const ref::PlanRequest r = Request({300, 0, 700});
  CaseBuilder b;
  b.AddRequest(r);
  b.AddPlan(PlanOf(r, ref::PlannerChoice::kSerial));
  const CliResult serial = Check({Write(b)});
  EXPECT_EQ(serial.exit_code, 1);
  EXPECT_NE(serial.out.find("  reproduced with planner = serial (the case says parallel)\n"
                            "  decision   parallel_planner_used: captured 0, re-planned 1\n"
                            "  decision   num_works: captured 7, re-planned 6\n"),
            std::string::npos)
      << serial.out;
  fs::remove_all(dir_);
  // 128 heads: fp8 q and KV run natively on gfx942, bf16 folds by 8 (aiter-mla-metadata.md §4.2).
  ref::PlanRequest fp8 = Request({300, 40, 700}, 8, 128);
  fp8.q_dtype = fp8.kv_dtype = ref::DType::kFp8;
  CaseBuilder c;
  c.AddRequest(Request({300, 40, 700}, 8, 128));
  c.AddPlan(PlanOf(fp8));
  const CliResult dtypes = Check({Write(c)});
  EXPECT_EQ(dtypes.exit_code, 1);
  EXPECT_NE(dtypes.out.find("  reproduced with q_dtype/kv_dtype = fp8/fp8 (the case says "
                            "bf16/bf16)\n  decision   fold_ratio: captured 1, re-planned 8\n"),
            std::string::npos)
      << dtypes.out;
  EXPECT_NE(dtypes.out.find("  decision   planner_heads: captured 128, re-planned 16\n"),
            std::string::npos)
      << dtypes.out;
}

TEST_F(CheckCli, StalePointersInWorkMetadataPtrsAreAFinding) {
  CaseBuilder b = CleanCase();
  // aiter stores &work_indptr[0], &work_info[0]: the builder put them at 0x7f1000000000 and
  // 0x7f1000010000.
  b.Add("work_metadata_ptrs", "uint64", {2},
        Bytes(std::vector<uint64_t>{0x7f1000000000, 0x7f1000010000}));
  const CliResult ok = Check({Write(b)});
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_EQ(ok.out.find("pointers"), std::string::npos) << ok.out;
  fs::remove_all(dir_);
  b.Add("work_metadata_ptrs", "uint64", {2},
        Bytes(std::vector<uint64_t>{0x7f1000000000, 0x7f5000000000}));
  const CliResult stale = Check({Write(b)});
  EXPECT_EQ(stale.exit_code, 1);
  EXPECT_NE(stale.out.find("  pointers   work_metadata_ptrs[1] is 0x7f5000000000 but the captured "
                           "work_info is at 0x7f1000010000: the kernel reads a plan other than "
                           "the captured one\n"),
            std::string::npos)
      << stale.out;
}

TEST_F(CheckCli, AFaultAddressIsAttributedToACapturedTensor) {
  CaseBuilder b = CleanCase();
  b.Add("o", "bfloat16", {3, 16, 512}, std::string(3 * 16 * 512 * 2, '\0'), 0x7f2000000000);
  const std::string dir = Write(b);
  // Row 3, head 2, column 3 of o: one row past its end (rows of 16 x 512 bf16 = 16384 bytes).
  const std::string log = File("rocm.log",
                               "[rank3] Memory access fault by GPU node-2 (Agent handle: 0x55) on "
                               "address 0x7f200000c806. Reason: Page not present or supervisor "
                               "privilege.\n");
  const CliResult past = Check({dir, "--fault-log", log});
  EXPECT_EQ(past.exit_code, 1) << past.err;
  EXPECT_NE(past.out.find("fault: 0x7f200000c806 (rocm, reason: Page not present or supervisor "
                          "privilege)\n"
                          "  0x7f200000c806 is 2054 bytes past the end of o (3 rows) = row 3, "
                          "head 2, column 3\n"
                          "\nnumerics: not run: the case has no q, kv_buffer (or kv_cache, kv), "
                          "kv_indices\n"
                          "\nverdict: FAILED (1 finding)\n"),
            std::string::npos)
      << past.out;
  const CliResult inside = Check({dir, "--fault-log", File("in.txt", "0x7f2000000402")});
  EXPECT_EQ(inside.exit_code, 0) << inside.out;
  EXPECT_NE(inside.out.find("  0x7f2000000402 is inside o at byte 1026 = row 0, head 1, column 1 "
                            "(3 rows)\n"),
            std::string::npos)
      << inside.out;
  const CliResult far = Check({dir, "--fault-log", File("far.txt", "0x1000")});
  EXPECT_EQ(far.exit_code, 0);
  EXPECT_NE(far.out.find("  not attributed: 0x1000 is "), std::string::npos) << far.out;
  const CliResult nil =
      Check({dir, "--fault-log",
             File("nil.txt", "Memory access fault by GPU node-2 on address (nil). Reason: x.")});
  EXPECT_EQ(nil.exit_code, 2);
  EXPECT_EQ(nil.err,
            "mlasim check: error: --fault-log: the fault address is (nil): a null pointer, not an "
            "overrun of a captured tensor\n");
  const CliResult none = Check({dir, "--fault-log", File("none.txt", "all good\n")});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("mlasim check: error: --fault-log: no fault address found"),
            std::string::npos);
}

TEST_F(CheckCli, CasesWithoutPlannerInputsOrBuffersSayWhatIsMissing) {
  CaseBuilder b = CleanCase();
  b.manifest["config"].erase("planner");
  const CliResult no_planner = Check({Write(b)});
  EXPECT_EQ(no_planner.exit_code, 0);
  EXPECT_NE(no_planner.out.find("plan: not checked: the case has no config.planner "
                                "(get_mla_metadata_v1's scalar arguments)\n"),
            std::string::npos)
      << no_planner.out;
  EXPECT_NE(no_planner.out.find("verdict: nothing checked"), std::string::npos);
  fs::remove_all(dir_);
  CaseBuilder c = CleanCase();
  c.manifest["tensors"].erase("work_info");
  const CliResult no_buffers = Check({Write(c)});
  EXPECT_EQ(no_buffers.exit_code, 0);
  EXPECT_NE(no_buffers.out.find("  diff       not run: the case has no work_info\n"),
            std::string::npos)
      << no_buffers.out;
  EXPECT_NE(no_buffers.out.find("verdict: nothing checked"), std::string::npos);
}

TEST_F(CheckCli, JsonReportCarriesEverySection) {
  const ref::PlanRequest r = Request();
  ref::Plan p = PlanOf(r);
  p.reduce_partial_map.data[1] = 7;
  CaseBuilder b;
  b.AddRequest(r);
  b.AddPlan(p);
  const CliResult out = Check({Write(b), "--json"});
  EXPECT_EQ(out.exit_code, 1) << out.err;
  const json j = json::parse(out.out);
  EXPECT_EQ(j["verdict"], "failed");
  EXPECT_EQ(j["call"], "mla_decode_fwd");
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["tensors"]["work_info"]["data_ptr"], "0x7f1000010000");
  EXPECT_EQ(j["plan"]["derived"]["num_works"], 6);
  EXPECT_EQ(j["plan"]["diff"]["first"],
            json({{"buffer", "reduce_partial_map"},
                  {"index", 1},
                  {"row", -1},
                  {"field", -1},
                  {"captured", 7},
                  {"captured_unwritten", false},
                  {"replanned", 1},
                  {"text", "reduce_partial_map[1]: captured 7, re-planned 1"}}));
  EXPECT_EQ(j["plan"]["check"]["diagnostics"][0]["code"], "reduce_group_mismatch");
  EXPECT_EQ(j["contracts"]["checked"], false);
  EXPECT_TRUE(j["fault"].is_null());
  EXPECT_EQ(j["findings"].size(), 2u);
}

TEST_F(CheckCli, BadCaseDirectoriesExitTwoNamingFileAndField) {
  const std::string missing = (dir_ / "nope").string();
  CliResult r = Check({missing});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "mlasim check: error: " + missing +
                       ": no such case directory (there is no folder " + dir_.string() + ")\n");
  EXPECT_EQ(r.out, "");

  CaseBuilder cut = CleanCase();
  cut.files["work_info.npy"].resize(cut.files["work_info.npy"].size() - 4);
  const std::string dir = Write(cut);
  r = Check({dir});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "mlasim check: error: " + dir +
                       "/work_info.npy:data: truncated: the header declares 320 data bytes (<i4 "
                       "(10, 8)) but the file holds 316\n");
  fs::remove_all(dir_);

  struct Row {
    const char* name;
    std::function<void(CaseBuilder&)> mutate;
    std::string field_and_reason;  // after "mlasim check: error: DIR/manifest.json"
  };
  const std::vector<Row> rows = {
      {"missing_field", [](CaseBuilder& b) { b.manifest["tensors"]["q_"] = json::object(); },
       ":tensors.q_.file: required key is missing"},
      {"wrong_dtype", [](CaseBuilder& b) { b.Add("kv_indptr", "int64", {4}, std::string(32, 0)); },
       ":tensors.kv_indptr.dtype: is int64; get_mla_metadata_v1's kv_indptr is int32"},
      {"limit", [](CaseBuilder& b) { b.manifest["config"]["planner"]["cu_count"] = 70000; },
       ":config.planner.cu_count: CU count is 70000, above mlasim's limit of 65536 (raise it "
       "with --limit clusters=N or MLASIM_LIMITS=clusters=N, up to 1048576)"},
      {"heads", [](CaseBuilder& b) { b.manifest["config"]["planner"]["heads_per_head_k"] = 20; },
       ":config.planner.heads_per_head_k: aiter's planner supports only #heads in [16, 64, 128], "
       "multiples of 16 (folded to 16), or the listed special shapes; got 20 heads, qlen 1, q "
       "bf16, kv bf16 on gfx942"},
      {"decreasing",
       [](CaseBuilder& b) {
         b.AddInt32("kv_indptr", {0, 300, 200, 1040});
       },
       ":tensors.kv_indptr[2]: decreases (300 -> 200): an indptr is cumulative"},
  };
  for (const Row& row : rows) {
    CaseBuilder b = CleanCase();
    row.mutate(b);
    const std::string d = Write(b);
    const CliResult bad = Check({d});
    EXPECT_EQ(bad.exit_code, 2) << row.name << ": " << bad.out;
    EXPECT_EQ(bad.err, "mlasim check: error: " + d + "/manifest.json" + row.field_and_reason + "\n")
        << row.name;
    EXPECT_EQ(bad.out, "") << row.name;
    fs::remove_all(dir_);
  }
}

TEST_F(CheckCli, CapturedBuffersAboveThePlanBufferLimitAreRefused) {
  CaseBuilder b = CleanCase();  // reduce_partial_map of 2^24 int32 (64 MiB, the load limit)
  b.AddInt32("reduce_partial_map", std::vector<int32_t>(size_t{1} << 24, 0));
  const std::string dir = Write(b);
  const CliResult r = Check({dir});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(
      r.err,
      "mlasim check: error: " + dir +
          "/manifest.json:tensors: the captured plan buffers' int32 "
          "element count is 16777315, above mlasim's limit of 16777216 (raise it with --limit "
          "plan_elements=N or MLASIM_LIMITS=plan_elements=N, up to 268435456)\n");
}

TEST_F(CheckCli, BadFlagsExitTwo) {
  const std::string dir = Write(CleanCase());
  CliResult r = Check({dir, "--planner", "fast"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "mlasim check: error: --planner: unknown planner 'fast' (expected auto, serial "
            "or parallel)\n");
  r = Check({});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("mlasim check: error: CASE_DIR"), std::string::npos) << r.err;
  r = Check({dir, "--fault-log", (dir_ / "missing.log").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("mlasim check: error: --fault-log: "), std::string::npos) << r.err;
  r = Check({dir, "--planner", "serial"});  // the worked example plans the same either way
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("planner serial"), std::string::npos);
}

// The worked example with q and o of `rows` rows captured ([rows, 16, 576] / [rows, 16, 512]):
// its plan covers 3 rows.
CaseBuilder CaseWithQo(int64_t rows) {
  CaseBuilder b = CleanCase();
  b.Add("q", "bfloat16", {rows, 16, 576}, std::string(rows * 16 * 576 * 2, '\0'));
  b.Add("o", "bfloat16", {rows, 16, 512}, std::string(rows * 16 * 512 * 2, '\0'));
  return b;
}

TEST_F(CheckCli, ContractFindingsExitOneAndCleanCallsSaySo) {
  std::string dir = Write(CaseWithQo(2));
  CliResult r = Check({dir});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  // Request 2 (one token, split in three pieces: work items 3, 4, 5) lies past q/o of 2 rows.
  EXPECT_NE(r.out.find("contracts: checked, 1 call (mla_decode_fwd under aiter-asm-decode "
                       "(builtin:aiter-decode-asm.json)), 1 finding\n"
                       "  mla_decode_fwd (aiter-asm-decode) reads q rows 2..2 of 2: 1 row past "
                       "its end (3 work items: 3, 4, 5)\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("verdict: FAILED (1 finding)"), std::string::npos) << r.out;
  const json j = json::parse(Check({dir, "--json"}).out);
  EXPECT_EQ(j["contracts"]["findings"][0]["tensor"], "q");
  EXPECT_EQ(j["contracts"]["findings"][0]["rows_past_end"], 1);
  EXPECT_EQ(j["contracts"]["findings"][0]["work_items"], json::array({3, 4, 5}));
  fs::remove_all(dir_);
  dir = Write(CaseWithQo(3));
  r = Check({dir});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("contracts: checked, 1 call (mla_decode_fwd under aiter-asm-decode "
                       "(builtin:aiter-decode-asm.json)), no finding\n"),
            std::string::npos)
      << r.out;
}

TEST_F(CheckCli, ContractFlagTakesAFileOrAVariantAndRefusesBadOnes) {
  const std::string dir = Write(CaseWithQo(3));
  CliResult r = Check({dir, "--contract", "hk"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("under aiter-hk-decode (builtin:aiter-decode-hk.json)), no finding"),
            std::string::npos)
      << r.out;
  r = Check({dir, "--contract", "triton"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("mlasim check: error: --contract: "), std::string::npos) << r.err;
  const std::string bad = File("bad.json", "{\"extends\": ");
  r = Check({dir, "--contract", bad});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("mlasim check: error: " + bad), std::string::npos) << r.err;
}

}  // namespace
}  // namespace mlasim::cli
