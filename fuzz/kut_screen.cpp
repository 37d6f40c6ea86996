// The GPU reference's screen (fuzz/kut_check_internal.h): which (row, head) pairs of a decode
// call's o its plan defines, so that the full-dims GPU reference (monolithic attention) is
// compared only where the plan computes what the monolithic attention computes. Host only:
// tests run it without a GPU.
#include <cmath>

#include "fuzz/kut_check_internal.h"
#include "ref/plan_check.h"

namespace mlasim::fuzz::kut_internal {
namespace {

bool Close(double a, double b, const ref::Tolerance& t) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::fabs(a - b) <= t.atol + t.rtol * std::fabs(b);
}

// The inputs of the screen at head dims 16: the campaign's seed and index values, default
// scales; `values` false leaves q and the cache empty (the structure walk reads neither).
ref::NumericsOptions ScreenInputOptions(uint64_t seed, bool values) {
  ref::NumericsOptions no;
  no.seed = seed;
  no.head_dim_qk = no.head_dim_v = kTinyDim;
  no.precision = KutPrecision(true);
  no.fill_values = values;
  return no;
}

}  // namespace

PlanCheckVerdict CheckPlanForScreen(const ref::PlanRequest& request, const ref::Plan& plan) {
  PlanCheckVerdict verdict = PlanCheckVerdict::kClean;
  for (const ref::PlanDiagnostic& d : ref::CheckPlan(request, plan).diagnostics) {
    if (d.severity != ref::Severity::kError) continue;
    if (d.code != ref::PlanDiag::kInputReadOutOfRange && d.code != ref::PlanDiag::kBufferOverflow)
      return PlanCheckVerdict::kRejected;
    verdict = PlanCheckVerdict::kPredicted;
  }
  return verdict;
}

ScreenMethod ScreenMethodFor(PlanCheckVerdict verdict) {
  return verdict == PlanCheckVerdict::kClean ? ScreenMethod::kStructure : ScreenMethod::kHeadDim16;
}

std::string ScreenPlanPairs(const ref::PlanRequest& request, const ref::Plan& plan, uint64_t seed,
                            ScreenMethod method, std::vector<uint8_t>* undefined) {
  const bool structure = method == ScreenMethod::kStructure;
  auto tiny = ref::BuildMlaInputs(request, ScreenInputOptions(seed, !structure));
  if (!tiny.ok()) return "inputs at head dims 16: " + tiny.status().ToString();
  ref::PlanExecOptions exec;
  exec.precision = KutPrecision(true);
  if (structure) {
    auto walk = ref::RunPlanStructure(*tiny, request, plan, exec);
    if (!walk.ok()) return "the head-dim-16 CPU runs failed";
    *undefined = ref::PoisonPairMask(walk->poison, tiny->q_rows(), tiny->num_heads);
    return "";
  }
  auto driven = ref::RunPlanDriven(*tiny, request, plan, exec);
  auto mono = ref::RunMonolithic(*tiny, exec.precision);
  if (!driven.ok() || !mono.ok()) return "the head-dim-16 CPU runs failed";
  const ref::OutputTolerances tt = ref::TolerancesFor(*tiny, *mono, exec.precision);
  *undefined = ref::PoisonPairMask(driven->poison, tiny->q_rows(), tiny->num_heads);
  for (size_t pair = 0; pair < undefined->size(); ++pair) {
    bool defined = Close(driven->out.lse[pair], mono->lse[pair], tt.lse);
    for (size_t x = 0; defined && x < kTinyDim; ++x)
      defined = Close(driven->out.o[pair * kTinyDim + x], mono->o[pair * kTinyDim + x], tt.o);
    if (!defined) (*undefined)[pair] = 1;
  }
  return "";
}

}  // namespace mlasim::fuzz::kut_internal
