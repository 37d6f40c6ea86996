// File: tools/mlasim/cmd_fuzz.cpp — `mlasim fuzz`: a fuzzing campaign over generated engine steps
// (fuzz/campaign.h). Exit 0 no findings, 1 findings, 2 bad input.
#include <malloc.h>
#include <unistd.h>

#include <fmt/format.h>

#include "fuzz/campaign.h"
#include "fuzz/search.h"
#include "sim/replay.h"
#include "sim/scenario_json.h"
#include "tools/mlasim/commands.h"

namespace mlasim::cli {
namespace {

constexpr const char* kName = "fuzz";

class FuzzCommand final : public Command {
 public:
  explicit FuzzCommand(CLI::App& parent) {
    app_ = parent.add_subcommand(kName,
                                 "Fuzz generated engine steps; keep one shrunk, replayable "
                                 "case per distinct failure signature");
    app_->footer(
        "Exit codes: 0 no findings, 1 findings, 2 bad input.\n"
        "Example: mlasim fuzz --seconds 60 --seed 7 --jobs 2 --profile atom-2026-08 --out "
        "findings\n"
        "Sharding: run --shard I/N on N machines with the same --seed; merge the --out folders.\n");
    app_->add_option("--seconds", o_.seconds, "wall-clock budget")->capture_default_str();
    app_->add_option("--cases", o_.max_cases, "stop after this many cases (-1: time only)");
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
    app_->add_option("--reproduce", reproduce_seed_, "regenerate the case of a finding's seed")
        ->type_name("SEED")
        ->check(UnsignedInteger());
    app_->add_option("--size", reproduce_size_, "with --reproduce (required): the RapidCheck size");
    app_->add_option("--shrink-path", shrink_path_,
                     "with --reproduce: e.g. [3,0,1] (default [] = unshrunk)");
  }
  CLI::App* app() const override { return app_; }

  int Run(const Streams& io) override {
    if (!profiles_.empty()) o_.profiles = profiles_;
    if (app_->count("--reproduce")) {
      for (const char* flag : {"--out", "--jobs", "--cases", "--seconds", "--resume", "--shard",
                               "--seed", "--ignore-known"})
        if (app_->count(flag))
          return Fail(io, InvalidArgumentError(
                              flag, "not used with --reproduce (it regenerates one case)"));
      return Reproduce(io);
    }
    for (const char* flag : {"--size", "--shrink-path"})
      if (app_->count(flag))
        return Fail(io, InvalidArgumentError(flag, "only with --reproduce SEED"));
    if (o_.max_cases < -1)
      return Fail(io, InvalidArgumentError("--cases", "must be >= 0, or -1 for a time-only run"));
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
    const bool tty = ::isatty(STDERR_FILENO);
    double last_plain = -10;
    auto progress = [&](int64_t cases, int64_t findings, double secs) {
      const double rate = secs > 0 ? cases / secs : 0;
      if (tty) {
        io.err << fmt::format("\r{:>9} cases  {:>8.0f} cases/s  {:>3} findings  {:>6.1f}s", cases,
                              rate, findings, secs)
               << std::flush;
      } else if (secs - last_plain >= 5) {
        last_plain = secs;
        io.err << fmt::format("fuzz: {} cases, {:.0f} cases/s, {} findings, {:.1f}s\n", cases, rate,
                              findings, secs);
      }
    };
    // Plans use capacity-sized buffers (hundreds of KiB): keep them on the heap instead of a
    // fresh mmap per allocation, whose page faults cost more than the simulation.
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
    auto sum = fuzz::RunCampaign(o_, progress);
    if (tty) io.err << '\n';
    if (!sum.ok()) return Fail(io, sum.status());
    io.out << fmt::format("fuzz: seed {} shard {}/{} profiles {}\n", seed_text_, o_.shard,
                          o_.shards, fmt::join(o_.profiles, ","));
    io.out << fmt::format("cases {}  ({:.0f} cases/s over {:.1f} s, {} job(s))\n", sum->cases,
                          sum->seconds > 0 ? sum->cases / sum->seconds : 0.0, sum->seconds,
                          o_.jobs);
    io.out << fmt::format("distinct findings {}\n", sum->findings.size());
    for (const auto& [sig, f] : sum->findings)
      io.out << fmt::format("  {}  (seed index {}){}\n", sig, f.seed_index,
                            f.file.empty() ? "" : "  " + f.file);
    io.out << "coverage:";
    for (const auto& [k, v] : sum->coverage) io.out << ' ' << k << '=' << v;
    io.out << '\n';
    return sum->findings.empty() ? kExitOk : kExitCheckFailed;
  }

 private:
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
    auto s = fuzz::ReplayShrinkPath(cfg, reproduce_seed_, reproduce_size_, path);
    if (!s.ok()) return Fail(io, s.status());
    io.out << sim::ScenarioToJson(*s).dump(2) << '\n';
    return kExitOk;
  }
  int Fail(const Streams& io, const Status& st) {
    PrintError(io.err, kName, st.field(), st.message());
    return ExitCodeFor(st);
  }

  CLI::App* app_ = nullptr;
  fuzz::CampaignOptions o_;
  std::vector<std::string> profiles_;
  std::string seed_text_ = "1", shard_text_, shrink_path_ = "[]";
  uint64_t reproduce_seed_ = 0;
  int reproduce_size_ = 50;
};

}  // namespace

std::unique_ptr<Command> RegisterFuzz(CLI::App& app) {
  return std::make_unique<FuzzCommand>(app);
}

}  // namespace mlasim::cli
