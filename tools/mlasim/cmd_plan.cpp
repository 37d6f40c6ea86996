// File: tools/mlasim/cmd_plan.cpp — `mlasim plan`: one plan from flags or a JSON request, or a
// golden corpus replay (--check-golden). Usage and conventions: docs/cli.md.
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ref/limits.h"
#include "ref/plan_check.h"
#include "ref/planner.h"
#include "ref/sizing.h"
#include "sim/plan_svg.h"
#include "tools/io/golden.h"
#include "tools/io/request_json.h"
#include "tools/mlasim/commands.h"
#include "tools/mlasim/html_output.h"
#include "tools/mlasim/plan_input.h"
#include "tools/mlasim/plan_output.h"

namespace mlasim::cli {
namespace {

constexpr const char* kName = "plan";
// Largest --launch-grid: far above any GPU's workgroups per launch of a persistent kernel.
// Workgroups of a launch: ref/limits.h launch_grid.
int64_t MaxLaunchGrid() {
  return ref::Limit(ref::LimitId::kLaunchGrid);
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

class PlanCommand final : public Command {
 public:
  explicit PlanCommand(CLI::App& parent) {
    app_ = parent.add_subcommand(kName,
                                 "Plan one batch as aiter's get_mla_metadata_v1 does "
                                 "(fast mode, v1.2), or replay a golden corpus");
    app_->footer(
        "Exit codes: 0 success, 1 the plan check failed (or a golden mismatch), 2 bad input (the "
        "message names the flag or JSON path), 3 internal error.\nExample: mlasim plan "
        "--kv-lens 300,40,700 --qlen 1 --heads 16 --clusters 8\n");
    AddPlanFlags(*app_, flags_);
    request_opt_ = app_->add_option("--request", request_file_,
                                    "JSON request: a golden `input` object, or a golden record "
                                    "with an `input` key (instead of the flags above)")
                       ->type_name("FILE");
    planner_opt_ =
        app_->add_option("--planner", planner_, "auto (aiter's dispatch), serial or parallel")
            ->type_name("auto|serial|parallel")
            ->capture_default_str();
    launch_opt_ = app_->add_option("--launch-grid", launch_grid_,
                                   "check the plan against a decode launch of N workgroups "
                                   "(default: aiter's grid, work_indptr entries - 1)")
                      ->type_name("N");
    mutant_opt_ = app_->add_option("--mutant", mutant_,
                                   "plan with a deliberately broken planner variant, to see what "
                                   "the plan check reports (none, planner-no-tail-rule, ...)")
                      ->type_name("NAME");
    json_opt_ = app_->add_flag("--json", json_, "print the plan as JSON instead of the table");
    npy_opt_ = app_->add_option("--npy", npy_dir_,
                                "also write the six buffers as .npy files (aiter's dtypes and "
                                "full sizes) into DIR, created if missing")
                   ->type_name("DIR");
    svg_opt_ = app_->add_option("--svg", svg_file_,
                                "also write the plan's timeline (clusters, work items along KV, "
                                "reduce groups) as an SVG file (docs/pictures.md)")
                   ->type_name("FILE");
    app_->add_option("--check-golden", golden_files_,
                     "replan every record of a golden corpus .jsonl and compare every written "
                     "buffer (repeatable)")
        ->type_name("FILE.jsonl");
  }

  CLI::App* app() const override { return app_; }

  int Run(const Streams& io) override {
    if (!golden_files_.empty()) return RunGolden(io);
    const std::vector<std::string> given = flags_.GivenFlags();
    const bool from_file = request_opt_->count() > 0;
    if (from_file && !given.empty())
      return Fail(io, "--request",
                  "cannot be combined with " + Join(given) +
                      ": give the request either as flags or as a JSON file");
    if (!from_file && flags_.kv_lens.empty() && given.empty())
      return Fail(io, "--kv-lens",
                  "required: give --kv-lens LEN,... (with other flags), --request FILE or "
                  "--check-golden FILE.jsonl (see 'mlasim plan --help')");
    const InputSource source = from_file ? InputSource::kRequestFile : InputSource::kFlags;
    if (Status st =
            CheckOutputsAreNotInputs({{"--svg", svg_file_}}, {{"--request's file", request_file_}});
        !st.ok())
      return Fail(io, st.field(), st.message());
    StatusOr<ref::PlanRequest> request =
        from_file ? RequestFromFile(request_file_) : RequestFromFlags(flags_);
    if (!request.ok()) return Fail(io, request.status(), source);
    StatusOr<ref::PlannerOptions> options = ParseOptions();
    if (!options.ok()) return Fail(io, options.status(), source);
    StatusOr<ref::Plan> plan = MakePlan(*request, *options);
    if (!plan.ok()) return Fail(io, plan.status(), source);
    if (npy_opt_->count() > 0) {
      if (npy_dir_.empty()) return Fail(io, "--npy", "needs a directory name");
      if (Status st = WritePlanNpy(npy_dir_, *plan); !st.ok()) return Fail(io, st, source);
    }
    if (svg_opt_->count() > 0) {
      sim::PlanPicture pic;
      pic.title = fmt::format("mlasim plan: {} requests on {} clusters ({}, revision {})",
                              request->kv_indptr.size() - 1, plan->derived.num_clusters,
                              ref::ArchName(request->target), ref::RevisionName(request->revision));
      pic.request = &*request;
      pic.plan = &*plan;
      if (Status st = WriteOutputFile("--svg", svg_file_, sim::PlanTimelineFile(pic)); !st.ok())
        return Fail(io, st, source);
    }
    const int64_t grid = launch_opt_->count() > 0 ? launch_grid_ : ref::AiterLaunchGrid(*plan);
    const ref::PlanCheckReport report = CheckPrintedPlan(*request, *plan, grid);
    Print(io, *request, *plan, report, grid);
    return report.ok() ? kExitOk : kExitCheckFailed;
  }

 private:
  // --planner, --mutant and --launch-grid (checked here: their errors name the flag).
  StatusOr<ref::PlannerOptions> ParseOptions() const {
    ref::PlannerOptions options;
    MLASIM_ASSIGN_OR_RETURN(options.choice, ParsePlannerChoice(planner_));
    if (mutant_opt_->count() > 0) {
      MLASIM_ASSIGN_OR_RETURN(options.mutant, ref::ParsePlannerMutant(mutant_, "--mutant"));
    }
    // "got" the text as typed (decimal-normalised): 2^63 .. 2^64 - 1 reach launch_grid_ as
    // INT64_MAX, which the message printed instead.
    if (launch_opt_->count() > 0 && (launch_grid_ < 1 || launch_grid_ > MaxLaunchGrid()))
      return InvalidArgumentError("--launch-grid", "must be in 1.." +
                                                       std::to_string(MaxLaunchGrid()) + ", got " +
                                                       launch_opt_->results().back());
    return options;
  }

  // Validation, sizing, host decisions and mlasim's limits, then the plan itself.
  static StatusOr<ref::Plan> MakePlan(const ref::PlanRequest& request,
                                      const ref::PlannerOptions& options) {
    MLASIM_RETURN_IF_ERROR(ref::ValidatePlanRequest(request));
    const int32_t batch = static_cast<int32_t>(request.kv_indptr.size()) - 1;
    MLASIM_ASSIGN_OR_RETURN(const ref::MetadataSizes sizes,
                            ref::GetMlaMetadataInfoV1(request, batch));
    MLASIM_RETURN_IF_ERROR(CheckSizesLimit(sizes));
    MLASIM_ASSIGN_OR_RETURN(const ref::PlanDerived derived,
                            ref::DecidePlan(request, options.choice));
    MLASIM_RETURN_IF_ERROR(CheckPlannerLimits(request, derived));
    return ref::PlanMlaMetadata(request, options);
  }

  // The plan checker on what is printed, and the launch check with `grid` workgroups.
  static ref::PlanCheckReport CheckPrintedPlan(const ref::PlanRequest& request,
                                               const ref::Plan& plan, int64_t grid) {
    ref::PlanCheckReport report = ref::CheckPlan(request, plan);
    if (grid >= 1) {
      const ref::PlanCheckReport launch = ref::CheckLaunchGrid(plan, grid);
      report.diagnostics.insert(report.diagnostics.end(), launch.diagnostics.begin(),
                                launch.diagnostics.end());
    }
    return report;
  }

  void Print(const Streams& io, const ref::PlanRequest& request, const ref::Plan& plan,
             const ref::PlanCheckReport& report, int64_t grid) const {
    const std::string launch =
        fmt::format("{} workgroup{} ({})", grid, grid == 1 ? "" : "s",
                    launch_opt_->count() > 0 ? "--launch-grid" : "aiter's grid: work_indptr - 1");
    if (json_) {
      nlohmann::json j = io::PlanToJson(plan);
      j["check"] = io::PlanCheckToJson(report, grid, launch_opt_->count() > 0);
      io.out << j.dump(2) << '\n';
      return;
    }
    PrintPlanTable(io.out, request, plan);
    if (npy_opt_->count() > 0)
      io.out << fmt::format("\nwrote {} .npy files to {}\n", NpyFileNames().size(), npy_dir_);
    PrintPlanCheck(io.out, report, launch);
  }

  int RunGolden(const Streams& io) {
    std::vector<std::string> conflicts = flags_.GivenFlags();
    for (const CLI::Option* o :
         {request_opt_, planner_opt_, launch_opt_, mutant_opt_, json_opt_, npy_opt_, svg_opt_})
      if (o->count() > 0) conflicts.push_back(o->get_name());
    if (!conflicts.empty())
      return Fail(io, "--check-golden",
                  "cannot be combined with " + Join(conflicts) +
                      ": a golden record carries its own request");
    int code = kExitOk;
    for (const std::string& path : golden_files_) {
      std::error_code ec;
      if (std::filesystem::is_directory(path, ec)) {
        Fail(io, "--check-golden", path + ": is a directory, not a .jsonl file");
        code = kExitBadInput;
        continue;
      }
      StatusOr<io::GoldenSummary> sum = io::CheckGoldenFile(path, [&](const io::GoldenMismatch& m) {
        io.out << "id " << m.id << ": " << m.buffer;
        if (m.index >= 0) io.out << '[' << m.index << ']';
        io.out << ": " << m.detail << '\n';
      });
      if (!sum.ok()) {
        Fail(io, "--check-golden", sum.status().ToString());
        code = kExitBadInput;
        continue;
      }
      if (sum->records == 0) {
        Fail(io, "--check-golden", path + ": holds no records");
        code = kExitBadInput;
        continue;
      }
      io.out << sum->matched << '/' << sum->records << " records match in " << path << '\n';
      if (sum->matched != sum->records && code == kExitOk) code = kExitCheckFailed;
    }
    return code;
  }

  int Fail(const Streams& io, const std::string& field, const std::string& reason) {
    PrintError(io.err, kName, field, reason);
    return kExitBadInput;
  }
  int Fail(const Streams& io, const Status& st, InputSource source) {
    PrintError(io.err, kName, DisplayField(st.field(), source), st.message());
    return ExitCodeFor(st);
  }

  CLI::App* app_ = nullptr;
  PlanFlags flags_;
  std::string request_file_;
  std::string planner_ = "auto";
  int64_t launch_grid_ = 0;
  std::string mutant_;
  bool json_ = false;
  std::string npy_dir_, svg_file_;
  std::vector<std::string> golden_files_;
  CLI::Option* request_opt_ = nullptr;
  CLI::Option* planner_opt_ = nullptr;
  CLI::Option* launch_opt_ = nullptr;
  CLI::Option* mutant_opt_ = nullptr;
  CLI::Option* json_opt_ = nullptr;
  CLI::Option* npy_opt_ = nullptr;
  CLI::Option* svg_opt_ = nullptr;
};

}  // namespace

std::unique_ptr<Command> RegisterPlan(CLI::App& app) {
  return std::make_unique<PlanCommand>(app);
}

}  // namespace mlasim::cli
