// libFuzzer harness: plan request JSON (tools/io/request_json.h) through the planner and checker.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ref/plan_check.h"
#include "ref/planner.h"
#include "tools/io/request_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return 0;
  auto r = mlasim::io::ParsePlanRequest(doc, "input", true);
  if (!r.ok() || r->kv_indptr.size() > 600 || r->cu_count > 2048) return 0;
  auto plan = mlasim::ref::PlanMlaMetadata(*r);
  if (plan.ok()) (void)mlasim::ref::CheckPlan(*r, *plan);
  return 0;
}
