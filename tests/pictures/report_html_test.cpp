// The replay page (sim/report_html.h) and the memory maps (sim/memory_map_svg.h) on the built-in
// cases and the regression corpus: exact element counts, the red items equal the violations'
// work items, addresses equal the replay's, escaping, bounds, determinism.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "fuzz/scenario_gen.h"
#include "sim/memory_map_svg.h"
#include "sim/report_html.h"
#include "sim/scenario_json.h"
#include "tests/pictures/picture_helpers.h"

namespace mlasim::sim {
namespace {

namespace fs = std::filesystem;
using test::Count;
using test::WorkRects;

ReplayReport Replayed(const std::string& builtin, const std::string& profile = "") {
  Scenario s = *BuiltinScenario(builtin);
  if (!profile.empty()) s.engine = *GetEngineProfile(profile, "engine");
  return *Replay(s);
}

ReplayReport RunCase(const std::string& name) {
  const fs::path p = fs::path(MLASIM_SOURCE_DIR) / "tests" / "cases" / (name + ".json");
  auto s = LoadScenarioFile(p.string());
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return *Replay(*s);
}

TEST(ReportHtml, CallAddressSpaceEqualsTheReplayLayout) {
  for (const std::string name : {"seed", "seed-b35", "dense-mtp"}) {
    const ReplayReport r = Replayed(name);
    nlohmann::json want = r.result.layout;
    // (The replay's "accesses" are its violations, not part of the address space.)
    for (const char* k : {"call", "step", "call_name", "has_violation", "accesses"}) want.erase(k);
    const AddressSpace as = CallAddressSpace(r.scenario, r.trace, r.result.layout_call);
    EXPECT_EQ(as.LayoutJson(), want) << name;
  }
}

TEST(ReportHtml, SeedPlanPicturesMarkExactlyTheViolatingItems) {
  const ReplayReport r = Replayed("seed");
  const std::vector<PlanPicture> pics = ReplayPlanPictures(r);
  // sparse_mtp (detail + all clusters) and the two draft plans; main_plan feeds no kernel
  ASSERT_EQ(pics.size(), 4u);
  EXPECT_EQ(pics[0].title,
            "plan snapshot 1: sparse_mtp_plan (buffers sparse_mtp.*): the clusters around the "
            "flagged items");
  EXPECT_EQ(pics[1].title, "plan snapshot 1: sparse_mtp_plan (buffers sparse_mtp.*): all clusters");
  const std::string all = PlanTimelineInline(pics[1]);
  EXPECT_EQ(static_cast<int32_t>(WorkRects(all).size()), r.trace.plans[1].plan.num_works());
  EXPECT_EQ(WorkRects(all).size(), 378u);
  EXPECT_EQ(WorkRects(all, "oob"), (std::multiset<int32_t>{374, 375, 376, 377}));
  EXPECT_EQ(WorkRects(all, "zero-kv"), (std::multiset<int32_t>{374, 375, 376, 377}));
  EXPECT_NE(all.find("378 work items on 256 clusters (254 with work; no work: 254..255)"),
            std::string::npos);
  EXPECT_NE(all.find("call 6 reads q rows 156..159"), std::string::npos);
  EXPECT_NE(all.find("call 6 writes o rows 156..159"), std::string::npos);
  // the detail: clusters 251..255 (253 runs works 373..377)
  ASSERT_EQ(pics[0].only_clusters, (std::vector<std::pair<int32_t, int32_t>>{{251, 255}}));
  const std::string detail = PlanTimelineInline(pics[0]);
  EXPECT_EQ(WorkRects(detail), (std::multiset<int32_t>{370, 371, 372, 373, 374, 375, 376, 377}));
  EXPECT_EQ(WorkRects(detail, "oob"), (std::multiset<int32_t>{374, 375, 376, 377}));
  EXPECT_NE(detail.find("clusters 0..250 not shown"), std::string::npos);
  for (size_t i = 2; i < 4; ++i)
    EXPECT_EQ(WorkRects(PlanTimelineInline(pics[i]), "oob").size(), 0u);
}

// The reduce lists tiles: its out-of-bounds finding marks the pieces of those tiles.
TEST(ReportHtml, ReduceFindingsMarkThePiecesOfTheirTiles) {
  const ReplayReport r = RunCase("H-update-fold-mismatch");
  const Violation* red = nullptr;
  for (const Violation& v : r.result.violations)
    if (v.call == "dense_reduce" && v.kind == ViolationKind::kOutOfBounds) red = &v;
  ASSERT_NE(red, nullptr);
  ASSERT_EQ(red->work_items, (std::vector<int32_t>{6, 7}));
  const Call& call = r.trace.calls[red->call_index];
  const ref::Plan& plan = r.trace.plans[call.plan].plan;
  std::multiset<int32_t> want;  // works whose partial_qo_loc tile 6 or 7 reduces
  for (int32_t t : red->work_items)
    for (int32_t i = plan.reduce_indptr.data[t]; i < plan.reduce_indptr.data[t + 1]; ++i)
      for (int32_t w = 0; w < plan.num_works(); ++w)
        if (plan.work(w, ref::kPartialQoLoc) == plan.reduce_partial_map.data[i]) want.insert(w);
  ASSERT_FALSE(want.empty());
  const std::string label = "call " + std::to_string(red->call_index) + " writes o rows";
  for (const PlanPicture& p : ReplayPlanPictures(r)) {
    if (p.plan != &plan || !p.only_clusters.empty()) continue;
    std::multiset<int32_t> got;
    for (const PlanMark& m : p.marks)
      if (m.label.rfind(label, 0) == 0) got.insert(m.work);
    EXPECT_EQ(got, want);
    return;
  }
  ADD_FAILURE() << "no picture of the reduce's plan";
}

// Findings other than out of bounds (an invalid plan, stale reads) outline their items orange.
TEST(ReportHtml, OtherFindingsAreOrange) {
  const ReplayReport r = RunCase("H-update-fold-mismatch");
  const std::vector<PlanPicture> pics = ReplayPlanPictures(r);
  ASSERT_EQ(pics.size(), 4u);
  const std::string all = PlanTimelineInline(pics[3]);  // the snapshot after the update
  // work 50: plan_invalid:tile_pieces_scattered only
  EXPECT_EQ(WorkRects(all, "finding").count(50), 1u);
  EXPECT_EQ(WorkRects(all, "oob").count(50), 0u);
  // work 51: plan_invalid and calls 8's out-of-bounds reads and writes: red
  EXPECT_EQ(WorkRects(all, "oob").count(51), 1u);
  EXPECT_NE(all.find("other finding (the label says which)"), std::string::npos);
  EXPECT_NE(all.find("call 6 plan_invalid:tile_pieces_scattered"), std::string::npos);
}

TEST(ReportHtml, SeedMemoryMapsShowTheGuardPagesAndTheFaults) {
  const ReplayReport r = Replayed("seed");
  const std::string maps = MemoryMapsHtml(r);
  EXPECT_EQ(Count(maps, "class=\"memory-map\""), 2);
  EXPECT_EQ(Count(maps, "class=\"overrun\""), 2);
  EXPECT_EQ(Count(maps, "class=\"fault\""), 2);
  EXPECT_NE(maps.find("fault 0x7f10003d0000"), std::string::npos);  // o
  EXPECT_NE(maps.find("fault 0x7f100015f000"), std::string::npos);  // q
  EXPECT_NE(maps.find("q rows 156..159: bytes 0..36863 past the end of q"), std::string::npos);
  EXPECT_NE(maps.find("o rows 156..159: bytes 0..65535 past the end of o"), std::string::npos);
  EXPECT_EQ(Count(maps, ">unmapped (guard)</text>"), 4);  // after o and logits, after q and o
}

TEST(ReportHtml, CachingAllocatorMapShowsSlackAndTheSegmentGap) {
  const ReplayReport r = Replayed("seed-b35");
  const std::string maps = MemoryMapsHtml(r);
  EXPECT_EQ(Count(maps, "class=\"memory-map\""), 2);
  EXPECT_NE(maps.find("on hardware: unobserved (the bytes land in slack)"), std::string::npos);
  EXPECT_NE(maps.find("fault 0x7f1000200000"), std::string::npos);
  EXPECT_EQ(Count(maps, ">unmapped gap</text>"), 2);
  EXPECT_NE(maps.find(">22 KiB</text>"), std::string::npos);  // q's slack to the segment end
}

TEST(ReportHtml, MapOfABufferTheLayoutLacksSaysSo) {
  const ReplayReport r = Replayed("seed");
  Violation v = r.result.violations[0];
  v.buffer = "no<such>buffer";
  const AddressSpace as = CallAddressSpace(r.scenario, r.trace, v.call_index);
  const std::string svg = MemoryMapInline(as, v);
  EXPECT_NE(svg.find("holds no buffer named no&lt;such&gt;buffer"), std::string::npos);
  EXPECT_EQ(Count(svg, "class=\"overrun\""), 0);
}

TEST(ReportHtml, CallTableHasOneRowPerCall) {
  const ReplayReport r = Replayed("seed");
  const std::string t = CallTableHtml(r);
  EXPECT_EQ(Count(t, "<tr class=\"ok\">") + Count(t, "<tr class=\"bad\">"), 16);
  EXPECT_EQ(Count(t, "<tr class=\"bad\">"), 1);
  EXPECT_NE(t.find("<td class=\"verdict\">2 violations: fault</td>"), std::string::npos);
}

TEST(ReportHtml, CleanReplaySaysCleanAndDrawsNoRed) {
  const ReplayReport r = Replayed("seed", "atom-2026-11");
  ASSERT_TRUE(r.clean());
  const std::string page = ReplayHtml(r);
  EXPECT_NE(page.find("verdict: clean"), std::string::npos);
  EXPECT_EQ(WorkRects(page, "oob").size(), 0u);
  EXPECT_EQ(Count(page, "class=\"memory-map\""), 0);
  EXPECT_EQ(Count(page, "<tr class=\"bad\">"), 0);
  EXPECT_NE(page.find("No out-of-bounds access: no memory map."), std::string::npos);
}

TEST(ReportHtml, InputStringsAreEscaped) {
  ReplayReport r = Replayed("seed");
  r.scenario.name = "<script>alert('x')</script>";
  r.scenario.description = "<img src=x onerror=alert(1)>";
  ReplayHtmlOptions o;
  o.command = "mlasim replay '<b>'";
  const std::string page = ReplayHtml(r, o);
  EXPECT_EQ(Count(page, "<script"), 0);
  EXPECT_EQ(Count(page, "<img"), 0);
  EXPECT_EQ(Count(page, "<b>"), 0);
  EXPECT_NE(page.find("<h1>mlasim replay: &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;</h1>"),
            std::string::npos);
}

TEST(ReportHtml, PageIsSelfContainedAndByteIdentical) {
  const std::string a = ReplayHtml(Replayed("seed")), b = ReplayHtml(Replayed("seed"));
  EXPECT_EQ(a, b);
  EXPECT_EQ(Count(a, "<script"), 0);
  EXPECT_EQ(Count(a, "http"), 0);
  EXPECT_EQ(Count(a, "src="), 0);
  EXPECT_EQ(Count(a, "url("), Count(a, "url(#mlasim-hatch-"));
}

TEST(ReportHtml, MemoryMapsUpToTheBound) {
  ReplayReport r = Replayed("seed");
  const Violation v = r.result.violations[0];
  r.result.violations.assign(kMaxMemoryMaps, v);
  std::string maps = MemoryMapsHtml(r);
  EXPECT_EQ(Count(maps, "class=\"memory-map\""), kMaxMemoryMaps);
  EXPECT_EQ(Count(maps, "more memory maps not drawn"), 0);
  r.result.violations.push_back(v);
  maps = MemoryMapsHtml(r);
  EXPECT_EQ(Count(maps, "class=\"memory-map\""), kMaxMemoryMaps);
  EXPECT_NE(maps.find("1 more memory maps not drawn."), std::string::npos);
}

TEST(ReportHtml, ViolationRowsUpToTheBound) {
  ReplayReport r = Replayed("seed");
  const Violation v = r.result.violations[0];
  r.result.violations.assign(kMaxViolationRows, v);
  std::string t = ViolationTableHtml(r);
  EXPECT_EQ(Count(t, "<tr class=\"bad\">"), kMaxViolationRows);
  EXPECT_EQ(Count(t, "more violations not listed"), 0);
  r.result.violations.push_back(v);
  t = ViolationTableHtml(r);
  EXPECT_EQ(Count(t, "<tr class=\"bad\">"), kMaxViolationRows);
  EXPECT_NE(t.find("1 more violations not listed."), std::string::npos);
}

TEST(ReportHtml, GpuSectionDrawsObservationAgainstPrediction) {
  const nlohmann::json gpu = test::CannedGpuReport();
  const std::string s = GpuSectionHtml(gpu);
  EXPECT_NE(s.find("gpu verdict: agrees with the simulator"), std::string::npos);
  EXPECT_EQ(Count(s, "class=\"gpu-rows\""), 1);
  EXPECT_EQ(Count(s, "class=\"buffer\""), 8);    // q and o of 4 calls
  EXPECT_EQ(Count(s, "class=\"observed\""), 2);  // draft_step_0: q and o rows 156..159
  EXPECT_EQ(Count(s, "class=\"predicted\""), 2);
  EXPECT_EQ(Count(s, "gpu 156..159, simulator 156..159: agree"), 2);
  EXPECT_NE(s.find("q: faulted (simulator 156..159); o: faulted (simulator 156..159)"),
            std::string::npos);
  EXPECT_EQ(Count(s, "DISAGREE"), 0);
  EXPECT_EQ(Count(s, "bit-identical"), 3);
}

TEST(ReportHtml, GpuSectionShowsADisagreement) {
  nlohmann::json gpu = test::CannedGpuReport();
  gpu["verdict"] = "disagrees";
  nlohmann::json& c = gpu["calls"][1];
  c["agree"] = false;
  c["q_read_past_end"]["gpu"] = {{"first", 156}, {"last", 157}};
  c["q_read_past_end"]["agree"] = false;
  const std::string s = GpuSectionHtml(gpu);
  EXPECT_NE(s.find("gpu verdict: DISAGREES with the simulator"), std::string::npos);
  EXPECT_NE(s.find("gpu 156..157, simulator 156..159: DISAGREE"), std::string::npos);
  EXPECT_EQ(Count(s, "<td class=\"verdict\">DISAGREES</td>"), 1);
}

TEST(ReportHtml, GpuSectionOfANonObjectSaysSo) {
  EXPECT_EQ(GpuSectionHtml(nlohmann::json::array()),
            "<p class=\"note\">The GPU report is not a JSON object.</p>\n");
  // missing keys read as absent: no picture, no crash
  const std::string s = GpuSectionHtml(nlohmann::json::object());
  EXPECT_NE(s.find("DISAGREES"), std::string::npos);  // no verdict "agrees"
  EXPECT_EQ(Count(s, "<svg"), 0);
}

TEST(ReportHtml, ReplayPageWithGpuHasTheSection) {
  const nlohmann::json gpu = test::CannedGpuReport();
  ReplayHtmlOptions o;
  o.gpu = &gpu;
  const std::string page = ReplayHtml(Replayed("seed"), o);
  EXPECT_NE(page.find("<h2 id=\"gpu\">GPU: observed against predicted</h2>"), std::string::npos);
  o.id_prefix = "case3-";
  EXPECT_NE(ReplayHtml(Replayed("seed"), o).find("<h2 id=\"case3-gpu\">"), std::string::npos);
  EXPECT_EQ(Count(ReplayHtml(Replayed("seed")), "GPU: observed"), 0);
}

// Every drawn picture of a page: the all-clusters timelines draw every work item (up to the
// bound) and make red exactly the marked items the plan holds; no NaN reaches an attribute.
void ExpectConsistentPage(const ReplayReport& r, const std::string& what) {
  const std::string page = ReplayHtml(r);
  EXPECT_EQ(Count(page, "nan"), 0) << what;
  EXPECT_EQ(Count(page, "=\"inf"), 0) << what;
  EXPECT_EQ(Count(page, "<script"), 0) << what;
  for (const PlanPicture& p : ReplayPlanPictures(r)) {
    if (!p.only_clusters.empty()) continue;
    const std::string svg = PlanTimelineInline(p);
    const int32_t works =
        static_cast<int32_t>(std::min<int64_t>(p.plan->num_works(), p.plan->work_info.size() / 8));
    std::set<int32_t> in_clusters;  // works some cluster's work_indptr range holds
    for (int32_t c = 0; c < p.plan->derived.num_clusters; ++c)
      for (int32_t w = p.plan->work_indptr.data[c]; w < p.plan->work_indptr.data[c + 1]; ++w)
        if (w >= 0 && w < works) in_clusters.insert(w);
    std::set<int32_t> oob, other;  // out-of-bounds marks red, the others orange
    for (const PlanMark& m : p.marks)
      if (in_clusters.count(m.work)) (m.out_of_bounds ? oob : other).insert(m.work);
    std::multiset<int32_t> red(oob.begin(), oob.end()), orange;
    for (int32_t w : other)
      if (!oob.count(w)) orange.insert(w);
    if (works <= kMaxDrawnWorks) {
      EXPECT_EQ(WorkRects(svg).size(), in_clusters.size()) << what << " " << p.title;
      EXPECT_EQ(WorkRects(svg, "oob"), red) << what << " " << p.title;
      EXPECT_EQ(WorkRects(svg, "finding"), orange) << what << " " << p.title;
    }
  }
}

TEST(ReportHtml, EveryRegressionCaseRendersConsistently) {
  int cases = 0;
  for (const auto& e : fs::directory_iterator(fs::path(MLASIM_SOURCE_DIR) / "tests" / "cases")) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() != ".json" || name.find(".expect.") != std::string::npos) continue;
    auto s = LoadScenarioFile(e.path().string());
    ASSERT_TRUE(s.ok()) << name;
    auto r = Replay(*s);
    if (!r.ok()) continue;
    ExpectConsistentPage(*r, name);
    EXPECT_EQ(ReplayHtml(*r), ReplayHtml(*Replay(*s))) << name;
    ++cases;
  }
  EXPECT_GE(cases, 12);
}

TEST(ReportHtml, WorkItemsPastTheBufferAreNamed) {
  auto s = LoadScenarioFile(
      (fs::path(MLASIM_SOURCE_DIR) / "tests" / "cases" / "D-work-info-overflow.json").string());
  ASSERT_TRUE(s.ok());
  const ReplayReport r = *Replay(*s);
  const ref::Plan& p = r.trace.plans[0].plan;
  ASSERT_EQ(p.num_works(), 1915);
  ASSERT_EQ(p.work_info.size() / 8, 963);
  PlanPicture pic;
  pic.request = &r.trace.plans[0].request;
  pic.plan = &p;
  const std::string svg = PlanTimelineInline(pic);
  EXPECT_EQ(WorkRects(svg).size(), 963u);
  EXPECT_NE(svg.find("952 work items lie past the end of work_info (963 rows)"), std::string::npos);
}

TEST(ReportHtml, GeneratedStepsRenderConsistently) {
  fuzz::GenConfig cfg;
  int rendered = 0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    Scenario s;
    {
      std::lock_guard<std::mutex> lock(fuzz::GeneratorMutex());
      s = fuzz::ScenarioFromSeed(cfg, seed, 10 + static_cast<int>(seed * 7 % 91)).value();
    }
    auto r = Replay(s);
    if (!r.ok()) continue;  // a step the engine refuses (an unsupported head count)
    ExpectConsistentPage(*r, "seed " + std::to_string(seed));
    ++rendered;
  }
  EXPECT_GE(rendered, 30);
}

}  // namespace
}  // namespace mlasim::sim
