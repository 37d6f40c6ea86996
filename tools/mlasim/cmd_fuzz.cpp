// File: tools/mlasim/cmd_fuzz.cpp — `mlasim fuzz`: a fuzzing campaign over generated engine steps
// (fuzz/campaign.h), and `mlasim fuzz merge` over the finding folders of many shards
// (fuzz/findings.h). Exit codes in kFuzzExitCodes (docs/cli.md).
#include <malloc.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "fuzz/campaign.h"
#include "fuzz/findings.h"
#include "fuzz/search.h"
#include "fuzz/summary_html.h"
#include "sim/replay.h"
#include "sim/scenario_json.h"
#include "tools/mlasim/commands.h"
#include "tools/mlasim/html_output.h"
#include "tools/mlasim/scenario_input.h"

namespace mlasim::cli {
namespace {

constexpr const char* kName = "fuzz";

// `fuzz` only: the campaign ran, found nothing new, but its --seconds budget ended it before its
// --cases budget (the same seed and case budget would have tested more).
constexpr int kExitBudgetCutShort = 4;

constexpr const char* kFuzzExitCodes =
    "Exit codes: 0 no new findings (findings already in --out are listed, not counted), 1 new "
    "findings, 2 bad input, 3 internal error, 4 no new findings but --seconds ended the campaign "
    "before its --cases budget. fuzz merge: 0 merged, 2 bad input.\n";

// The flags of a campaign, refused by --reproduce and by merge.
constexpr const char* kCampaignFlags[] = {
    "--out",          "--jobs",     "--cases",        "--seconds", "--resume",
    "--shard",        "--seed",     "--ignore-known", "--small",   "--profile",
    "--shrink-steps", "--generate", "--contract",     "--html",    "--swarm"};

class FuzzCommand final : public Command {
 public:
  explicit FuzzCommand(CLI::App& parent) {
    app_ = parent.add_subcommand(kName,
                                 "Fuzz generated engine steps; keep one shrunk, replayable "
                                 "case per distinct failure signature");
    app_->footer(
        std::string(kFuzzExitCodes) +
        "Example: mlasim fuzz --seconds 60 --seed 7 --jobs 2 --profile atom-2026-08 --out "
        "findings\n"
        "Sharding: run --shard I/N on N machines with the same --seed; then mlasim fuzz merge "
        "DIR... --out MERGED.\n");
    app_->add_option("--seconds", o_.seconds,
                     "wall-clock budget of the whole campaign (default 10; none with --cases)");
    app_->add_option("--cases", o_.max_cases,
                     "case budget of the whole campaign (this shard; -1: time only)");
    app_->add_option("--seed", seed_text_, "base seed: number, 0x-hex or a 40-hex commit")
        ->capture_default_str();
    app_->add_option("--jobs", o_.jobs, "worker threads")->capture_default_str();
    app_->add_option("--profile", profiles_, "engine profile(s) to generate (repeatable)")
        ->type_name("NAME");
    app_->add_option("--out", o_.out_dir, "write findings (one case JSON each) into DIR")
        ->type_name("DIR");
    app_->add_flag("--resume", o_.resume, "continue this shard from DIR's progress file");
    app_->add_option("--shard", shard_text_, "I/N: this process tests seed indices I, I+N, ...");
    app_->add_flag("--ignore-known", o_.ignore_known,
                   "do not report the documented families (fuzz/properties.h)");
    app_->add_flag("--small", o_.small, "B <= 64 and K <= 3: throughput runs");
    app_->add_option("--generate", generate_text_,
                     "also generate these families, comma-separated: hostile-indices, "
                     "disagreements, paged (docs/fuzzing.md)")
        ->type_name("LIST");
    app_->add_option("--swarm", swarm_text_,
                     "on: every case leaves a random subset of the generator's options out "
                     "(swarm testing, docs/fuzzing.md); off: the generator without swarm")
        ->type_name("on|off")
        ->capture_default_str();
    app_->add_option("--contract", o_.contract_files,
                     "a kernel contract file (docs/contracts.md) every case runs under, in place "
                     "of the built-in one of its call kind; repeatable")
        ->type_name("FILE");
    app_->add_option("--shrink-steps", o_.max_shrink_steps,
                     "accepted shrink steps per finding (0..100000)")
        ->capture_default_str();
    app_->add_option("--html", html_out_,
                     "also write the campaign summary as one self-contained HTML page (findings "
                     "over time, coverage; docs/pictures.md)")
        ->type_name("FILE");
    app_->add_option("--reproduce", reproduce_seed_, "regenerate the case of a finding's seed")
        ->type_name("SEED")
        ->check(UnsignedInteger());
    app_->add_option("--size", reproduce_size_, "with --reproduce (required): the RapidCheck size");
    app_->add_option("--shrink-path", shrink_path_,
                     "with --reproduce: e.g. [3,0,1] (default [] = unshrunk)");
    merge_ = app_->add_subcommand(
        "merge",
        "Merge the finding folders of many shards: one finding per signature, the "
        "smallest case kept, a summary across shards");
    merge_->add_option("DIR", merge_dirs_, "finding folders (--out of each shard)")
        ->required()
        ->type_name("DIR");
    merge_->footer(
        "Exit codes: 0 merged, 2 bad input (a missing folder, a malformed finding or progress "
        "file).\nExample: mlasim fuzz merge findings/* --out merged\n");
    merge_
        ->add_option("--out", merge_out_,
                     "write the kept findings into OUT (its own findings take part)")
        ->type_name("OUT");
  }
  CLI::App* app() const override { return app_; }

  int Run(const Streams& io) override {
    if (merge_->parsed()) {
      for (const char* flag : kCampaignFlags)
        if (app_->count(flag))
          return Fail(io,
                      InvalidArgumentError(flag, "not used with merge (put --out after merge)"));
      for (const char* flag : {"--reproduce", "--size", "--shrink-path"})
        if (app_->count(flag)) return Fail(io, InvalidArgumentError(flag, "not used with merge"));
      return Merge(io);
    }
    if (!profiles_.empty()) o_.profiles = profiles_;
    if (swarm_text_ != "on" && swarm_text_ != "off")
      return Fail(io,
                  InvalidArgumentError("--swarm", "must be on or off (got '" + swarm_text_ + "')"));
    o_.swarm = swarm_text_ == "on";
    if (const Status st = LoadGenerators(); !st.ok()) return Fail(io, st);
    if (app_->count("--reproduce")) {
      for (const char* flag : kCampaignFlags) {
        const std::string f = flag;
        if (f == "--profile" || f == "--small" || f == "--generate" || f == "--contract" ||
            f == "--swarm")
          continue;  // they shape the regenerated case
        if (app_->count(flag))
          return Fail(io, InvalidArgumentError(
                              flag, "not used with --reproduce (it regenerates one case)"));
      }
      return Reproduce(io);
    }
    for (const char* flag : {"--size", "--shrink-path"})
      if (app_->count(flag))
        return Fail(io, InvalidArgumentError(flag, "only with --reproduce SEED"));
    return Campaign(io);
  }

 private:
  // A campaign (fuzz/campaign.h) with the parsed flags: progress on stderr, the summary on
  // stdout, exit 1 with new findings, else 4 when --seconds cut --cases short, else 0.
  int Campaign(const Streams& io) {
    if (o_.max_cases < -1)
      return Fail(io, InvalidArgumentError("--cases", "must be >= 0, or -1 for a time-only run"));
    // A case budget alone runs until its last case; --seconds then bounds it (exit 4 if it cuts).
    if (o_.max_cases >= 0 && !app_->count("--seconds"))
      o_.seconds = std::numeric_limits<double>::infinity();
    auto seed = fuzz::ParseSeed(seed_text_);
    if (!seed.ok()) return Fail(io, seed.status());
    o_.seed = *seed;
    if (!shard_text_.empty()) {
      Status st = fuzz::ParseShard(shard_text_, &o_.shard, &o_.shards);
      if (!st.ok()) return Fail(io, st);
    }
    if (o_.resume && o_.out_dir.empty())
      return Fail(
          io, InvalidArgumentError("--resume", "needs --out DIR (the progress file lives there)"));
    if (app_->count("--html"))
      if (Status st = CheckOutputFile("--html", html_out_); !st.ok()) return Fail(io, st);
    const bool tty = ::isatty(STDERR_FILENO);
    double last_plain = -10;
    auto progress = [&](int64_t cases, int64_t findings, double secs) {
      const double rate = secs > 0 ? cases / secs : 0;
      if (tty) {
        io.err << fmt::format("\r{:>9} cases  {:>8.0f} cases/s  {:>3} new findings  {:>6.1f}s",
                              cases, rate, findings, secs)
               << std::flush;
      } else if (secs - last_plain >= 5) {
        last_plain = secs;
        io.err << fmt::format("fuzz: {} cases, {:.0f} cases/s, {} new findings, {:.1f}s\n", cases,
                              rate, findings, secs);
      }
    };
    auto note = [&](const std::string& line) { io.err << "fuzz: " << line << '\n'; };
    // Plans use capacity-sized buffers (hundreds of KiB): keep them on the heap instead of a
    // fresh mmap per allocation, whose page faults cost more than the simulation.
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
    auto sum = fuzz::RunCampaign(o_, progress, note);
    if (tty) io.err << '\n';
    if (!sum.ok()) return Fail(io, sum.status());
    PrintSummary(io, *sum);
    if (app_->count("--html")) {  // checked before the campaign; a failure now is a full disk
      const std::string page = fuzz::CampaignHtml(o_, *sum, seed_text_);
      if (Status st = WriteOutputFile("--html", html_out_, page); !st.ok()) return Fail(io, st);
    }
    if (sum->NewFindings() > 0) return kExitCheckFailed;
    return sum->cut_short ? kExitBudgetCutShort : kExitOk;
  }

  void PrintSummary(const Streams& io, const fuzz::CampaignSummary& sum) const;
  int Merge(const Streams& io);
  int Reproduce(const Streams& io) {
    if (!app_->count("--size"))
      return Fail(io, InvalidArgumentError(
                          "--size",
                          "required with --reproduce (the finding's reproduce command gives it)"));
    if (reproduce_size_ < 1 || reproduce_size_ > 1000)
      return Fail(io, InvalidArgumentError("--size", "must be in 1..1000 (a RapidCheck size)"));
    // [i,j,...]: small non-negative integers, nothing else
    std::vector<int> path;
    std::string t;
    for (char c : shrink_path_)
      if (c != ' ') t += c;
    const bool bracketed = t.size() >= 2 && t.front() == '[' && t.back() == ']';
    std::string body = bracketed ? t.substr(1, t.size() - 2) : "";
    bool ok = bracketed;
    for (size_t i = 0; ok && !body.empty();) {
      const size_t comma = body.find(',', i);
      const std::string item =
          body.substr(i, comma == std::string::npos ? std::string::npos : comma - i);
      ok = !item.empty() && item.size() <= 6 &&
           item.find_first_not_of("0123456789") == std::string::npos;
      if (ok) path.push_back(std::stoi(item));
      if (comma == std::string::npos) break;
      i = comma + 1;
      ok = ok && i < body.size();  // no trailing comma
    }
    if (!ok)
      return Fail(io,
                  InvalidArgumentError("--shrink-path", "must look like [3,0,1] (small integers)"));
    fuzz::GenConfig cfg;
    cfg.profiles = o_.profiles;
    cfg.small = o_.small;
    if (o_.small) cfg.max_batch = 64;
    if (const Status st = fuzz::EnableFamilies(o_.generate, &cfg); !st.ok()) return Fail(io, st);
    cfg.contracts = o_.contracts;
    cfg.swarm = o_.swarm;
    auto s = fuzz::ReplayShrinkPath(cfg, reproduce_seed_, reproduce_size_, path);
    if (!s.ok()) return Fail(io, s.status());
    io.out << sim::ScenarioToJson(*s).dump(2) << '\n';
    return kExitOk;
  }
  // --generate LIST and --contract FILE... into the campaign options.
  Status LoadGenerators() {
    o_.generate.clear();
    for (size_t i = 0; !generate_text_.empty() && i <= generate_text_.size();) {
      const size_t comma = std::min(generate_text_.find(',', i), generate_text_.size());
      o_.generate.push_back(generate_text_.substr(i, comma - i));
      i = comma + 1;
    }
    fuzz::GenConfig probe;
    MLASIM_RETURN_IF_ERROR(fuzz::EnableFamilies(o_.generate, &probe));
    sim::Scenario holder;
    MLASIM_RETURN_IF_ERROR(AddContractFiles(o_.contract_files, &holder));
    o_.contracts = holder.contracts;
    return OkStatus();
  }
  int Fail(const Streams& io, const Status& st) {
    PrintError(io.err, kName, st.field(), st.message());
    return ExitCodeFor(st);
  }

  CLI::App* app_ = nullptr;
  CLI::App* merge_ = nullptr;
  std::vector<std::string> merge_dirs_;
  std::string merge_out_, html_out_;
  fuzz::CampaignOptions o_;
  std::vector<std::string> profiles_;
  std::string generate_text_;
  std::string swarm_text_ = "on";
  std::string seed_text_ = "1", shard_text_, shrink_path_ = "[]";
  uint64_t reproduce_seed_ = 0;
  int reproduce_size_ = 50;
};

// "seed index 25, 14 shrink steps[, cut short by the 200-step budget]".
std::string Origin(std::optional<uint64_t> seed_index, int steps, bool cut_short, int budget) {
  std::string out = seed_index ? fmt::format("seed index {}", *seed_index) : "seed index unknown";
  out += fmt::format(", {} shrink step{}", steps, steps == 1 ? "" : "s");
  if (cut_short)
    out += budget >= 0 ? fmt::format(", cut short by the {}-step budget", budget)
                       : ", cut short by the shrink step budget";
  return out;
}

void FuzzCommand::PrintSummary(const Streams& io, const fuzz::CampaignSummary& sum) const {
  io.out << fmt::format("fuzz: seed {} shard {}/{} profiles {} swarm {}\n", seed_text_, o_.shard,
                        o_.shards, fmt::join(o_.profiles, ","), o_.swarm ? "on" : "off");
  io.out << fmt::format("cases {}  ({:.0f} cases/s over {:.1f} s, {} job(s))\n", sum.cases,
                        sum.seconds > 0 ? sum.cases / sum.seconds : 0.0, sum.seconds, o_.jobs);
  std::string budget = o_.max_cases >= 0 ? fmt::format(" of {}", o_.max_cases) : "";
  if (sum.resumed_at >= 0 || sum.next_index != sum.cases)
    io.out << fmt::format("campaign {}{} cases over {:.1f} s (this run resumed at case {})\n",
                          sum.next_index, budget, sum.campaign_seconds, sum.resumed_at);
  if (sum.cut_short)
    io.out << fmt::format(
        "budget: --seconds {} ended the campaign after {} of its {} cases (exit {} without new "
        "findings)\n",
        o_.seconds, sum.next_index, o_.max_cases, kExitBudgetCutShort);
  const int64_t fresh = sum.NewFindings();
  io.out << fmt::format("distinct signatures {}\n", sum.signatures.size());
  io.out << fmt::format("findings {}: {} new, {} already in {}\n", sum.findings.size(), fresh,
                        sum.findings.size() - fresh, o_.out_dir.empty() ? "--out" : o_.out_dir);
  for (const auto& [sig, f] : sum.findings) {
    io.out << fmt::format("  {}  ({}{}){}\n", sig, f.earlier ? "earlier, " : "",
                          Origin(f.seed_index, f.shrink_steps, f.cut_short, f.max_shrink_steps),
                          f.file.empty() ? "" : "  " + f.file);
    if (!f.known.empty()) io.out << "    " << f.known << '\n';
  }
  io.out << "coverage:";
  for (const auto& [k, v] : sum.coverage) io.out << ' ' << k << '=' << v;
  io.out << '\n';
}

int FuzzCommand::Merge(const Streams& io) {
  auto m = fuzz::MergeFindingDirs(merge_dirs_, merge_out_);
  if (!m.ok()) return Fail(io, m.status());
  io.out << fmt::format("fuzz merge: {} folder(s), {} shard(s), {} cases\n", merge_dirs_.size(),
                        m->shards.size(), m->cases);
  for (const fuzz::ShardRecord& s : m->shards)
    io.out << fmt::format("  shard {}/{} seed {} profiles {}{}{}: {} cases  {}{}\n", s.shard,
                          s.shards, s.seed, fmt::join(s.profiles, ","), s.small ? " --small" : "",
                          s.ignore_known ? " --ignore-known" : "", s.cases, s.path,
                          s.copies > 1 ? fmt::format(" (in {} folders)", s.copies) : "");
  io.out << fmt::format("findings {}\n", m->findings.size());
  for (const auto& [sig, r] : m->findings)
    io.out << fmt::format("  {}  ({}, in {} folder(s))  {}\n", sig,
                          Origin(r.seed_index, r.shrink_steps, r.cut_short, r.max_shrink_steps),
                          m->folders_with.at(sig), r.path);
  for (const std::string& p : m->skipped) io.out << "skipped (no finding object): " << p << '\n';
  if (!merge_out_.empty())
    io.out << fmt::format("wrote {} file(s) into {}\n", m->written.size(), merge_out_);
  return kExitOk;
}

}  // namespace

std::unique_ptr<Command> RegisterFuzz(CLI::App& app) {
  return std::make_unique<FuzzCommand>(app);
}

}  // namespace mlasim::cli
