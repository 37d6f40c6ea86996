// File: tools/mlasim/cmd_fuzz.cpp — `mlasim fuzz`: a fuzzing campaign over generated engine steps
// (fuzz/campaign.h), and `mlasim fuzz merge` over the finding folders of many shards
// (fuzz/findings.h). Exit codes in kFuzzExitCodes (docs/cli.md).
#include <malloc.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <limits>

#include "fuzz/campaign.h"
#include "fuzz/findings.h"
#include "fuzz/kut_devices.h"
#include "fuzz/kut_pool.h"
#include "fuzz/search.h"
#include "fuzz/summary_html.h"
#include "fuzz/summary_junit.h"
#include "sim/replay.h"
#include "sim/scenario.h"
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
    "--out", "--jobs", "--cases", "--seconds", "--resume", "--shard", "--seed", "--ignore-known",
    "--small", "--profile", "--shrink-steps", "--generate", "--contract", "--html", "--junit",
    "--swarm", "--shrink",
    // kernel under test (docs/kernel-under-test.md)
    "--gpu", "--kernel-under-test", "--kernel-config", "--device", "--devices", "--head-dims",
    "--reference", "--kernel-timeout"};

// A kernel-under-test campaign's flags that only make sense with --gpu.
constexpr const char* kKernelFlags[] = {"--kernel-under-test", "--kernel-config", "--device",
                                        "--devices",           "--head-dims",     "--reference",
                                        "--kernel-timeout"};

// Campaigns run the engine-step numerics on every 64th case by default: a numerics step costs
// about 40 replays, so this about doubles the CPU per case (every 16th: 3.2x; docs/fuzzing.md
// "Engine-step numerics in campaigns").
constexpr int64_t kDefaultStepNumericsEvery = 64;

class FuzzCommand final : public Command {
 public:
  explicit FuzzCommand(CLI::App& parent) {
    o_.step_numerics_every = kDefaultStepNumericsEvery;
    app_ = parent.add_subcommand(kName,
                                 "Fuzz generated engine steps; keep one shrunk, replayable "
                                 "case per distinct failure signature");
    app_->footer(
        std::string(kFuzzExitCodes) +
        "Example: mlasim fuzz --seconds 60 --seed 7 --jobs 2 --profile atom-2026-08 --out "
        "findings\n"
        "Sharding: run --shard I/N on N machines with the same --seed; then mlasim fuzz merge "
        "DIR... --out MERGED.\n");
    AddCampaignFlags();
    AddShrinkAndReportFlags();
    AddKernelFlags();
    AddReproduceFlags();
    AddMergeCommand();
  }

  // The campaign's budget, seed, sharding, output folder and generator flags.
  void AddCampaignFlags() {
    app_->add_option("--seconds", o_.seconds,
                     "wall-clock budget of the whole campaign (default 10; none with --cases)");
    app_->add_option("--cases", o_.max_cases,
                     "case budget of the whole campaign (this shard; -1: time only)");
    app_->add_option("--seed", seed_text_, "base seed: number, 0x-hex or a 40-hex commit")
        ->capture_default_str();
    app_->add_option("--jobs", o_.jobs, "worker threads")->capture_default_str();
    app_->add_option("--profile", profiles_,
                     fmt::format("engine profile(s) to generate (repeatable; default {}; "
                                 "known: {})",
                                 fuzz::CampaignOptions{}.profiles.front(),
                                 fmt::join(sim::EngineProfileNames(), ", ")))
        ->type_name("NAME");
    app_->add_option("--out", o_.out_dir, "write findings (one case JSON each) into DIR")
        ->type_name("DIR");
    app_->add_flag("--resume", o_.resume, "continue this shard from DIR's progress file");
    app_->add_option("--shard", shard_text_, "I/N: this process tests seed indices I, I+N, ...");
    app_->add_flag("--ignore-known", o_.ignore_known,
                   "do not report the documented families (fuzz/properties.h)");
    app_->add_flag("--small", o_.small, "B <= 64 and K <= 3: throughput runs");
    app_->add_option("--step-numerics-every", o_.step_numerics_every,
                     "run the engine-step numerics (contexts capped at 48, head dims 80/64, "
                     "poisoned inputs) on every Nth case, by seed index; 0: never (default 64; "
                     "not with --gpu)")
        ->type_name("N");
    app_->add_option("--generate", generate_text_,
                     "also generate these families, comma-separated: hostile-indices, "
                     "disagreements, paged, ragged-q (docs/fuzzing.md)")
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
  }

  // How findings are shrunk, and the HTML and JUnit reports of the campaign.
  void AddShrinkAndReportFlags() {
    app_->add_option("--shrink", shrink_text_,
                     "per-signature: every signature of every violation is a finding, shrunk "
                     "keeping that signature; first-failure: round 1's rule (a case's first "
                     "violation only, shrunk keeping any failure), to measure it "
                     "(docs/fuzzing.md)")
        ->type_name("per-signature|first-failure")
        ->capture_default_str();
    app_->add_option("--shrink-steps", o_.max_shrink_steps,
                     "accepted shrink steps per finding (0..100000)")
        ->capture_default_str();
    app_->add_option("--html", html_out_,
                     "also write the campaign summary as one self-contained HTML page (findings "
                     "over time, coverage; docs/pictures.md)")
        ->type_name("FILE");
    app_->add_option("--junit", junit_out_,
                     "also write a JUnit XML report for CI: one failing test case per new "
                     "finding, a passing \"campaign\" case with the cases run (docs/ci.md)")
        ->type_name("FILE");
  }

  // --reproduce SEED --size N [--shrink-path P]: regenerate one finding's case.
  void AddReproduceFlags() {
    app_->add_option("--reproduce", reproduce_seed_, "regenerate the case of a finding's seed")
        ->type_name("SEED")
        ->check(UnsignedInteger());
    app_->add_option("--size", reproduce_size_, "with --reproduce (required): the RapidCheck size");
    app_->add_option("--shrink-path", shrink_path_,
                     "with --reproduce: e.g. [3,0,1] (default [] = unshrunk)");
  }

  // `fuzz merge DIR... --out OUT [--junit FILE]`.
  void AddMergeCommand() {
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
    merge_
        ->add_option("--junit", merge_junit_,
                     "also write a JUnit XML report: one failing test case per kept finding "
                     "(docs/ci.md)")
        ->type_name("FILE");
  }

  CLI::App* app() const override { return app_; }

  // The kernel-under-test flags (docs/kernel-under-test.md): --gpu turns a campaign into one that runs each
  // generated step through a kernel library in worker processes.
  void AddKernelFlags() {
    app_->add_option(
            "--gpu", gpu_mode_,
            "run every step through a kernel under test (docs/kernel-under-test.md): sentinel "
            "(sentinel bytes around every buffer) or guard (guard pages; faults caught)")
        ->type_name("sentinel|guard");
    app_->add_option("--kernel-under-test", kut_path_,
                     "kernel library (kernels/mlasim_kut.h); default: mlasim's GPU kernels "
                     "(libmlasim_kut_gpu.so beside the binary)")
        ->type_name("PATH.so");
    app_->add_option("--kernel-config", kut_config_, "the kernel library's config text")
        ->type_name("TEXT");
    app_->add_option("--device", device_, "the GPU the kernel's workers use")->type_name("N");
    app_->add_option("--devices", devices_text_,
                     "one campaign process per device (all, or a list like 0,1 or 0,0), seed "
                     "indices sharded, findings merged into --out")
        ->type_name("all|LIST");
    app_->add_option("--head-dims", head_dims_text_, "head dims of the inputs (default 576,512)")
        ->type_name("D,DV");
    app_->add_option("--reference", kut_reference_,
                     "numerics reference: cpu, gpu or auto (gpu for a device kernel)")
        ->capture_default_str();
    app_->add_option("--kernel-timeout", kut_timeout_,
                     "seconds a kernel call may run before it counts as a hang")
        ->capture_default_str();
    app_->add_flag("--kut-worker", kut_worker_, "internal: a kernel worker process")->group("");
    app_->add_flag("--no-gpu-plans", no_gpu_plans_, "internal: skip the GPU planner check")
        ->group("");
    app_->add_flag("--host-inputs", host_inputs_,
                   "internal: build q and the KV cache on the host and upload them (the "
                   "measurement baseline of device-generated inputs)")
        ->group("");
    app_->add_option("--known-from", known_from_, "internal: findings found before")->group("");
    app_->add_flag("--skip-known-faults", skip_known_faults_,
                   "internal: guard mode does not run calls predicted to fault through known "
                   "families only (what --ignore-known sets)")
        ->group("");
  }

  int Run(const Streams& io) override {
    if (kut_worker_) return KutWorker(io);
    if (merge_->parsed()) {
      for (const char* flag : kCampaignFlags)
        if (app_->count(flag))
          return Fail(io, InvalidArgumentError(
                              flag, std::string("not used with merge (put ") +
                                        (std::string(flag) == "--junit" ? "--junit" : "--out") +
                                        " after merge)"));
      for (const char* flag : {"--reproduce", "--size", "--shrink-path"})
        if (app_->count(flag)) return Fail(io, InvalidArgumentError(flag, "not used with merge"));
      return Merge(io);
    }
    // A profile named twice would be drawn twice as often (and be another campaign for
    // --resume): refused.
    for (size_t i = 0; i < profiles_.size(); ++i)
      if (std::find(profiles_.begin(), profiles_.begin() + static_cast<std::ptrdiff_t>(i),
                    profiles_[i]) != profiles_.begin() + static_cast<std::ptrdiff_t>(i))
        return Fail(io, InvalidArgumentError("--profile", "'" + profiles_[i] + "' given twice"));
    if (!profiles_.empty()) o_.profiles = profiles_;
    if (swarm_text_ != "on" && swarm_text_ != "off")
      return Fail(io,
                  InvalidArgumentError("--swarm", "must be on or off (got '" + swarm_text_ + "')"));
    o_.swarm = swarm_text_ == "on";
    auto shrink = fuzz::ParseShrinkPolicy(shrink_text_);
    if (!shrink.ok()) return Fail(io, shrink.status());
    o_.shrink = *shrink;
    if (const Status st = LoadGenerators(); !st.ok()) return Fail(io, st);
    if (app_->count("--reproduce")) {
      for (const char* flag : kCampaignFlags) {
        const std::string f = flag;
        if (f == "--profile" || f == "--small" || f == "--generate" || f == "--contract" ||
            f == "--gpu" || f == "--swarm" || f == "--kernel-under-test" || f == "--kernel-config")
          continue;  // they shape the regenerated case (a kernel: its limits; --shrink does not)
        if (app_->count(flag))
          return Fail(io, InvalidArgumentError(
                              flag, "not used with --reproduce (it regenerates one case)"));
      }
      return Reproduce(io);
    }
    for (const char* flag : {"--size", "--shrink-path"})
      if (app_->count(flag))
        return Fail(io, InvalidArgumentError(flag, "only with --reproduce SEED"));
    if (!app_->count("--gpu"))
      for (const char* flag : kKernelFlags)
        if (app_->count(flag))
          return Fail(io, InvalidArgumentError(flag, "only with --gpu sentinel|guard"));
    if (app_->count("--seconds"))  // typed: never infinite (--cases alone makes it so)
      if (Status st = fuzz::CheckCampaignSeconds(o_.seconds); !st.ok()) return Fail(io, st);
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
    if (Status st = CheckDistinctOutputs({{"--html", html_out_}, {"--junit", junit_out_}});
        !st.ok())
      return Fail(io, st);
    std::vector<std::pair<std::string, std::string>> inputs = {
        {"--kernel-under-test's library", kut_path_}};
    for (const std::string& c : o_.contract_files) inputs.push_back({"--contract's file", c});
    if (Status st =
            CheckOutputsAreNotInputs({{"--html", html_out_}, {"--junit", junit_out_}}, inputs);
        !st.ok())
      return Fail(io, st);
    if (app_->count("--junit"))
      if (Status st = CheckOutputFile("--junit", junit_out_); !st.ok()) return Fail(io, st);
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
    std::unique_ptr<fuzz::KutPool> pool;
    if (app_->count("--gpu")) {
      if (app_->count("--devices")) return Devices(io, progress);
      Status st = StartKernel(&pool);
      if (!st.ok()) return Fail(io, st);
      o_.property = fuzz::KutProperty(pool.get(), o_.ignore_known);
      o_.kernel_inputs = true;
      o_.gpu_mode = gpu_mode_;
    }
    // Plans use capacity-sized buffers (hundreds of KiB): keep them on the heap instead of a
    // fresh mmap per allocation, whose page faults cost more than the simulation.
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
    auto sum = fuzz::RunCampaign(o_, progress, note);
    if (tty) io.err << '\n';
    if (!sum.ok()) return Fail(io, sum.status());
    // Checked before the campaign; a failure now is a full disk: exit 2, nothing on stdout.
    if (app_->count("--html")) {
      const std::string page = fuzz::CampaignHtml(o_, *sum, seed_text_);
      if (Status st = WriteOutputFile("--html", html_out_, page); !st.ok()) return Fail(io, st);
    }
    if (app_->count("--junit")) {
      const std::string xml = fuzz::CampaignJunit(o_, *sum, seed_text_);
      if (Status st = WriteOutputFile("--junit", junit_out_, xml); !st.ok()) return Fail(io, st);
    }
    PrintSummary(io, *sum);
    if (pool) PrintKernelSummary(io, *pool, sum->cases);
    if (sum->NewFindings() > 0) return kExitCheckFailed;
    return sum->cut_short ? kExitBudgetCutShort : kExitOk;
  }

  // --gpu: the kernel library's worker pool (one worker per --jobs), the campaign's identity and
  // the replay flags its findings record.
  Status StartKernel(std::unique_ptr<fuzz::KutPool>* pool) {
    MLASIM_RETURN_IF_ERROR(ParseKernelFlags());
    fuzz::KutPoolOptions po;
    po.worker_exe = fuzz::WorkerExe();
    po.library = kut_path_;
    po.config = kut_config_;
    po.check = check_;
    po.workers = o_.jobs;
    po.timeout_seconds = kut_timeout_;
    if (app_->count("--device")) po.devices = {std::to_string(device_)};
    MLASIM_ASSIGN_OR_RETURN(*pool, fuzz::KutPool::Start(po));
    o_.kernel_limits = (*pool)->description().Limits();
    o_.kernel_flags = "--kernel-under-test " + fuzz::ShellQuote(kut_path_);
    if (!kut_config_.empty())
      o_.kernel_flags += " --kernel-config " + fuzz::ShellQuote(kut_config_);
    o_.kernel = fmt::format("{}|{}|{}|{},{}|{}", kut_path_, kut_config_, gpu_mode_,
                            check_.head_dim_qk, check_.head_dim_v, check_.reference);
    o_.replay_flags = ReplayFlags();
    o_.known_dirs = known_from_;
    return OkStatus();
  }

  Status ParseKernelFlags() {
    if (gpu_mode_ != "sentinel" && gpu_mode_ != "guard")
      return InvalidArgumentError("--gpu", "must be sentinel or guard (got '" + gpu_mode_ + "')");
    check_.guard = gpu_mode_ == "guard";
    if (app_->count("--step-numerics-every") && o_.step_numerics_every > 0)
      return InvalidArgumentError("--step-numerics-every",
                                  "the engine-step numerics run in simulator campaigns; a --gpu "
                                  "campaign compares the kernel's numerics on every call");
    if (!head_dims_text_.empty()) {
      int d = 0, dv = 0;
      char tail = 0;
      if (std::sscanf(head_dims_text_.c_str(), "%d,%d%c", &d, &dv, &tail) != 2 || d < 16 ||
          dv < 16 || d > 1024 || dv > d || d % 16 != 0 || dv % 16 != 0)
        return InvalidArgumentError("--head-dims",
                                    "must be D,DV with 16 <= DV <= D <= 1024, multiples of 16 "
                                    "(got '" +
                                        head_dims_text_ + "')");
      check_.head_dim_qk = d;
      check_.head_dim_v = dv;
    }
    if (kut_reference_ != "auto" && kut_reference_ != "cpu" && kut_reference_ != "gpu")
      return InvalidArgumentError("--reference", "must be auto, cpu or gpu");
    check_.reference = kut_reference_;
    check_.gpu_plans = !no_gpu_plans_;
    check_.device_inputs = !host_inputs_;
    // Guard mode with --ignore-known: a call that would fault through known families only is not
    // run (its finding would be dropped; each fault costs a worker and a GPU context).
    check_.skip_known_faults = check_.guard && (o_.ignore_known || skip_known_faults_);
    MLASIM_RETURN_IF_ERROR(fuzz::CheckKernelTimeout(kut_timeout_));
    if (app_->count("--device") && (device_ < 0 || device_ > 1023))
      return InvalidArgumentError("--device", "must be in 0..1023");
    if (kut_path_.empty()) kut_path_ = fuzz::DefaultGpuKutPath();
    if (kut_path_.empty())
      return InvalidArgumentError(
          "--kernel-under-test",
          "this mlasim has no GPU kernel library (a GPU_BACKEND=NONE build): name a kernel "
          "library, e.g. the CPU one, build/bin/libmlasim_kut_cpu.so");
    return OkStatus();
  }

  // The `mlasim replay` flags that run a finding through the same kernel again. A finding file's
  // command is run from --out (it names the file alone), so the library is named by its absolute
  // path: a relative one (build/bin/lib.so) does not resolve from there.
  std::string ReplayFlags() const {
    std::error_code ec;
    const std::filesystem::path lib = std::filesystem::absolute(kut_path_, ec);
    std::string f = "--gpu " + gpu_mode_ + " --kernel-under-test " +
                    fuzz::ShellQuote(ec ? kut_path_ : lib.lexically_normal().string());
    if (!kut_config_.empty()) f += " --kernel-config " + fuzz::ShellQuote(kut_config_);
    if (!head_dims_text_.empty()) f += " --head-dims " + head_dims_text_;
    if (kut_reference_ != "auto") f += " --reference " + kut_reference_;
    return f;
  }

  void PrintKernelSummary(const Streams& io, const fuzz::KutPool& pool, int64_t cases) const;
  int KutWorker(const Streams& io);
  int Devices(const Streams& io, const std::function<void(int64_t, int64_t, double)>& progress);
  // The flags every device's campaign process runs with (one shard each, --out set per process).
  std::vector<std::string> DeviceWorkerArgs() const;
  // The summary of a --devices campaign on stdout; the number of new findings.
  int64_t PrintDeviceSummary(const Streams& io, const fuzz::DeviceCampaignSummary& sum) const;
  // --junit of a --devices campaign: its report over the merged findings.
  Status WriteDeviceJunit(const fuzz::DeviceCampaignSummary& sum) const;

  void PrintSummary(const Streams& io, const fuzz::CampaignSummary& sum) const;
  int Merge(const Streams& io);
  int Reproduce(const Streams& io) {
    if (!app_->count("--size"))
      return Fail(io, InvalidArgumentError(
                          "--size",
                          "required with --reproduce (the finding's reproduce command gives it)"));
    if (reproduce_size_ < 1 || reproduce_size_ > 1000)
      return Fail(io, InvalidArgumentError("--size", "must be in 1..1000 (a RapidCheck size)"));
    // [i,j,...]: small non-negative integers, nothing else; blanks around the brackets and items
    // only ("[1 2]" was read as [12] when every blank was dropped).
    std::vector<int> path;
    auto trim = [](const std::string& x) {
      const size_t b = x.find_first_not_of(' ');
      return b == std::string::npos ? std::string() : x.substr(b, x.find_last_not_of(' ') - b + 1);
    };
    const std::string t = trim(shrink_path_);
    const bool bracketed = t.size() >= 2 && t.front() == '[' && t.back() == ']';
    const std::string body = trim(bracketed ? t.substr(1, t.size() - 2) : "");
    bool ok = bracketed;
    for (size_t i = 0; ok && !body.empty();) {
      const size_t comma = body.find(',', i);
      const std::string item =
          trim(body.substr(i, comma == std::string::npos ? std::string::npos : comma - i));
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
    cfg.kernel_inputs = app_->count("--gpu") > 0;
    cfg.swarm = o_.swarm;
    if (cfg.kernel_inputs &&
        app_->count("--kernel-under-test")) {  // its limits (GenConfig::kernel)
      std::unique_ptr<fuzz::KutPool> pool;
      if (const Status st = StartKernel(&pool); !st.ok()) return Fail(io, st);
      cfg.kernel = o_.kernel_limits;
    }
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
  std::string merge_out_, merge_junit_, html_out_, junit_out_;
  fuzz::CampaignOptions o_;
  fuzz::KutCheckOptions check_;
  std::string gpu_mode_, kut_path_, kut_config_, devices_text_, head_dims_text_;
  std::string kut_reference_ = "auto";
  bool host_inputs_ = false, skip_known_faults_ = false;
  double kut_timeout_ = 120;
  int64_t device_ = 0;  // 64 bits, as every integer flag: 2^31 reaches the range check
  bool kut_worker_ = false, no_gpu_plans_ = false;
  std::vector<std::string> known_from_;
  std::vector<std::string> profiles_;
  std::string generate_text_;
  std::string swarm_text_ = "on";
  std::string shrink_text_ = "per-signature";
  std::string seed_text_ = "1", shard_text_, shrink_path_ = "[]";
  uint64_t reproduce_seed_ = 0;
  int64_t reproduce_size_ = 50;
};

// "seed index 25, 14 shrink steps[, cut short by the 200-step budget]".
std::string Origin(std::optional<uint64_t> seed_index, int steps, bool cut_short, int budget) {
  return fuzz::OriginText(seed_index, steps, cut_short, budget);
}

void FuzzCommand::PrintSummary(const Streams& io, const fuzz::CampaignSummary& sum) const {
  const bool first_failure = o_.shrink == fuzz::ShrinkPolicy::kFirstFailure;
  io.out << fmt::format("fuzz: seed {} shard {}/{} profiles {} swarm {}{}\n", seed_text_, o_.shard,
                        o_.shards, fmt::join(o_.profiles, ","), o_.swarm ? "on" : "off",
                        first_failure ? " shrink first-failure" : "");
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
  if (first_failure)  // round 1's rule: what the cases showed against what it targeted
    io.out << fmt::format(
        "distinct signatures {} (every violation of this run's cases); {} first-violation "
        "targets, each shrunk keeping any failure (--shrink first-failure)\n",
        sum.shown.size(), sum.signatures.size());
  else
    io.out << fmt::format("distinct signatures {}\n", sum.signatures.size());
  io.out << fmt::format("findings {}: {} new, {} already in {}\n", sum.findings.size(), fresh,
                        sum.findings.size() - fresh, o_.out_dir.empty() ? "--out" : o_.out_dir);
  for (const auto& [sig, f] : sum.findings) {
    io.out << fmt::format("  {}  ({}{}){}\n", sig, f.earlier ? "earlier, " : "",
                          Origin(f.seed_index, f.shrink_steps, f.cut_short, f.max_shrink_steps),
                          f.file.empty() ? "" : "  " + f.file);
    if (!f.known.empty()) io.out << "    " << f.known << '\n';
  }
  if (o_.step_numerics_every > 0 && o_.kernel.empty())
    io.out << fmt::format("engine-step numerics: {} of {} cases (every {}th seed index)\n",
                          sum.step_numerics, sum.cases, o_.step_numerics_every);
  if (const std::string n = fuzz::NotRunText(sum.not_run, sum.cases, "seed index"); !n.empty())
    io.out << n << '\n';
  io.out << "coverage:";
  for (const auto& [k, v] : sum.coverage) io.out << ' ' << k << '=' << v;
  io.out << '\n';
}

void FuzzCommand::PrintKernelSummary(const Streams& io, const fuzz::KutPool& pool,
                                     int64_t cases) const {
  const fuzz::KutDescription& d = pool.description();
  io.out << fmt::format(
      "kernel under test: {} ({}{}), {} mode, head dims {},{}, reference {}; {} worker "
      "replacement(s){}\n",
      d.name, kut_path_, kut_config_.empty() ? "" : ", config " + kut_config_, gpu_mode_,
      check_.head_dim_qk, check_.head_dim_v, check_.reference, pool.restarts(),
      (pool.faults_not_recurring() > 0
           ? fmt::format(", {} device fault(s) that did not recur alone (not findings)",
                         pool.faults_not_recurring())
           : std::string()) +
          (pool.under_mps() ? "; an MPS daemon was listening (workers start as its clients)" : "") +
          (pool.left_mps() ? "; workers left the MPS daemon after a device fault" : ""));
  // What became of the decode calls: a kernel that runs none of the generated shapes is silent
  // otherwise.
  int64_t run = 0, skipped = 0, unsupported = 0, top = 0;
  std::string top_why;
  for (const auto& [outcome, n] : pool.CallOutcomes()) {
    (outcome == "run" ? run : outcome.rfind("skipped", 0) == 0 ? skipped : unsupported) += n;
    if (outcome != "run" && n > top) top = n, top_why = outcome;
  }
  io.out << fmt::format("decode calls: {} run, {} skipped, {} unsupported by the kernel{}\n", run,
                        skipped, unsupported,
                        top > 0 ? fmt::format(" (most often {}: {})", top, top_why) : "");
  // The formats those runs handed the kernel (fuzz/kut_check.cpp PickDtype): whether the
  // campaign reached a kernel's fp8 path at all shows here.
  std::string formats;
  for (const auto& [f, n] : pool.CallFormats())
    formats += fmt::format("{}{} {}", formats.empty() ? "" : "; ", f, n);
  if (!formats.empty()) io.out << "decode calls run by format: " << formats << '\n';
  if (check_.skip_known_faults) {
    const auto outcomes = pool.CallOutcomes();
    const auto known = outcomes.find(std::string("skipped: ") + fuzz::kSkippedKnownFault);
    io.out << fmt::format(
        "calls_skipped_known_fault {} (guard mode, --ignore-known: not run, every access they "
        "would fault through is a known family's; sentinel mode runs them)\n",
        known == outcomes.end() ? 0 : known->second);
  }
  int64_t compared = 0, not_compared = 0, top_n = 0;
  std::string top_n_why;
  for (const auto& [outcome, n] : pool.NumericsOutcomes()) {
    (outcome == "compared" ? compared : not_compared) += n;
    if (outcome != "compared" && n > top_n) top_n = n, top_n_why = outcome.substr(14);
  }
  io.out << fmt::format("numerics: {} call(s) compared, {} not compared{}\n", compared,
                        not_compared,
                        top_n > 0 ? fmt::format(" (most often {}: {})", top_n, top_n_why) : "");
  const std::map<std::string, double> t = pool.Timing();
  if (t.empty() || cases <= 0) return;
  double total = 0;
  for (const auto& [k, v] : t) total += k == "steps" ? 0 : v;
  io.out << fmt::format("time in the workers ({:.1f} s over {} steps checked, ms per step):", total,
                        t.count("steps") ? t.at("steps") : 0);
  const double steps = std::max(1.0, t.count("steps") ? t.at("steps") : 1.0);
  for (const auto& [k, v] : t)
    if (k != "steps") io.out << fmt::format(" {} {:.2f}", k, 1000 * v / steps);
  io.out << '\n';
}

int FuzzCommand::KutWorker(const Streams& io) {
  Status st = ParseKernelFlags();
  if (!st.ok()) return Fail(io, st);
  return fuzz::KutWorkerMain(std::cin, STDOUT_FILENO, kut_path_, kut_config_, check_);
}

std::vector<std::string> FuzzCommand::DeviceWorkerArgs() const {
  std::vector<std::string> args = {"fuzz",
                                   "--seed",
                                   seed_text_,
                                   "--jobs",
                                   std::to_string(o_.jobs),
                                   "--shrink-steps",
                                   std::to_string(o_.max_shrink_steps),
                                   "--gpu",
                                   gpu_mode_,
                                   "--kernel-under-test",
                                   kut_path_,
                                   "--head-dims",
                                   fmt::format("{},{}", check_.head_dim_qk, check_.head_dim_v),
                                   "--reference",
                                   kut_reference_,
                                   "--kernel-timeout",
                                   fmt::format("{}", kut_timeout_)};
  if (!kut_config_.empty()) args.insert(args.end(), {"--kernel-config", kut_config_});
  if (app_->count("--seconds"))
    args.insert(args.end(), {"--seconds", fmt::format("{}", o_.seconds)});
  for (const std::string& p : o_.profiles) args.insert(args.end(), {"--profile", p});
  if (o_.ignore_known) args.push_back("--ignore-known");
  if (o_.small) args.push_back("--small");
  if (!generate_text_.empty()) args.insert(args.end(), {"--generate", generate_text_});
  for (const std::string& c : o_.contract_files) args.insert(args.end(), {"--contract", c});
  args.insert(args.end(), {"--swarm", o_.swarm ? "on" : "off"});  // each worker generates alike
  args.insert(args.end(), {"--shrink", fuzz::ShrinkPolicyName(o_.shrink)});
  return args;
}

int64_t FuzzCommand::PrintDeviceSummary(const Streams& io,
                                        const fuzz::DeviceCampaignSummary& sum) const {
  io.out << fmt::format("fuzz: seed {} shard {}/{} profiles {}, {} device process(es) ({})\n",
                        seed_text_, o_.shard, o_.shards, fmt::join(o_.profiles, ","),
                        sum.processes.size(), devices_text_);
  for (const fuzz::DeviceProcess& p : sum.processes)
    io.out << fmt::format("  device {} shard {}: {} cases{}{}, exit {}{}  {}\n", p.device, p.shard,
                          p.cases, p.budget >= 0 ? fmt::format(" of {}", p.budget) : "",
                          p.restarts ? fmt::format(", {} restart(s)", p.restarts) : "", p.exit_code,
                          p.taken_out ? " TAKEN OUT" : "", p.log);
  io.out << fmt::format("cases {}  ({:.0f} cases/s over {:.1f} s)\n", sum.cases,
                        sum.seconds > 0 ? sum.cases / sum.seconds : 0.0, sum.seconds);
  int64_t fresh = 0;
  for (const auto& [sig, r] : sum.findings) fresh += sum.earlier.count(sig) ? 0 : 1;
  io.out << fmt::format("findings {}: {} new, {} already in {}\n", sum.findings.size(), fresh,
                        sum.findings.size() - fresh, o_.out_dir.empty() ? "--out" : o_.out_dir);
  for (const auto& [sig, r] : sum.findings)
    io.out << fmt::format("  {}  ({}{}){}\n", sig, sum.earlier.count(sig) ? "earlier, " : "",
                          Origin(r.seed_index, r.shrink_steps, r.cut_short, r.max_shrink_steps),
                          o_.out_dir.empty() ? "" : "  " + r.path);
  return fresh;
}

Status FuzzCommand::WriteDeviceJunit(const fuzz::DeviceCampaignSummary& sum) const {
  fuzz::CampaignSummary cs;
  cs.cases = cs.next_index = sum.cases;
  cs.cut_short = sum.cut_short;
  for (const auto& [sig, r] : sum.findings) {
    fuzz::CampaignFinding f = fuzz::FindingFromRecord(r, sum.earlier.count(sig) > 0);
    if (o_.out_dir.empty()) f.file = f.replay = "";  // the workers' folders are gone
    cs.signatures.insert(sig);
    cs.findings.emplace(sig, f);
  }
  return WriteOutputFile("--junit", junit_out_, fuzz::CampaignJunit(o_, cs, seed_text_));
}

// --devices: one campaign process per device (fuzz/kut_devices.h), findings merged into --out.
int FuzzCommand::Devices(const Streams& io,
                         const std::function<void(int64_t, int64_t, double)>& progress) {
  Status st = ParseKernelFlags();
  if (st.ok()) st = fuzz::CheckCampaignOptions(o_);  // each process would refuse them, taken out
  if (!st.ok()) return Fail(io, st);
  auto devices = fuzz::ParseDevices(devices_text_);
  if (!devices.ok()) return Fail(io, devices.status());
  fuzz::DeviceCampaignOptions d;
  d.exe = fuzz::WorkerExe();
  d.devices = *devices;
  d.shard = o_.shard;
  d.shards = o_.shards;
  d.max_cases = o_.max_cases;
  d.resume = o_.resume;
  // Without --out the processes' findings meet in a temporary folder, removed afterwards.
  const std::string tmp = o_.out_dir.empty() ? (std::filesystem::temp_directory_path() /
                                                fmt::format("mlasim-fuzz-devices-{}", ::getpid()))
                                                   .string()
                                             : std::string();
  d.out_dir = o_.out_dir.empty() ? tmp : o_.out_dir;
  d.args = DeviceWorkerArgs();
  auto sum = fuzz::RunDeviceCampaign(d, progress);
  if (::isatty(STDERR_FILENO)) io.err << '\n';
  std::error_code ec;
  if (!tmp.empty()) std::filesystem::remove_all(tmp, ec);
  if (!sum.ok()) return Fail(io, sum.status());
  const int64_t fresh = PrintDeviceSummary(io, *sum);
  if (app_->count("--junit"))
    if (Status w = WriteDeviceJunit(*sum); !w.ok()) return Fail(io, w);
  bool failed = false;
  for (const fuzz::DeviceProcess& p : sum->processes) failed = failed || p.taken_out;
  if (failed) return kExitInternal;
  if (fresh > 0) return kExitCheckFailed;
  return sum->cut_short ? kExitBudgetCutShort : kExitOk;
}

int FuzzCommand::Merge(const Streams& io) {
  if (merge_->count("--junit"))
    if (Status st = CheckOutputFile("--junit", merge_junit_); !st.ok()) return Fail(io, st);
  auto m = fuzz::MergeFindingDirs(merge_dirs_, merge_out_);
  if (!m.ok()) return Fail(io, m.status());
  if (merge_->count("--junit")) {  // first: a full disk is an exit 2 with nothing on stdout
    const std::string xml = fuzz::MergeJunit(*m, merge_dirs_, merge_out_);
    if (Status st = WriteOutputFile("--junit", merge_junit_, xml); !st.ok()) return Fail(io, st);
  }
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
