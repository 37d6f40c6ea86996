// The regression corpus: tests/cases/*.json (scenario) + *.expect.json (verdict and every
// violation's identifying fields), and tests/cases/bad/ (broken scenarios, each with the exact
// field and reason expected). Also determinism: replaying any case twice gives the same bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <utility>

#include "sim/engine.h"
#include "sim/replay.h"
#include "sim/report.h"
#include "sim/scenario_json.h"

namespace mlasim::sim {
namespace {

namespace fs = std::filesystem;
const fs::path kCases = fs::path(MLASIM_SOURCE_DIR) / "tests" / "cases";

nlohmann::json ReadJson(const fs::path& p) {
  std::ifstream f(p);
  return nlohmann::json::parse(f);
}

std::vector<fs::path> CaseFiles() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(kCases)) {
    const std::string n = e.path().filename().string();
    if (e.is_regular_file() && n.size() > 5 && n.substr(n.size() - 5) == ".json" &&
        n.find(".expect.json") == std::string::npos)
      out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(CaseCorpus, EveryCaseReplaysToItsExpectedVerdictAndViolations) {
  const auto files = CaseFiles();
  ASSERT_GE(files.size(), 10u);
  const char* keys[] = {"kind",          "class",          "step",       "call",
                        "buffer",        "access",         "first_row",  "last_row",
                        "rows_past_end", "bytes_past_end", "consequence"};
  for (const fs::path& f : files) {
    SCOPED_TRACE(f.filename().string());
    auto s = LoadScenarioFile(f.string());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    auto r = Replay(*s);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const nlohmann::json got = ReportJson(*r);
    fs::path exp_path = f;
    exp_path.replace_extension(".expect.json");
    const nlohmann::json want = ReadJson(exp_path);
    EXPECT_EQ(got["verdict"], want["verdict"]);
    EXPECT_EQ(got["scheduled_tokens"], want["scheduled_tokens"]);
    EXPECT_EQ(got["running_tokens"], want["running_tokens"]);
    ASSERT_EQ(got["violations"].size(), want["violations"].size()) << got["violations"].dump(1);
    for (size_t i = 0; i < want["violations"].size(); ++i) {
      for (const char* k : keys)
        EXPECT_EQ(got["violations"][i][k], want["violations"][i][k])
            << "violation " << i << " " << k;
      // Keys an expectation states beyond the common ones (rows_before_start, ...) must match.
      for (auto it = want["violations"][i].begin(); it != want["violations"][i].end(); ++it)
        EXPECT_EQ(got["violations"][i].value(it.key(), nlohmann::json()), it.value())
            << "violation " << i << " " << it.key();
    }
  }
}

TEST(CaseCorpus, ClassesCovered) {
  // Every bug class the simulator can express has at least one case (bug-classes.md).
  std::set<std::string> classes;
  for (const fs::path& f : CaseFiles()) {
    fs::path e = f;
    e.replace_extension(".expect.json");
    const nlohmann::json expect = ReadJson(e);
    for (const auto& v : expect["violations"]) classes.insert(v["class"].get<std::string>());
  }
  for (const char* c : {"A", "D", "E", "F", "G", "H"})
    EXPECT_TRUE(classes.count(c)) << "class " << c;
}

TEST(CaseCorpus, ReplayIsDeterministic) {
  for (const fs::path& f : CaseFiles()) {
    auto s = LoadScenarioFile(f.string());
    ASSERT_TRUE(s.ok());
    auto a = Replay(*s);
    auto b = Replay(*s);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(ReportJson(*a).dump(), ReportJson(*b).dump()) << f;
    EXPECT_EQ(a->result.layout.dump(), b->result.layout.dump()) << f;
  }
}

TEST(CaseCorpus, ScenarioJsonRoundTrips) {
  for (const fs::path& f : CaseFiles()) {
    auto s = LoadScenarioFile(f.string());
    ASSERT_TRUE(s.ok());
    auto again = ParseScenario(ScenarioToJson(*s));
    ASSERT_TRUE(again.ok()) << f << ": " << again.status().ToString();
    EXPECT_EQ(ScenarioToJson(*again).dump(), ScenarioToJson(*s).dump());
  }
}

TEST(BadScenarios, EachGivesTheExactFieldAndReason) {
  const nlohmann::json manifest = ReadJson(kCases / "bad" / "expected_errors.json");
  ASSERT_GE(manifest.size(), 20u);
  for (auto it = manifest.begin(); it != manifest.end(); ++it) {
    SCOPED_TRACE(it.key());
    const fs::path p = kCases / "bad" / it.key();
    Status st;
    auto s = LoadScenarioFile(p.string());
    if (s.ok()) {
      auto t = ExpandStep(*s);
      ASSERT_FALSE(t.ok()) << "accepted a broken scenario";
      st = t.status();
    } else {
      st = s.status();
    }
    std::string want_field = it.value()["field"].get<std::string>();
    if (want_field.rfind("tests/", 0) == 0)
      want_field = (fs::path(MLASIM_SOURCE_DIR) / want_field).string();
    EXPECT_EQ(st.field(), want_field);
    EXPECT_NE(st.message().find(it.value()["message_contains"].get<std::string>()),
              std::string::npos)
        << st.message();
  }
}

TEST(ParseJsonStrict, NamesTheDuplicateKeyByItsPath) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"a": 1, "a": 2})", "duplicate key $.a "},
      {R"({"a": [1, {"b": 1, "c": 2, "b": 3}]})", "duplicate key $.a[1].b "},
      {R"([[1], [{"x": 1, "x": 1}]])", "duplicate key $[1][0].x "},
      {R"({"m": {"k": {"z": 0}, "k": 1}})", "duplicate key $.m.k "},
  };
  for (const auto& [text, want] : cases) {
    SCOPED_TRACE(text);
    auto j = ParseJsonStrict(text, "f");
    ASSERT_FALSE(j.ok());
    EXPECT_EQ(j.status().field(), "f");
    EXPECT_EQ(j.status().message().rfind(want, 0), 0u) << j.status().message();
  }
  // the same keys in different objects are fine; the value is the parsed document
  auto ok = ParseJsonStrict(R"({"a": {"k": 1}, "b": {"k": 2}, "c": [{"k": 3}, {"k": 4}]})", "f");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)["c"][1]["k"], 4);
  auto bad = ParseJsonStrict("{\"a\": ", "f");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("malformed JSON: ", 0), 0u) << bad.status().message();
}

}  // namespace
}  // namespace mlasim::sim
