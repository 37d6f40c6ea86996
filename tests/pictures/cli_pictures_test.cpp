// The picture flags in process: `replay --html`, `fuzz --html`, `plan --svg` write their file,
// leave stdout as it is without the flag, and a path that cannot be written exits 2 naming the
// flag before any work.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/pictures/picture_helpers.h"
#include "tools/mlasim/cli.h"

namespace mlasim::cli {
namespace {

namespace fs = std::filesystem;
using test::Count;

struct Out {
  int code;
  std::string out, err;
};

Out Cli(const std::vector<std::string>& args) {
  std::ostringstream o, e;
  const int code = RunMlasim(args, o, e);
  return {code, o.str(), e.str()};
}

fs::path Tmp(const std::string& name) {
  return fs::temp_directory_path() / ("mlasim_pictures_" + std::to_string(::getpid()) + "_" + name);
}

std::string Read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST(CliPictures, ReplayHtmlWritesThePageAndKeepsStdout) {
  const fs::path f = Tmp("seed.html");
  const Out r = Cli({"replay", "--builtin", "seed", "--html", f.string()});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_EQ(r.out, Cli({"replay", "--builtin", "seed"}).out);
  const std::string page = Read(f);
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(page.find("call 6 reads q rows 156..159"), std::string::npos);
  EXPECT_EQ(Count(page, "class=\"memory-map\""), 2);
  EXPECT_EQ(Count(page, "class=\"plan-timeline\""), 4);
  fs::remove(f);
}

TEST(CliPictures, ReplayHtmlToADirectoryExitsTwoBeforeTheReport) {
  const Out r = Cli({"replay", "--builtin", "seed", "--html", fs::temp_directory_path().string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("mlasim replay: error: --html: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("is a directory"), std::string::npos) << r.err;
}

TEST(CliPictures, ReplayHtmlIntoAMissingFolderExitsTwo) {
  const Out r = Cli({"replay", "--builtin", "seed", "--html", "/nonexistent-mlasim/x.html"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "mlasim replay: error: --html: cannot write /nonexistent-mlasim/x.html: the folder "
            "/nonexistent-mlasim does not exist\n");
}

TEST(CliPictures, EmptyFileNamesExitTwo) {
  Out r = Cli({"replay", "--builtin", "seed", "--html", ""});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "mlasim replay: error: --html: must not be empty\n");
  r = Cli({"fuzz", "--cases", "1", "--html", ""});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "mlasim fuzz: error: --html: must not be empty\n");
  r = Cli({"plan", "--kv-lens", "300", "--svg", ""});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "mlasim plan: error: --svg: must not be empty\n");
}

TEST(CliPictures, ReplayHtmlOnAFullDiskExitsTwo) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full on this system";
  const Out r = Cli({"replay", "--builtin", "seed", "--html", "/dev/full"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");  // the report waits for --html
  EXPECT_EQ(r.err,
            "mlasim replay: error: --html: cannot write /dev/full: no space left on the device "
            "(the disk is full)\n");
}

TEST(CliPictures, FuzzHtmlWritesTheCampaignSummary) {
  const fs::path f = Tmp("campaign.html");
  const Out r = Cli({"fuzz", "--cases", "30", "--seed", "7", "--small", "--html", f.string()});
  EXPECT_TRUE(r.code == 0 || r.code == 1) << r.err;
  const std::string page = Read(f);
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(page.find("campaign summary"), std::string::npos);
  EXPECT_NE(page.find("budget: 30 cases, no time limit"), std::string::npos);
  EXPECT_GT(Count(page, "class=\"cov\""), 10);
  if (r.code == 1) {
    EXPECT_GT(Count(page, "<circle class=\"finding\""), 0);
  }
  fs::remove(f);
}

TEST(CliPictures, FuzzHtmlUnwritableExitsTwoBeforeTheCampaign) {
  const Out r = Cli({"fuzz", "--cases", "30", "--html", "/nonexistent-mlasim/c.html"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "mlasim fuzz: error: --html: cannot write /nonexistent-mlasim/c.html: the folder "
            "/nonexistent-mlasim does not exist\n");
}

TEST(CliPictures, FuzzHtmlIsACampaignFlag) {
  Out r = Cli({"fuzz", "--reproduce", "5", "--size", "10", "--html", Tmp("r.html").string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--html: not used with --reproduce"), std::string::npos) << r.err;
  r = Cli({"fuzz", "--html", Tmp("m.html").string(), "merge", fs::temp_directory_path().string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--html: not used with merge"), std::string::npos) << r.err;
}

TEST(CliPictures, PlanSvgWritesTheTimeline) {
  const fs::path f = Tmp("plan.svg");
  const std::vector<std::string> args = {"plan",    "--kv-lens", "300,40,700", "--qlen", "1",
                                         "--heads", "16",        "--clusters", "8"};
  std::vector<std::string> with = args;
  with.insert(with.end(), {"--svg", f.string()});
  const Out r = Cli(with);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, Cli(args).out);
  const std::string svg = Read(f);
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_EQ(test::WorkRects(svg).size(), 6u);
  EXPECT_NE(svg.find("mlasim plan: 3 requests on 8 clusters (gfx942, revision 2026-08)"),
            std::string::npos);
  fs::remove(f);
}

TEST(CliPictures, PlanSvgUnwritableExitsTwo) {
  const Out r = Cli({"plan", "--kv-lens", "300", "--svg", "/nonexistent-mlasim/p.svg"});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "mlasim plan: error: --svg: cannot write /nonexistent-mlasim/p.svg: the folder "
            "/nonexistent-mlasim does not exist\n");
}

TEST(CliPictures, PlanSvgWithCheckGoldenIsRefused) {
  const Out r = Cli({"plan", "--check-golden", "x.jsonl", "--svg", Tmp("g.svg").string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--check-golden: cannot be combined with --svg"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace mlasim::cli
