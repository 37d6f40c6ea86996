// The libFuzzer harnesses' seed corpora (tests/fuzz/corpus/<harness>/, docs/reliability.md) stay
// valid inputs of their formats as the formats change: a seed that no longer parses would start
// its harness from an error path. Each JSON seed goes through the reader its harness fuzzes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz/findings.h"
#include "fuzz/kut_library.h"
#include "fuzz/progress.h"
#include "sim/call_table.h"
#include "sim/contract.h"
#include "sim/json_input.h"
#include "tools/io/golden.h"
#include "tools/io/request_json.h"

namespace mlasim {
namespace {

namespace fs = std::filesystem;

// The seeds of one harness, by path; at least one. `regression-*` files reproduce fixed bugs
// (malformed on purpose) and are left out unless asked for.
std::vector<fs::path> Seeds(const std::string& harness, bool regressions = false) {
  std::vector<fs::path> out;
  const fs::path dir = fs::path(MLASIM_SOURCE_DIR) / "tests/fuzz/corpus" / harness;
  for (const auto& e : fs::directory_iterator(dir))
    if (regressions || e.path().filename().string().rfind("regression-", 0) != 0)
      out.push_back(e.path());
  std::sort(out.begin(), out.end());
  EXPECT_FALSE(out.empty()) << dir;
  return out;
}

std::string Text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(SeedCorpus, EveryHarnessHasSeedsWithinTheSmokeRunsMaxLen) {
  int harnesses = 0;
  for (const auto& h : fs::directory_iterator(fs::path(MLASIM_SOURCE_DIR) / "fuzz/harness")) {
    std::string name = h.path().filename().string();
    const std::string suffix = "_fuzz.cpp";
    ASSERT_GT(name.size(), suffix.size());
    name = name.substr(0, name.size() - suffix.size());
    for (const fs::path& p : Seeds(name, true))
      EXPECT_LE(fs::file_size(p), 8192u) << p;  // -max_len
    ++harnesses;
  }
  EXPECT_GE(harnesses, 12);
}

TEST(SeedCorpus, CallTableSeedsParse) {
  for (const fs::path& p : Seeds("call_table")) {
    auto doc = sim::ParseJsonStrict(Text(p), p.string());
    ASSERT_TRUE(doc.ok()) << doc.status().ToString();
    auto t = sim::ParseCallTable(*doc, p.string());
    EXPECT_TRUE(t.ok()) << t.status().ToString();
  }
}

TEST(SeedCorpus, GoldenRecordSeedsMatch) {
  for (const fs::path& p : Seeds("golden_record")) {
    std::string line = Text(p);
    while (!line.empty() && line.back() == '\n') line.pop_back();
    io::GoldenSummary sum;
    int mismatches = 0;
    const Status st = io::CheckGoldenLine(line, p.string() + ":1", &sum,
                                          [&](const io::GoldenMismatch&) { ++mismatches; });
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(sum.records, 1) << p;
    EXPECT_EQ(sum.matched, 1) << p;
    EXPECT_EQ(mismatches, 0) << p;
  }
}

TEST(SeedCorpus, ProgressFileSeedsParse) {
  for (const fs::path& p : Seeds("progress_file")) {
    auto r = fuzz::ParseProgressText(Text(p), p.string(), "--resume");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
  }
}

TEST(SeedCorpus, FindingFileSeedsAreFindings) {
  for (const fs::path& p : Seeds("finding_file")) {
    auto r = fuzz::ParseFindingText(Text(p), p.string());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r->has_value()) << p;
  }
}

TEST(SeedCorpus, KutDescriptionWorkerLineSeedsParse) {
  int lines = 0;
  for (const fs::path& p : Seeds("kut_description")) {
    const std::string t = Text(p);
    ASSERT_FALSE(t.empty());
    if (t[0] % 2 == 0) continue;  // the info form (fuzz/harness/kut_description_fuzz.cpp)
    auto doc = sim::ParseJsonStrict(t.substr(1), p.string());
    ASSERT_TRUE(doc.ok()) << doc.status().ToString();
    auto d = fuzz::KutDescription::FromJson(*doc);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    ++lines;
  }
  EXPECT_GE(lines, 1);
}

TEST(SeedCorpus, PlanRequestAndContractSeedsParse) {
  for (const fs::path& p : Seeds("plan_request")) {
    auto doc = sim::ParseJsonStrict(Text(p), p.string());
    ASSERT_TRUE(doc.ok()) << doc.status().ToString();
    EXPECT_TRUE(io::ParsePlanRequest(*doc, "input", true).ok()) << p;
  }
  for (const fs::path& p : Seeds("contract_json")) {
    auto doc = sim::ParseJsonStrict(Text(p), p.string());
    ASSERT_TRUE(doc.ok()) << doc.status().ToString();
    auto c = sim::ParseContract(*doc, p.string());
    EXPECT_TRUE(c.ok()) << c.status().ToString();
  }
}

}  // namespace
}  // namespace mlasim
