#include "fuzz/summary_junit.h"

#include <fmt/format.h>

#include <filesystem>

#include "sim/known_bugs.h"
#include "sim/violation.h"

namespace mlasim::fuzz {
namespace {

using sim::junit::Outcome;
using sim::junit::Passing;
using sim::junit::TestCase;
using sim::junit::TestSuite;

// The five parts of "step|call|buffer|access|class" (missing ones empty).
std::vector<std::string> SignatureParts(const std::string& signature) {
  std::vector<std::string> parts;
  size_t i = 0;
  for (size_t bar; parts.size() < 4 && (bar = signature.find('|', i)) != std::string::npos;
       i = bar + 1)
    parts.push_back(signature.substr(i, bar - i));
  parts.push_back(signature.substr(i));
  parts.resize(5);
  return parts;
}

std::string OrDash(const std::string& s) {
  return s.empty() ? "-" : s;
}

// "A: <meaning>" for a bug class letter, the kernel-under-test labels their own line.
std::string ClassText(const std::string& label) {
  auto c = sim::ParseBugClass(label, "class");
  if (c.ok()) return label + " (" + sim::BugClassMeaning(*c) + ")";
  return OrDash(label) + " (observed on the kernel under test, docs/kernel-under-test.md)";
}

// "<name> (<upstream>), fixed in <profile>" (sim/known_bugs.h KnownBugText without its
// "known: "), looked up by name for findings read back from files; the name alone for a bug
// this mlasim does not list.
std::string KnownText(const CampaignFinding& f) {
  std::string text = f.known;
  for (const sim::KnownBug& k : sim::KnownBugs())
    if (text.empty() && k.name == f.known_name) text = sim::KnownBugText(k);
  const std::string lead = "known: ";
  if (text.rfind(lead, 0) == 0) return text.substr(lead.size());
  return f.known_name;
}

std::string FindingLines(const CampaignFinding& f, const std::string& label) {
  std::string t = "signature: " + f.signature + "\n";
  t += "class: " + ClassText(label) + "\n";
  if (!f.known_name.empty()) t += "known bug: " + KnownText(f) + "\n";
  t += "detail: " + OrDash(f.detail) + "\n";
  t +=
      "origin: " + OriginText(f.seed_index, f.shrink_steps, f.cut_short, f.max_shrink_steps) + "\n";
  t +=
      "finding file: " + (f.file.empty() ? "none (the campaign ran without --out)" : f.file) + "\n";
  t += "reproduce: " + OrDash(f.command) + "\n";
  if (!f.replay.empty()) t += "replay: " + f.replay + "\n";
  return t;
}

std::string Bool(bool b) {
  return b ? "true" : "false";
}

std::string Join(const std::vector<std::string>& v) {
  return fmt::format("{}", fmt::join(v, ","));
}

}  // namespace

TestCase FindingCase(const CampaignFinding& f) {
  const std::vector<std::string> p = SignatureParts(f.signature);
  TestCase tc;
  tc.classname = "fuzz." + OrDash(p[0]) + "." + OrDash(p[1]);
  tc.name = f.signature;
  const std::string lines = FindingLines(f, p[4]);
  if (f.earlier) {
    tc.outcome = Outcome::kSkipped;
    tc.message = "found before this run: already in " + (f.file.empty() ? "--out" : f.file);
    tc.system_out = lines;
    return tc;
  }
  tc.outcome = Outcome::kFailure;
  tc.type = OrDash(p[4]);
  tc.message = OrDash(p[4]) + ": " + OrDash(f.detail) +
               (f.known_name.empty() ? "" : " [known: " + f.known_name + "]");
  tc.text = lines;
  return tc;
}

TestSuite CampaignSuite(const CampaignOptions& o, const CampaignSummary& s,
                        const std::string& seed_text) {
  const int64_t fresh = s.NewFindings();
  TestSuite suite;
  suite.name = "mlasim fuzz";
  suite.properties = {{"seed", seed_text.empty() ? std::to_string(o.seed) : seed_text},
                      {"shard", fmt::format("{}/{}", o.shard, o.shards)},
                      {"profiles", Join(o.profiles)},
                      {"swarm", o.swarm ? "on" : "off"},
                      {"small", Bool(o.small)},
                      {"generate", Join(o.generate)},
                      {"budget_cases", o.max_cases >= 0 ? std::to_string(o.max_cases) : "none"},
                      {"cases", std::to_string(s.cases)},
                      {"campaign_cases", std::to_string(s.next_index)},
                      {"signatures", std::to_string(s.signatures.size())},
                      {"findings", std::to_string(s.findings.size())},
                      {"new_findings", std::to_string(fresh)},
                      {"cut_short", Bool(s.cut_short)},
                      {"not_run_over_limit", std::to_string(s.not_run.over_limit)},
                      {"not_run_refused", std::to_string(s.not_run.refused)}};
  TestCase run = Passing("fuzz", "campaign");
  run.system_out = fmt::format(
      "cases {} this run, {} over the campaign{}{}\ndistinct signatures {}\nfindings {}: {} new, "
      "{} already in {}\n",
      s.cases, s.next_index,
      o.max_cases >= 0 ? fmt::format(" of its {}-case budget", o.max_cases) : "",
      s.cut_short ? " (--seconds ended it before its --cases budget)" : "", s.signatures.size(),
      s.findings.size(), fresh, s.findings.size() - fresh, o.out_dir.empty() ? "--out" : o.out_dir);
  if (const std::string n = NotRunText(s.not_run, s.cases, "seed index"); !n.empty())
    run.system_out += n + "\n";
  suite.cases.push_back(run);
  for (const auto& [sig, f] : s.findings) suite.cases.push_back(FindingCase(f));
  return suite;
}

std::string CampaignJunit(const CampaignOptions& o, const CampaignSummary& s,
                          const std::string& seed_text) {
  return sim::junit::Document("mlasim fuzz", {CampaignSuite(o, s, seed_text)});
}

std::string MergeJunit(const MergeResult& m, const std::vector<std::string>& dirs,
                       const std::string& out_dir) {
  TestSuite suite;
  suite.name = "mlasim fuzz merge";
  suite.properties = {{"folders", std::to_string(dirs.size())},
                      {"shards", std::to_string(m.shards.size())},
                      {"cases", std::to_string(m.cases)},
                      {"findings", std::to_string(m.findings.size())}};
  TestCase run = Passing("fuzz", "merge");
  run.system_out = fmt::format("{} folder(s), {} shard(s), {} cases, {} findings\n", dirs.size(),
                               m.shards.size(), m.cases, m.findings.size());
  for (const ShardRecord& s : m.shards)
    run.system_out += fmt::format("shard {}/{} seed {} profiles {}: {} cases  {}\n", s.shard,
                                  s.shards, s.seed, Join(s.profiles), s.cases, s.path);
  suite.cases.push_back(run);
  for (const auto& [sig, r] : m.findings) {
    FindingRecord kept = r;
    if (!out_dir.empty())
      kept.path = (std::filesystem::path(out_dir) / FindingFileName(sig)).string();
    suite.cases.push_back(FindingCase(FindingFromRecord(kept, false)));
  }
  return sim::junit::Document("mlasim fuzz merge", {suite});
}

}  // namespace mlasim::fuzz
