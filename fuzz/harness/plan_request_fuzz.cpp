// libFuzzer harness: plan request JSON (tools/io/request_json.h) through the planner and checker.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ref/limits.h"
#include "ref/plan_check.h"
#include "ref/planner.h"
#include "sim/json_input.h"
#include "tools/io/request_json.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The one limits table (ref/limits.h), lowered so each input plans in milliseconds.
  (void)mlasim::ref::SetLimits("requests=600,clusters=2048,plan_elements=1048576");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto doc = mlasim::sim::ParseJsonStrict(text, "--request");  // as mlasim plan --request reads it
  if (!doc.ok()) return 0;
  auto r = mlasim::io::ParsePlanRequest(*doc, "input", true);
  // The limits every path applies (ref/limits.h): the harness plans only what mlasim plan would.
  if (!r.ok() || !mlasim::ref::CheckPlanInputLimits(*r).ok()) return 0;
  auto plan = mlasim::ref::PlanMlaMetadata(*r);
  if (plan.ok()) (void)mlasim::ref::CheckPlan(*r, *plan);
  return 0;
}
