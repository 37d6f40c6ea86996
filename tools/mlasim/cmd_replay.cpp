// File: tools/mlasim/cmd_replay.cpp — `mlasim replay`: expand one engine step of a scenario, run
// every call's access contract over the simulated address space, report. docs/cli.md, docs/scenario.md.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fuzz/kut_pool.h"
#include "fuzz/signature.h"
#include "kernels/gpu_api.h"
#include "sim/junit.h"
#include "sim/replay.h"
#include "sim/report.h"
#include "sim/report_html.h"
#include "sim/scenario_json.h"
#include "tools/mlasim/commands.h"
#include "tools/mlasim/html_output.h"
#include "tools/mlasim/scenario_input.h"

namespace mlasim::cli {
namespace {

constexpr const char* kName = "replay";

// ---- `--gpu`: the step through a kernel under test (docs/kernel-under-test.md) -----------------------------
// The kernel library (mlasim's own GPU kernels by default, or --kernel-under-test) runs every
// decode call and the reduce after it in a worker process (fuzz/kut_pool.h), on buffers with
// sentinel bytes or guard pages; damage and faults are compared with the simulator's
// predictions under the kernel's contract, o / lse with the numerics reference (the GPU
// reference for a device kernel), and the GPU planner with the reference planner. Text: one
// block per decode call; --json: the report's "gpu" object.

std::string RangeText(const nlohmann::json& j) {
  const int64_t a = j.value("first_row", int64_t{0}), b = j.value("last_row", int64_t{0});
  return (a == b ? fmt::format("row {}", a) : fmt::format("rows {}..{}", a, b)) + " " +
         (j.value("side", "") == "before" ? "before" : "past the end of") + " " +
         j.value("buffer", "");
}

std::string NumericsText(const nlohmann::json& n) {
  if (!n.value("compared", false))
    return "    numerics not compared: " + n.value("why", std::string("-")) + "\n";
  auto num = [](const nlohmann::json& x) { return x.is_number() ? x.get<double>() : NAN; };
  const auto& o = n["o"];
  const auto& l = n["lse"];
  return fmt::format(
      "    numerics vs the {} reference ({} real rows{}): o max_abs {:.3g} (atol {:.3g} rtol "
      "{:.3g}) cos_diff {:.3g}, lse max_abs {:.3g}: {}\n",
      n.value("reference", ""), n.value("rows_compared", 0),
      n.value("pairs_skipped", 0)
          ? fmt::format(", {} undefined (row, head) pairs skipped", n.value("pairs_skipped", 0))
          : "",
      num(o["max_abs"]), num(o["atol"]), num(o["rtol"]), num(o["cos_diff"]), num(l["max_abs"]),
      n.value("passed", false) ? "within tolerance" : "OUTSIDE TOLERANCE");
}

std::string CallText(const nlohmann::json& c) {
  std::string s = fmt::format("  call {} {} {}", c.value("index", -1), c.value("step", ""),
                              c.value("call", ""));
  if (c.contains("reduce_index"))
    s += fmt::format(" (+ reduce, call {})", c["reduce_index"].get<int>());
  if (c.contains("q_rows"))
    s +=
        fmt::format(": q/o {} rows, plan covers {}", c.value("q_rows", 0), c.value("plan_rows", 0));
  s += "\n";
  if (c.contains("fault")) return s + "    FAULT: " + c["fault"].get<std::string>() + "\n";
  if (c.contains("skipped")) return s + "    not run: " + c["skipped"].get<std::string>() + "\n";
  for (const auto& r : c.value("runs", nlohmann::json::array())) {
    std::vector<std::string> seen, pred;
    for (const auto& d : r.value("observed", nlohmann::json::array())) seen.push_back(RangeText(d));
    for (const auto& d : r.value("predicted", nlohmann::json::array()))
      pred.push_back(d.value("access", "") + " " + RangeText(d));
    s += fmt::format(
        "    {}: damaged sentinel bytes: {}; the contract predicts: {}\n", r.value("op", ""),
        seen.empty() ? "none" : fmt::format("{}", fmt::join(seen, ", ")),
        pred.empty() ? "nothing out of bounds" : fmt::format("{}", fmt::join(pred, ", ")));
    if (r.contains("error"))
      s += "    the kernel returned an error: " + r["error"].get<std::string>() + "\n";
    if (r.contains("unsupported"))
      s += "    the kernel does not run it: " + r["unsupported"].get<std::string>() + "\n";
  }
  if (c.contains("numerics")) s += NumericsText(c["numerics"]);
  return s;
}

std::string KernelText(const fuzz::KutDescription& d, const std::string& mode,
                       const fuzz::KutStepResult& res) {
  std::string s = fmt::format("\ngpu: kernel under test {} ({}), {} mode, device {}\n", d.name,
                              d.path, mode, res.device.empty() ? "-" : res.device);
  for (const auto& p : res.plans) {
    if (p.contains("note")) {
      s += fmt::format("  plan {}: {}\n", p.value("plan", ""), p["note"].get<std::string>());
      continue;
    }
    const int64_t bad = p.value("mismatches", int64_t{0});
    s += fmt::format("  plan {}: GPU planner ({} kernel) vs reference planner: {}\n",
                     p.value("plan", ""), p.value("kernel", ""),
                     bad == 0 ? "bit-identical"
                              : fmt::format("{} MISMATCHES, first {}", bad,
                                            p.value("first_mismatch", std::string())));
  }
  for (const auto& c : res.calls) s += CallText(c);
  for (const std::string& n : res.notes) s += "  worker: " + n + "\n";
  if (!res.error.empty()) s += "  error: " + res.error + "\n";
  s += fmt::format("findings {}\n", res.findings.size());
  for (const sim::Violation& v : res.findings)
    s += fmt::format("  {}: {}\n", fuzz::Signature(v), v.detail);
  s += fmt::format("gpu verdict: {} ({} decode calls)\n",
                   res.findings.empty() && res.error.empty()
                       ? "the kernel agrees with its contract and the reference"
                       : "FINDINGS",
                   res.calls.size());
  return s;
}

nlohmann::json KernelJson(const fuzz::KutDescription& d, const std::string& mode,
                          const fuzz::KutStepResult& res) {
  nlohmann::json findings = nlohmann::json::array();
  for (const sim::Violation& v : res.findings) {
    nlohmann::json f = fuzz::ViolationToJson(v);
    f["signature"] = fuzz::Signature(v);
    findings.push_back(f);
  }
  nlohmann::json kernel = d.ToJson();
  kernel.erase("decode_contract");
  kernel.erase("reduce_contract");
  kernel["decode_contract"] = d.decode_contract->name;
  kernel["reduce_contract"] = d.reduce_contract->name;
  nlohmann::json out = {
      {"kernel", kernel},
      {"mode", mode},
      {"device", res.device},
      {"plans", res.plans},
      {"calls", res.calls},
      {"findings", findings},
      {"notes", res.notes},
      {"calls_run", res.calls.size()},
      {"verdict", res.findings.empty() && res.error.empty() ? "agrees" : "findings"}};
  if (!res.error.empty()) out["error"] = res.error;
  return out;
}

class ReplayCommand final : public Command {
 public:
  explicit ReplayCommand(CLI::App& parent) {
    app_ = parent.add_subcommand(kName,
                                 "Replay one engine step (verify + MTP drafts) of a "
                                 "scenario and report every access outside a buffer");
    app_->footer(
        "Exit codes: 0 clean, 1 violations, 2 bad input (the message names the JSON path).\n"
        "Examples: mlasim replay --builtin seed\n"
        "          mlasim replay case.json --profile atom-2026-11 --json\n");
    scenario_.Add(*app_);
    app_->add_flag("--json", json_, "print the report as JSON");
    app_->add_option("--layout-out", layout_out_,
                     "write the address-space layout (persistent buffers + the tensors of the "
                     "first call with a violation) as JSON, for `mlasim explain-fault`")
        ->type_name("FILE");
    app_->add_option("--html", html_out_,
                     "also write the report as one self-contained HTML page (call table, "
                     "memory maps, plan timelines; with --gpu the GPU's rows; docs/pictures.md)")
        ->type_name("FILE");
    app_->add_option("--junit", junit_out_,
                     "also write a JUnit XML report for CI: one test case per engine call, "
                     "failing with the call's violations (docs/ci.md)")
        ->type_name("FILE");
    gpu_opt_ =
        app_->add_option(
                "--gpu", gpu_mode_,
                "also run the decode and reduce calls through a kernel under test "
                "(docs/kernel-under-test.md; default mlasim's GPU kernels) and compare with the "
                "kernel's contract and the numerics reference: sentinel (default: "
                "sentinel bytes around every buffer) or guard (guard pages); exit 1 on "
                "any finding, 2 without a kernel library to run")
            ->expected(0, 1)
            ->type_name("[sentinel|guard]");
    app_->add_option("--kernel-under-test", kut_path_,
                     "with --gpu: the kernel library (kernels/mlasim_kut.h); default "
                     "libmlasim_kut_gpu.so beside the binary")
        ->type_name("PATH.so");
    app_->add_option("--kernel-config", kut_config_, "with --gpu: the kernel library's config")
        ->type_name("TEXT");
    app_->add_option("--head-dims", head_dims_, "with --gpu: head dims of the inputs (576,512)")
        ->type_name("D,DV");
    app_->add_option("--reference", reference_,
                     "with --gpu: numerics reference cpu, gpu or auto (gpu for a device kernel)")
        ->capture_default_str();
    app_->add_option("--kernel-timeout", kut_timeout_,
                     "with --gpu: seconds a kernel call may run before it counts as a hang")
        ->capture_default_str();
    app_->add_option("--mutant", mutant_,
                     "replay with a registered simulator mutant switched on (a case written by "
                     "`mlasim mutants --out` shows its violation only with it)")
        ->type_name("NAME");
    app_->add_option("--scenario-out", scenario_out_,
                     "write the scenario as canonical JSON (every field spelled out; cu_count only "
                     "when set, 0 = the target's CUs)")
        ->type_name("FILE");
  }

  CLI::App* app() const override { return app_; }

  int Run(const Streams& io) override {
    StatusOr<sim::Scenario> s = scenario_.Load();
    if (!s.ok()) return Fail(io, s.status());
    const bool gpu = gpu_opt_->count() > 0;
    for (const char* flag : {"--kernel-under-test", "--kernel-config", "--head-dims", "--reference",
                             "--kernel-timeout"})
      if (!gpu && app_->count(flag))
        return Fail(io, InvalidArgumentError(flag, "only with --gpu [sentinel|guard]"));
    std::unique_ptr<fuzz::KutPool> pool;
    if (gpu) {
      const int rc = StartKernel(io, &pool);
      if (rc != kExitOk) return rc;
      *s = fuzz::WithKutContracts(*s, pool->description());
    }
    sim::ExecuteOptions exec;
    if (!mutant_.empty()) {
      bool known = false;
      for (int m = 1; m < static_cast<int>(sim::SimMutant::kCount); ++m) {
        if (mutant_ == sim::SimMutantName(static_cast<sim::SimMutant>(m))) {
          exec.mutant = static_cast<sim::SimMutant>(m);
          known = true;
        }
      }
      if (!known)
        return Fail(io, InvalidArgumentError("--mutant", "no simulator mutant named '" + mutant_ +
                                                             "' (see mlasim mutants --list)"));
    }
    // Four reports into one file: each write replaced the one before, and one report was left.
    if (Status st = CheckDistinctOutputs({{"--html", html_out_},
                                          {"--junit", junit_out_},
                                          {"--layout-out", layout_out_},
                                          {"--scenario-out", scenario_out_}});
        !st.ok())
      return Fail(io, st);
    std::vector<std::pair<std::string, std::string>> inputs = {
        {"the scenario file", scenario_.case_file}, {"--kernel-under-test's library", kut_path_}};
    for (const std::string& c : scenario_.contracts) inputs.push_back({"--contract's file", c});
    if (Status st = CheckOutputsAreNotInputs({{"--html", html_out_},
                                              {"--junit", junit_out_},
                                              {"--layout-out", layout_out_},
                                              {"--scenario-out", scenario_out_}},
                                             inputs);
        !st.ok())
      return Fail(io, st);
    if (app_->count("--html"))
      if (Status st = CheckOutputFile("--html", html_out_); !st.ok()) return Fail(io, st);
    if (app_->count("--junit"))
      if (Status st = CheckOutputFile("--junit", junit_out_); !st.ok()) return Fail(io, st);
    for (const auto& [flag, path] :
         {std::pair<const char*, const std::string*>{"--layout-out", &layout_out_},
          {"--scenario-out", &scenario_out_}})
      if (!path->empty())
        if (Status st = CheckOutputFile(flag, *path); !st.ok()) return Fail(io, st);
    auto report = sim::Replay(*s, exec);
    if (!report.ok()) return Fail(io, scenario_.InFile(report.status(), ChangedSinceLoad(gpu)));
    if (!layout_out_.empty() && !WriteJson(io, "--layout-out", layout_out_, report->result.layout))
      return kExitBadInput;
    if (!scenario_out_.empty() &&
        !WriteJson(io, "--scenario-out", scenario_out_, sim::ScenarioToJson(*s)))
      return kExitBadInput;
    bool gpu_agrees = true;
    nlohmann::json gpu_json;
    sim::junit::KernelPart kernel_part;
    // With --html or --junit the report waits for them: a file that cannot be written (a full
    // disk) is an exit 2 with nothing on stdout.
    std::ostringstream held;
    std::ostream& out = app_->count("--html") || app_->count("--junit") ? held : io.out;
    if (json_) {
      nlohmann::json j = sim::ReportJson(*report);
      if (gpu) {
        const fuzz::KutStepResult k = pool->Check(report->scenario);
        gpu_agrees = k.findings.empty() && k.error.empty();
        j["gpu"] = gpu_json = KernelJson(pool->description(), gpu_mode_, k);
        kernel_part = {k.findings, k.error};
      }
      out << j.dump(2) << '\n';
    } else {
      out << sim::ReportText(*report);
      out.flush();
      if (gpu) {
        const fuzz::KutStepResult k = pool->Check(report->scenario);
        gpu_agrees = k.findings.empty() && k.error.empty();
        gpu_json = KernelJson(pool->description(), gpu_mode_, k);
        kernel_part = {k.findings, k.error};
        out << KernelText(pool->description(), gpu_mode_, k);
      }
    }
    const Status written =
        WriteReports(*report, gpu ? &gpu_json : nullptr, gpu ? &kernel_part : nullptr);
    if (!written.ok()) return Fail(io, written);
    if (&out == &held) io.out << held.str();
    if (!gpu_agrees) return kExitCheckFailed;
    return report->clean() ? kExitOk : kExitCheckFailed;
  }

 private:
  int Fail(const Streams& io, const Status& st) {
    PrintError(io.err, kName, st.field(), st.message());
    return ExitCodeFor(st);
  }
  // What changed the scenario after its load (whose expansion passed): "the kernel under test's
  // contracts", "simulator mutant X", both, or "".
  std::string ChangedSinceLoad(bool gpu) const {
    std::string with = gpu ? "the kernel under test's contracts" : "";
    if (!mutant_.empty())
      with += (with.empty() ? "" : " and ") + std::string("simulator mutant ") + mutant_;
    return with;
  }
  // --html and --junit, after the report (their paths were checked before the replay); `gpu`
  // and `kernel` with --gpu, else null. Errors: those of WriteOutputFile (a full disk).
  Status WriteReports(const sim::ReplayReport& r, const nlohmann::json* gpu,
                      const sim::junit::KernelPart* kernel) const {
    if (app_->count("--html")) {
      sim::ReplayHtmlOptions ho;
      ho.gpu = gpu;
      MLASIM_RETURN_IF_ERROR(WriteOutputFile("--html", html_out_, sim::ReplayHtml(r, ho)));
    }
    if (app_->count("--junit"))
      MLASIM_RETURN_IF_ERROR(
          WriteOutputFile("--junit", junit_out_, sim::junit::ReplayJunit(r, kernel)));
    return OkStatus();
  }
  bool WriteJson(const Streams& io, const char* flag, const std::string& path,
                 const nlohmann::json& j) {
    // A directory, a missing folder, a read-only file system, a full disk: the cause in words.
    if (Status st = WriteOutputFile(flag, path, j.dump(2) + "\n"); !st.ok()) {
      Fail(io, st);
      return false;
    }
    return true;
  }

  // --gpu: the kernel library's worker (fuzz/kut_pool.h). Exit 2 with the reason when there is
  // no library to run or it is refused.
  int StartKernel(const Streams& io, std::unique_ptr<fuzz::KutPool>* pool) {
    if (gpu_mode_.empty()) gpu_mode_ = "sentinel";
    if (gpu_mode_ != "sentinel" && gpu_mode_ != "guard")
      return Fail(
          io, InvalidArgumentError("--gpu", "must be sentinel or guard (got '" + gpu_mode_ + "')"));
    fuzz::KutPoolOptions po;
    po.library = kut_path_.empty() ? fuzz::DefaultGpuKutPath() : kut_path_;
    if (po.library.empty()) {
      PrintError(io.err, kName, "--gpu",
                 "this mlasim was built without a GPU backend (GPU_BACKEND=NONE), so it has no "
                 "GPU kernel library; rebuild with -DGPU_BACKEND=CUDA or HIP, or name a kernel "
                 "library with --kernel-under-test (e.g. build/bin/libmlasim_kut_cpu.so)");
      return kExitBadInput;
    }
    po.worker_exe = fuzz::WorkerExe();
    po.config = kut_config_;
    po.check.guard = gpu_mode_ == "guard";
    if (!head_dims_.empty()) {
      int d = 0, dv = 0;
      char tail = 0;
      if (std::sscanf(head_dims_.c_str(), "%d,%d%c", &d, &dv, &tail) != 2 || d < 16 || dv < 16 ||
          d > 1024 || dv > d || d % 16 != 0 || dv % 16 != 0)
        return Fail(io, InvalidArgumentError("--head-dims",
                                             "must be D,DV with 16 <= DV <= D <= 1024, multiples "
                                             "of 16 (got '" +
                                                 head_dims_ + "')"));
      po.check.head_dim_qk = d;
      po.check.head_dim_v = dv;
    }
    if (reference_ != "auto" && reference_ != "cpu" && reference_ != "gpu")
      return Fail(io, InvalidArgumentError("--reference", "must be auto, cpu or gpu"));
    po.check.reference = reference_;
    if (Status st = fuzz::CheckKernelTimeout(kut_timeout_); !st.ok()) return Fail(io, st);
    po.timeout_seconds = kut_timeout_;
    auto p = fuzz::KutPool::Start(po);
    if (!p.ok()) return Fail(io, p.status());
    if (!(*p)->description().host_memory && !gpu::available()) {
      PrintError(io.err, kName, "--gpu",
                 (*p)->description().name + " runs on a GPU and no GPU device is visible");
      return kExitBadInput;
    }
    *pool = std::move(*p);
    return kExitOk;
  }

  CLI::App* app_ = nullptr;
  CLI::Option* gpu_opt_ = nullptr;
  std::string gpu_mode_, kut_path_, kut_config_, head_dims_, reference_ = "auto";
  double kut_timeout_ = 120;
  ScenarioArgs scenario_;
  std::string mutant_, layout_out_, scenario_out_, html_out_, junit_out_;
  bool json_ = false;
};

}  // namespace

std::unique_ptr<Command> RegisterReplay(CLI::App& app) {
  return std::make_unique<ReplayCommand>(app);
}

}  // namespace mlasim::cli
