// The numerics of one decode call (and its reduce) of a kernel under test (fuzz/kut_check.h):
// o and lse of the real rows against the CPU plan-driven reference (ref::RunPlanDriven) or a
// plain fp32 GPU kernel (gpu::reference_attention), within the tolerances of docs/numerics.md.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "fuzz/kut_check_internal.h"
#include "kernels/gpu_api.h"
#include "sim/step_numerics.h"

namespace mlasim::fuzz::kut_internal {
namespace {

using nlohmann::json;

json CompareJson(const ref::CompareResult& c, const ref::Tolerance& t) {
  auto num = [](double x) { return std::isfinite(x) ? json(x) : json(); };
  return {{"max_abs", num(c.max_abs)},
          {"cos_diff", num(c.cos_diff)},
          {"elements", c.elements},
          {"tolerance_violations", c.tolerance_violations},
          {"nan_mismatches", c.nan_mismatches},
          {"inf_mismatches", c.inf_mismatches},
          {"passed", c.passed},
          {"atol", num(t.atol)},
          {"rtol", num(t.rtol)}};
}

}  // namespace

double CpuReferenceMacs(const ref::MlaInputs& in) {
  double macs = 0;
  for (int32_t b = 0; b < in.num_requests(); ++b) {
    const double pages = static_cast<double>(in.kv_indptr[b + 1]) - in.kv_indptr[b];
    const double keys =
        in.topk >= 0 ? std::min(pages, static_cast<double>(in.topk)) : pages * in.page_size;
    const double rows = static_cast<double>(in.qo_indptr[b + 1]) - in.qo_indptr[b];
    macs += rows * std::max(keys, 0.0);
  }
  return macs * in.num_heads * (in.head_dim_qk + in.head_dim_v);
}

// The CPU reference at the campaign's dims: the plan-driven run of the same plan (what the plan
// says the kernel computes); pairs it marks poisoned are not compared. Above the work bound
// (KutCheckOptions::max_cpu_reference_macs) it does not run and says so.
std::string StepChecker::CpuReference(Reference* out) {
  const double macs = CpuReferenceMacs(in_);
  if (o_.max_cpu_reference_macs > 0 && macs > static_cast<double>(o_.max_cpu_reference_macs))
    return kCpuReferenceOverBound;
  PartTimer timer(out_.seconds, "reference");
  if (const std::string why = EnsureHostValues(); !why.empty()) return why;
  ref::PlanExecOptions exec;
  exec.precision = KutPrecision(true);
  // The decode contract's two fields, as the engine-step numerics read them (sim/step_numerics.h).
  exec.empty_rows = sim::EmptyRowPolicyOf(d_.decode_contract->semantics.empty_rows);
  exec.zero_kv = sim::ZeroKvPolicyOf(d_.decode_contract->semantics.zero_kv);
  if (!sim::ProgramLoads(d_.decode_contract->program, sim::kLoadWorkInfo)) {
    // A kernel that plans by itself (FlashMLA, FlashInfer): aiter's plan is not what it runs,
    // so the truth is the monolithic attention of each request, every pair compared.
    auto mono = ref::RunMonolithic(in_, exec.precision);
    if (!mono.ok()) return "the CPU monolithic run failed: " + mono.status().ToString();
    ref::ApplyEmptyRowLse(exec.empty_rows, *mono);  // FlashMLA: keyless rows hold lse +inf
    out->name = "cpu";
    out->skip.assign(static_cast<size_t>(in_.q_rows()) * in_.num_heads, 0);
    out->tol = ref::TolerancesFor(in_, *mono, exec.precision);
    out->o = std::move(mono->o);
    out->lse = std::move(mono->lse);
    return "";
  }
  auto driven = ref::RunPlanDriven(in_, req_, snap_->plan, exec);
  if (!driven.ok()) return "the CPU plan-driven run failed: " + driven.status().ToString();
  for (const ref::PoisonFinding& f : driven->poison)
    if (f.output == ref::NumericsBuffer::kO && f.row_begin < 0)
      return "the plan reads outside its metadata (poison whose rows are unknown): no output of "
             "this call is defined";
  if (driven->poison_dropped > 0) return "more poison findings than the reference keeps";
  out->name = "cpu";
  out->skip = ref::PoisonPairMask(driven->poison, in_.q_rows(), in_.num_heads);
  out->tol = ref::TolerancesFor(in_, driven->out, exec.precision);
  out->o = std::move(driven->out.o);
  out->lse = std::move(driven->out.lse);
  return "";
}

// The GPU reference at the campaign's dims: monolithic fp32 attention on the device, compared
// where the screen (fuzz/kut_screen.cpp) shows that the plan defines the output and agrees with
// the monolithic truth (a wrong plan is the simulator's finding, not the kernel's): for a plan
// the checker finds clean, the plan-driven walk without arithmetic; for any other, CPU runs at
// head dims 16.
std::string StepChecker::GpuReference(Reference* out) {
  if (!gpu_) return "no GPU is visible for the GPU reference";
  // Inputs outside the plain reference's domain (a page table holding the hostile values an
  // index fill wrote: -1, INT_MAX, ...) go to the CPU reference, which says what it can compare;
  // the GPU reference would refuse them, and its refusal is not the kernel's fault. So does a
  // plan the plan checker rejects (a known family's, e.g. decode_update's unsupported plans):
  // the kernel follows it, the monolithic reference does not, and the head-dim-16 screen below
  // cannot tell every pair the plan leaves undefined (a dropped key can weigh little at dim 16
  // and enough at 576); the CPU reference runs the plan itself. A kernel whose contract reads no
  // work_info (FlashMLA, FlashInfer: they plan for themselves) keeps the monolithic reference.
  const bool follows_plan = sim::ProgramLoads(d_.decode_contract->program, sim::kLoadWorkInfo);
  const Status valid = host_values_ ? ref::ValidateMlaInputs(in_) : ref::ValidateMlaShape(in_);
  const PlanCheckVerdict verdict =
      follows_plan ? CheckPlanForScreen(snap_->request, snap_->plan) : PlanCheckVerdict::kClean;
  if (!valid.ok() || verdict == PlanCheckVerdict::kRejected) return CpuReference(out);
  // A kernel that plans by itself takes no mask from the screen, only its refusals (inputs or a
  // plan the CPU runs cannot take), which the walk without arithmetic gives as the head-dim-16
  // runs did.
  const ScreenMethod method = follows_plan ? ScreenMethodFor(verdict) : ScreenMethod::kStructure;
  std::vector<uint8_t> undefined;
  {
    PartTimer screen_timer(out_.seconds, "screen");
    const std::string why = ScreenPlanPairs(req_, snap_->plan, o_.input_seed, method, &undefined);
    if (!why.empty()) return why;
  }
  PartTimer timer(out_.seconds, "reference");
  const ref::AttentionPrecision precision = KutPrecision(true);
  // Device-generated inputs: the reference generates its own fp32 copy of them on the device (a
  // kernel that wrote inside its inputs does not change the reference).
  const Tensor *qt = nullptr, *kt = nullptr;
  for (const Tensor& t : tensors_)
    if (t.generated) (t.name == "q" ? qt : kt) = &t;
  // Over device-generated inputs the reference's o stays on the device for the comparison.
  ref::AttentionOutput full;
  if (host_values_ || !qt || !kt) {
    full = gpu::reference_attention(in_);
  } else {
    out->device = gpu::reference_attention_on_device(in_, qt->gen, kt->gen);
    full = std::move(out->device->host);  // lse and the shape; o on the device
  }
  // A contract that says what a keyless row holds (zero_and_pos_inf_lse: o = 0, lse = +inf) has
  // those rows compared; under the others their non-finite truth is not.
  const ref::EmptyRowPolicy empty_rows =
      sim::EmptyRowPolicyOf(d_.decode_contract->semantics.empty_rows);
  ref::ApplyEmptyRowLse(empty_rows, full);
  const bool keyless_defined = empty_rows == ref::EmptyRowPolicy::kWriteZeroPosInfLse;
  const int32_t H = in_.num_heads;
  out->name = "gpu";
  if (follows_plan) out->screen = method == ScreenMethod::kStructure ? "structure" : "head_dim_16";
  // A kernel that plans by itself is compared wherever the truth is finite: aiter's plan, which
  // it does not run, does not excuse any pair. One that follows the plan is compared where the
  // plan defines the pair and the truth is finite.
  out->skip.assign(static_cast<size_t>(in_.q_rows()) * H, 0);
  for (int64_t pair = 0; pair < static_cast<int64_t>(out->skip.size()); ++pair) {
    const double l = full.lse[pair];
    if (!follows_plan) {
      if (std::isnan(l) || (std::isinf(l) && !(keyless_defined && l > 0))) out->skip[pair] = 1;
      continue;
    }
    if (undefined[pair] || !std::isfinite(l)) out->skip[pair] = 1;
  }
  out->tol = host_values_ ? ref::TolerancesFor(in_, full, precision)
                          : ref::TolerancesFor(in_, full, precision, kv_abs_max_);
  out->o = full.o;
  out->lse = full.lse;
  return "";
}

// The kernel's o (the first `n` elements of tensor `ot`, downloaded and widened to double) against
// the host reference `ref.o`, (row, head) pairs of ref.skip left out (`group` elements each).
ref::CompareResult StepChecker::CompareOnHost(const Tensor& ot, int64_t n, int32_t group,
                                              const Reference& ref) const {
  const int eb = ElemBytes(ot.dtype);
  std::vector<unsigned char> raw(static_cast<size_t>(n * eb));
  arena_->Download("o", raw.data(), raw.size());
  std::vector<double> o(static_cast<size_t>(n));
  for (size_t i = 0; i < o.size(); ++i) o[i] = Decode(raw.data() + i * eb, ot.dtype);
  std::vector<uint8_t> skip_o(o.size());
  for (size_t i = 0; i < skip_o.size(); ++i) skip_o[i] = ref.skip[i / group];
  return ref::CompareTensors(o.data(), ref.o.data(), n, ref.tol.o, skip_o.data());
}

void StepChecker::CompareNumerics(const sim::Call& c, KutCallReport& rep) {
  const int32_t H = in_.num_heads, Dv = in_.head_dim_v;
  const int64_t rows =
      std::min<int64_t>({c.o_rows, in_.q_rows(), FirstPaddingRow(req_, snap_->real_requests)});
  Reference ref;
  const bool gpu_ref = o_.reference == "gpu" || (o_.reference == "auto" && !d_.host_memory && gpu_);
  const std::string why = gpu_ref ? GpuReference(&ref) : CpuReference(&ref);
  if (!why.empty()) {
    rep.json["numerics"] = {{"compared", false}, {"why", why}};
    return;
  }
  PartTimer timer(out_.seconds, "checks");
  const Tensor* ot = nullptr;
  for (const Tensor& t : tensors_)
    if (t.name == "o") ot = &t;
  std::vector<float> lse_raw(static_cast<size_t>(rows * H));
  arena_->Download("lse", lse_raw.data(), lse_raw.size() * 4);
  std::vector<double> lse(lse_raw.begin(), lse_raw.end());
  ref.skip.resize(static_cast<size_t>(rows * H));
  int64_t skipped = 0;
  for (uint8_t f : ref.skip) skipped += f;
  const ref::CompareResult co =
      ref.device ? gpu::compare_on_device(arena_->Data("o"), ot->dtype, ref.device->o,
                                          rows * H * Dv, Dv, ref.skip.data(), ref.tol.o)
                 : CompareOnHost(*ot, rows * H * Dv, Dv, ref);
  const ref::CompareResult cl = ref::CompareTensors(
      lse.data(), ref.lse.data(), static_cast<int64_t>(lse.size()), ref.tol.lse, ref.skip.data());
  rep.json["numerics"] = {{"compared", true},
                          {"reference", ref.name},
                          {"rows_compared", rows},
                          {"pairs_skipped", skipped},
                          {"o", CompareJson(co, ref.tol.o)},
                          {"lse", CompareJson(cl, ref.tol.lse)},
                          {"passed", co.passed && cl.passed}};
  if (!ref.screen.empty()) rep.json["numerics"]["screen"] = ref.screen;
  for (const auto& [name, cmp, width] :
       {std::tuple{"o", &co, Dv}, std::tuple{"lse", &cl, int32_t{1}}}) {
    if (cmp->passed) continue;
    const int64_t at =
        cmp->first_anomaly_mismatch >= 0 ? cmp->first_anomaly_mismatch : cmp->first_violation;
    const int64_t pair = at >= 0 ? at / width : -1;
    rep.findings.push_back(KernelViolation(
        sim::ViolationKind::kKernelNumerics, kNumericsClass, c, name, "write",
        fmt::format("{}'s {} of the {} real rows differs from the {} reference: {} NaN and {} inf "
                    "mismatches, {} elements outside atol {:.3g} + rtol {:.3g}, max_abs {:.3g}, "
                    "cos_diff {:.3g}; first at row {} head {}",
                    d_.name, name, rows, ref.name, cmp->nan_mismatches, cmp->inf_mismatches,
                    cmp->tolerance_violations,
                    name == std::string("o") ? ref.tol.o.atol : ref.tol.lse.atol,
                    name == std::string("o") ? ref.tol.o.rtol : ref.tol.lse.rtol, cmp->max_abs,
                    cmp->cos_diff, pair < 0 ? -1 : pair / H, pair < 0 ? -1 : pair % H)));
  }
}

}  // namespace mlasim::fuzz::kut_internal
