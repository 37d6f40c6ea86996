// fuzz::FaultFinding for a device fault that names no address (cudaErrorIllegalAddress): the call's
// first predicted out-of-range access is the finding when the contract predicts one (ATOM's draft
// step 0 writing o rows 2..3 of 2 faults in guard mode, a known family that must stay known), and
// a KUT-fault when it predicts none.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "fuzz/kut_check.h"
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

}  // namespace
}  // namespace mlasim::fuzz
