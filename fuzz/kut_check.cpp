#include "fuzz/kut_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "fuzz/kut_check_internal.h"
#include "fuzz/kut_memory.h"
#include "fuzz/signature.h"
#include "kernels/gpu_api.h"
#include "ref/input_values.h"
#include "ref/numerics.h"
#include "ref/planner.h"

namespace mlasim::fuzz {
namespace kut_internal {

using nlohmann::json;

const char* const kPlanBuffers[] = {"work_indptr", "work_info", "reduce_indptr", "reduce_final_map",
                                    "reduce_partial_map"};

ref::AttentionPrecision KutPrecision(bool o_bf16) {
  ref::AttentionPrecision p;
  p.accumulate = ref::Accumulate::kFp32;
  p.p_format = ref::NumFormat::kBf16;
  p.out_format = o_bf16 ? ref::NumFormat::kBf16 : ref::NumFormat::kFp32;
  return p;
}

// ---- element encodings (exact: the inputs are already rounded to their formats) -------------
int ElemBytes(int32_t dtype) {
  return dtype == MLASIM_KUT_FP8_E4M3FN                            ? 1
         : (dtype == MLASIM_KUT_FP32 || dtype == MLASIM_KUT_INT32) ? 4
                                                                   : 2;
}
namespace {
// Encodes `v` as `dtype` (ref/input_values.h, the encoder the device generator uses); false when
// a value is not exactly representable.
bool Encode(const std::vector<float>& v, int32_t dtype, std::vector<unsigned char>* out) {
  const int eb = ElemBytes(dtype);
  out->resize(v.size() * static_cast<size_t>(eb));
  for (size_t i = 0; i < v.size(); ++i)
    if (!ref::values::EncodeExact(v[i], dtype, out->data() + eb * i)) return false;
  return true;
}
// The storage types tried for values of the model's format, narrowest first.
std::vector<int32_t> DtypeOrder(ref::NumFormat model) {
  std::vector<int32_t> order = {MLASIM_KUT_BF16, MLASIM_KUT_FP32};
  if (model == ref::NumFormat::kFp8E4m3fn || model == ref::NumFormat::kFp8E4m3fnuz)
    order.insert(order.begin(), MLASIM_KUT_FP8_E4M3FN);
  return order;
}
}  // namespace

int32_t PickDtype(uint32_t supported, ref::NumFormat model, const std::vector<float>& values,
                  std::vector<unsigned char>* bytes) {
  for (int32_t d : DtypeOrder(model))
    if ((supported & MLASIM_KUT_DTYPE_BIT(d)) && Encode(values, d, bytes)) return d;
  return 0;
}
int32_t PickDtype(uint32_t supported, ref::NumFormat model, uint32_t exact) {
  for (int32_t d : DtypeOrder(model))
    if ((supported & MLASIM_KUT_DTYPE_BIT(d)) && (exact & MLASIM_KUT_DTYPE_BIT(d))) return d;
  return 0;
}
double Decode(const unsigned char* p, int32_t dtype) {
  if (dtype == MLASIM_KUT_FP32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t x;
  std::memcpy(&x, p, 2);
  const uint32_t u = static_cast<uint32_t>(x) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// ---- predictions: the simulator's out-of-bounds accesses of a call, per kernel buffer -------
json Predicted::Json() const {
  return {{"buffer", buffer},
          {"access", access},
          {"side", before ? "before" : "after"},
          {"first_row", first},
          {"last_row", last}};
}

namespace {

// The kernel buffer of an allocation a call receives ("" for buffers the harness does not
// reproduce).
std::string KutBufferOf(const sim::Call& c, const std::string& allocation) {
  std::string role;
  for (const sim::TensorArg& a : c.args)
    if (a.buffer == allocation) role = a.role;
  if (role.empty())
    for (const char* p : kPlanBuffers) {
      const std::string s = p;
      if (allocation.size() >= s.size() &&
          allocation.compare(allocation.size() - s.size(), s.size(), s) == 0)
        role = s;
    }
  if (role == "logits") return "partial_o";
  if (role == "attn_lse") return "partial_lse";
  // The engine's index buffer is longer than the harness's page list, but both start at the same
  // element: only accesses before it compare (as for the KV cache). Sparse calls pass their
  // per-token lists in another layout (topk_indices), which does not compare.
  if (role == "kv_indices") return c.sparse ? "" : "kv_indices";
  if (role == "indices") return "";
  return role;
}

}  // namespace

bool ProgramTouches(const std::vector<sim::Statement>& program, const std::string& role) {
  for (const sim::Statement& s : program)
    if (s.buffer == role || ProgramTouches(s.body, role)) return true;
  return false;
}

std::vector<Predicted> Predict(const sim::ReplayReport& r, const sim::Call& c,
                               int64_t harness_kv_rows) {
  std::vector<Predicted> out;
  // The harness always passes lse; the simulator predicts its rows only when the contract writes
  // lse and the engine's call passes one. Otherwise lse's rows are o's (every contract writes
  // them together, per q row).
  bool call_passes_lse = false;
  for (const sim::TensorArg& a : c.args) call_passes_lse = call_passes_lse || a.role == "lse";
  const bool lse_mirrors_o =
      c.contract && (!call_passes_lse || !ProgramTouches(c.contract->program, "lse"));
  for (const sim::Violation& v : r.result.violations) {
    if (v.call_index != c.index || v.kind != sim::ViolationKind::kOutOfBounds) continue;
    const std::string buf = KutBufferOf(c, v.buffer);
    if (buf.empty()) continue;
    for (const bool before : {true, false}) {
      if (before ? v.rows_before_start <= 0 : v.rows_past_end <= 0) continue;
      // The harness's cache is as large as the inputs need: reads before it compare, and reads
      // of rows past its end too (an index value past both caches).
      const bool past_harness_kv =
          buf == "kv_cache" && harness_kv_rows >= 0 && v.last_row >= harness_kv_rows;
      if ((buf == "kv_cache" || buf == "kv_indices") && !before && !past_harness_kv) continue;
      const int64_t end = buf == "kv_cache" && !before ? harness_kv_rows : v.rows;
      const int64_t first = before ? -v.rows_before_start : std::max(v.first_row, end);
      const int64_t last = before ? -1 : std::max(v.last_row, first);
      std::vector<std::string> names = {buf};
      if (buf == "o" && lse_mirrors_o && v.access == sim::Access::kWrite) names.push_back("lse");
      for (const std::string& n : names) {
        auto it = std::find_if(out.begin(), out.end(), [&](const Predicted& p) {
          return p.buffer == n && p.access == sim::AccessName(v.access) && p.before == before;
        });
        if (it == out.end()) {
          out.push_back(Predicted{n, sim::AccessName(v.access), before, first, last, {}});
          it = out.end() - 1;
          it->attribution_only = past_harness_kv && !before;
        }
        it->first = std::min(it->first, first);
        it->last = std::max(it->last, last);
        if (n == buf) it->from.push_back(v);
      }
    }
  }
  return out;
}

bool OnlyKnownFaults(const std::vector<Predicted>& predicted,
                     const std::function<bool(const Predicted&)>& guarded,
                     const std::function<bool(const sim::Violation&)>& known) {
  int64_t faulting = 0;
  for (const Predicted& p : predicted) {
    if (p.attribution_only || !guarded(p)) continue;
    ++faulting;
    for (const sim::Violation& v : p.from)
      if (!known(v)) return false;
  }
  return faulting > 0;
}

sim::Violation KernelViolation(sim::ViolationKind kind, const char* cls, const sim::Call& c,
                               const std::string& buffer, const std::string& access,
                               const std::string& detail) {
  sim::Violation v;
  v.kind = kind;
  (void)cls;  // the label (KUT-contract, ...) follows from the kind: sim::ClassLabel
  v.step = c.step;
  v.call = c.name;
  v.call_index = c.index;
  v.table_row = c.table_row;
  v.kernel = c.kernel;
  v.buffer = buffer;
  v.access = access == "write" ? sim::Access::kWrite
             : access == "run" ? sim::Access::kRun
                               : sim::Access::kRead;
  v.detail = detail;
  return v;
}

std::string Rows(int64_t a, int64_t b) {
  return a == b ? fmt::format("row {}", a) : fmt::format("rows {}..{}", a, b);
}

KutStepReport StepChecker::Run(const sim::Scenario& s) {
  sim::ExecuteOptions eo;
  eo.capture_layout = false;
  auto r = [&] {
    PartTimer t(out_.seconds, "replay");
    return sim::Replay(WithKutContracts(s, d_), eo);
  }();
  if (!r.ok()) {
    out_.error = "replay: " + r.status().ToString();
    return std::move(out_);
  }
  r_ = std::move(*r);
  gpu_ = gpu::available();
  out_.device = d_.host_memory ? "host" : (gpu_ ? gpu::device_name() : "none");
  if (o_.gpu_plans && gpu_) CheckPlans();
  const auto& calls = r_.trace.calls;
  for (size_t i = 0; i < calls.size(); ++i) {
    const sim::Call& c = calls[i];
    if (c.kind != sim::CallKind::kDecode) continue;
    const sim::Call* reduce = i + 1 < calls.size() && calls[i + 1].kind == sim::CallKind::kReduce &&
                                      calls[i + 1].plan == c.plan
                                  ? &calls[i + 1]
                                  : nullptr;
    CheckDecode(c, reduce);
  }
  out_.findings = out_.plan_findings;
  for (const KutCallReport& k : out_.calls)
    out_.findings.insert(out_.findings.end(), k.findings.begin(), k.findings.end());
  return std::move(out_);
}

void StepChecker::Emit(KutCallReport&& rep) {
  json sigs = json::array();
  for (const sim::Violation& v : rep.findings) sigs.push_back(Signature(v));
  rep.json["findings"] = sigs;
  if (after_) after_(rep);
  out_.calls.push_back(std::move(rep));
}

// The GPU planner against the reference planner, once per plan a decode call uses.
void StepChecker::CheckPlans() {
  PartTimer timer(out_.seconds, "plans");
  std::vector<bool> seen(r_.trace.plans.size(), false);
  for (const sim::Call& c : r_.trace.calls) {
    if (c.kind != sim::CallKind::kDecode || c.plan < 0 || seen[c.plan]) continue;
    seen[c.plan] = true;
    const sim::PlanSnapshot& snap = r_.trace.plans[c.plan];
    json j = {{"plan", snap.name}};
    auto want = ref::PlanMlaMetadata(snap.request);
    if (!want.ok()) {
      j["note"] = "the reference planner refuses the request: " + want.status().message();
      out_.plans.push_back(j);
      continue;
    }
    const gpu::GpuPlan g = gpu::plan_mla_metadata(snap.request, ref::PlannerChoice::kAiterDispatch);
    const std::vector<int32_t>* got[] = {&g.work_indptr, &g.work_info, &g.reduce_indptr,
                                         &g.reduce_final_map, &g.reduce_partial_map};
    const ref::Int32Buffer* ref_bufs[] = {&want->work_indptr, &want->work_info,
                                          &want->reduce_indptr, &want->reduce_final_map,
                                          &want->reduce_partial_map};
    int64_t bad = 0;
    std::string first, first_buffer;
    for (int b = 0; b < 5; ++b)
      for (int64_t e = 0; e < ref_bufs[b]->size(); ++e) {
        const bool defined = ref_bufs[b]->cells[e] != ref::Cell::kUndefined;
        const bool same =
            e < static_cast<int64_t>(got[b]->size()) && (*got[b])[e] == ref_bufs[b]->data[e];
        if (!defined || same) continue;
        if (bad++ == 0) {
          first_buffer = kPlanBuffers[b];
          first = fmt::format("{}[{}]: gpu {} reference {}", kPlanBuffers[b], e,
                              e < static_cast<int64_t>(got[b]->size()) ? (*got[b])[e] : 0,
                              ref_bufs[b]->data[e]);
        }
      }
    j["kernel"] = g.parallel ? "parallel" : "serial";
    j["mismatches"] = bad;
    if (bad > 0) {
      j["first_mismatch"] = first;
      out_.plan_findings.push_back(KernelViolation(
          sim::ViolationKind::kKernelContract, kPlanClass, c, first_buffer, "write",
          fmt::format("the GPU planner's plan {} differs from the reference planner in {} cells; "
                      "first {}",
                      snap.name, bad, first)));
    }
    out_.plans.push_back(j);
  }
}

}  // namespace kut_internal

sim::Scenario WithKutContracts(const sim::Scenario& s, const KutDescription& d) {
  sim::Scenario out = s;
  // The kernel's decode and reduce contracts replace the scenario's of those call kinds; its
  // contracts of other calls (index fills, plan builds) stay.
  const auto kernels = [&](const std::shared_ptr<const sim::Contract>& c) {
    return c->call == d.decode_contract->call || c->call == d.reduce_contract->call;
  };
  out.contracts.erase(std::remove_if(out.contracts.begin(), out.contracts.end(), kernels),
                      out.contracts.end());
  out.contracts.push_back(d.decode_contract);
  out.contracts.push_back(d.reduce_contract);
  return out;
}

KutStepReport CheckStep(const KutLibrary& lib, const sim::Scenario& s, const KutCheckOptions& o,
                        const KutCallHook& before,
                        const std::function<void(const KutCallReport&)>& after) {
  return kut_internal::StepChecker(lib, o, before, after).Run(s);
}

}  // namespace mlasim::fuzz

namespace mlasim::fuzz {

nlohmann::json ViolationToJson(const sim::Violation& v) {
  return {{"kind", sim::ViolationKindName(v.kind)},
          {"class", static_cast<int>(v.bug_class)},  // worker -> parent IPC: enums as numbers
          {"step", v.step},
          {"call", v.call},
          {"call_index", v.call_index},
          {"table_row", v.table_row},
          {"kernel", v.kernel},
          {"buffer", v.buffer},
          {"access", static_cast<int>(v.access)},
          {"rows", v.rows},
          {"row_bytes", v.row_bytes},
          {"first_row", v.first_row},
          {"last_row", v.last_row},
          {"rows_past_end", v.rows_past_end},
          {"bytes_past_end", v.bytes_past_end},
          {"rows_before_start", v.rows_before_start},
          {"bytes_before_start", v.bytes_before_start},
          {"cause", v.cause},
          {"work_items", v.work_items},
          {"consequence", static_cast<int>(v.consequence)},
          {"consequence_of", v.consequence_of},
          {"first_bad_address", v.first_bad_address},
          {"detail", v.detail}};
}

StatusOr<sim::Violation> ViolationFromJson(const nlohmann::json& j) {
  sim::Violation v;
  try {
    const std::string kind = j.at("kind").get<std::string>();
    bool known = false;
    for (int k = 0; k < 64 && !known; ++k) {
      const auto kk = static_cast<sim::ViolationKind>(k);
      if (kind == sim::ViolationKindName(kk)) v.kind = kk, known = true;
    }
    if (!known) return InvalidArgumentError("violation.kind", "unknown kind '" + kind + "'");
    const int cls = j.at("class").get<int>();
    if (cls < 0 || cls >= sim::kBugClassCount)
      return InvalidArgumentError("violation.class", "unknown class " + std::to_string(cls));
    v.bug_class = static_cast<sim::BugClass>(cls);
    v.step = j.at("step").get<std::string>();
    v.call = j.at("call").get<std::string>();
    v.call_index = j.at("call_index").get<int32_t>();
    v.table_row = j.at("table_row").get<std::string>();
    v.kernel = j.at("kernel").get<std::string>();
    v.buffer = j.at("buffer").get<std::string>();
    const int a = j.at("access").get<int>();
    if (a < 0 || a > static_cast<int>(sim::Access::kRun))
      return InvalidArgumentError("violation.access", "unknown access " + std::to_string(a));
    v.access = static_cast<sim::Access>(a);
    v.rows = j.at("rows").get<int64_t>();
    v.row_bytes = j.at("row_bytes").get<int64_t>();
    v.first_row = j.at("first_row").get<int64_t>();
    v.last_row = j.at("last_row").get<int64_t>();
    v.rows_past_end = j.at("rows_past_end").get<int64_t>();
    v.bytes_past_end = j.at("bytes_past_end").get<int64_t>();
    v.rows_before_start = j.at("rows_before_start").get<int64_t>();
    v.bytes_before_start = j.at("bytes_before_start").get<int64_t>();
    v.cause = j.at("cause").get<std::string>();
    v.work_items = j.at("work_items").get<std::vector<int32_t>>();
    const int q = j.at("consequence").get<int>();
    if (q < 0 || q > static_cast<int>(sim::Consequence::kWrongOutput))
      return InvalidArgumentError("violation.consequence",
                                  "unknown consequence " + std::to_string(q));
    v.consequence = static_cast<sim::Consequence>(q);
    v.consequence_of = j.at("consequence_of").get<std::string>();
    v.first_bad_address = j.at("first_bad_address").get<uint64_t>();
    v.detail = j.at("detail").get<std::string>();
  } catch (const std::exception& e) {
    return InvalidArgumentError("violation", std::string("malformed: ") + e.what());
  }
  return v;
}

namespace {

using kut_internal::kContractClass;
using kut_internal::kFaultClass;

// The call a worker's `running` record names.
sim::Call RunningCall(const nlohmann::json& running) {
  sim::Call c;
  c.index = running.value("call", -1);
  c.step = running.value("step", "");
  c.name = running.value("name", "");
  c.table_row = running.value("table_row", "");
  c.kernel = running.value("kernel", "");
  return c;
}

// The first violation the contract predicts for the call (of `buffer` and side `before`, when
// `buffer` is given), with `observed` appended to its detail; nullopt when it predicts none.
// `row` (when `row_known`) must lie in the prediction's rows; `*outside` gets the rows of a
// prediction it misses.
std::optional<sim::Violation> PredictedViolation(const nlohmann::json& running,
                                                 const std::string& buffer, bool before,
                                                 const std::string& access, bool row_known,
                                                 int64_t row, const std::string& observed,
                                                 std::string* outside) {
  for (const auto& p : running.value("predicted", nlohmann::json::array())) {
    if (!buffer.empty()) {
      if (p.value("buffer", "") != buffer || (p.value("side", "") == "before") != before) continue;
      if (access != "unknown" && p.value("access", "") != access) continue;
      const int64_t first = p.value("first_row", int64_t{0}),
                    last = p.value("last_row", int64_t{0});
      if (row_known && (row < first || row > last)) {  // outside what the contract allows
        *outside = kut_internal::Rows(first, last);
        continue;
      }
    }
    for (const auto& vj : p.value("violations", nlohmann::json::array())) {
      auto v = ViolationFromJson(vj);
      if (!v.ok()) continue;
      v->detail += observed;
      return *v;
    }
  }
  return std::nullopt;
}

// A device fault (no address) or a worker that ended without a fault report: the first
// violation the contract predicts in this call, which is what it does on hardware (guard mode
// puts an unmapped page past each guarded buffer), so a known family stays known; otherwise a
// fault the model does not explain.
sim::Violation UnattributedFault(const nlohmann::json& running, const nlohmann::json& fault,
                                 const std::string& kernel, const sim::Call& c,
                                 const std::string& op, bool device) {
  const std::string what =
      device ? fault["device"].get<std::string>()
             : "its worker ended without a fault report: " + fault["ended"].get<std::string>();
  std::string unused;
  const std::string observed = fmt::format(
      "; observed on {}: {} in this call ({}), as this predicted access out of range "
      "would",
      kernel, device ? "the device faulted" : "the kernel failed", what);
  if (auto v = PredictedViolation(running, "", false, "unknown", false, 0, observed, &unused))
    return *v;
  return kut_internal::KernelViolation(
      sim::ViolationKind::kKernelFault, kFaultClass, c, "", "run",
      device ? fmt::format("{} failed on the device in the {} call: {}", kernel, op, what)
             : fmt::format("{} failed in the {} call: {}", kernel, op, what));
}

// A fault before or past a guarded buffer: the contract's predicted violation when it allows
// that row, else a contract finding naming what it predicts.
sim::Violation GuardedBufferFault(const nlohmann::json& running, const nlohmann::json& fault,
                                  const std::string& kernel, const sim::Call& c,
                                  const std::string& op) {
  const std::string buffer = fault.value("buffer", "");
  const std::string access = fault.value("access", "unknown");
  const int64_t rb = std::max<int64_t>(1, fault.value("row_bytes", int64_t{1}));
  const int64_t off = fault.value("offset", int64_t{0});
  const int64_t rows = fault.value("rows", int64_t{0});
  const bool before = fault.value("side", "unknown") == "before";
  const int64_t row = before ? -((-off + rb - 1) / rb) : rows + off / rb;
  const std::string how =
      fault.contains("device")
          ? fmt::format("the device faulted ({}) with only {} guarded",
                        fault["device"].get<std::string>(), buffer)
          : fmt::format("a {} fault {} bytes {} the {} buffer{}", access, before ? -off : off,
                        before ? "before" : "past the end of", buffer,
                        fault.contains("row_bytes") ? fmt::format(" (row {})", row) : "");
  std::string predicted_rows;
  if (auto v =
          PredictedViolation(running, buffer, before, access, fault.contains("row_bytes"), row,
                             fmt::format("; observed on {}: {}", kernel, how), &predicted_rows))
    return *v;
  return kut_internal::KernelViolation(
      sim::ViolationKind::kKernelContract, kContractClass, c, buffer,
      access == "unknown" ? "access" : access,
      fmt::format("{}: {} in the {} call; its contract predicts {} {} {} {}", kernel, how, op,
                  access == "unknown" ? "access" : access,
                  predicted_rows.empty() ? "none" : "only " + predicted_rows,
                  before ? "before" : "past the end of", buffer));
}

}  // namespace

// A fault or hang of the call `running` names, as a finding. A host fault names the buffer and
// the side; the predictions decide whether the contract allows it.
sim::Violation FaultFinding(const nlohmann::json& running, const nlohmann::json& fault,
                            const std::string& kernel) {
  const sim::Call c = RunningCall(running);
  const std::string op = running.value("op", "decode");
  if (fault.contains("hang"))
    return kut_internal::KernelViolation(
        sim::ViolationKind::kKernelFault, kFaultClass, c, "", "run",
        fmt::format("{} did not return from the {} call within {} s (a hang: an unbounded loop "
                    "or a deadlock); its worker was killed and replaced",
                    kernel, op, fault["hang"].get<double>()));
  const std::string buffer = fault.value("buffer", "");
  const std::string side = fault.value("side", "unknown");
  const std::string access = fault.value("access", "unknown");
  const bool device = fault.contains("device") && buffer.empty();
  if (device || fault.contains("ended"))
    return UnattributedFault(running, fault, kernel, c, op, device);
  // An address outside every guard page names no buffer in the signature: the nearest one
  // depends on where the allocations happened to land (address-space layout), not on the case.
  if (buffer.empty() || side == "unknown" || side == "inside")
    return kut_internal::KernelViolation(
        sim::ViolationKind::kKernelFault, kFaultClass, c, side == "inside" ? buffer : "", access,
        fmt::format("{} crashed in the {} call (signal {}) at an address {}", kernel, op,
                    fault.value("signal", 0),
                    buffer.empty() ? "outside every buffer"
                                   : "outside every guard page, nearest buffer " + buffer));
  return GuardedBufferFault(running, fault, kernel, c, op);
}

}  // namespace mlasim::fuzz
