// The golden corpora produced by running aiter's own planner and decode_update code
// (../shared/golden/README.md), read in place. Every record must match field by field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "ref/decode_update.h"
#include "ref/plan_check.h"
#include "ref/planner.h"
#include "tools/io/golden.h"
#include "tools/io/request_json.h"

namespace mlasim::io {
namespace {

std::string GoldenPath(const char* name) {
  return std::string(MLASIM_GOLDEN_DIR) + "/" + name;
}

void ExpectCorpusMatches(const char* name, int64_t min_records) {
  const std::string path = GoldenPath(name);
  if (!std::filesystem::exists(path))
    GTEST_SKIP() << "golden corpus not found at " << path
                 << " (it lives in ../shared/golden beside the checkout)";
  int64_t shown = 0;
  auto summary = CheckGoldenFile(path, [&](const GoldenMismatch& m) {
    if (shown++ < 10)
      ADD_FAILURE() << "record " << m.id << ": " << m.buffer << "[" << m.index << "]: " << m.detail;
  });
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_GE(summary->records, min_records);
  EXPECT_EQ(summary->matched, summary->records);
}

TEST(GoldenCorpus, PlannerMatchesAiterOnEveryRecord) {
  ExpectCorpusMatches("aiter-v12-dev.jsonl", 1500);
}

TEST(GoldenCorpus, DecodeUpdateMatchesAiterOnEveryRecord) {
  ExpectCorpusMatches("aiter-decode-update-dev.jsonl", 403);
}

// Runs one decode_update record and returns the checker's report on the updated plan.
ref::PlanCheckReport CheckUpdatedRecord(const nlohmann::json& rec) {
  auto req = ParsePlanRequest(rec.at("input"), "input", true);
  EXPECT_TRUE(req.ok());
  auto plan = ref::PlanMlaMetadata(*req);
  ref::PlanRequest served;
  EXPECT_TRUE(ApplyUpdateChain(rec, *req, *plan, &served).ok());
  return ref::CheckPlan(served, *plan);
}

TEST(GoldenCorpus, CheckerRejectsEveryFoldMismatchUpdateAndNamesTheCause) {
  const std::string path = GoldenPath("aiter-decode-update-dev.jsonl");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "golden corpus not found at " << path;
  std::ifstream f(path);
  std::string line;
  int64_t mismatches = 0;
  while (std::getline(f, line)) {
    const auto rec = nlohmann::json::parse(line);
    if (!rec.at("derived").value("fold_mismatch", false)) continue;
    ++mismatches;
    const ref::PlanCheckReport report = CheckUpdatedRecord(rec);
    EXPECT_FALSE(report.ok()) << "record " << rec.at("id");
    EXPECT_GE(report.count(ref::PlanDiag::kUpdateFoldMismatch), 1) << "record " << rec.at("id");
  }
  EXPECT_EQ(mismatches, 91);
}

TEST(GoldenCorpus, CheckerAcceptsEveryGoldenPlan) {
  const std::string path = GoldenPath("aiter-v12-dev.jsonl");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "golden corpus not found at " << path;
  std::ifstream f(path);
  std::string line;
  int64_t plans = 0, with_input_reads = 0;
  while (std::getline(f, line)) {
    const auto rec = nlohmann::json::parse(line);
    if (rec.contains("error")) continue;
    auto req = ParsePlanRequest(rec.at("input"), "input", true);
    ASSERT_TRUE(req.ok());
    auto plan = ref::PlanMlaMetadata(*req);
    ASSERT_TRUE(plan.ok());
    ++plans;
    const ref::PlanCheckReport report = ref::CheckPlan(*req, *plan);
    // The only errors aiter's own plans show are its reads of kv_last_page_lens past the end
    // (folded heads, paged KV): the corpus records those values as null.
    for (const auto& d : report.diagnostics) {
      if (d.severity == ref::Severity::kError) {
        EXPECT_EQ(d.code, ref::PlanDiag::kInputReadOutOfRange)
            << "record " << rec.at("id") << ": " << d.message;
      }
    }
    if (!plan->input_violations.empty()) ++with_input_reads;
  }
  EXPECT_EQ(plans, 1476);
  EXPECT_EQ(with_input_reads, 159);  // the README's count of records with null kv_offset
}

}  // namespace
}  // namespace mlasim::io
