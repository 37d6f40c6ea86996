// Every kind of page rendered by a real browser: headless Chromium (Debian's `chromium`,
// scripts/install-deps.sh) loads the page from a file, writes the DOM after rendering
// (--dump-dom) and a screenshot (--screenshot), and logs the page's console to stderr
// (--enable-logging=stderr --v=0: one `...:CONSOLE...` line per message). The pages hold no
// script, so every console message is an error the browser found in the page itself (an SVG
// attribute it cannot parse, say). Checks per page: exit 0, the SVG present in the DOM, the
// expected labels present, no console message, a PNG screenshot of the window's size with more
// than one colour and a visible share of non-background pixels. Two pages that must fail (a bad
// SVG attribute, a blank page) prove the checks can fail. Without Chromium these tests FAIL:
// `make verify` installs it. MLASIM_CHROMIUM overrides the browser; MLASIM_SCREENSHOT_DIR keeps
// the screenshots (docs/pictures.md).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <png.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "sim/html.h"
#include "sim/replay.h"
#include "sim/report_html.h"
#include "tests/pictures/picture_helpers.h"
#include "tools/mlasim/cli.h"

extern char** environ;

namespace mlasim {
namespace {

namespace fs = std::filesystem;

std::string FindChromium() {
  if (const char* env = std::getenv("MLASIM_CHROMIUM"); env && *env) return env;
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin");
  for (std::string dir; std::getline(dirs, dir, ':');)
    for (const char* name : {"chromium", "chromium-browser"})
      if (!dir.empty() && ::access((fs::path(dir) / name).c_str(), X_OK) == 0)
        return (fs::path(dir) / name).string();
  return "";
}

struct Screenshot {
  std::string error;  // why it could not be read
  int width = 0, height = 0;
  int64_t colours = 0;    // distinct RGB values (counted up to 4096)
  double foreground = 0;  // share of pixels that differ from the top-left one
};

Screenshot ReadPng(const fs::path& p) {
  Screenshot s;
  png_image img{};
  img.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&img, p.c_str())) {
    s.error = std::string("not a PNG: ") + img.message;
    return s;
  }
  img.format = PNG_FORMAT_RGB;
  std::vector<uint8_t> px(PNG_IMAGE_SIZE(img));
  if (!png_image_finish_read(&img, nullptr, px.data(), 0, nullptr)) {
    s.error = std::string("cannot decode: ") + img.message;
    return s;
  }
  s.width = static_cast<int>(img.width);
  s.height = static_cast<int>(img.height);
  std::set<uint32_t> seen;
  int64_t differ = 0;
  const uint32_t bg = (uint32_t{px[0]} << 16) | (uint32_t{px[1]} << 8) | px[2];
  for (size_t i = 0; i + 2 < px.size(); i += 3) {
    const uint32_t c = (uint32_t{px[i]} << 16) | (uint32_t{px[i + 1]} << 8) | px[i + 2];
    if (seen.size() < 4096) seen.insert(c);
    differ += c != bg;
  }
  s.colours = static_cast<int64_t>(seen.size());
  s.foreground = static_cast<double>(differ) / static_cast<double>(px.size() / 3);
  return s;
}

struct Rendered {
  int status = -1;  // chromium's exit status (timeout: 124)
  std::string dom, log;
  std::vector<std::string> console;  // the page's console messages
  Screenshot png;
};

std::string Slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

class Browser : public ::testing::Test {
 protected:
  void SetUp() override {
    chromium_ = FindChromium();
    ASSERT_TRUE(!chromium_.empty() && ::access(chromium_.c_str(), X_OK) == 0)
        << "headless Chromium is required for the picture tests and was not found ("
        << (chromium_.empty() ? "no chromium on PATH" : chromium_ + " is not executable")
        << "): install it with scripts/install-deps.sh (Debian package `chromium`) or set "
           "MLASIM_CHROMIUM";
    dir_ = fs::temp_directory_path() /
           ("mlasim_browser_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Loads `page` (a file under dir_) in a fresh profile.
  Rendered Render(const std::string& page, int width, int height) {
    const fs::path png = dir_ / (page + ".png"), profile = dir_ / "profile";
    fs::remove_all(profile);
    std::vector<std::string> args = {"timeout",
                                     "120",
                                     chromium_,
                                     "--headless",
                                     "--no-sandbox",
                                     "--disable-gpu",
                                     "--disable-quic",
                                     "--no-first-run",
                                     "--disable-background-networking",
                                     "--disable-component-update",
                                     "--disable-sync",
                                     "--hide-scrollbars",
                                     "--user-data-dir=" + profile.string(),
                                     "--enable-logging=stderr",
                                     "--v=0",
                                     fmt("--window-size=", width, height),
                                     "--screenshot=" + png.string(),
                                     "--dump-dom",
                                     "file://" + (dir_ / page).string()};
    Rendered r;
    r.status = Spawn(args, dir_ / "dom.txt", dir_ / "log.txt");
    r.dom = Slurp(dir_ / "dom.txt");
    r.log = Slurp(dir_ / "log.txt");
    std::istringstream lines(r.log);
    for (std::string l; std::getline(lines, l);)
      if (l.find(":CONSOLE") != std::string::npos) r.console.push_back(l);
    r.png = ReadPng(png);
    if (const char* keep = std::getenv("MLASIM_SCREENSHOT_DIR"); keep && *keep && fs::exists(png)) {
      std::error_code ec;
      fs::copy_file(png, fs::path(keep) / (page + ".png"), fs::copy_options::overwrite_existing,
                    ec);
      EXPECT_FALSE(ec) << "MLASIM_SCREENSHOT_DIR: cannot copy into " << keep << ": "
                       << ec.message();
    }
    return r;
  }

  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }

  // Runs `mlasim` in process; the output file argument is `{}` in `args`.
  void Mlasim(std::vector<std::string> args, const std::string& out_name) {
    for (std::string& a : args)
      if (a == "{}") a = (dir_ / out_name).string();
    std::ostringstream o, e;
    const int code = cli::RunMlasim(args, o, e);
    ASSERT_TRUE(code == 0 || code == 1) << e.str();
    ASSERT_TRUE(fs::exists(dir_ / out_name));
  }

  // Every check of one page.
  void ExpectGoodPage(const Rendered& r, int width, int height,
                      const std::vector<std::string>& labels) {
    EXPECT_EQ(r.status, 0) << r.log;
    EXPECT_NE(r.dom.find("<svg"), std::string::npos) << "no SVG in the rendered DOM";
    for (const std::string& l : labels)
      EXPECT_NE(r.dom.find(l), std::string::npos) << "label missing: " << l;
    EXPECT_TRUE(r.console.empty()) << "console: " << r.console.front();
    ASSERT_EQ(r.png.error, "");
    EXPECT_EQ(r.png.width, width);
    EXPECT_EQ(r.png.height, height);
    EXPECT_GT(r.png.colours, 1);
    EXPECT_GT(r.png.foreground, 0.01);
  }

 private:
  static std::string fmt(const char* flag, int w, int h) {
    return std::string(flag) + std::to_string(w) + "," + std::to_string(h);
  }
  static int Spawn(const std::vector<std::string>& args, const fs::path& out, const fs::path& err) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    pid_t pid = -1;
    const int rc = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return -1;
    int st = 0;
    if (waitpid(pid, &st, 0) != pid) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }

  std::string chromium_;
  fs::path dir_;
};

TEST_F(Browser, ReplayOfTheFoundingCase) {
  Mlasim({"replay", "--builtin", "seed", "--html", "{}"}, "replay-seed.html");
  const Rendered r = Render("replay-seed.html", 1400, 1500);
  ExpectGoodPage(r, 1400, 1500,
                 {"verdict: 2 violation(s)", "q rows 156..159", "o rows 156..159",
                  "378 work items on 256 clusters", "fault 0x7f100015f000", "unmapped (guard)",
                  "plan-timeline", "memory-map"});
}

TEST_F(Browser, CleanReplay) {
  Mlasim({"replay", "--builtin", "seed", "--profile", "atom-2026-11", "--html", "{}"},
         "replay-clean.html");
  const Rendered r = Render("replay-clean.html", 1400, 1100);
  ExpectGoodPage(r, 1400, 1100,
                 {"verdict: clean", "plan snapshot 1: sparse_mtp_plan",
                  "374 work items on 256 clusters", "No out-of-bounds access"});
}

TEST_F(Browser, CampaignSummary) {
  Mlasim({"fuzz", "--cases", "100", "--seed", "7", "--small", "--html", "{}"}, "campaign.html");
  const Rendered r = Render("campaign.html", 1300, 1200);
  ExpectGoodPage(r, 1300, 1200,
                 {"campaign summary", "Findings over time", "seed index", "model:sparse",
                  "findings-time", "coverage"});
}

TEST_F(Browser, PlanSvg) {
  Mlasim({"plan", "--kv-lens", "300,40,700", "--qlen", "1", "--heads", "16", "--clusters", "8",
          "--svg", "{}"},
         "plan.svg");
  const Rendered r = Render("plan.svg", 860, 270);
  ExpectGoodPage(r, 860, 270,
                 {"6 work items on 8 clusters", "b2 kv 340..580", "reduce lane",
                  "clusters 6..7: no work item"});
}

TEST_F(Browser, GpuReportFromACannedStructure) {
  const nlohmann::json gpu = test::CannedGpuReport();
  sim::ReplayHtmlOptions o;
  o.gpu = &gpu;
  Write("replay-gpu.html", sim::ReplayHtml(*sim::Replay(*sim::BuiltinScenario("seed")), o));
  const Rendered r = Render("replay-gpu.html", 1400, 1250);
  ExpectGoodPage(r, 1400, 1250,
                 {"gpu verdict: agrees with the simulator",
                  "gpu 156..159, simulator 156..159: agree", "gpu-rows", "bit-identical"});
}

// The whole timeline of the founding case's sparse MTP plan: 256 clusters, 378 work items.
TEST_F(Browser, FoundingCasePlanTimeline) {
  const sim::ReplayReport rep = *sim::Replay(*sim::BuiltinScenario("seed"));
  const std::vector<sim::PlanPicture> pics = sim::ReplayPlanPictures(rep);
  ASSERT_GE(pics.size(), 2u);
  Write("plan-timeline-seed.html",
        sim::html::Page("founding case: sparse MTP plan", sim::PlanTimelineInline(pics[1])));
  const Rendered r = Render("plan-timeline-seed.html", 1100, 1500);
  ExpectGoodPage(r, 1100, 1500,
                 {"378 work items on 256 clusters", "c0", "c249",
                  "work 374..377:", "call 6 reads q rows 156..159", "c254-255"});
}

// The checks can fail: a picture whose SVG the browser cannot parse logs a console error ...
TEST_F(Browser, ABadSvgAttributeIsAConsoleError) {
  Write("bad.html",
        "<!DOCTYPE html><html><body><svg width=\"100\" height=\"40\"><rect width=\"-5x\" "
        "height=\"10\"/></svg></body></html>");
  const Rendered r = Render("bad.html", 400, 200);
  EXPECT_EQ(r.status, 0) << r.log;
  ASSERT_EQ(r.console.size(), 1u) << r.log;
  EXPECT_NE(r.console[0].find("attribute width"), std::string::npos) << r.console[0];
}

// ... and a page that draws nothing gives a one-colour screenshot.
TEST_F(Browser, ABlankPageIsOneColour) {
  Write("blank.html", "<!DOCTYPE html><html><body></body></html>");
  const Rendered r = Render("blank.html", 400, 200);
  ASSERT_EQ(r.png.error, "");
  EXPECT_EQ(r.png.colours, 1);
  EXPECT_EQ(r.png.foreground, 0.0);
}

}  // namespace
}  // namespace mlasim
