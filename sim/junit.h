// File: sim/junit.h
//
// JUnit XML reports for CI systems (`mlasim replay --junit FILE`, `mlasim fuzz --junit FILE`;
// docs/ci.md "JUnit reports of mlasim"): a small document model, its writer, and the replay's
// report (one <testcase> per engine call). The campaign's report is fuzz/summary_junit.h.
//
// The dialect is the one Jenkins, GitLab and GitHub's JUnit actions read (Ant's JUnit task, as
// Maven Surefire writes it): <testsuites> around <testsuite>s, each with <properties> and
// <testcase classname name time>, a test case holding at most one <failure>, <error> or
// <skipped> and optionally a <system-out>. Deterministic: no timestamp, no hostname, and every
// `time` attribute is "0" (mlasim's results do not depend on the clock; readers require the
// attribute). The same model gives the same bytes.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/replay.h"
#include "sim/violation.h"

namespace mlasim::sim::junit {

// What one test case says beyond passing.
enum class Outcome : uint8_t { kPassed, kFailure, kError, kSkipped };

struct TestCase {
  std::string classname;  // "replay.verify", "fuzz.verify.sparse_decode"
  std::string name;       // "call 06 sparse_decode", a signature
  Outcome outcome = Outcome::kPassed;
  std::string type;        // <failure>/<error> type attribute ("" = none written)
  std::string message;     // <failure>/<error>/<skipped> message attribute (one line)
  std::string text;        // <failure>/<error> element text (several lines; "" = empty element)
  std::string system_out;  // <system-out> text; "" = none
};

// A passing test case.
inline TestCase Passing(std::string classname, std::string name) {
  TestCase c;
  c.classname = std::move(classname);
  c.name = std::move(name);
  return c;
}

struct TestSuite {
  std::string name;
  std::vector<std::pair<std::string, std::string>> properties;  // written in this order
  std::vector<TestCase> cases;
};

// The whole document: XML declaration, <testsuites name=...> with the totals (tests, failures,
// errors, skipped, time="0") and each suite with its own totals. Text is escaped (XmlText);
// lines end with '\n', indent 2 spaces per level.
std::string Document(std::string_view name, const std::vector<TestSuite>& suites);

// `s` safe as XML 1.0 element text or a double-quoted attribute value: & < > " ' as entities
// (sim/html.h Escape), bytes that are no valid UTF-8 and characters XML 1.0 forbids (control
// characters other than tab and newline, U+FFFE, U+FFFF) as U+FFFD; in attributes a newline or
// tab is written as &#10; / &#9; so readers keep it (`attribute` true).
std::string XmlText(std::string_view s, bool attribute = false);

// ---- `mlasim replay --junit` ---------------------------------------------------------------

// The `--gpu` part of a replay (fuzz/kut_pool.h KutStepResult), as the report needs it: the
// findings observed on the kernel under test (each with the call_index of its decode call) and
// the reason the step could not be checked at all ("" = it was).
struct KernelPart {
  std::vector<Violation> findings;
  std::string error;
};

// The replay report `r` as one suite "mlasim replay <case>": properties case, profile, kernel,
// calls, violations (and kernel_findings with `kernel`); one test case per engine call of the
// step, in call order, classname "replay.<step>", name "call <index> <call>" (the index
// zero-padded to the width of the last one, so a name sort keeps call order). A call passes, or
// fails with one <failure>: type the sorted distinct class labels of its violations ("A",
// "A,C"), message "<n> violation(s): <signature>; ..." (distinct signatures in order), text the
// report's explanation of each violation (sim/report.h ViolationText). With `kernel` (replay
// --gpu), the kernel's findings join their call's failure ("[observed on the kernel under
// test] <signature>" and the detail) and one more test case "replay.gpu" / "kernel under test"
// follows: an <error> when the kernel could not run the step, a failure for findings naming no
// call of the trace, else passing. Every simulator violation belongs to a call (MLASIM_ASSERT).
TestSuite ReplaySuite(const ReplayReport& r, const KernelPart* kernel = nullptr);

// Document("mlasim replay", {ReplaySuite(r, kernel)}).
std::string ReplayJunit(const ReplayReport& r, const KernelPart* kernel = nullptr);

}  // namespace mlasim::sim::junit
