#include "fuzz/campaign.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string_view>
#include <thread>

#include "fuzz/coverage.h"
#include "fuzz/findings.h"
#include "fuzz/progress.h"
#include "fuzz/properties.h"
#include "fuzz/signature.h"
#include "ref/int_text.h"
#include "ref/mutant.h"
#include "sim/contract.h"
#include "sim/os_error.h"
#include "sim/scenario_json.h"

namespace mlasim::fuzz {
namespace {

namespace fs = std::filesystem;

// Features of the scenario space a case exercises (the campaign's coverage summary).
void Cover(const sim::Scenario& s, WorkerCoverage& cov) {
  // (the suffix by reference: a name is viewed, not copied, on its way to the count)
  auto hit = [&cov](std::string_view prefix, const auto&... suffix) {
    cov.Hit(prefix, suffix...);
  };
  hit(s.model.sparse ? "model:sparse" : "model:dense");
  hit("mtp_k:", s.mtp_k);
  // An engine whose backend is a planner dialect (vllm-flashmla, sglang-flashinfer) runs that
  // dialect's planner and kernel, whatever the scenario's aiter fields say.
  const std::string& backend = s.engine.attention_backend;
  const bool aiter = backend.empty() || backend == "aiter";
  hit("kernel:", aiter ? sim::DecodeVariant(s) : backend);
  hit("target:", ref::ArchName(s.target));
  hit("revision:", ref::RevisionName(s.revision));
  hit(s.allocator.model == sim::AllocatorModel::kExact ? "allocator:exact" : "allocator:caching");
  hit("profile:", s.engine.name);
  hit(s.graph.eager ? "graph:eager" : "graph:capture");
  if (!aiter)
    hit("planner:", backend);
  else
    hit(s.serial_planner ? "planner:serial" : "planner:aiter-dispatch");
  if (s.parallel.dcp > 1) hit("dcp");
  if (s.parallel.dp > 1) hit("dp");
  const int32_t per_rank = s.model.heads / s.parallel.tp;
  hit("heads_per_rank:", per_rank);
  const size_t b = s.requests.size();
  hit(b == 1 ? "batch:1" : b <= 8 ? "batch:2-8" : b <= 64 ? "batch:9-64" : "batch:65-512");
  // Request shapes, KV model and stated disagreements (docs/scenario.md).
  hit("kv_granularity:", s.kv_granularity);
  hit(s.max_split_per_batch == 16 ? "max_split:16"
      : s.max_split_per_batch < 0 ? "max_split:none"
                                  : "max_split:other");
  bool topk = false;
  for (const sim::RequestSpec& r : s.requests) topk = topk || !r.topk_lengths.empty();
  if (topk) hit("topk_lengths");
  // Verify q lengths (batch.q_lens): ragged when some request's differs from Q; q_len:0 when a
  // request has none, q_len:max when one has Q.
  if (sim::StatesQLens(s)) {
    bool ragged = false, zero = false, full = false;
    for (const sim::RequestSpec& r : s.requests) {
      const int32_t q = sim::QLen(s, r);
      ragged = ragged || q != s.mtp_k + 1;
      zero = zero || q == 0;
      full = full || q == s.mtp_k + 1;
    }
    hit(ragged ? "q_lens:ragged" : "q_lens:uniform");
    if (zero) hit("q_len:0");
    if (full) hit("q_len:max");
  }
  if (s.kv_cache.modelled) hit("kv_cache:page_", s.kv_cache.page_size);
  if (!s.kv_cache.index_values.empty()) hit("hostile_indices");
  for (const sim::CallOverride& o : s.calls) {
    if (o.launch_grid >= 0) hit("override:launch_grid");
    if (o.q_rows >= 0 || o.o_rows >= 0) hit("override:qo_rows");
    if (o.kernel_heads > 0 || o.kernel_q_cols > 0) hit("override:kernel_view");
    if (o.planner_cu_count > 0 || o.planner_heads > 0 || !o.planner_dtype.empty())
      hit("override:planner_inputs");
    if (!o.plan_from.empty()) hit("override:plan_from");
  }
  if (!s.sizing.empty()) hit("override:sizing");
}

// The options a swarm case left out (fuzz/scenario_gen.h SwarmOmittedNames), counted under
// `keys` (SwarmOptionKeys with the prefix "swarm-out:").
void CoverSwarm(const std::vector<std::vector<std::string>>& keys, const SwarmDraw& draw,
                WorkerCoverage& cov) {
  bool any = false;
  for (size_t k = 0; k < keys.size() && k < draw.omitted.size(); ++k)
    for (size_t i = 0; i < keys[k].size(); ++i)
      if (draw.omitted[k] >> i & 1u) {
        cov.HitSwarm(k, i);
        any = true;
      }
  if (!any) cov.Hit("swarm-out:nothing");
}

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

class Campaign {
 public:
  Campaign(const CampaignOptions& o, const ProgressFn& p, const NoteFn& n)
      : o_(o), progress_(p), note_(n) {}
  ~Campaign() {
    if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the shard's lock (a kill releases it too)
  }
  Campaign(const Campaign&) = delete;
  Campaign& operator=(const Campaign&) = delete;
  StatusOr<CampaignSummary> Run();

 private:
  // What one seed index gave; committed in index order so that the findings do not depend on
  // which thread finished first.
  struct CaseResult {
    std::vector<std::string> signatures;  // the case's targets under the policy (PolicyTargets)
    std::vector<std::string> shown;       // every violation's signature (sorted)
    // The shrunk finding of each target no lower index showed when the case ran (a lower index
    // committed later may still have shown it: the commit decides).
    std::map<std::string, Failure> failures;
    bool step_numerics = false;  // the engine-step numerics joined its property
    Status refusal;              // why the step ran nothing (ok: it ran)
  };
  CaseResult RunCase(int64_t k, int32_t slot, WorkerCoverage& cov);
  Failure Unreproduced(const sim::Scenario& scenario, const std::vector<sim::Violation>& broken,
                       uint64_t seed, int size, const std::string& sig);
  void Worker(int32_t slot);
  // What each worker thread is doing (slot -> case), for the slow-case notes of the progress
  // loop: a case that runs for minutes (a full-size kernel-under-test step, or its shrinking)
  // otherwise shows only as a frozen case count.
  void SetInFlight(int32_t slot, int64_t k, const std::string& phase);
  void NoteSlowCase();
  void CommitReadyLocked();
  void RecordLocked(const Failure& f, const std::string& signature, uint64_t index);
  uint64_t SeedIndex(int64_t k) const {
    return static_cast<uint64_t>(k) * static_cast<uint64_t>(o_.shards) +
           static_cast<uint64_t>(o_.shard);
  }
  std::string Path(const std::string& name) const { return (fs::path(o_.out_dir) / name).string(); }
  // This shard's temp files: `.tmp-I-of-N-...` (shards sharing a folder never touch another's).
  std::string TempPrefix() const { return fmt::format(".tmp-{}-of-{}-", o_.shard, o_.shards); }
  CampaignIdentity Identity() const;
  Status PrepareOutDir();
  Status LockShard();
  Status LoadKnownFindings();
  Status LoadProgress();
  Status CheckOneSplit() const;
  void SaveProgress();
  void Note(const std::string& line);
  bool Budgeted(int64_t k) const { return o_.max_cases < 0 || k < o_.max_cases; }
  // The policy the campaign runs; the slipping-shrink test mutant (campaign.h) is its one
  // injection point.
  ShrinkPolicy Policy() const {
    return MLASIM_MUTANT(o_.mutant, kSlippingShrink) ? ShrinkPolicy::kFirstFailure : o_.shrink;
  }

  const CampaignOptions& o_;
  const ProgressFn& progress_;
  const NoteFn& note_;
  GenConfig config_;
  std::vector<std::vector<std::string>> swarm_out_keys_;  // SwarmOptionKeys(config_, "swarm-out:")
  Property property_;
  Property numerics_property_;  // property_ and the engine-step numerics (step_numerics_every)
  CampaignSummary sum_;
  std::set<std::string> known_;  // signatures of findings in --out before the run (read-only)
  std::mutex mu_;
  std::condition_variable done_cv_;
  int live_workers_ = 0;                   // under mu_
  std::map<int64_t, CaseResult> pending_;  // finished but not committed (under mu_)
  // Signatures a case in flight or pending has shown and shrinks, with the lowest such index
  // (under mu_): a higher index showing one does not shrink it again, since the commit in index
  // order keeps the lower index's finding. Without this, every worker whose case showed a
  // common new signature shrank it at once (12 full-size kernel-under-test shrinks on the H200).
  std::map<std::string, int64_t> shrinking_;
  int64_t committed_ = 0;  // every k < committed_ is committed (under mu_)
  Status error_;           // first failure to write a finding (under mu_)
  int lock_fd_ = -1;       // DIR/.lock-I-of-N, held (LockShard)
  std::atomic<int64_t> next_{0};
  std::atomic<int64_t> cases_{0};
  std::atomic<int64_t> new_findings_{0};
  std::atomic<bool> stop_{false};
  std::chrono::steady_clock::time_point t0_;
  int64_t start_index_ = 0;
  double spent_before_ = 0;  // seconds of earlier runs of the campaign
  struct InFlight {
    int64_t k = -1;  // -1: idle
    std::chrono::steady_clock::time_point since;
    std::string phase;
  };
  std::mutex flight_mu_;
  std::vector<InFlight> in_flight_;  // by worker slot (under flight_mu_)
  double last_slow_note_ = 0;        // Since(t0_) of the last slow-case note (progress thread)
};

void Campaign::Note(const std::string& line) {
  sum_.notes.push_back(line);
  if (note_) note_(line);
}

CampaignIdentity Campaign::Identity() const {
  CampaignIdentity id;
  id.seed = o_.seed;
  id.profiles = o_.profiles;
  id.small = o_.small;
  id.ignore_known = o_.ignore_known;
  id.generate = o_.generate;
  id.contract_files = o_.contract_files;
  id.shard = o_.shard;
  id.shards = o_.shards;
  id.max_shrink_steps = o_.max_shrink_steps;
  id.kernel = o_.kernel;
  id.swarm = o_.swarm;
  id.shrink = ShrinkPolicyName(o_.shrink);
  // The numerics run only in simulator campaigns (a kernel under test has its own).
  id.step_numerics_every = o_.kernel.empty() ? o_.step_numerics_every : 0;
  return id;
}

void Campaign::RecordLocked(const Failure& f, const std::string& signature, uint64_t index) {
  // In --out already, or (first-failure) an earlier case's shrink slipped to the same signature.
  if (sum_.findings.count(signature)) return;
  CampaignFinding cf;
  cf.signature = signature;
  cf.seed_index = index;
  cf.detail = ViolationDetail(*FindSignature(f.broken, signature));
  cf.shrink_steps = f.shrink_steps;
  cf.max_shrink_steps = o_.max_shrink_steps;
  cf.cut_short = f.cut_short;
  const sim::KnownBug* known = KnownBugOf(f, signature);
  FindingOrigin origin;
  origin.known = known;
  origin.seed_index = index;
  origin.profiles = o_.profiles;
  origin.profiles_are_default = o_.profiles == CampaignOptions{}.profiles;
  origin.small = o_.small;
  origin.generate = o_.generate;
  origin.contract_files = o_.contract_files;
  origin.max_shrink_steps = o_.max_shrink_steps;
  origin.replay_flags = o_.replay_flags;
  origin.kernel_inputs = o_.kernel_inputs;
  origin.gpu_mode = o_.gpu_mode;
  if (!o_.kernel_limits.LimitsNothing()) origin.kernel_flags = o_.kernel_flags;
  origin.swarm = o_.swarm;
  origin.shrink = o_.shrink;
  if (known) {
    cf.known = sim::KnownBugText(*known);
    cf.known_name = known->name;
  }
  cf.command = ReproduceCommand(f, origin);
  if (!o_.out_dir.empty() && error_.ok()) {
    const std::string name = FindingFileName(signature);
    Status st = WriteFileAtomic(Path(name), Path(TempPrefix() + name),
                                FindingDocument(f, signature, origin).dump(2) + '\n', "--out");
    if (!st.ok()) {  // the campaign stops: a finding it cannot keep is not reported as kept
      error_ = st;
      stop_ = true;
      return;
    }
    cf.file = Path(name);
    cf.replay = ReplayCommand(o_.replay_flags, cf.file);
    const sim::Violation* v = FindSignature(f.broken, signature);
    if (v && (v->kind == sim::ViolationKind::kPoisonedOutput ||
              v->kind == sim::ViolationKind::kWrongOutput))  // an engine-step numerics finding
      cf.replay = fmt::format("mlasim numerics --poison --max-context {} {}", kStepNumericsContext,
                              cf.file);
  }
  if (o_.on_finding) o_.on_finding(cf);
  sum_.findings.emplace(signature, std::move(cf));
  ++new_findings_;
}

// A target is shrunk only when no committed (lower) index had shown it; the commit in index
// order then keeps exactly the findings a one-thread run keeps: the same files at any --jobs.
void Campaign::CommitReadyLocked() {
  for (auto it = pending_.find(committed_); it != pending_.end(); it = pending_.find(committed_)) {
    const CaseResult& r = it->second;
    sum_.step_numerics += r.step_numerics ? 1 : 0;
    if (!r.refusal.ok()) sum_.not_run.Add(r.refusal, SeedIndex(committed_));
    sum_.shown.insert(r.shown.begin(), r.shown.end());
    for (const std::string& sig : r.signatures) {
      if (!sum_.signatures.insert(sig).second) continue;  // a lower index showed it
      const auto f = r.failures.find(sig);
      if (f == r.failures.end()) continue;  // in --out before the run: not shrunk again
      RecordLocked(f->second, FiledSignature(f->second, Policy()), SeedIndex(committed_));
    }
    for (auto s = shrinking_.begin(); s != shrinking_.end();)
      s = s->second <= committed_ ? shrinking_.erase(s) : std::next(s);
    pending_.erase(it);
    ++committed_;
  }
}

Campaign::CaseResult Campaign::RunCase(int64_t k, int32_t slot, WorkerCoverage& cov) {
  const uint64_t index = SeedIndex(k);
  const uint64_t seed = o_.seed * 0x9E3779B97F4A7C15ull + index;
  const int size = static_cast<int>(10 + (index % 91));
  sim::Scenario scenario;
  SwarmDraw swarm;
  // Drawn directly (fuzz/draw.h): no RapidCheck state, so no GeneratorMutex.
  scenario = ScenarioAndSwarmFromSeed(config_, seed, size, &swarm);
  Cover(scenario, cov);
  if (config_.swarm) CoverSwarm(swarm_out_keys_, swarm, cov);
  CaseResult res;
  res.step_numerics =
      numerics_property_ && index % static_cast<uint64_t>(o_.step_numerics_every) == 0;
  const Property& property = res.step_numerics ? numerics_property_ : property_;
  const std::vector<sim::Violation> broken =
      Evaluate(scenario, property, sim::SimMutant::kNone, &res.refusal);
  if (broken.empty()) return res;
  res.signatures = PolicyTargets(broken, Policy());
  res.shown = Signatures(broken);
  std::vector<std::string> todo;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& sig : res.signatures) {
      if (sum_.signatures.count(sig) || known_.count(sig)) continue;
      // A lower index in flight has shown it: that case's shrink is the one the commit keeps.
      const auto [it, first] = shrinking_.emplace(sig, k);
      if (!first && it->second < k) continue;
      it->second = std::min(it->second, k);
      todo.push_back(sig);
    }
  }
  for (const std::string& sig : todo) {
    SetInFlight(slot, k, "shrinking " + sig);
    std::optional<Failure> f = ShrinkForPolicy(config_, seed, size, property, sim::SimMutant::kNone,
                                               sig, Policy(), o_.max_shrink_steps);
    if (!f.has_value() && !o_.kernel.empty()) f = Unreproduced(scenario, broken, seed, size, sig);
    MLASIM_ASSERT(f.has_value(), "a replay of the same scenario shows the same violations");
    res.failures.emplace(sig, std::move(*f));
  }
  return res;
}

// A kernel under test is not bound to be deterministic (a race, a hang near the timeout): when
// the first replay of the generated case no longer shows `sig`, the unshrunk case is the finding,
// its violation saying so.
Failure Campaign::Unreproduced(const sim::Scenario& scenario,
                               const std::vector<sim::Violation>& broken, uint64_t seed, int size,
                               const std::string& sig) {
  Failure f;
  f.scenario = scenario;
  f.seed = seed;
  f.size = size;
  f.target = sig;
  for (const sim::Violation& v : broken) {
    if (Signature(v) != sig) continue;
    f.broken.push_back(v);
    f.broken.back().detail +=
        " (not shown again when the case was replayed to shrink it: the "
        "kernel under test is not deterministic here; not shrunk)";
  }
  return f;
}

void Campaign::Worker(int32_t slot) {
  WorkerCoverage cov;
  while (!stop_.load()) {
    const int64_t k = next_.fetch_add(1);
    if (!Budgeted(k) || Since(t0_) >= o_.seconds - spent_before_) break;
    SetInFlight(slot, k, "checking");
    CaseResult res = RunCase(k, slot, cov);
    SetInFlight(slot, -1, "");
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_.emplace(k, std::move(res));
      CommitReadyLocked();
    }
    ++cases_;
  }
  std::lock_guard<std::mutex> lock(mu_);
  cov.MergeInto(swarm_out_keys_, sum_.coverage);
  if (--live_workers_ == 0) done_cv_.notify_all();
}

void Campaign::SetInFlight(int32_t slot, int64_t k, const std::string& phase) {
  std::lock_guard<std::mutex> lock(flight_mu_);
  InFlight& f = in_flight_[static_cast<size_t>(slot)];
  if (f.k != k) f.since = std::chrono::steady_clock::now();
  f.k = k;
  f.phase = phase;
}

// Every slow_case_note_seconds while some case has run that long: its seed index, age and phase,
// on the note stream only (stderr; never the summary or --out, which stay timing-free).
void Campaign::NoteSlowCase() {
  const double slow = o_.slow_case_note_seconds;
  if (!note_ || Since(t0_) - last_slow_note_ < slow) return;
  std::lock_guard<std::mutex> lock(flight_mu_);
  const InFlight* oldest = nullptr;
  int32_t busy = 0;
  for (const InFlight& f : in_flight_) {
    if (f.k < 0) continue;
    ++busy;
    if (!oldest || f.since < oldest->since) oldest = &f;
  }
  if (!oldest || Since(oldest->since) < slow) return;
  last_slow_note_ = Since(t0_);
  note_(fmt::format("the case at seed index {} has run for {:.0f} s ({}); {} of {} worker(s) busy",
                    SeedIndex(oldest->k), Since(oldest->since), oldest->phase, busy,
                    in_flight_.size()));
}

// Findings already in --out (earlier runs, merged folders, other shards) are not reported again;
// the summary lists them with the seed index their files record.
Status Campaign::LoadKnownFindings() {
  std::vector<FindingRecord> all;
  for (const std::string& dir : o_.known_dirs) {
    auto known = ReadFindingDir(dir, "--out");
    if (!known.ok()) return known.status();
    all.insert(all.end(), known->begin(), known->end());
  }
  auto records = ReadFindingDir(o_.out_dir, "--out");
  if (!records.ok()) return records.status();
  all.insert(all.end(), records->begin(), records->end());
  for (const FindingRecord& r : all) {
    known_.insert(r.signature);
    sum_.findings[r.signature] = FindingFromRecord(r, true);
  }
  return OkStatus();
}

// --resume: the progress file must be one this campaign wrote (same seed, profiles, options,
// shard); anything else is an error naming --resume, never a silent restart.
Status Campaign::LoadProgress() {
  const std::string path = Path(ProgressFileName(o_.shard, o_.shards));
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    Note(
        fmt::format("--resume: no progress file {} (the earlier run was stopped before its "
                    "first checkpoint, or never ran): starting the shard at case 0",
                    path));
    return OkStatus();
  }
  auto p = ReadProgressFile(path, "--resume");
  if (!p.ok()) return p.status();
  const nlohmann::json want = IdentityJson(Identity());
  const nlohmann::json have = IdentityJson(p->identity);
  for (const auto& [k, v] : want.items())
    if (have[k] != v)
      return InvalidArgumentError("--resume", path + " belongs to another campaign (" + k + " " +
                                                  have[k].dump() + ", this run " + v.dump() +
                                                  "); use the same flags or a new --out");
  sum_.signatures = std::move(p->signatures);
  start_index_ = p->next_index;
  spent_before_ = p->seconds_spent;
  sum_.resumed_at = start_index_;
  Note(fmt::format("--resume: continuing at case {} after {:.1f} s of earlier runs", start_index_,
                   spent_before_));
  return OkStatus();
}

void Campaign::SaveProgress() {
  if (o_.out_dir.empty()) return;
  Progress p;
  p.identity = Identity();
  {
    std::lock_guard<std::mutex> lock(mu_);
    p.next_index = committed_;  // a resume re-runs whatever was in flight
    p.signatures = sum_.signatures;
  }
  p.seconds_spent = spent_before_ + Since(t0_);
  // A failed checkpoint is retried at the next one; a resume then re-runs a little more.
  (void)WriteFileAtomic(Path(ProgressFileName(o_.shard, o_.shards)),
                        Path(TempPrefix() + "progress"), ProgressText(p), "--out");
}

// One run per shard and folder: a second run of the shard into the folder (another terminal, a
// script started twice) would remove the first one's temp files as a killed run's, replace its
// progress file at every checkpoint and count its findings as earlier ones. An flock on
// DIR/.lock-I-of-N (an empty file, left in place) held for the run refuses it; the kernel drops
// the lock when the holder exits or is killed, so a kill leaves nothing to clean up.
Status Campaign::LockShard() {
  const std::string path = Path(fmt::format(".lock-{}-of-{}", o_.shard, o_.shards));
  lock_fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) return sim::OsError("--out", sim::FileOp::kWrite, path, errno);
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) == 0) return OkStatus();
  const int e = errno;
  ::close(lock_fd_);
  lock_fd_ = -1;
  if (e == EWOULDBLOCK)
    return InvalidArgumentError(
        "--out", fmt::format("{} is in use: another campaign of shard {}/{} is running into it "
                             "(it holds {}); one run per shard and folder",
                             o_.out_dir, o_.shard, o_.shards, path));
  return sim::OsError("--out", sim::FileOp::kWrite, path, e);
}

// A progress file in --out of this campaign (its identity but the shard) split another way:
// shard I of N runs the seed indices i % N == I, so this shard would run cases that one ran, and
// `fuzz merge` refuses the folder afterwards (FuzzMerge's CheckOneSplit). A run of --shard 0/2
// into the folder of an unsharded campaign was taken, with --resume too (no .progress-0-of-2
// there: "starting the shard at case 0"). Unreadable or malformed progress files are left to
// merge and --resume, which name them.
Status Campaign::CheckOneSplit() const {
  nlohmann::json mine = IdentityJson(Identity());
  mine.erase("shard");
  mine.erase("shards");
  std::error_code ec;
  std::vector<fs::path> paths;
  for (fs::directory_iterator it(o_.out_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string n = it->path().filename().string();
    if (n.rfind(".progress-", 0) == 0 && n.find(".tmp") == std::string::npos)
      paths.push_back(it->path());
  }
  std::sort(paths.begin(), paths.end());
  for (const fs::path& p : paths) {
    auto prog = ReadProgressFile(p.string(), "--out");
    if (!prog.ok() || prog->identity.shards == o_.shards) continue;
    nlohmann::json theirs = IdentityJson(prog->identity);
    theirs.erase("shard");
    theirs.erase("shards");
    if (theirs != mine) continue;  // another campaign: merge keeps campaigns apart
    return InvalidArgumentError(
        "--shard", fmt::format("{} holds {} (shard {}/{}), this campaign split another way: "
                               "shard {}/{} would run cases it ran, and fuzz merge refuses the "
                               "folder; use the same --shard I/N or a new --out",
                               o_.out_dir, p.string(), prog->identity.shard, prog->identity.shards,
                               o_.shard, o_.shards));
  }
  return OkStatus();
}

Status Campaign::PrepareOutDir() {
  std::error_code ec;
  // Created, and findings must be writable before the campaign starts: a read-only, full or
  // missing folder is refused naming the cause (sim/os_error.h).
  MLASIM_RETURN_IF_ERROR(sim::PrepareOutputFolder("--out", o_.out_dir, /*create=*/true));
  MLASIM_RETURN_IF_ERROR(LockShard());
  if (const int n = RemoveTempFiles(o_.out_dir, TempPrefix()))
    Note(fmt::format("removed {} temp file(s) {}* that a killed run of this shard left in {}", n,
                     TempPrefix(), o_.out_dir));
  MLASIM_RETURN_IF_ERROR(LoadKnownFindings());
  MLASIM_RETURN_IF_ERROR(CheckOneSplit());
  if (o_.resume) return LoadProgress();
  if (fs::exists(Path(ProgressFileName(o_.shard, o_.shards)), ec))
    Note(
        fmt::format("{} holds a progress file of shard {}/{}; without --resume this run starts "
                    "the shard again at case 0 and replaces it",
                    o_.out_dir, o_.shard, o_.shards));
  return OkStatus();
}

StatusOr<CampaignSummary> Campaign::Run() {
  config_.profiles = o_.profiles;
  config_.small = o_.small;
  config_.kernel_inputs = o_.kernel_inputs;
  config_.kernel = o_.kernel_limits;
  if (o_.small) config_.max_batch = 64;
  MLASIM_RETURN_IF_ERROR(EnableFamilies(o_.generate, &config_));
  config_.contracts = o_.contracts;
  config_.swarm = o_.swarm;
  swarm_out_keys_ = SwarmOptionKeys(config_, "swarm-out:");
  for (const std::string& p : o_.profiles) {
    auto e = sim::GetEngineProfile(p, "--profile");
    if (!e.ok()) return e.status();
  }
  property_ = o_.property;
  if (!property_)
    property_ = o_.ignore_known
                    ? Property(UnknownViolations)
                    : Property([](const sim::ReplayReport& r) { return r.result.violations; });
  if (o_.step_numerics_every < 0)
    return InvalidArgumentError("--step-numerics-every", "must be >= 0 (0: never)");
  if (o_.step_numerics_every > 0 && o_.kernel.empty())
    numerics_property_ = [base = property_](const sim::ReplayReport& r) {
      std::vector<sim::Violation> v = base(r);
      for (sim::Violation& n : NumericsViolations(r)) v.push_back(std::move(n));
      return v;
    };
  if (!o_.out_dir.empty()) MLASIM_RETURN_IF_ERROR(PrepareOutDir());
  next_ = start_index_;
  committed_ = start_index_;
  t0_ = std::chrono::steady_clock::now();
  if (!Budgeted(start_index_) || spent_before_ >= o_.seconds)
    Note(fmt::format("the campaign's budget is spent ({} cases, {:.1f} s): nothing to run",
                     start_index_, spent_before_));
  SaveProgress();  // the first checkpoint, before any case
  std::vector<std::thread> workers;
  live_workers_ = o_.jobs;
  in_flight_.assign(static_cast<size_t>(o_.jobs), InFlight{});
  for (int32_t j = 0; j < o_.jobs; ++j) workers.emplace_back([this, j] { Worker(j); });
  // Progress and checkpoints from the calling thread, until every worker has stopped.
  while (true) {
    std::unique_lock<std::mutex> lock(mu_);
    if (done_cv_.wait_for(lock, std::chrono::milliseconds(200),
                          [this] { return live_workers_ == 0; }))
      break;
    lock.unlock();
    if (progress_) progress_(cases_.load(), new_findings_.load(), Since(t0_));
    NoteSlowCase();
    SaveProgress();
  }
  for (auto& w : workers) w.join();
  if (!error_.ok()) return error_;
  if (progress_) progress_(cases_.load(), new_findings_.load(), Since(t0_));
  SaveProgress();
  sum_.cases = committed_ - start_index_;  // cases past a gap at a --seconds stop are not counted
  sum_.seconds = Since(t0_);
  sum_.next_index = committed_;
  sum_.campaign_seconds = spent_before_ + sum_.seconds;
  sum_.cut_short = o_.max_cases >= 0 && committed_ < o_.max_cases;
  return sum_;
}

}  // namespace

int64_t CampaignSummary::NewFindings() const {
  int64_t n = 0;
  for (const auto& [sig, f] : findings) n += f.earlier ? 0 : 1;
  return n;
}

Status CheckCampaignSeconds(double seconds) {
  if (seconds > 0 && seconds <= kMaxCampaignSeconds) return OkStatus();
  return InvalidArgumentError(
      "--seconds", fmt::format("must be in (0, {}] seconds (a year; it may be left out with "
                               "--cases; got {})",
                               kMaxCampaignSeconds, seconds));
}

Status CheckCampaignOptions(const CampaignOptions& options) {
  if (options.jobs < 1 || options.jobs > 256)
    return InvalidArgumentError("--jobs", "must be in 1..256");
  if (options.max_cases < -1 || options.max_cases > kMaxProgressIndex)
    return InvalidArgumentError("--cases", "must be in 0..2^50, or -1 for a time-only run");
  const bool cases_alone = std::isinf(options.seconds) && options.seconds > 0 &&
                           options.max_cases >= 0;  // --cases without --seconds
  if (!cases_alone) MLASIM_RETURN_IF_ERROR(CheckCampaignSeconds(options.seconds));
  if (options.max_shrink_steps < 0 || options.max_shrink_steps > 100000)
    return InvalidArgumentError("--shrink-steps", "must be in 0..100000");
  if (options.out_dir.empty() && options.resume)
    return InvalidArgumentError("--resume", "needs --out DIR");
  return OkStatus();
}

StatusOr<CampaignSummary> RunCampaign(const CampaignOptions& options, const ProgressFn& progress,
                                      const NoteFn& note) {
  MLASIM_RETURN_IF_ERROR(CheckCampaignOptions(options));
  Campaign c(options, progress, note);
  return c.Run();
}

Status ParseShard(const std::string& text, int32_t* shard, int32_t* shards) {
  const auto slash = text.find('/');
  try {
    if (slash == std::string::npos) throw std::invalid_argument("no slash");
    if (text.find_first_not_of("0123456789/") != std::string::npos)
      throw std::invalid_argument("not digits");
    size_t a = 0, b = 0;
    const long i = std::stol(text.substr(0, slash), &a);
    const long n = std::stol(text.substr(slash + 1), &b);
    if (a != slash || b != text.size() - slash - 1 || n < 1 || i < 0 || i >= n || n > 1000000)
      throw std::invalid_argument("range");
    *shard = static_cast<int32_t>(i);
    *shards = static_cast<int32_t>(n);
  } catch (const std::exception&) {
    return InvalidArgumentError("--shard", "must be I/N with 0 <= I < N (got '" + text + "')");
  }
  return OkStatus();
}

StatusOr<uint64_t> ParseSeed(const std::string& text) {
  auto hex_value = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (text.size() == 40) {  // a git commit: fold 160 bits into 64
    uint64_t h = 0xcbf29ce484222325ull;
    for (char c : text) {
      const int v = hex_value(c);
      if (v < 0) return InvalidArgumentError("--seed", "a 40-character seed must be a hex commit");
      h = (h ^ static_cast<uint64_t>(v)) * 0x100000001b3ull;
    }
    return h;
  }
  try {
    // digits or 0x-hex only: stoull alone would take " 5", "+5" and wrap "-1" to 2^64 - 1
    const bool hex = text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
    const std::string digits = hex ? text.substr(2) : text;
    if (digits.empty() || digits.find_first_not_of(hex ? "0123456789abcdefABCDEF" : "0123456789") !=
                              std::string::npos)
      throw std::invalid_argument("not a number");
    size_t used = 0;
    const uint64_t v = std::stoull(text, &used, 0);
    if (used != text.size()) throw std::invalid_argument("trailing");
    return v;
  } catch (const std::exception&) {
    if (ref::IsDecimalBeyond64Bits(text))
      return InvalidArgumentError("--seed", ref::Beyond64BitsText(text));
    const bool hex = text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
    if (hex && text.find_first_not_of("0123456789abcdefABCDEF", 2) == std::string::npos)
      return InvalidArgumentError("--seed", "'" + text + "' is a hex number above 64 bits (" +
                                                std::to_string(text.size() - 2) +
                                                " digits; at most 16)");
    return InvalidArgumentError(
        "--seed", "must be a number, 0x-hex, or a 40-hex commit (got '" + text + "')");
  }
}

CampaignFinding FindingFromRecord(const FindingRecord& r, bool earlier) {
  CampaignFinding f;
  f.signature = r.signature;
  f.seed_index = r.seed_index;
  f.file = r.path;
  f.detail = r.detail;
  f.shrink_steps = r.shrink_steps;
  f.max_shrink_steps = r.max_shrink_steps;
  f.cut_short = r.cut_short;
  f.earlier = earlier;
  f.known_name = r.known_name;
  f.command = r.command;
  f.replay = ReplayCommand(r.replay_flags, r.path);
  return f;
}

}  // namespace mlasim::fuzz
