#include "sim/junit.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "ref/status.h"
#include "sim/html.h"
#include "sim/report.h"

namespace mlasim::sim::junit {
namespace {

constexpr const char* kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// The character at s[i]: `length` bytes of well-formed UTF-8 (0: an ill-formed byte, as in a
// lone continuation byte, a truncated or overlong sequence, an encoded surrogate), `allowed`
// when XML 1.0 permits it (tab, newline, carriage return, U+0020 and above but U+FFFE, U+FFFF).
struct Utf8Char {
  size_t length = 0;
  bool allowed = false;
};

Utf8Char CharAt(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  if (c < 0x80) return {1, c >= 0x20 || c == '\t' || c == '\n' || c == '\r'};
  size_t n = 0;
  uint32_t cp = 0;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2, cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3, cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4, cp = c & 0x07;
  } else {
    return {};
  }
  if (i + n > s.size()) return {};
  for (size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xC0) != 0x80) return {};
    cp = (cp << 6) | (b(k) & 0x3F);
  }
  const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {};
  return {n, cp != 0xFFFE && cp != 0xFFFF};
}

std::string Attr(std::string_view name, std::string_view value) {
  return fmt::format(" {}=\"{}\"", name, XmlText(value, true));
}

struct Totals {
  int64_t tests = 0, failures = 0, errors = 0, skipped = 0;
  void Add(const TestSuite& s) {
    for (const TestCase& c : s.cases) {
      ++tests;
      failures += c.outcome == Outcome::kFailure;
      errors += c.outcome == Outcome::kError;
      skipped += c.outcome == Outcome::kSkipped;
    }
  }
  std::string Attrs() const {
    return fmt::format(" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"0\"",
                       tests, failures, errors, skipped);
  }
};

std::string CaseXml(const TestCase& c) {
  std::string out =
      "    <testcase" + Attr("classname", c.classname) + Attr("name", c.name) + " time=\"0\"";
  std::string body;
  if (c.outcome != Outcome::kPassed) {
    const char* tag = c.outcome == Outcome::kFailure ? "failure"
                      : c.outcome == Outcome::kError ? "error"
                                                     : "skipped";
    body += std::string("      <") + tag;
    if (!c.type.empty() && c.outcome != Outcome::kSkipped) body += Attr("type", c.type);
    if (!c.message.empty()) body += Attr("message", c.message);
    if (c.text.empty() || c.outcome == Outcome::kSkipped)
      body += "/>\n";
    else
      body += ">" + XmlText(c.text) + "</" + tag + ">\n";
  }
  if (!c.system_out.empty())
    body += "      <system-out>" + XmlText(c.system_out) + "</system-out>\n";
  if (body.empty()) return out + "/>\n";
  return out + ">\n" + body + "    </testcase>\n";
}

}  // namespace

std::string XmlText(std::string_view s, bool attribute) {
  // Valid characters collect in `plain` and go through html::Escape; a carriage return (which
  // html::Escape drops) and, in attributes, newline and tab (which readers would normalise to
  // spaces) are written as character references.
  std::string out, plain;
  plain.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const Utf8Char ch = CharAt(s, i);
    const char c = s[i];
    if (!ch.allowed) {  // one U+FFFD per ill-formed byte or forbidden character
      plain += kReplacement;
    } else if (c == '\r' || (attribute && (c == '\n' || c == '\t'))) {
      out += html::Escape(plain);
      plain.clear();
      out += c == '\r' ? "&#13;" : c == '\n' ? "&#10;" : "&#9;";
    } else {
      plain.append(s.substr(i, ch.length));
    }
    i += std::max<size_t>(ch.length, 1);
  }
  return out + html::Escape(plain);
}

std::string Document(std::string_view name, const std::vector<TestSuite>& suites) {
  Totals all;
  for (const TestSuite& s : suites) all.Add(s);
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<testsuites" + Attr("name", name) + all.Attrs() + ">\n";
  for (const TestSuite& s : suites) {
    Totals t;
    t.Add(s);
    out += "  <testsuite" + Attr("name", s.name) + t.Attrs() + ">\n";
    if (!s.properties.empty()) {
      out += "    <properties>\n";
      for (const auto& [k, v] : s.properties)
        out += "      <property" + Attr("name", k) + Attr("value", v) + "/>\n";
      out += "    </properties>\n";
    }
    for (const TestCase& c : s.cases) out += CaseXml(c);
    out += "  </testsuite>\n";
  }
  return out + "</testsuites>\n";
}

namespace {

// "call 06 sparse_decode": the index zero-padded to the width of the step's last index.
std::string CallCaseName(const Call& c, size_t calls) {
  const size_t width = std::to_string(calls == 0 ? 0 : calls - 1).size();
  return fmt::format("call {:0{}} {}", c.index, width, c.name);
}

// A violation of the step: the simulator's prediction, or a finding observed on the kernel
// under test (replay --gpu), which the report explains as the GPU part of the text report does.
struct Entry {
  const Violation* v;
  bool observed;
};

std::string EntryText(const ReplayReport& r, const Entry& e) {
  if (!e.observed) return ViolationText(r, *e.v);
  return fmt::format("\n  [observed on the kernel under test] {}\n      {}\n",
                     ViolationSignature(*e.v), e.v->detail);
}

// One failure naming every violation of a call: type the sorted distinct class labels,
// message the count and the distinct signatures in order, text each explanation.
TestCase Failing(TestCase tc, const ReplayReport& r, const std::vector<Entry>& es) {
  std::set<std::string> labels;
  std::vector<std::string> sigs;
  std::string text;
  for (const Entry& e : es) {
    labels.insert(ClassLabel(*e.v));
    const std::string sig = ViolationSignature(*e.v);
    if (std::find(sigs.begin(), sigs.end(), sig) == sigs.end()) sigs.push_back(sig);
    text += EntryText(r, e);
  }
  tc.outcome = Outcome::kFailure;
  tc.type = fmt::format("{}", fmt::join(labels, ","));
  tc.message = fmt::format("{} violation{}: {}", es.size(), es.size() == 1 ? "" : "s",
                           fmt::join(sigs, "; "));
  tc.text = text.substr(1);  // without the blank line each explanation starts with
  return tc;
}

// replay --gpu: "replay.gpu" / "kernel under test": an error when the kernel could not run the
// step, a failure for findings that name no call of the trace, else it passes.
TestCase KernelCase(const ReplayReport& r, const KernelPart& k, const std::vector<Entry>& orphans) {
  TestCase tc = Passing("replay.gpu", "kernel under test");
  if (!k.error.empty()) {
    tc.outcome = Outcome::kError;
    tc.type = "kernel";
    tc.message = "the kernel under test could not run the step: " + k.error;
    return tc;
  }
  return orphans.empty() ? tc : Failing(tc, r, orphans);
}

}  // namespace

TestSuite ReplaySuite(const ReplayReport& r, const KernelPart* kernel) {
  const std::vector<Call>& calls = r.trace.calls;
  const auto n = static_cast<int32_t>(calls.size());
  std::vector<std::vector<Entry>> by_call(calls.size());
  std::vector<Entry> orphans;
  for (const Violation& v : r.result.violations) {
    MLASIM_ASSERT(v.call_index >= 0 && v.call_index < n,
                  "every violation belongs to a call of the replayed step");
    by_call[v.call_index].push_back({&v, false});
  }
  if (kernel)
    for (const Violation& v : kernel->findings)
      (v.call_index >= 0 && v.call_index < n ? by_call[v.call_index] : orphans)
          .push_back({&v, true});
  TestSuite s;
  s.name = "mlasim replay " + r.scenario.name;
  s.properties = {{"case", r.scenario.name},
                  {"profile", r.scenario.engine.name},
                  {"kernel", DecodeVariant(r.scenario)},
                  {"calls", std::to_string(calls.size())},
                  {"violations", std::to_string(r.result.violations.size())}};
  if (kernel) s.properties.push_back({"kernel_findings", std::to_string(kernel->findings.size())});
  for (const Call& c : calls) {
    MLASIM_ASSERT(c.index >= 0 && c.index < n && &calls[c.index] == &c,
                  "calls are numbered in trace order");
    TestCase tc = Passing("replay." + c.step, CallCaseName(c, calls.size()));
    s.cases.push_back(by_call[c.index].empty() ? tc : Failing(tc, r, by_call[c.index]));
  }
  if (kernel) s.cases.push_back(KernelCase(r, *kernel, orphans));
  return s;
}

std::string ReplayJunit(const ReplayReport& r, const KernelPart* kernel) {
  return Document("mlasim replay", {ReplaySuite(r, kernel)});
}

}  // namespace mlasim::sim::junit
