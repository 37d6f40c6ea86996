// FlashInfer's own MLAPlan (compiled from -DMLASIM_FLASHINFER_DIR through the host shim)
// against the reference on fresh random inputs: same plan_info, same int-workspace image
// (overflowing lists included), same work and merge lists, same errors. Part of `make verify`
// when ../shared/third_party/flashinfer.tar.xz is there.
#include <gtest/gtest.h>

#include "ref/flashinfer/check.h"
#include "tests/ref/flashinfer_corpus.h"
#include "tests/third_party/flashinfer_shim.h"

namespace mlasim::test {
namespace {

namespace fi = ref::flashinfer;

constexpr uint64_t kLiveSeed = 20261202;  // not the corpus seed: inputs the corpus never saw

FlashInferOutcome FlashInferOutcomeOf(const fi::MLAPlanInput& in) {
  const auto run = third_party::RunFlashInferMLAPlan(in, ImageSlackBytes(in));
  if (!run.ok) {
    FlashInferOutcome o;
    o.error = run.error;
    o.error_field = ErrorFieldOfFlashInferMessage(run.error);
    return o;
  }
  return OutcomeFromImage(in, run.plan_info, run.page_locked, run.copied_bytes);
}

TEST(FlashInferLive, ReferenceReproducesMLAPlanOnFreshRandomInputs) {
  int64_t compared = 0, errors = 0, overflows = 0;
  for (int64_t index = 0; index < 400; ++index) {
    const FlashInferCase c = RandomFlashInferCase(kLiveSeed, index);
    const FlashInferOutcome theirs = FlashInferOutcomeOf(c.input);
    const FlashInferOutcome ours = ReferenceOutcome(c.input);
    const auto diffs = CompareOutcomes(theirs, ours);
    ASSERT_TRUE(diffs.empty()) << "case " << index << " (" << c.kind << "): " << diffs.front()
                               << "\ninput: " << CaseToJson(c).dump();
    ++compared;
    errors += !theirs.ok;
    overflows += theirs.total_num_works > fi::kMaxTotalNumWorks;
  }
  EXPECT_EQ(compared, 400);
  EXPECT_GE(errors, 10);    // the distribution's error cases did run
  EXPECT_GE(overflows, 2);  // and some batches past the 16384-work capacity
}

TEST(FlashInferLive, MLAPlanQueriesTheDeviceOnceAndCopiesTheAllocatedPrefix) {
  const FlashInferCase c = RandomFlashInferCase(kLiveSeed, 0);
  const auto run = third_party::RunFlashInferMLAPlan(c.input, ImageSlackBytes(c.input));
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(run.device_queries, 1);
  const auto ours = fi::MLAPlan(c.input);
  ASSERT_TRUE(ours.ok());
  EXPECT_EQ(run.copied_bytes, ours->int_allocated_bytes);
}

TEST(FlashInferLive, CheckerAcceptsEveryPlanFlashInferMakesWithinCapacity) {
  for (int64_t index = 0; index < 200; ++index) {
    const FlashInferCase c = RandomFlashInferCase(kLiveSeed + 1, index);
    const auto plan = fi::MLAPlan(c.input);
    if (!plan.ok() || !plan->overflows.empty()) continue;
    const auto report = fi::CheckMLAPlan(c.input, *plan, {c.page_size});
    EXPECT_TRUE(report.ok()) << "case " << index << ": " << report.ToString();
  }
}

}  // namespace
}  // namespace mlasim::test
