// The plan timeline (sim/plan_svg.h) and the page building blocks (sim/html.h): exact counts of
// drawn elements, the drawing bounds at and one past their limit, escaping, determinism.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ref/planner.h"
#include "sim/html.h"
#include "sim/plan_svg.h"
#include "tests/pictures/picture_helpers.h"
#include "tests/ref/plan_builders.h"

namespace mlasim::sim {
namespace {

using test::Count;
using test::WorkRects;

TEST(Html, EscapeReplacesTheFiveSpecialCharacters) {
  EXPECT_EQ(html::Escape("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;");
  EXPECT_EQ(html::Escape(""), "");
}

TEST(Html, EscapeKeepsUtf8AndReplacesControlBytes) {
  EXPECT_EQ(html::Escape("a\tb\nc"), "a\tb\nc");
  EXPECT_EQ(html::Escape(std::string("x\x01y", 3)), "x\xEF\xBF\xBDy");
  EXPECT_EQ(html::Escape(std::string("\0", 1)), "\xEF\xBF\xBD");
  EXPECT_EQ(html::Escape("\xC3\xA9"), "\xC3\xA9");  // é
}

TEST(Html, NumWritesAtMostOneDecimal) {
  EXPECT_EQ(html::Num(12), "12");
  EXPECT_EQ(html::Num(12.25), "12.3");
  EXPECT_EQ(html::Num(12.04), "12");
  EXPECT_EQ(html::Num(-0.04), "0");
  EXPECT_EQ(html::Num(-3.5), "-3.5");
  EXPECT_EQ(html::Num(1e6), "1000000");
  EXPECT_EQ(html::Num(std::nan("")), "0");
  EXPECT_EQ(html::Num(std::numeric_limits<double>::infinity()), "0");
}

TEST(Html, BytesAtTheUnitBoundaries) {
  EXPECT_EQ(html::Bytes(0), "0 B");
  EXPECT_EQ(html::Bytes(1023), "1023 B");
  EXPECT_EQ(html::Bytes(1024), "1 KiB");
  EXPECT_EQ(html::Bytes(1536), "1.5 KiB");
  EXPECT_EQ(html::Bytes(2 << 20), "2 MiB");
  EXPECT_EQ(html::Bytes(int64_t{3} << 30), "3 GiB");
  EXPECT_EQ(html::Bytes(-5), "-5 B");
}

TEST(Html, PageIsOneFileWithoutScriptOrExternalReference) {
  const std::string page = html::Page("t<i>", "<p>x</p>");
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(page.find("<title>t&lt;i&gt;</title>"), std::string::npos);
  EXPECT_EQ(Count(page, "<script"), 0);
  EXPECT_EQ(Count(page, "src="), 0);
  EXPECT_EQ(Count(page, "http"), 0);
  EXPECT_EQ(Count(page, "url("), 0);  // the patterns are referenced by the pictures only
  EXPECT_EQ(Count(page, "<pattern id="), 3);
}

// aiter-mla-metadata.md §6.1: three requests (300, 40, 700 KV tokens) on 8 clusters.
struct SpecExample {
  ref::PlanRequest req = ref::test::DenseRequest(ref::Arch::kGfx942, 16, 1, {300, 40, 700}, 8);
  ref::Plan plan = *ref::PlanMlaMetadata(req);
  PlanPicture Picture() const {
    PlanPicture p;
    p.title = "spec example";
    p.request = &req;
    p.plan = &plan;
    return p;
  }
};

TEST(PlanSvg, SpecExampleDrawsEveryWorkItemOnce) {
  const SpecExample ex;
  ASSERT_EQ(ex.plan.num_works(), 6);
  const std::string svg = PlanTimelineInline(ex.Picture());
  EXPECT_EQ(WorkRects(svg), (std::multiset<int32_t>{0, 1, 2, 3, 4, 5}));
  // works 0,1 (request 0) and 3,4,5 (request 2) are pieces of split tiles; work 2 is not
  EXPECT_EQ(WorkRects(svg, "split"), (std::multiset<int32_t>{0, 1, 3, 4, 5}));
  EXPECT_EQ(WorkRects(svg, "zero-kv").size(), 0u);
  EXPECT_EQ(WorkRects(svg, "oob").size(), 0u);
  EXPECT_EQ(Count(svg, "class=\"empty-run\""), 1);  // clusters 6 and 7 have no work
  EXPECT_NE(svg.find("clusters 6..7: no work item"), std::string::npos);
  EXPECT_EQ(Count(svg, "<g class=\"reduce\""), 2);  // tile 0 on c0-c1, tile 2 on c3-c5
  EXPECT_NE(svg.find("b2 kv 340..580"), std::string::npos);
  EXPECT_NE(svg.find("6 work items on 8 clusters (6 with work; no work: 6..7)"), std::string::npos);
  EXPECT_EQ(Count(svg, "out of bounds"), 0);  // the legend lists only what is drawn
}

TEST(PlanSvg, MarkedItemsAreRedAndLabelledOnce) {
  const SpecExample ex;
  PlanPicture p = ex.Picture();
  p.marks = {{3, "call 6 reads q rows 2..2"}, {4, "call 6 reads q rows 2..2"}, {9, "ignored"}};
  const std::string svg = PlanTimelineInline(p);
  EXPECT_EQ(WorkRects(svg, "oob"), (std::multiset<int32_t>{3, 4}));
  // work 3 on c3 and work 4 on c4 say the same: one label, a leader from each row
  EXPECT_EQ(Count(svg, "call 6 reads q rows 2..2"), 1);
  EXPECT_NE(svg.find(">work 3..4:</tspan>"), std::string::npos);
  EXPECT_EQ(Count(svg, "class=\"leader\""), 2);
  EXPECT_EQ(Count(svg, "ignored"), 0);  // no work 9 in the plan
  // different labels on consecutive rows stay apart
  p.marks = {{3, "call 6 reads q rows 2..2"}, {4, "call 7 writes o rows 2..2"}};
  const std::string two = PlanTimelineInline(p);
  EXPECT_NE(two.find(">work 3:</tspan>"), std::string::npos);
  EXPECT_NE(two.find(">work 4:</tspan>"), std::string::npos);
}

TEST(PlanSvg, TitlesAndLabelsAreEscaped) {
  const SpecExample ex;
  PlanPicture p = ex.Picture();
  p.title = "<script>alert(1)</script>";
  p.notes = {"a & b"};
  p.marks = {{0, "<img src=x>"}};
  const std::string svg = PlanTimelineInline(p);
  EXPECT_EQ(Count(svg, "<script"), 0);
  EXPECT_EQ(Count(svg, "<img"), 0);
  EXPECT_NE(svg.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(svg.find("a &amp; b"), std::string::npos);
  EXPECT_NE(svg.find("&lt;img src=x&gt;"), std::string::npos);
}

TEST(PlanSvg, StandaloneFileIsAnSvgDocument) {
  const SpecExample ex;
  const std::string f = PlanTimelineFile(ex.Picture());
  EXPECT_EQ(
      f.rfind(
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\"",
          0),
      0u);
  EXPECT_EQ(Count(f, "<pattern id="), 3);
  EXPECT_EQ(f.substr(f.size() - 7), "</svg>\n");
  EXPECT_EQ(WorkRects(f).size(), 6u);
}

TEST(PlanSvg, ByteIdenticalAcrossRuns) {
  const SpecExample a, b;
  EXPECT_EQ(PlanTimelineFile(a.Picture()), PlanTimelineFile(b.Picture()));
}

TEST(PlanSvg, ZeroKvItemsAreHatched) {
  const ref::Plan p = test::SyntheticPlan(2, 3, 2);  // works 0, 2, 4 have no KV
  const ref::PlanRequest req;
  PlanPicture pic;
  pic.request = &req;
  pic.plan = &p;
  const std::string svg = PlanTimelineInline(pic);
  EXPECT_EQ(WorkRects(svg), (std::multiset<int32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(WorkRects(svg, "zero-kv"), (std::multiset<int32_t>{0, 2, 4}));
  EXPECT_NE(svg.find("zero-KV item"), std::string::npos);
}

TEST(PlanSvg, PlanWithoutWorkDrawsOneEmptyRun) {
  ref::Plan p = test::SyntheticPlan(4, 0);
  const ref::PlanRequest req;
  PlanPicture pic;
  pic.request = &req;
  pic.plan = &p;
  const std::string svg = PlanTimelineInline(pic);
  EXPECT_EQ(WorkRects(svg).size(), 0u);
  EXPECT_EQ(Count(svg, "class=\"empty-run\""), 1);
  EXPECT_NE(svg.find("clusters 0..3: no work item"), std::string::npos);
}

TEST(PlanSvg, UndefinedFieldsAreDrawnGrey) {
  ref::Plan p = test::SyntheticPlan(1, 2);
  p.work_info.cells[8 + ref::kKvEnd] = ref::Cell::kUndefined;  // work 1
  const ref::PlanRequest req;
  PlanPicture pic;
  pic.request = &req;
  pic.plan = &p;
  const std::string svg = PlanTimelineInline(pic);
  EXPECT_EQ(WorkRects(svg, "undefined"), (std::multiset<int32_t>{1}));
  EXPECT_NE(svg.find("fields undefined"), std::string::npos);
}

TEST(PlanSvg, PaddingRequestsAreMarked) {
  const SpecExample ex;
  PlanPicture p = ex.Picture();
  p.real_requests = 2;  // request 2 (q row 2: works 3, 4, 5) is padding
  EXPECT_EQ(WorkRects(PlanTimelineInline(p), "padding"), (std::multiset<int32_t>{3, 4, 5}));
  p.real_requests = 3;  // all real
  EXPECT_EQ(WorkRects(PlanTimelineInline(p), "padding").size(), 0u);
}

TEST(PlanSvg, DrawsWorkItemsUpToTheBound) {
  const ref::PlanRequest req;
  PlanPicture pic;
  pic.request = &req;
  const ref::Plan at = test::SyntheticPlan(2, kMaxDrawnWorks / 2);
  pic.plan = &at;
  std::string svg = PlanTimelineInline(pic);
  EXPECT_EQ(static_cast<int32_t>(WorkRects(svg).size()), kMaxDrawnWorks);
  EXPECT_EQ(Count(svg, "not drawn:"), 0);
  const ref::Plan past = test::SyntheticPlan(1, kMaxDrawnWorks + 1);
  pic.plan = &past;
  svg = PlanTimelineInline(pic);
  EXPECT_EQ(static_cast<int32_t>(WorkRects(svg).size()), kMaxDrawnWorks);
  EXPECT_NE(svg.find("not drawn: 0 more cluster row(s), 1 more work item(s)"), std::string::npos);
}

TEST(PlanSvg, DrawsClusterRowsUpToTheBound) {
  const ref::PlanRequest req;
  PlanPicture pic;
  pic.request = &req;
  const ref::Plan at = test::SyntheticPlan(kMaxDrawnRows, 1);
  pic.plan = &at;
  std::string svg = PlanTimelineInline(pic);
  EXPECT_EQ(static_cast<int32_t>(WorkRects(svg).size()), kMaxDrawnRows);
  EXPECT_EQ(Count(svg, "not drawn:"), 0);
  const ref::Plan past = test::SyntheticPlan(kMaxDrawnRows + 1, 1);
  pic.plan = &past;
  svg = PlanTimelineInline(pic);
  EXPECT_EQ(static_cast<int32_t>(WorkRects(svg).size()), kMaxDrawnRows);
  EXPECT_NE(svg.find("not drawn: 1 more cluster row(s), 1 more work item(s)"), std::string::npos);
}

TEST(PlanSvg, ClustersAroundClampsAndMerges) {
  const ref::Plan p = test::SyntheticPlan(10, 1);  // work w runs on cluster w
  using Ranges = std::vector<std::pair<int32_t, int32_t>>;
  EXPECT_EQ(ClustersAround(p, {0}, 2), (Ranges{{0, 2}}));
  EXPECT_EQ(ClustersAround(p, {9}, 2), (Ranges{{7, 9}}));
  EXPECT_EQ(ClustersAround(p, {2, 6}, 1), (Ranges{{1, 3}, {5, 7}}));
  EXPECT_EQ(ClustersAround(p, {2, 5}, 1), (Ranges{{1, 6}}));  // adjacent ranges merge
  EXPECT_EQ(ClustersAround(p, {4}, 0), (Ranges{{4, 4}}));
  EXPECT_EQ(ClustersAround(p, {10, -1}, 1), Ranges{});  // no cluster runs them
}

TEST(PlanSvg, OnlyClustersElidesTheRest) {
  const ref::Plan p = test::SyntheticPlan(10, 1);
  const ref::PlanRequest req;
  PlanPicture pic;
  pic.request = &req;
  pic.plan = &p;
  pic.only_clusters = {{2, 3}, {7, 7}};
  const std::string svg = PlanTimelineInline(pic);
  EXPECT_EQ(WorkRects(svg), (std::multiset<int32_t>{2, 3, 7}));
  EXPECT_EQ(Count(svg, "class=\"elided\""), 3);  // 0..1, 4..6, 8..9
  EXPECT_NE(svg.find("clusters 4..6 not shown"), std::string::npos);
}

}  // namespace
}  // namespace mlasim::sim
