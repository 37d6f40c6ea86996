// libFuzzer harness: `mlasim check CASE_DIR` (tools/mlasim/cmd_check.cpp) on a case held in
// memory, every section in the command's order with the command's limits: the manifest and .npy
// headers (OpenCase), the planner read, the plan section (the limits table's request, planner
// and size checks, the re-plan, the captured plan's read, diff, decision differences, the
// reproducing input and the checker), the kernel contract over the captured tensors, the
// numerics over the captured tensors and the scenario `--scenario-out` writes. Input: as
// case_dir_fuzz, chunks of a 2-byte little-endian length and its bytes, manifest.json first,
// then the .npy files of the manifest's tensors in name order (a tensor without a chunk gets the
// last one). Seeds: tests/fuzz/corpus/case_check/ (docs/cli.md's worked example).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/harness_chunks.h"
#include "ref/limits.h"
#include "ref/plan_check.h"
#include "ref/planner.h"
#include "ref/sizing.h"
#include "tools/io/case_contracts.h"
#include "tools/io/case_dir.h"
#include "tools/io/case_numerics.h"
#include "tools/io/case_plan.h"
#include "tools/io/case_scenario.h"
#include "tools/io/plan_buffers.h"

namespace {

using mlasim::Status;
namespace io = mlasim::io;
namespace ref = mlasim::ref;

Status Limits(const ref::PlanRequest& r, const ref::PlanDerived& d) {
  MLASIM_RETURN_IF_ERROR(ref::CheckRequestLimits(r));
  return ref::CheckPlannerLimits(r, d);
}

// cmd_check.cpp's RunPlanSection: false where the command stops with exit 2.
bool PlanSection(const io::CasePlanner& planner, std::optional<ref::Plan>* captured) {
  if (!planner.request) return true;
  const ref::PlanRequest& r = *planner.request;
  const auto choice = ref::PlannerChoice::kAiterDispatch;
  if (!ref::CheckRequestLimits(r).ok() || !ref::ValidatePlanRequest(r).ok()) return false;
  auto derived = ref::DecidePlan(r, choice);
  if (!derived.ok() || !ref::CheckPlannerLimits(r, *derived).ok()) return false;
  auto info = ref::GetMlaMetadataInfoV1(r, static_cast<int32_t>(r.kv_indptr.size()) - 1);
  if (!info.ok() || !ref::CheckSizesLimit(*info).ok()) return false;
  ref::PlannerOptions options;
  options.choice = choice;
  auto reference = ref::PlanMlaMetadata(r, options);
  if (!reference.ok()) return false;
  if (!planner.buffers) return true;
  const io::PlanBufferViews views = planner.views();
  const int64_t total = views.work_indptr.size + views.work_info.size + views.reduce_indptr.size +
                        views.reduce_final_map.size + views.reduce_partial_map.size;
  if (total > ref::Limit(ref::LimitId::kPlanElements)) return false;
  auto plan = io::PlanFromBuffers(r, views, io::kDefaultUnwrittenValue, choice);
  if (!plan.ok()) return false;
  auto replanned = ref::PlanMlaMetadataInto(r, io::SizesOf(*plan), options);
  if (!replanned.ok()) return false;
  const io::PlanDiff diff = io::DiffPlans(*plan, *replanned);
  if (!diff.identical()) {
    (void)io::ObservedDecisionDifferences(*plan, *reference);
    (void)io::FindReproducingInput(r, choice, *plan, *reference, Limits);
  }
  (void)ref::CheckPlan(r, *plan);
  *captured = std::move(*plan);
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The one limits table (ref/limits.h), lowered so each case plans and runs in milliseconds.
  (void)ref::SetLimits(
      "requests=600,clusters=2048,plan_elements=1048576,loop_trips=65536,launch_grid=4096,"
      "tensor_values=1048576");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> chunks = Chunks(data, size);
  if (chunks.empty()) return 0;
  auto parsed = io::ParseCaseManifest(chunks[0], "manifest.json");
  if (!parsed.ok()) return 0;
  io::MemoryCaseFiles files;
  files.files["manifest.json"] = chunks[0];
  for (size_t i = 0; i < parsed->tensors.size(); ++i)
    files.files[parsed->tensors[i].file] = chunks[std::min(i + 1, chunks.size() - 1)];
  auto m = io::OpenCase(files);
  if (!m.ok()) return 0;
  auto planner = io::ReadCasePlanner(files, *m);
  if (!planner.ok()) return 0;
  std::optional<ref::Plan> captured;
  if (!PlanSection(*planner, &captured)) return 0;
  if (!io::CheckCaseContracts(files, *m, *planner).ok()) return 0;
  if (!io::CheckCaseNumerics(files, *m, *planner, captured ? &*captured : nullptr).ok()) return 0;
  (void)io::ScenarioFromCase(files, *m, *planner, ref::PlannerChoice::kAiterDispatch);
  return 0;
}
