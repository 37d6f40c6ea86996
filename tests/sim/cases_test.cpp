// The regression corpus (docs/cases.md): tests/cases/*.json (scenario) + *.expect.json (verdict
// and every violation's identifying fields), and tests/cases/bad/ (broken scenarios, each with
// the exact field and reason expected in bad/expected_errors.json). Value-parameterised: every
// case file is its own test (CaseFile.Replays/<name>, BadScenario.Refused/<name>), and so its own
// ctest test through gtest_discover_tests; a new file becomes a new test at the next build.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
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

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Files of `dir` ending in .json, other than *.expect.json and the files in `except`, sorted.
std::vector<fs::path> JsonFiles(const fs::path& dir, const std::set<std::string>& except = {}) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (e.is_regular_file() && EndsWith(n, ".json") && !EndsWith(n, ".expect.json") &&
        !except.count(n))
      out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<fs::path> CaseFiles() {
  return JsonFiles(kCases);
}

std::vector<fs::path> BadFiles() {
  return JsonFiles(kCases / "bad", {"expected_errors.json"});
}

// A gtest name from a file name: "A-seed-b35.json" -> "A_seed_b35".
std::string TestName(const ::testing::TestParamInfo<fs::path>& info) {
  std::string n = info.param.stem().string();
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

// The corpus itself: enough cases, every class the simulator expresses, one expectation per case.
TEST(CaseCorpus, HasCasesOfEveryExpressibleClass) {
  const auto files = CaseFiles();
  ASSERT_GE(files.size(), 10u) << "regression corpus missing or emptied: " << kCases;
  std::set<std::string> classes;
  for (const fs::path& f : files) {
    fs::path e = f;
    e.replace_extension(".expect.json");
    ASSERT_TRUE(fs::exists(e)) << f.filename() << " has no " << e.filename();
    const nlohmann::json expect = ReadJson(e);
    for (const auto& v : expect["violations"]) classes.insert(v["class"].get<std::string>());
  }
  for (const char* c : {"A", "D", "E", "F", "G", "H"})
    EXPECT_TRUE(classes.count(c)) << "class " << c;
}

class CaseFile : public ::testing::TestWithParam<fs::path> {};

// Replays to its expected verdict and violations; replaying twice gives the same bytes; the
// scenario survives a JSON round trip.
TEST_P(CaseFile, Replays) {
  const fs::path& f = GetParam();
  fs::path exp_path = f;
  exp_path.replace_extension(".expect.json");
  ASSERT_TRUE(fs::exists(exp_path)) << "missing " << exp_path << " (docs/cases.md)";
  auto s = LoadScenarioFile(f.string());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto r = Replay(*s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const nlohmann::json got = ReportJson(*r);
  const nlohmann::json want = ReadJson(exp_path);
  EXPECT_EQ(got["verdict"], want["verdict"]);
  EXPECT_EQ(got["scheduled_tokens"], want["scheduled_tokens"]);
  EXPECT_EQ(got["running_tokens"], want["running_tokens"]);
  const char* keys[] = {"kind",          "class",          "step",       "call",
                        "buffer",        "access",         "first_row",  "last_row",
                        "rows_past_end", "bytes_past_end", "consequence"};
  ASSERT_EQ(got["violations"].size(), want["violations"].size()) << got["violations"].dump(1);
  for (size_t i = 0; i < want["violations"].size(); ++i) {
    for (const char* k : keys)
      EXPECT_EQ(got["violations"][i][k], want["violations"][i][k]) << "violation " << i << " " << k;
    // Keys an expectation states beyond the common ones (rows_before_start, ...) must match.
    for (auto it = want["violations"][i].begin(); it != want["violations"][i].end(); ++it)
      EXPECT_EQ(got["violations"][i].value(it.key(), nlohmann::json()), it.value())
          << "violation " << i << " " << it.key();
  }

  auto again = Replay(*s);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(ReportJson(*again).dump(), got.dump()) << "replay is not deterministic";
  EXPECT_EQ(again->result.layout.dump(), r->result.layout.dump()) << "layout differs";

  auto parsed = ParseScenario(ScenarioToJson(*s));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(ScenarioToJson(*parsed).dump(), ScenarioToJson(*s).dump());
}

INSTANTIATE_TEST_SUITE_P(Cases, CaseFile, ::testing::ValuesIn(CaseFiles()), TestName);

// bad/expected_errors.json lists exactly the files of bad/: a file without an entry would never
// be checked, an entry without a file checks nothing.
TEST(BadScenarios, ManifestListsEveryFile) {
  const nlohmann::json manifest = ReadJson(kCases / "bad" / "expected_errors.json");
  std::set<std::string> listed, present;
  for (auto it = manifest.begin(); it != manifest.end(); ++it) listed.insert(it.key());
  for (const fs::path& f : BadFiles()) present.insert(f.filename().string());
  EXPECT_GE(present.size(), 20u);
  EXPECT_EQ(listed, present);
}

class BadScenario : public ::testing::TestWithParam<fs::path> {};

// Refused with the exact field and a message containing the expected reason.
TEST_P(BadScenario, Refused) {
  const fs::path& p = GetParam();
  const nlohmann::json manifest = ReadJson(kCases / "bad" / "expected_errors.json");
  const std::string name = p.filename().string();
  ASSERT_TRUE(manifest.contains(name)) << name << " has no entry in bad/expected_errors.json";
  const nlohmann::json& want = manifest.at(name);
  Status st;
  auto s = LoadScenarioFile(p.string());
  if (s.ok()) {
    auto t = ExpandStep(*s);
    ASSERT_FALSE(t.ok()) << "accepted a broken scenario";
    st = t.status();
  } else {
    st = s.status();
  }
  std::string want_field = want["field"].get<std::string>();
  if (want_field.rfind("tests/", 0) == 0)
    want_field = (fs::path(MLASIM_SOURCE_DIR) / want_field).string();
  else if (!s.ok())  // a scenario field refused while loading the file: the path leads it
    want_field = p.string() + ": " + want_field;
  EXPECT_EQ(st.field(), want_field);
  EXPECT_NE(st.message().find(want["message_contains"].get<std::string>()), std::string::npos)
      << st.message();
}

INSTANTIATE_TEST_SUITE_P(Bad, BadScenario, ::testing::ValuesIn(BadFiles()), TestName);

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
