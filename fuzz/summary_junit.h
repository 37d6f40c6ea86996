// File: fuzz/summary_junit.h
//
// A campaign, or a merge of campaigns' finding folders, as a JUnit XML report for CI
// (`mlasim fuzz --junit FILE`, `mlasim fuzz merge ... --junit FILE`; the format is
// docs/ci.md "JUnit reports of mlasim", the writer sim/junit.h). One <testcase> per finding
// (per signature), plus one "campaign" (or "merge") test case that always runs, so a campaign
// without findings still reports a suite of one passing test and how many cases ran. Pure: the
// same summary gives the same bytes (no wall-clock figure, no timestamp, no host).
#pragma once

#include <string>
#include <vector>

#include "fuzz/campaign.h"
#include "fuzz/findings.h"
#include "sim/junit.h"

namespace mlasim::fuzz {

// One finding as a test case: classname "fuzz.<step>.<call>" and name the signature
// "step|call|buffer|access|class" (empty parts as "-"). A new finding is a <failure> of type
// the class label ("A".."J", "KUT-contract", ...), message "<class>: <detail>" (plus
// " [known: <name>]"), and text lines: signature, class with its meaning, known bug, detail,
// origin (seed index, shrink steps), finding file, reproduce command, replay command. A finding
// already in --out when the run started (`earlier`) is <skipped> with the same lines as
// <system-out>: it does not fail the run, as it does not change the exit code.
sim::junit::TestCase FindingCase(const CampaignFinding& f);

// The campaign suite "mlasim fuzz": properties seed (as typed: `seed_text`, else the number),
// shard, profiles, swarm, small, generate, budget_cases, cases, campaign_cases, signatures,
// findings, new_findings, cut_short; the test case "fuzz" / "campaign" (passes; its system-out
// says the cases run and the findings), then one FindingCase per finding in signature order.
sim::junit::TestSuite CampaignSuite(const CampaignOptions& o, const CampaignSummary& s,
                                    const std::string& seed_text = "");
// The whole document (sim::junit::Document "mlasim fuzz" around CampaignSuite).
std::string CampaignJunit(const CampaignOptions& o, const CampaignSummary& s,
                          const std::string& seed_text = "");

// `fuzz merge DIR... [--out OUT] --junit FILE`: the suite "mlasim fuzz merge" with properties
// folders, shards, cases, findings; the test case "fuzz" / "merge" (passes; system-out lists the
// shards), then every kept finding as a failure (a merge has no earlier findings), its file the
// one in `out_dir` when given, else the kept source file.
std::string MergeJunit(const MergeResult& m, const std::vector<std::string>& dirs,
                       const std::string& out_dir);

}  // namespace mlasim::fuzz
