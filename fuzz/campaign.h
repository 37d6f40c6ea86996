// File: fuzz/campaign.h
//
// `mlasim fuzz`: generate engine steps from seeds, replay them, and keep one shrunk, replayable
// case per distinct failure signature (step|call|buffer|access|class, fuzz/signature.h). Every
// signature any violation of any case shows is a target, shrunk on its own towards a smaller case
// that still shows it (fuzz/search.h), so each finding is the smallest case of its own bug.
// Findings are written atomically (temp file, fsync, rename) the moment they are committed, so a
// crash or kill -9 loses none already reported; --resume continues a shard from its progress
// file (fuzz/progress.h), and the budget counts the whole campaign across resumes. --shard I/N
// splits the seed space: shard I tests seed indices I, I+N, I+2N, ..., so N machines never
// repeat work and their finding folders merge (`fuzz merge`, fuzz/findings.h).
// CampaignOptions::shrink (`--shrink first-failure`) runs round 1's rule instead, to measure it.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fuzz/scenario_gen.h"
#include "fuzz/search.h"
#include "ref/status.h"
#include "sim/contract.h"

namespace mlasim::fuzz {

// Deliberately broken campaign drivers, for tests only (the CLI never sets one): each must make
// a test of tests/fuzz/ fail.
enum class CampaignMutant {
  kNone,
  // Issue 20's slippage: the campaign ignores CampaignOptions::shrink and runs
  // ShrinkPolicy::kFirstFailure (targets only each case's first violation, shrinks keeping any
  // failure, files the shrunk case under its own first violation).
  kSlippingShrink,
};

struct CampaignFinding;
struct FindingRecord;  // fuzz/findings.h

// The longest --seconds budget: a year (31536000 s), as --kernel-timeout is held to a day. Above it
// a budget is a typo (1e308 was taken); a longer campaign resumes (--resume) or runs on --cases.
inline constexpr double kMaxCampaignSeconds = 365.0 * 86400;

struct CampaignOptions {
  // Budgets of the whole campaign (every run of it: --resume continues them). seconds in
  // (0, kMaxCampaignSeconds], or +infinity with a case budget.
  double seconds = 10;
  int64_t max_cases = -1;  // stop at this many cases of the shard (-1: time only); <= 2^50
  uint64_t seed = 1;       // base seed (a 40-hex commit hash is accepted by the CLI)
  int64_t jobs = 1;  // worker threads, 1..256 (64 bits: the CLI binds it, docs/reliability.md)
  int32_t shard = 0, shards = 1;
  std::vector<std::string> profiles = {"atom-2026-08"};
  bool ignore_known = false;  // skip the documented families (fuzz/properties.h)
  bool small = false;         // B <= 64: throughput runs
  // Generator families beyond the engine as it runs (fuzz/scenario_gen.h GeneratorFamilies).
  std::vector<std::string> generate;
  // Kernel contracts every generated case runs under (`--contract FILE`): the files, as given,
  // and the parsed contracts (the CLI loads them).
  std::vector<std::string> contract_files;
  std::vector<std::shared_ptr<const sim::Contract>> contracts;
  std::string out_dir;  // "" = do not write findings
  bool resume = false;
  bool kernel_inputs = false;  // GenConfig::kernel_inputs (fuzz --gpu)
  std::string gpu_mode = "sentinel";  // fuzz --gpu MODE: what the reproduce command names
  KernelLimits kernel_limits;  // GenConfig::kernel: the kernel under test's description
  std::string kernel_flags;    // "--kernel-under-test PATH [--kernel-config TEXT]" (fuzz --gpu)
  int64_t max_shrink_steps = kDefaultShrinkSteps;  // accepted shrink steps per finding, 0..100000
  // Swarm generation (fuzz/scenario_gen.h SwarmKnobs). The CLI's default is on (`--swarm on`);
  // here false keeps the generator of campaigns before swarm, and their findings.
  bool swarm = false;
  // How a failing case becomes findings (fuzz/search.h; `--shrink`): per-signature (issue 20
  // §1), or round 1's first-failure, a measurement and compatibility mode.
  ShrinkPolicy shrink = ShrinkPolicy::kPerSignature;
  CampaignMutant mutant = CampaignMutant::kNone;
  // The engine-step numerics property (fuzz/properties.h NumericsViolations: contexts capped at
  // kStepNumericsContext, head dims 80/64, poisoned inputs) joins the property on every case
  // whose seed index is a multiple of this (its shrinks included); 0: never. Not for
  // kernel-under-test campaigns (their property is the device's).
  int64_t step_numerics_every = 0;
  // The property whose violations are findings; empty: every violation (or, with ignore_known,
  // UnknownViolations). Tests set a synthetic one; a kernel-under-test campaign (fuzz --gpu)
  // sets KutProperty (fuzz/kut_pool.h).
  Property property;
  // A kernel-under-test campaign: its identity (progress files; a resume must match it) and the
  // `mlasim replay` flags that replay its findings (recorded in each finding file).
  std::string kernel;
  std::string replay_flags;
  // Seconds a case may run before the note stream (stderr) names it, its phase (checking,
  // shrinking SIG) and how many workers are busy, and again every as many seconds while one
  // does: a full-size kernel-under-test case can take minutes. Never written to the summary.
  double slow_case_note_seconds = 60;
  // Folders whose findings count as found before this run (fuzz --devices: the merged --out of
  // the workers' campaigns), besides --out itself.
  std::vector<std::string> known_dirs;
  // Called for each finding as it is committed (in seed-index order, on a worker thread, under
  // the campaign's lock: it must not call back into the campaign): `mlasim effectiveness` times
  // the reports with it. Never set by the CLI.
  std::function<void(const CampaignFinding&)> on_finding;
};

struct CampaignFinding {
  std::string signature;
  std::optional<uint64_t> seed_index;  // absent only for older files found in --out
  std::string file;                    // written case, if out_dir was given
  std::string detail;
  int shrink_steps = 0;
  int max_shrink_steps = -1;  // the step budget it was shrunk under (-1: not recorded)
  bool cut_short = false;     // the shrink step budget ended its shrinking (fuzz/search.h)
  bool earlier = false;       // already in --out when this run started (not new)
  std::string known;          // "known: <name> (...), fixed in <profile>" (sim/known_bugs.h)
  std::string known_name;     // that known bug's name ("" = none)
  std::string command;        // the reproduce command (`mlasim fuzz --reproduce ...`)
  std::string replay;         // `mlasim replay [FLAGS] FILE` when `file` was written, else ""
};

// A finding file read back (fuzz/findings.h) as a campaign finding; `earlier`: it was already in
// --out when this run started.
CampaignFinding FindingFromRecord(const FindingRecord& r, bool earlier);

struct CampaignSummary {
  int64_t cases = 0;            // cases committed by this run
  double seconds = 0;           // this run
  int64_t next_index = 0;       // the shard's committed cases over every run of the campaign
  double campaign_seconds = 0;  // over every run of the campaign
  int64_t resumed_at = -1;      // next_index this run resumed from (-1: started afresh)
  bool cut_short = false;       // --seconds ended the campaign before its --cases budget
  // The targets of the shard's committed cases, over every run: every violation's signature
  // (under ShrinkPolicy::kFirstFailure, each case's first violation's).
  std::set<std::string> signatures;
  // Every violation's signature of the cases this run committed, whatever the policy (equal to
  // `signatures` for a per-signature campaign that did not resume).
  std::set<std::string> shown;
  std::map<std::string, CampaignFinding> findings;  // by signature, earlier ones included
  // feature -> cases of this run exercising it; with swarm, "swarm-out:KNOB.OPTION" counts the
  // cases that left the option out and "swarm-out:nothing" those that left none out.
  std::map<std::string, int64_t> coverage;
  std::vector<std::string> notes;  // what the run told the user (NoteFn)
  // Cases of this run whose engine-step numerics ran (CampaignOptions::step_numerics_every).
  int64_t step_numerics = 0;
  // Cases of this run whose step ran nothing (counted apart, never as clean).
  NotRun not_run;
  int64_t NewFindings() const;
};

// Progress callback: cases so far (this run), new findings so far, seconds elapsed (this run).
using ProgressFn = std::function<void(int64_t, int64_t, double)>;
// A one-line note for the user, as it happens (resume state, cleanup of a killed run's files).
using NoteFn = std::function<void(const std::string&)>;

// A --seconds the user typed: (0, kMaxCampaignSeconds]. Errors: InvalidArgument("--seconds")
// (infinity too: only a budget left out, with --cases, is infinite; CheckCampaignOptions cannot
// tell the two apart, the command line can).
Status CheckCampaignSeconds(double seconds);

// The budgets' and flags' checks RunCampaign makes before any work (also before a --devices
// campaign starts its processes): --jobs 1..256, --cases 0..2^50 or -1, --seconds in
// (0, kMaxCampaignSeconds] (or +infinity with --cases), --shrink-steps 0..100000, --resume with
// --out. Errors: InvalidArgument naming the flag.
Status CheckCampaignOptions(const CampaignOptions& options);

// Errors: InvalidArgument naming the flag (--jobs, --seconds, --cases, --resume, --out,
// --profile), e.g. a progress file of another campaign or an unwritable --out.
StatusOr<CampaignSummary> RunCampaign(const CampaignOptions& options, const ProgressFn& progress,
                                      const NoteFn& note = nullptr);

// Parses "I/N" (0 <= I < N). Errors name --shard.
Status ParseShard(const std::string& text, int32_t* shard, int32_t* shards);
// Seeds: decimal, 0x-hex, or a 40-hex git commit (folded to 64 bits). Errors name --seed.
StatusOr<uint64_t> ParseSeed(const std::string& text);

}  // namespace mlasim::fuzz
