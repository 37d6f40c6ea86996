// File: fuzz/kut_check_internal.h (internal to fuzz/kut_check*.cpp)
//
// The step checker behind fuzz/kut_check.h: kut_check.cpp holds the step (replay, GPU plans,
// predictions, findings, JSON), kut_check_call.cpp one decode call and its reduce (buffers, the
// kernel call, damage, inputs, numerics).
#pragma once

#include "sim/kernel_request.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz/kut_check.h"
#include "fuzz/kut_memory.h"
#include "kernels/gpu_api.h"
#include "ref/attention.h"
#include "ref/numerics.h"

namespace mlasim::fuzz::kut_internal {

// Why a call's numerics were not compared when the CPU reference is over its work bound: one
// fixed text, so the campaign summary counts these calls under one line.
inline constexpr const char* kCpuReferenceOverBound =
    "the CPU reference is above its work bound of 2^31 multiply-adds";

// Multiply-adds of monolithic attention over `in`: q rows x visible keys x heads x (D + Dv),
// summed over requests (dense: the request's pages x page size, whatever the last page holds;
// sparse: min(pages, topk)); a request whose kv_indptr falls counts no keys. In double, so
// hostile shapes cannot overflow. Compared with KutCheckOptions::max_cpu_reference_macs.
double CpuReferenceMacs(const ref::MlaInputs& in);

inline constexpr const char* kContractClass = "KUT-contract";
inline constexpr const char* kNumericsClass = "KUT-numerics";
inline constexpr const char* kFaultClass = "KUT-fault";
inline constexpr const char* kPlanClass = "GPU-plan";
inline constexpr int64_t kMinSentinelRows = 64;  // a 64-row tile stored past the end lands in it
inline constexpr int64_t kMaxSentinelBytes = int64_t{64} << 20;
inline constexpr int32_t kTinyDim = 16;  // head dims of the CPU run saying which outputs exist

// ---- The GPU reference's screen (fuzz/kut_screen.cpp): which outputs a plan defines ---------
// What the plan checker (ref::CheckPlan) says of a decode call's plan.
enum class PlanCheckVerdict : uint8_t {
  kClean,      // no error diagnostic at all
  kPredicted,  // errors, every one input_read_out_of_range or buffer_overflow (accesses the
               // contracts predict; the simulator's plan check filters the same two)
  kRejected,   // another error (a known family's plan, e.g. decode_update's unsupported ones)
};
PlanCheckVerdict CheckPlanForScreen(const ref::PlanRequest& request, const ref::Plan& plan);

// How the screen tells the pairs a plan defines.
enum class ScreenMethod : uint8_t {
  // The plan-driven and the monolithic CPU runs at head dims 16: a pair is defined when the
  // plan-driven run does not poison it and agrees with the monolithic one within tolerance.
  kHeadDim16,
  // ref::RunPlanStructure: a pair is defined when the plan-driven walk does not poison it. Only
  // for a plan the checker finds clean: the plan then computes each pair it does not poison as
  // the monolithic attention does (tests/kut/kut_screen_test.cpp checks the two agree).
  kStructure,
};
// kStructure for a clean plan, kHeadDim16 for every other.
ScreenMethod ScreenMethodFor(PlanCheckVerdict verdict);

// Pairs of the call's o the plan leaves undefined: `undefined` [q_rows x heads] of `request`
// (the kernel's view, sim::KernelRequest), 1 = not compared. `seed`: the inputs' seed (the
// head-dim-16 values; the index values are those of the campaign's inputs). Returns why no
// mask came out ("inputs at head dims 16: ...", "the head-dim-16 CPU runs failed"), or "".
std::string ScreenPlanPairs(const ref::PlanRequest& request, const ref::Plan& plan, uint64_t seed,
                            ScreenMethod method, std::vector<uint8_t>* undefined);

// The request as the kernel addresses q, and its first padding row (sim/kernel_request.h).
using sim::FirstPaddingRow;
inline ref::PlanRequest KernelView(const ref::PlanRequest& r) {
  return sim::KernelRequest(r);
}
// fp32 accumulation, P rounded to bf16, o rounded to bf16 (or kept fp32).
ref::AttentionPrecision KutPrecision(bool o_bf16);

int ElemBytes(int32_t dtype);
// The storage type the kernel takes for values of the model's format, narrowest first, with the
// values encoded in `bytes`; 0 when no type the kernel takes holds every value exactly.
int32_t PickDtype(uint32_t supported, ref::NumFormat model, const std::vector<float>& values,
                  std::vector<unsigned char>* bytes);
// The same for values generated on the device: `exact` has bit d set when dtype d holds every
// value (gpu::GeneratedStats::exact_dtypes).
int32_t PickDtype(uint32_t supported, ref::NumFormat model, uint32_t exact);
double Decode(const unsigned char* p, int32_t dtype);  // bf16 or fp32

// An out-of-bounds access the simulator predicts for a call, on a kernel buffer.
struct Predicted {
  std::string buffer, access;
  bool before = false;
  int64_t first = 0, last = 0;       // rows, counted as KutDamage counts them
  std::vector<sim::Violation> from;  // the simulator's violations behind it
  // Only to explain a fault: the kernel may read its own copy of the buffer (FlashMLA's sparse
  // adapter converts the KV cache), so no guard page is expected to see it.
  bool attribution_only = false;
  nlohmann::json Json() const;
};
// The simulator's out-of-range accesses of call `c`, per kernel buffer. `harness_kv_rows`: the
// rows of the harness's KV cache (-1: unknown). The harness's cache and page list are as large
// as the inputs need, not the engine's: only their reads before the start compare, and reads of
// KV rows past the harness's cache too (a hostile index value, the same in both).
std::vector<Predicted> Predict(const sim::ReplayReport& r, const sim::Call& c,
                               int64_t harness_kv_rows = -1);
// KutCheckOptions::skip_known_faults' decision: some prediction of `predicted` lies on a
// `guarded` side (a guard page there would fault) and every violation behind every such
// prediction is `known` (a known family's), so whichever faults first, the fault's finding is a
// known family's. Predictions the kernel may make on its own copy (attribution_only) count
// neither way.
bool OnlyKnownFaults(const std::vector<Predicted>& predicted,
                     const std::function<bool(const Predicted&)>& guarded,
                     const std::function<bool(const sim::Violation&)>& known);
// Whether a contract program (or a loop body in it) names the buffer role.
bool ProgramTouches(const std::vector<sim::Statement>& program, const std::string& role);

sim::Violation KernelViolation(sim::ViolationKind kind, const char* cls, const sim::Call& c,
                               const std::string& buffer, const std::string& access,
                               const std::string& detail);
std::string Rows(int64_t a, int64_t b);

// Adds the seconds of its scope to m[part] (the step report's "where the time goes").
class PartTimer {
 public:
  PartTimer(std::map<std::string, double>& m, const char* part)
      : m_(m), part_(part), t0_(std::chrono::steady_clock::now()) {}
  ~PartTimer() {
    m_[part_] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }
  PartTimer(const PartTimer&) = delete;
  PartTimer& operator=(const PartTimer&) = delete;

 private:
  std::map<std::string, double>& m_;
  const char* part_;
  std::chrono::steady_clock::time_point t0_;
};

// One buffer of the kernel call: its shape, type and (inputs) the bytes uploaded.
struct Tensor {
  std::string name;
  int64_t rows = 0;
  int32_t heads = 1, cols = 1, dtype = 5;  // MLASIM_KUT_INT32
  bool input = true;
  bool guard_before = false;
  std::vector<unsigned char> bytes;
  // Generated on the device (StepChecker::device_inputs_): `elements` values of `gen` instead
  // of `bytes`.
  bool generated = false;
  int64_t elements = 0;
  gpu::GeneratedTensor gen;
  int64_t row_bytes() const { return int64_t{heads} * cols * ElemBytes(dtype); }
};
inline Tensor MakeTensor(std::string name, int64_t rows, int32_t heads, int32_t cols, int32_t dtype,
                         bool input) {
  Tensor t;
  t.name = std::move(name);
  t.rows = rows;
  t.heads = heads;
  t.cols = cols;
  t.dtype = dtype;
  t.input = input;
  return t;
}

class StepChecker {
 public:
  StepChecker(const KutLibrary& lib, const KutCheckOptions& o, const KutCallHook& before,
              const std::function<void(const KutCallReport&)>& after)
      : lib_(lib), d_(lib.description()), o_(o), before_(before), after_(after) {}
  KutStepReport Run(const sim::Scenario& s);

 private:
  // kut_check.cpp
  void CheckPlans();
  void Emit(KutCallReport&& rep);
  // kut_check_call.cpp
  void CheckDecode(const sim::Call& c, const sim::Call* reduce);
  std::string Prepare(const sim::Call& c, const sim::Call* reduce);
  std::string BuildTensors(const sim::Call& c);
  void BuildGeneratedInputs(const sim::Call& c, Tensor& q, Tensor& kv);
  ref::NumericsOptions InputOptions() const;
  std::string EnsureHostValues();
  void ApplyIndexValues(const sim::Call& c);
  void Allocate(const std::vector<Predicted>& a, const std::vector<Predicted>& b);
  mlasim_kut_call Descriptor(int32_t op) const;
  bool RunOne(int32_t op, const sim::Call& c, const std::vector<Predicted>& pred,
              KutCallReport& rep);
  bool GuardedSide(const Predicted& p) const;
  bool OnlyKnownFaultsAhead(const std::vector<Predicted>& decode,
                            const std::vector<Predicted>& reduce) const;
  void CompareDamage(const sim::Call& c, const std::vector<Predicted>& pred,
                     const std::vector<KutDamage>& damage, KutCallReport& rep);
  void CheckInputs(const sim::Call& c, KutCallReport& rep);
  void CompareNumerics(const sim::Call& c, KutCallReport& rep);
  struct Reference {
    std::string name;    // "cpu" or "gpu"
    std::string screen;  // gpu: how the defined pairs were told ("structure", "head_dim_16")
    std::vector<double> o, lse;  // o empty when `device` holds it
    // gpu over device-generated inputs: the reference's o left on the device, compared there
    // (gpu::compare_on_device).
    std::unique_ptr<gpu::DeviceAttention> device;
    std::vector<uint8_t> skip;  // (row, head) pairs not compared
    ref::OutputTolerances tol;
    int64_t skipped = 0;
  };
  std::string CpuReference(Reference* ref);
  std::string GpuReference(Reference* ref);
  ref::CompareResult CompareOnHost(const Tensor& ot, int64_t n, int32_t group,
                                   const Reference& ref) const;

  const KutLibrary& lib_;
  const KutDescription& d_;
  const KutCheckOptions& o_;
  const KutCallHook& before_;
  const std::function<void(const KutCallReport&)>& after_;
  KutStepReport out_;
  sim::ReplayReport r_;
  bool gpu_ = false;  // a GPU is visible to this process
  // The decode call being checked.
  const sim::PlanSnapshot* snap_ = nullptr;
  ref::PlanRequest req_;
  ref::MlaInputs in_;
  // q and the KV cache are generated on the device (a device kernel with a GPU and
  // KutCheckOptions::device_inputs): in_ holds no values until a host reference needs them.
  bool device_inputs_ = false;
  bool host_values_ = true;  // in_.q and in_.kv_cache hold the values
  ref::MlaValueSource source_;
  double kv_abs_max_ = 0;  // max |stored V| over the generated cache (tolerances)
  std::vector<Tensor> tensors_;
  std::unique_ptr<KutArena> arena_;
  int64_t rows_compared_ = 0;
  std::set<std::string> confirmed_;  // simulator violations already confirmed (signature+detail)
};

}  // namespace mlasim::fuzz::kut_internal
