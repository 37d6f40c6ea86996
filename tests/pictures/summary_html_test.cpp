// The campaign page (fuzz/summary_html.h): one dot per finding with a known seed index, the
// cumulative line, one bar per coverage counter, escaping, bounds.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "fuzz/summary_html.h"
#include "tests/pictures/picture_helpers.h"

namespace mlasim::fuzz {
namespace {

using test::Count;

CampaignFinding Finding(std::optional<uint64_t> index, bool earlier) {
  CampaignFinding f;
  f.seed_index = index;
  f.earlier = earlier;
  f.shrink_steps = 3;
  f.file = "findings/x.json";
  f.detail = "reads q rows 156..159 of 156";
  return f;
}

CampaignSummary Summary() {
  CampaignSummary s;
  s.cases = 120;
  s.next_index = 120;
  s.seconds = 2;
  s.campaign_seconds = 2;
  s.findings["draft_step_0|sparse_decode|q|read|A"] = Finding(5, false);
  s.findings["draft_step_0|sparse_decode|o|write|A"] = Finding(40, false);
  s.findings["verify|main_plan|main.work_info|write|D"] = Finding(12, true);
  s.findings["draft_step_1|dense_reduce|o|write|B"] = Finding(std::nullopt, true);
  for (const auto& [sig, f] : s.findings) s.signatures.insert(sig);
  s.coverage = {{"model:sparse", 70}, {"model:dense", 50}, {"mtp_k:3", 120}, {"dcp", 9}};
  return s;
}

TEST(SummaryHtml, OneDotPerFindingWithASeedIndex) {
  CampaignOptions o;
  o.seed = 7;
  o.max_cases = 120;
  const std::string svg = FindingsTimeSvg(o, Summary());
  EXPECT_EQ(Count(svg, "<circle class=\"finding\""), 2);
  EXPECT_EQ(Count(svg, "<circle class=\"finding earlier\""), 1);
  // the cumulative line: start, two points per finding, end
  const size_t p = svg.find("class=\"cumulative\"");
  ASSERT_NE(p, std::string::npos);
  const std::string pts = svg.substr(svg.find("points=\"", p) + 8);
  EXPECT_EQ(Count(pts.substr(0, pts.find('"')), ","), 2 + 2 * 3);
  // sorted by seed index: 5, 12, 40
  const size_t a = svg.find("q|read|A"), b = svg.find("work_info|write|D"),
               c = svg.find("o|write|A");
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
}

TEST(SummaryHtml, PageHasTheFindingsTableAndCoverage) {
  CampaignOptions o;
  o.seed = 7;
  o.max_cases = 120;
  o.seconds = std::numeric_limits<double>::infinity();
  const std::string page = CampaignHtml(o, Summary(), "7");
  EXPECT_EQ(Count(page, "<tr class=\"bad\">"), 2);  // new findings
  EXPECT_EQ(Count(page, "<tr class=\"ok\">"), 2);   // earlier ones
  EXPECT_EQ(Count(page, "class=\"cov\""), 4);
  EXPECT_NE(page.find("mtp_k:3: 120 cases"), std::string::npos);
  EXPECT_NE(page.find("120 (100%)"), std::string::npos);
  EXPECT_NE(page.find("budget: 120 cases, no time limit"), std::string::npos);
  EXPECT_NE(page.find("findings 4: 2 new, 2 earlier"), std::string::npos);
  EXPECT_EQ(Count(page, "<script"), 0);
  EXPECT_EQ(Count(page, "http"), 0);
  EXPECT_EQ(page, CampaignHtml(o, Summary(), "7"));
}

TEST(SummaryHtml, SignaturesAndNotesAreEscaped) {
  CampaignSummary s = Summary();
  s.findings["<script>|x|y|read|A"] = Finding(3, false);
  s.notes.push_back("removed <b>temp</b>");
  const std::string page = CampaignHtml(CampaignOptions{}, s, "0x<7>");
  EXPECT_EQ(Count(page, "<script"), 0);
  EXPECT_EQ(Count(page, "<b>"), 0);
  EXPECT_NE(page.find("&lt;script&gt;|x|y|read|A"), std::string::npos);
  EXPECT_NE(page.find("seed 0x&lt;7&gt; (1)"), std::string::npos);
}

TEST(SummaryHtml, NoFindingsAndNoCasesSayWhatIsMissing) {
  const CampaignSummary s;
  EXPECT_EQ(FindingsTimeSvg(CampaignOptions{}, s), "");
  EXPECT_EQ(CoverageSvg(s), "");
  const std::string page = CampaignHtml(CampaignOptions{}, s);
  EXPECT_NE(page.find("No finding with a known seed index."), std::string::npos);
  EXPECT_NE(page.find("No findings."), std::string::npos);
  EXPECT_NE(page.find("No coverage counters (no case ran)."), std::string::npos);
}

TEST(SummaryHtml, DrawsFindingsUpToTheBound) {
  CampaignSummary s;
  s.next_index = 1000;
  for (int i = 0; i < kMaxDrawnFindings; ++i)
    s.findings["sig" + std::to_string(i)] = Finding(static_cast<uint64_t>(i), false);
  std::string svg = FindingsTimeSvg(CampaignOptions{}, s);
  EXPECT_EQ(Count(svg, "<circle class=\"finding\""), kMaxDrawnFindings);
  EXPECT_EQ(Count(svg, "more findings not drawn"), 0);
  s.findings["sig-last"] = Finding(999, false);
  svg = FindingsTimeSvg(CampaignOptions{}, s);
  EXPECT_EQ(Count(svg, "<circle class=\"finding\""), kMaxDrawnFindings);
  EXPECT_NE(svg.find("1 more findings not drawn (see the table)"), std::string::npos);
}

}  // namespace
}  // namespace mlasim::fuzz
