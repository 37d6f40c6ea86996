// Round-1 reports stay byte-identical (issue "A model as wide as the bugs", §1): every file of
// tests/data/round1-reports/ is replayed through the CLI in process and compared byte for byte.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tools/mlasim/cli.h"

namespace mlasim {
namespace {

namespace fs = std::filesystem;
const fs::path kDir = fs::path(MLASIM_SOURCE_DIR) / "tests" / "data" / "round1-reports";

std::string Slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string part; std::getline(ss, part, sep);) out.push_back(part);
  return out;
}

// The replay arguments that produced a report file, from its name.
std::vector<std::string> ArgsFor(const std::string& stem) {
  const std::vector<std::string> p = Split(stem, '.');
  if (p[0] == "case") return {"replay", (fs::path(MLASIM_SOURCE_DIR) / "tests/cases" /
                                         (p[1] + ".json")).string()};
  if (p[0] == "mutant")
    return {"replay", "--builtin", p[2], "--profile", "atom-2026-11", "--mutant", p[1]};
  return {"replay", "--builtin", p[0], "--profile", p[1], "--kernel", p[2]};
}

struct Report {
  fs::path file;
  std::string stem;  // name without the .json / .txt / .layout.json suffix
  std::string kind;  // json | txt | layout
};

std::vector<Report> Reports() {
  std::vector<Report> out;
  for (const auto& e : fs::directory_iterator(kDir)) {
    std::string n = e.path().filename().string();
    auto ends = [&](const std::string& x) {
      return n.size() > x.size() && n.compare(n.size() - x.size(), x.size(), x) == 0;
    };
    if (ends(".layout.json"))
      out.push_back({e.path(), n.substr(0, n.size() - 12), "layout"});
    else if (ends(".json"))
      out.push_back({e.path(), n.substr(0, n.size() - 5), "json"});
    else if (ends(".txt"))
      out.push_back({e.path(), n.substr(0, n.size() - 4), "txt"});
  }
  std::sort(out.begin(), out.end(), [](const Report& a, const Report& b) {
    return a.file.filename() < b.file.filename();
  });
  return out;
}

TEST(Round1Reports, EveryFrozenReportIsReproducedByteForByte) {
  const std::vector<Report> reports = Reports();
  ASSERT_EQ(reports.size(), 137u) << "tests/data/round1-reports/ lost or gained files";
  const fs::path tmp = fs::temp_directory_path() / "mlasim-round1-layout.json";
  for (const Report& r : reports) {
    SCOPED_TRACE(r.file.filename().string());
    std::vector<std::string> args = ArgsFor(r.stem);
    if (r.kind == "json") args.push_back("--json");
    if (r.kind == "layout") args.insert(args.end(), {"--json", "--layout-out", tmp.string()});
    std::ostringstream out, err;
    const int code = cli::RunMlasim(args, out, err);
    ASSERT_TRUE(code == 0 || code == 1) << err.str();
    const std::string got = r.kind == "layout" ? Slurp(tmp) : out.str();
    EXPECT_EQ(got, Slurp(r.file));
  }
  fs::remove(tmp);
}

}  // namespace
}  // namespace mlasim
