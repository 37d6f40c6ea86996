// The golden corpora produced by running aiter's own planner and decode_update code
// (docs/golden.md), read from the repository (tests/golden/*.jsonl.xz). Every record must match
// field by field. A missing corpus is a failure, never a skip.
#include <gtest/gtest.h>

#include <filesystem>

#include "ref/decode_update.h"
#include "ref/plan_check.h"
#include "ref/planner.h"
#include "tools/io/golden.h"
#include "tools/io/input_file.h"
#include "tools/io/request_json.h"

namespace mlasim::io {
namespace {

std::string GoldenPath(const char* name) {
  return std::string(MLASIM_GOLDEN_DIR) + "/" + name;
}

// Calls `each` with every parsed record of a corpus; fails the test (loudly) when the file is
// missing, unreadable or its xz data is damaged.
template <typename Fn>
void ForEachRecord(const char* name, Fn each) {
  const std::string path = GoldenPath(name);
  ASSERT_TRUE(std::filesystem::exists(path))
      << "golden corpus missing: " << path << " (it is tracked in git: tests/golden/)";
  auto in = InputFile::Open(path);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  std::string line;
  while (std::getline((*in)->stream(), line)) {
    if (!line.empty()) each(nlohmann::json::parse(line));
  }
  ASSERT_TRUE((*in)->status().ok()) << (*in)->status().ToString();
}

void ExpectCorpusMatches(const char* name, int64_t records) {
  const std::string path = GoldenPath(name);
  ASSERT_TRUE(std::filesystem::exists(path))
      << "golden corpus missing: " << path << " (it is tracked in git: tests/golden/)";
  int64_t shown = 0;
  auto summary = CheckGoldenFile(path, [&](const GoldenMismatch& m) {
    if (shown++ < 10)
      ADD_FAILURE() << "record " << m.id << ": " << m.buffer << "[" << m.index << "]: " << m.detail;
  });
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->records, records);
  EXPECT_EQ(summary->matched, summary->records);
}

TEST(GoldenCorpus, PlannerMatchesAiterOnEveryRecord) {
  ExpectCorpusMatches("aiter-v12-dev.jsonl.xz", 1500);
}

TEST(GoldenCorpus, DecodeUpdateMatchesAiterOnEveryRecord) {
  ExpectCorpusMatches("aiter-decode-update-dev.jsonl.xz", 403);
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
  int64_t mismatches = 0;
  ForEachRecord("aiter-decode-update-dev.jsonl.xz", [&](const nlohmann::json& rec) {
    if (!rec.at("derived").value("fold_mismatch", false)) return;
    ++mismatches;
    const ref::PlanCheckReport report = CheckUpdatedRecord(rec);
    EXPECT_FALSE(report.ok()) << "record " << rec.at("id");
    EXPECT_GE(report.count(ref::PlanDiag::kUpdateFoldMismatch), 1) << "record " << rec.at("id");
  });
  EXPECT_EQ(mismatches, 91);
}

TEST(GoldenCorpus, CheckerAcceptsEveryGoldenPlan) {
  int64_t plans = 0, with_input_reads = 0;
  ForEachRecord("aiter-v12-dev.jsonl.xz", [&](const nlohmann::json& rec) {
    if (rec.contains("error")) return;
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
  });
  EXPECT_EQ(plans, 1476);
  EXPECT_EQ(with_input_reads, 159);  // the README's count of records with null kv_offset
}

}  // namespace
}  // namespace mlasim::io
