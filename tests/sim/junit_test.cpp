// The JUnit writer (sim/junit.h): escaping of text and attributes (XML's five specials, invalid
// UTF-8, characters XML 1.0 forbids, newlines in attributes), the exact bytes of a document with
// every outcome, totals, and an empty document.
#include "sim/junit.h"

#include <gtest/gtest.h>

namespace mlasim::sim::junit {
namespace {

TEST(JunitXmlText, EscapesTheFiveSpecials) {
  EXPECT_EQ(XmlText(R"(a<b>&"c'd)"), "a&lt;b&gt;&amp;&quot;c&#39;d");
  EXPECT_EQ(XmlText(""), "");
}

TEST(JunitXmlText, KeepsValidUtf8AndReplacesInvalidBytes) {
  EXPECT_EQ(XmlText("\xC3\xA9 \xE2\x86\x92 \xF0\x9F\x98\x80"),
            "\xC3\xA9 \xE2\x86\x92 \xF0\x9F\x98\x80");
  // A lone continuation byte, a truncated sequence at the end, an overlong '/', a surrogate.
  EXPECT_EQ(XmlText("a\x80z"), "a\xEF\xBF\xBDz");
  EXPECT_EQ(XmlText("a\xE2\x86"), "a\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(XmlText("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(XmlText("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  // U+FFFE and U+FFFF are not XML characters; U+FFFD is.
  EXPECT_EQ(XmlText("\xEF\xBF\xBE\xEF\xBF\xBF"), "\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(JunitXmlText, ControlCharactersAndLineBreaks) {
  EXPECT_EQ(XmlText(std::string("a\0b\x1b\x7f", 5)),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD\x7f");
  EXPECT_EQ(XmlText("l1\nl2\tx\r"), "l1\nl2\tx&#13;");
  EXPECT_EQ(XmlText("l1\nl2\tx\r", true), "l1&#10;l2&#9;x&#13;");
}

TEST(JunitDocument, EveryOutcomeWithTotalsAndProperties) {
  TestSuite s;
  s.name = "suite <1>";
  s.properties = {{"case", "a&b"}, {"empty", ""}};
  s.cases.push_back(Passing("c.x", "passes"));
  TestCase f{
      "c.x", "fails", Outcome::kFailure, "A,C", "2 violations: \"x\"", "line 1\nline 2 <b>\n", ""};
  s.cases.push_back(f);
  s.cases.push_back({"c.y", "errs", Outcome::kError, "kernel", "no run", "", ""});
  TestCase k{"c.y", "skips", Outcome::kSkipped, "ignored", "earlier", "not written", "out\n"};
  s.cases.push_back(k);
  TestCase o = Passing("c.z", "passes with output");
  o.system_out = "cases 3\n";
  s.cases.push_back(o);
  EXPECT_EQ(Document("all", {s, TestSuite{"empty suite", {}, {}}}),
            R"(<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="all" tests="5" failures="1" errors="1" skipped="1" time="0">
  <testsuite name="suite &lt;1&gt;" tests="5" failures="1" errors="1" skipped="1" time="0">
    <properties>
      <property name="case" value="a&amp;b"/>
      <property name="empty" value=""/>
    </properties>
    <testcase classname="c.x" name="passes" time="0"/>
    <testcase classname="c.x" name="fails" time="0">
      <failure type="A,C" message="2 violations: &quot;x&quot;">line 1
line 2 &lt;b&gt;
</failure>
    </testcase>
    <testcase classname="c.y" name="errs" time="0">
      <error type="kernel" message="no run"/>
    </testcase>
    <testcase classname="c.y" name="skips" time="0">
      <skipped message="earlier"/>
      <system-out>out
</system-out>
    </testcase>
    <testcase classname="c.z" name="passes with output" time="0">
      <system-out>cases 3
</system-out>
    </testcase>
  </testsuite>
  <testsuite name="empty suite" tests="0" failures="0" errors="0" skipped="0" time="0">
  </testsuite>
</testsuites>
)");
}

TEST(JunitDocument, NoSuites) {
  EXPECT_EQ(Document("none", {}),
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"none\" tests=\"0\" "
            "failures=\"0\" errors=\"0\" skipped=\"0\" time=\"0\">\n</testsuites>\n");
}

}  // namespace
}  // namespace mlasim::sim::junit
