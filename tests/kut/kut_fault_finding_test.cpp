// fuzz::FaultFinding for a device fault that names no address (cudaErrorIllegalAddress): the call's
// first predicted out-of-range access is the finding when the contract predicts one (ATOM's draft
// step 0 writing o rows 2..3 of 2 faults in guard mode, a known family that must stay known), and
// a KUT-fault when it predicts none.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "fuzz/kut_check.h"
#include "fuzz/kut_check_internal.h"
#include "sim/replay.h"
#include "sim/scenario_json.h"
#include "sim/violation.h"

namespace mlasim::fuzz {
namespace {

const char* kKernel = "flashmla-dense-bf16 (9241ae3)";
const char* kDevice = "cudaErrorIllegalAddress (an illegal memory access was encountered)";

sim::Violation DraftStep0OWrite() {
  sim::Violation v;
  v.kind = sim::ViolationKind::kOutOfBounds;
  v.bug_class = sim::BugClass::kA;
  v.step = "draft_step_0";
  v.call = "dense_decode";
  v.call_index = 4;
  v.table_row = "D0b'";
  v.kernel = "flashmla_dense";
  v.buffer = "o";
  v.access = sim::Access::kWrite;
  v.rows = 2;
  v.first_row = 2;
  v.last_row = 3;
  v.rows_past_end = 2;
  v.detail = "writes o rows 2..3 of 2";
  return v;
}

nlohmann::json Running(bool with_prediction) {
  nlohmann::json run = {{"op", "decode"}, {"call", 4}, {"step", "draft_step_0"},
                        {"name", "dense_decode"}, {"table_row", "D0b'"},
                        {"kernel", "flashmla_dense"}, {"predicted", nlohmann::json::array()}};
  if (with_prediction)
    run["predicted"].push_back({{"buffer", "o"}, {"access", "write"}, {"side", "after"},
                                {"first_row", 2}, {"last_row", 3},
                                {"violations", {ViolationToJson(DraftStep0OWrite())}}});
  return run;
}

TEST(KutFaultFinding, ADeviceFaultInACallWithAPredictedOverrunIsThatOverrun) {
  const sim::Violation v =
      FaultFinding(Running(true), {{"device", kDevice}, {"buffer", ""}}, kKernel);
  EXPECT_EQ(sim::ViolationSignature(v), "draft_step_0|dense_decode|o|write|A");
  EXPECT_EQ(v.kind, sim::ViolationKind::kOutOfBounds);
  EXPECT_EQ(v.first_row, 2);
  EXPECT_EQ(v.last_row, 3);
  EXPECT_EQ(v.detail,
            "writes o rows 2..3 of 2; observed on flashmla-dense-bf16 (9241ae3): the device "
            "faulted in this call (cudaErrorIllegalAddress (an illegal memory access was "
            "encountered)), as this predicted access out of range would");
}

TEST(KutFaultFinding, ADeviceFaultInACallWithNoPredictionIsAKutFault) {
  const sim::Violation v =
      FaultFinding(Running(false), {{"device", kDevice}, {"buffer", ""}}, kKernel);
  EXPECT_EQ(sim::ViolationSignature(v), "draft_step_0|dense_decode||run|KUT-fault");
  EXPECT_EQ(v.kind, sim::ViolationKind::kKernelFault);
  EXPECT_EQ(v.detail,
            "flashmla-dense-bf16 (9241ae3) failed on the device in the decode call: "
            "cudaErrorIllegalAddress (an illegal memory access was encountered)");
}

TEST(KutFaultFinding, AHangStaysAKutFaultEvenWithAPrediction) {
  const sim::Violation v = FaultFinding(Running(true), {{"hang", 30.0}}, kKernel);
  EXPECT_EQ(sim::ViolationSignature(v), "draft_step_0|dense_decode||run|KUT-fault");
}

// A worker that ended without a fault report (FlashMLA's sparse decode on the H200, 2026-12-02:
// the worker died where an index of -2 was read) is the predicted overrun when there is one, and
// otherwise a KUT-fault that says how the worker ended.
TEST(KutFaultFinding, AWorkerThatEndedIsThePredictedOverrunOrSaysHowItEnded) {
  const nlohmann::json ended = {{"signal", 0}, {"ended", "killed by signal 6"}};
  const sim::Violation p = FaultFinding(Running(true), ended, kKernel);
  EXPECT_EQ(sim::ViolationSignature(p), "draft_step_0|dense_decode|o|write|A");
  EXPECT_EQ(p.detail,
            "writes o rows 2..3 of 2; observed on flashmla-dense-bf16 (9241ae3): the kernel "
            "failed in this call (its worker ended without a fault report: killed by signal 6), "
            "as this predicted access out of range would");
  const sim::Violation u = FaultFinding(Running(false), ended, kKernel);
  EXPECT_EQ(sim::ViolationSignature(u), "draft_step_0|dense_decode||run|KUT-fault");
  EXPECT_EQ(u.detail,
            "flashmla-dense-bf16 (9241ae3) failed in the decode call: its worker ended without a "
            "fault report: killed by signal 6");
}

// Reads of KV rows past the harness's own cache (a hostile index value, the same in the engine's
// cache and the harness's) are predicted, to explain a fault only; rows inside the harness's
// cache are not (the engine's cache is sized differently), nor is anything without its size.
TEST(KutPredict, KvReadsPastTheHarnessCacheExplainAFaultOnly) {
  auto s = sim::LoadScenarioFile(std::string(MLASIM_SOURCE_DIR) +
                                 "/tests/cases/G-hostile-sparse-indices-minus-one-masked.json");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto r = sim::Replay(*s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const sim::Call* decode = nullptr;
  for (const sim::Call& c : r->trace.calls)
    if (c.kind == sim::CallKind::kDecode && decode == nullptr) decode = &c;
  ASSERT_NE(decode, nullptr);
  auto kv = [&](int64_t harness_rows) -> const kut_internal::Predicted* {
    static std::vector<kut_internal::Predicted> keep;
    keep = kut_internal::Predict(*r, *decode, harness_rows);
    for (const auto& p : keep)
      if (p.buffer == "kv_cache" && !p.before) return &p;
    return nullptr;
  };
  EXPECT_EQ(kv(-1), nullptr);
  const kut_internal::Predicted* past = kv(50000);  // values 100000 and INT_MAX lie past it
  ASSERT_NE(past, nullptr);
  EXPECT_EQ(past->access, "read");
  EXPECT_EQ(past->first, 100000);
  EXPECT_EQ(past->last, 2147483647);
  EXPECT_TRUE(past->attribution_only);
  const kut_internal::Predicted* part = kv(200000);  // only INT_MAX lies past it
  ASSERT_NE(part, nullptr);
  EXPECT_EQ(part->first, 200000);
  EXPECT_NE(kv(2147483647), nullptr);             // row INT_MAX is past a cache of INT_MAX rows
  EXPECT_EQ(kv(int64_t{2147483647} + 1), nullptr);  // and inside one of INT_MAX + 1
}

}  // namespace
}  // namespace mlasim::fuzz
