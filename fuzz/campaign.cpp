#include "fuzz/campaign.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "fuzz/properties.h"
#include "fuzz/search.h"
#include "sim/json_input.h"
#include "sim/scenario_json.h"
#include "sim/contract.h"

namespace mlasim::fuzz {
namespace {

namespace fs = std::filesystem;

std::string FileName(const std::string& signature) {
  std::string out;
  for (char c : signature)
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') ? c : '.';
  return out + ".json";
}

// Features of the scenario space a case exercises (the campaign's coverage summary).
void Cover(const sim::Scenario& s, std::map<std::string, int64_t>& cov) {
  auto hit = [&cov](const std::string& k) { ++cov[k]; };
  hit(s.model.sparse ? "model:sparse" : "model:dense");
  hit("mtp_k:" + std::to_string(s.mtp_k));
  hit(std::string("kernel:") + sim::DecodeVariant(s));
  hit(std::string("target:") + ref::ArchName(s.target));
  hit(std::string("revision:") + ref::RevisionName(s.revision));
  hit(s.allocator.model == sim::AllocatorModel::kExact ? "allocator:exact" : "allocator:caching");
  hit("profile:" + s.engine.name);
  hit(s.graph.eager ? "graph:eager" : "graph:capture");
  hit(s.serial_planner ? "planner:serial" : "planner:aiter-dispatch");
  if (s.parallel.dcp > 1) hit("dcp");
  if (s.parallel.dp > 1) hit("dp");
  const int32_t per_rank = s.model.heads / s.parallel.tp;
  hit("heads_per_rank:" + std::to_string(per_rank));
  const size_t b = s.requests.size();
  hit(b == 1 ? "batch:1" : b <= 8 ? "batch:2-8" : b <= 64 ? "batch:9-64" : "batch:65-512");
}

class Campaign {
 public:
  Campaign(const CampaignOptions& o, const ProgressFn& p) : o_(o), progress_(p) {}
  StatusOr<CampaignSummary> Run();

 private:
  // What one seed index gave; committed in index order so that the findings do not depend on
  // which thread finished first.
  struct CaseResult {
    std::string unshrunk;  // signature of the unshrunk scenario's first violation, or ""
    std::optional<Failure>
        failure;  // the shrunk finding (not computed when a lower index had `unshrunk`)
  };
  void Worker(int32_t job);
  void CommitReadyLocked();
  void RecordLocked(const Failure& f, uint64_t index);
  uint64_t SeedIndex(int64_t k) const {
    return static_cast<uint64_t>(k) * static_cast<uint64_t>(o_.shards) +
           static_cast<uint64_t>(o_.shard);
  }
  std::string ProgressPath() const {
    return (fs::path(o_.out_dir) / fmt::format(".progress-{}-of-{}", o_.shard, o_.shards)).string();
  }
  void SaveProgress();
  Status LoadProgress();
  nlohmann::json Identity() const;

  const CampaignOptions& o_;
  const ProgressFn& progress_;
  GenConfig config_;
  CampaignSummary sum_;
  std::mutex mu_;
  std::atomic<int64_t> next_{0};
  std::map<int64_t, CaseResult> pending_;  // finished but not committed (under mu_)
  int64_t committed_ = 0;                  // every k < committed_ is committed (under mu_)
  std::set<std::string> seen_unshrunk_;    // unshrunk signatures of committed cases (under mu_)
  std::atomic<int64_t> cases_{0};
  std::atomic<bool> stop_{false};
  std::chrono::steady_clock::time_point t0_;
  int64_t start_index_ = 0;
};

// " --profile P" for each campaign profile, unless they are the default (CampaignOptions).
std::string ProfileFlags(const std::vector<std::string>& profiles) {
  if (profiles == CampaignOptions{}.profiles) return "";
  std::string out;
  for (const std::string& p : profiles) out += " --profile " + p;
  return out;
}

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void Campaign::RecordLocked(const Failure& f, uint64_t index) {
  const sim::Violation& v = f.broken.front();
  const std::string sig = Signature(v);
  if (sum_.findings.count(sig)) return;  // known, or found at a lower seed index
  CampaignFinding cf;
  cf.signature = sig;
  cf.seed_index = index;
  cf.detail = v.detail;
  if (!o_.out_dir.empty()) {
    nlohmann::json doc = sim::ScenarioToJson(f.scenario);
    doc["name"] = "finding-" + FileName(sig).substr(0, FileName(sig).size() - 5);
    std::string path_json = "[";
    for (size_t i = 0; i < f.shrink_path.size(); ++i)
      path_json += (i ? "," : "") + std::to_string(f.shrink_path[i]);
    path_json += "]";
    doc["finding"] = {
        {"signature", sig},
        {"violation",
         {{"kind", sim::ViolationKindName(v.kind)},
          {"class", v.bug_class},
          {"step", v.step},
          {"call", v.call},
          {"buffer", v.buffer},
          {"access", v.access},
          {"rows_past_end", v.rows_past_end},
          {"detail", v.detail}}},
        {"reproduce",
         {{"seed", f.seed},
          {"size", f.size},
          {"shrink_path", f.shrink_path},
          {"profiles", o_.profiles},
          {"small", o_.small},
          {"command",
           fmt::format("mlasim fuzz --reproduce {} --size {} --shrink-path {}{}{}", f.seed, f.size,
                       path_json, ProfileFlags(o_.profiles), o_.small ? " --small" : "")},
          {"rc_params", fmt::format("seed={} max_success=1 max_size={}", f.seed, f.size)}}}};
    const fs::path final_path = fs::path(o_.out_dir) / FileName(sig);
    const fs::path tmp = fs::path(o_.out_dir) / (".tmp-" + FileName(sig));
    {
      std::ofstream out(tmp);
      out << doc.dump(2) << '\n';
    }
    std::error_code ec;
    fs::rename(tmp, final_path, ec);  // atomic on one filesystem: a reader sees all or nothing
    if (!ec) cf.file = final_path.string();
  }
  sum_.findings.emplace(sig, std::move(cf));
}

// A case is shrunk only when no committed (lower) index had its unshrunk signature; the commit
// in index order then keeps exactly the findings a one-thread run keeps: the same files at any
// --jobs.
void Campaign::CommitReadyLocked() {
  for (auto it = pending_.find(committed_); it != pending_.end(); it = pending_.find(committed_)) {
    const CaseResult& r = it->second;
    if (!r.unshrunk.empty() && seen_unshrunk_.insert(r.unshrunk).second && r.failure)
      RecordLocked(*r.failure, SeedIndex(committed_));
    pending_.erase(it);
    ++committed_;
  }
}

void Campaign::Worker(int32_t job) {
  (void)job;
  std::map<std::string, int64_t> cov;
  const Property property =
      o_.ignore_known ? Property(UnknownViolations)
                      : Property([](const sim::ReplayReport& r) { return r.result.violations; });
  while (!stop_.load()) {
    const int64_t k = next_.fetch_add(1);
    if (o_.max_cases >= 0 && k - start_index_ >= o_.max_cases) break;
    if (Since(t0_) >= o_.seconds) break;
    const uint64_t index = SeedIndex(k);
    const uint64_t seed = o_.seed * 0x9E3779B97F4A7C15ull + index;
    const int size = static_cast<int>(10 + (index % 91));
    sim::Scenario scenario;
    {
      std::lock_guard<std::mutex> gen_lock(GeneratorMutex());  // RapidCheck is not thread-safe
      scenario = ScenarioFromSeed(config_, seed, size).value();
    }
    Cover(scenario, cov);
    CaseResult res;
    std::vector<sim::Violation> broken = Evaluate(scenario, property, sim::SimMutant::kNone);
    if (!broken.empty()) {
      res.unshrunk = Signature(broken.front());
      bool seen;
      {
        std::lock_guard<std::mutex> lock(mu_);
        seen = seen_unshrunk_.count(res.unshrunk) > 0;
      }
      if (!seen) res.failure = TestSeed(config_, seed, size, property, sim::SimMutant::kNone);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_.emplace(k, std::move(res));
      CommitReadyLocked();
    }
    ++cases_;
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [k, v] : cov) sum_.coverage[k] += v;
}

// What a progress file must match to be resumed: the campaign that wrote it.
nlohmann::json Campaign::Identity() const {
  return {{"seed", o_.seed},   {"profiles", o_.profiles},
          {"small", o_.small}, {"ignore_known", o_.ignore_known},
          {"shard", o_.shard}, {"shards", o_.shards}};
}

// --resume: the progress file must be one this campaign wrote (same seed, profiles, options,
// shard); anything else is an error naming --resume, never a silent restart.
Status Campaign::LoadProgress() {
  const std::string path = ProgressPath();
  auto text = sim::ReadTextFile(path, "--resume");
  if (!text.ok()) return text.status();
  auto doc = sim::ParseJsonStrict(*text, "--resume");
  if (!doc.ok()) return InvalidArgumentError("--resume", path + ": " + doc.status().message());
  const nlohmann::json want = Identity();
  if (!doc->is_object()) return InvalidArgumentError("--resume", path + " is not a progress file");
  for (const auto& [k, v] : want.items())
    if (!doc->contains(k) || (*doc)[k] != v)
      return InvalidArgumentError(
          "--resume", path + " belongs to another campaign (" + k + " " +
                          (doc->contains(k) ? (*doc)[k].dump() : "missing") + ", this run " +
                          v.dump() + "); use the same flags or a new --out");
  const auto& next = (*doc)["next_index"];
  if (!next.is_number_integer() || !sim::IsInt64(next) || next.get<int64_t>() < 0 ||
      next.get<int64_t>() > (int64_t{1} << 50))
    return InvalidArgumentError("--resume", path + ": next_index must be an integer in 0..2^50");
  const auto& seen = (*doc)["seen_unshrunk"];
  if (!seen.is_array())
    return InvalidArgumentError("--resume", path + ": seen_unshrunk must be an array");
  for (const auto& v : seen) {
    if (!v.is_string())
      return InvalidArgumentError("--resume", path + ": seen_unshrunk holds signatures (strings)");
    seen_unshrunk_.insert(v.get<std::string>());
  }
  start_index_ = next.get<int64_t>();
  return OkStatus();
}

void Campaign::SaveProgress() {
  if (o_.out_dir.empty()) return;
  const fs::path tmp = ProgressPath() + ".tmp";
  nlohmann::json doc = Identity();
  {
    std::lock_guard<std::mutex> lock(mu_);
    doc["next_index"] = committed_;  // a resume re-runs whatever was in flight
    // the unshrunk signatures already committed: a resumed run skips them as an unbroken one does
    doc["seen_unshrunk"] = seen_unshrunk_;
  }
  std::ofstream(tmp) << doc.dump() << '\n';
  std::error_code ec;
  fs::rename(tmp, ProgressPath(), ec);
}

StatusOr<CampaignSummary> Campaign::Run() {
  config_.profiles = o_.profiles;
  config_.small = o_.small;
  if (o_.small) config_.max_batch = 64;
  for (const std::string& p : o_.profiles) {
    auto e = sim::GetEngineProfile(p, "--profile");
    if (!e.ok()) return e.status();
  }
  if (!o_.out_dir.empty()) {
    std::error_code ec;
    fs::create_directories(o_.out_dir, ec);
    if (ec)
      return InvalidArgumentError("--out", "cannot create " + o_.out_dir + ": " + ec.message());
    // Findings must be writable before the campaign starts: probe with a temp file and a rename.
    const fs::path probe = fs::path(o_.out_dir) / ".probe";
    { std::ofstream(probe.string() + ".tmp") << "probe\n"; }
    fs::rename(probe.string() + ".tmp", probe, ec);
    if (ec)
      return InvalidArgumentError("--out",
                                  "cannot write findings into " + o_.out_dir + ": " + ec.message());
    fs::remove(probe, ec);
    // Known signatures (merged directories, earlier runs) are not reported twice.
    for (const auto& e : fs::directory_iterator(o_.out_dir)) {
      const std::string n = e.path().filename().string();
      if (n.empty() || n[0] == '.' || e.path().extension() != ".json" || !e.is_regular_file(ec))
        continue;
      auto text = sim::ReadTextFile(e.path().string(), "--out");
      if (!text.ok()) continue;
      auto doc = nlohmann::json::parse(*text, nullptr, false);
      if (doc.is_discarded() || !doc.is_object() || !doc.contains("finding") ||
          !doc["finding"].is_object() || !doc["finding"].contains("signature") ||
          !doc["finding"]["signature"].is_string())
        continue;
      CampaignFinding cf;
      cf.signature = doc["finding"].value("signature", "");
      cf.file = e.path().string();
      cf.detail = "(from an earlier run)";
      if (!cf.signature.empty()) sum_.findings.emplace(cf.signature, cf);
    }
    if (o_.resume && fs::exists(ProgressPath())) MLASIM_RETURN_IF_ERROR(LoadProgress());
  }
  next_ = start_index_;
  committed_ = start_index_;
  const size_t known = sum_.findings.size();
  t0_ = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int32_t j = 0; j < o_.jobs; ++j) workers.emplace_back([this, j] { Worker(j); });
  // Progress and periodic checkpoints from the calling thread.
  while (true) {
    bool done = true;
    for (auto& w : workers) (void)w;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const int64_t c = cases_.load();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (progress_) progress_(c, static_cast<int64_t>(sum_.findings.size() - known), Since(t0_));
    }
    SaveProgress();
    done = Since(t0_) >= o_.seconds || (o_.max_cases >= 0 && c >= o_.max_cases);
    if (done) break;
  }
  stop_ = true;
  for (auto& w : workers) w.join();
  SaveProgress();
  sum_.cases = committed_ - start_index_;  // cases past a gap at a --seconds stop are not counted
  sum_.seconds = Since(t0_);
  sum_.next_index = committed_;
  return sum_;
}

}  // namespace

StatusOr<CampaignSummary> RunCampaign(const CampaignOptions& options, const ProgressFn& progress) {
  if (options.jobs < 1 || options.jobs > 256)
    return InvalidArgumentError("--jobs", "must be in 1..256");
  if (!(options.seconds > 0) || !std::isfinite(options.seconds))
    return InvalidArgumentError("--seconds", "must be a finite number > 0");
  if (options.out_dir.empty() && options.resume)
    return InvalidArgumentError("--resume", "needs --out DIR");
  Campaign c(options, progress);
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
    return InvalidArgumentError(
        "--seed", "must be a number, 0x-hex, or a 40-hex commit (got '" + text + "')");
  }
}

}  // namespace mlasim::fuzz
