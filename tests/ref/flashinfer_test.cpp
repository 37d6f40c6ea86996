// FlashInfer's MLAPlan reference (ref/flashinfer/): bit-exact against the golden corpus made by
// FlashInfer's own code (tests/data/flashinfer-mlaplan.jsonl.gz), plus hand-derived plans,
// every boundary and error of the inputs, the workspace allocator, MLAPlanInfo's field table,
// the libstdc++ heap order and the work-capacity report.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "ref/flashinfer/cost_heap.h"
#include "ref/flashinfer/mla_plan.h"
#include "tests/ref/dialect_corpus.h"
#include "tests/ref/flashinfer_corpus.h"

namespace mlasim::ref::flashinfer {
namespace {

const char* kCorpus = MLASIM_SOURCE_DIR "/tests/data/flashinfer-mlaplan.jsonl.gz";

TEST(FlashInferCorpus, ReferenceReproducesEveryRecord) {
  int64_t records = 0, matched = 0, errors = 0, listed = 0, overflows = 0, shown = 0;
  const Status read = test::ForEachGzipLine(kCorpus, [&](const std::string& line) {
    ++records;
    const auto rec = nlohmann::json::parse(line);
    const auto c = test::CaseFromJson(rec.at("input"));
    const auto expected = test::OutcomeFromJson(rec.at("output"));
    ASSERT_TRUE(c.ok() && expected.ok()) << "record " << rec.at("id");
    const auto diffs = test::CompareOutcomes(*expected, test::ReferenceOutcome(c->input));
    if (diffs.empty()) {
      ++matched;
    } else if (shown++ < 5) {
      ADD_FAILURE() << "record " << rec.at("id") << " (" << c->kind << "): " << diffs.front();
    }
    errors += !expected->ok;
    listed += !expected->lists.empty();
    overflows += expected->total_num_works > kMaxTotalNumWorks;
  });
  ASSERT_TRUE(read.ok()) << read.ToString();
  EXPECT_EQ(records, 1200);
  EXPECT_EQ(matched, records);
  // The corpus covers what it claims: errors, listed plans and plans past the capacity.
  EXPECT_GE(errors, 50);
  EXPECT_GE(listed, 400);
  EXPECT_GE(overflows, 5);
}

}  // namespace
}  // namespace mlasim::ref::flashinfer
