// One decode call of a step through the kernel under test, with the reduce call after it on the
// same plan (fuzz/kut_check.h): the buffers, the kernel calls, the damage against the
// predictions, the inputs against what was uploaded, and the numerics.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "fuzz/kut_check_internal.h"
#include "fuzz/properties.h"
#include "fuzz/signature.h"
#include "kernels/gpu_api.h"
#include "ref/dtypes.h"
#include "ref/planner.h"

namespace mlasim::fuzz::kut_internal {
namespace {

using nlohmann::json;

// Why a plan cannot be launched safely (its indptrs point past its own buffers: a class-D
// overflow the simulator reports), "" when it can; as kernels/decode.hip checks its plans.
std::string PlanOutsideItself(const ref::Plan& plan) {
  const int64_t rows = plan.work_info.size() / 8;
  const auto& wi = plan.work_indptr.data;
  for (size_t c = 0; c + 1 < wi.size(); ++c)
    if (wi[c] < wi[c + 1] && (wi[c] < 0 || wi[c + 1] > rows))
      return fmt::format("work_indptr[{}..{}] = {}..{} lies outside work_info ({} rows)", c, c + 1,
                         wi[c], wi[c + 1], rows);
  const auto& ri = plan.reduce_indptr.data;
  for (size_t t = 0; t + 1 < ri.size(); ++t) {
    if (ri[t + 1] - int64_t{ri[t]} < 2) continue;
    if (ri[t] < 0 || ri[t + 1] > plan.reduce_partial_map.size() ||
        static_cast<int64_t>(2 * t + 1) >= plan.reduce_final_map.size())
      return fmt::format("reduce tile {} points past reduce_partial_map or reduce_final_map", t);
  }
  return "";
}

json DamageJson(const KutDamage& d) {
  return {{"buffer", d.buffer},       {"side", d.before ? "before" : "after"},
          {"first_row", d.first_row}, {"last_row", d.last_row},
          {"bad_bytes", d.bad_bytes}, {"rows", d.rows}};
}

int32_t Bit(int32_t op) {
  return static_cast<int32_t>(MLASIM_KUT_OP_BIT(op));
}

}  // namespace

void StepChecker::CheckDecode(const sim::Call& c, const sim::Call* reduce) {
  if (c.index < o_.start_call) return;  // reported by the worker this one replaces
  if (o_.end_call >= 0 && c.index >= o_.end_call) return;
  KutCallReport rep;
  rep.json = {{"index", c.index},
              {"step", c.step},
              {"call", c.name},
              {"kernel", d_.name},
              {"q_rows", c.q_rows},
              {"o_rows", c.o_rows},
              {"plan_rows", r_.trace.plans.at(c.plan).q_rows_covered},
              {"runs", json::array()}};
  if (reduce != nullptr) rep.json["reduce_index"] = reduce->index;
  const std::string skip =
      c.guard_refused ? "refused by the engine's guard (not launched)" : Prepare(c, reduce);
  if (!skip.empty()) {
    rep.json["skipped"] = skip;
    Emit(std::move(rep));
    return;
  }
  int64_t kv_rows = -1;
  for (const Tensor& t : tensors_)
    if (t.name == "kv_cache") kv_rows = t.rows;
  const std::vector<Predicted> pd = Predict(r_, c, kv_rows);
  const std::vector<Predicted> pr = reduce ? Predict(r_, *reduce) : std::vector<Predicted>();
  if (o_.skip_known_faults && OnlyKnownFaultsAhead(pd, pr)) {
    rep.json["skipped"] = kSkippedKnownFault;
    Emit(std::move(rep));
    return;
  }
  Allocate(pd, pr);
  bool ok = RunOne(MLASIM_KUT_OP_DECODE, c, pd, rep);
  if (ok && reduce != nullptr) {
    if (d_.ops & Bit(MLASIM_KUT_OP_REDUCE))
      ok = RunOne(MLASIM_KUT_OP_REDUCE, *reduce, pr, rep);
    else
      rep.json["reduce_skipped"] = "the kernel runs no reduce calls";
  }
  if (ok) CompareNumerics(c, rep);
  arena_.reset();
  Emit(std::move(rep));
}

// Whether an access the contract predicts past buffer p.buffer's end (or before its start) would
// land on a guard page: guard mode, the buffer guarded, on the side its guard is.
bool StepChecker::GuardedSide(const Predicted& p) const {
  const Tensor* t = nullptr;
  for (const Tensor& x : tensors_)
    if (x.name == p.buffer) t = &x;
  return o_.guard && (o_.guard_only.empty() || o_.guard_only == p.buffer) &&
         (d_.host_memory ? p.before == (t && t->guard_before) : !p.before);
}

// KutCheckOptions::skip_known_faults: the call (decode and reduce) has a predicted access on a
// guarded side, and every such access is a known family's, so whichever of them faults first,
// the fault's finding is a known family's. An access on a guarded side that the kernel may make
// on its own copy (attribution_only) does not count either way.
bool StepChecker::OnlyKnownFaultsAhead(const std::vector<Predicted>& decode,
                                       const std::vector<Predicted>& reduce) const {
  if (!o_.guard || !o_.guard_only.empty()) return false;
  std::vector<Predicted> both = decode;
  both.insert(both.end(), reduce.begin(), reduce.end());
  return OnlyKnownFaults(
      both, [this](const Predicted& p) { return GuardedSide(p); },
      [this](const sim::Violation& v) { return IsKnownFamily(v, r_); });
}

// Checks that the call can run; builds its inputs. Returns why not, or "".
std::string StepChecker::Prepare(const sim::Call& c, const sim::Call* /*reduce*/) {
  PartTimer timer(out_.seconds, "inputs");
  snap_ = &r_.trace.plans.at(c.plan);
  req_ = KernelView(snap_->request);
  if (!(d_.ops & Bit(MLASIM_KUT_OP_DECODE))) return "the kernel runs no decode calls";
  // A kernel that walks aiter's work_info views q of a head-folded plan folded (rows x fold,
  // heads / fold); the harness lays q out unfolded, so such calls are not run. A kernel that
  // plans by itself (its contract never loads work_info: FlashMLA, FlashInfer) sees [tokens,
  // heads], and so does the simulator for it (sim::Call::view_fold 1).
  if (snap_->plan.derived.fold_ratio != 1 &&
      sim::ProgramLoads(d_.decode_contract->program, sim::kLoadWorkInfo))
    return fmt::format(
        "a head-folded plan (fold ratio {}): the kernel walks aiter's work_info "
        "in the folded view, the harness lays q out unfolded",
        snap_->plan.derived.fold_ratio);
  const std::string why =
      d_.Unsupported(MLASIM_KUT_OP_DECODE, req_.heads_per_head_k, o_.head_dim_qk, o_.head_dim_v,
                     req_.page_size, req_.topk >= 0);
  if (!why.empty()) return "the kernel does not run it: " + why;
  if (const std::string bad = PlanOutsideItself(snap_->plan); !bad.empty())
    return "the plan points past its own buffers (" + bad +
           "): not launched, the simulator's findings cover it";
  const int64_t kv_values =
      int64_t{req_.kv_indptr.empty() ? 0 : req_.kv_indptr.back()} * req_.page_size * o_.head_dim_qk;
  const int64_t q_values = int64_t{c.q_rows} * req_.heads_per_head_k * o_.head_dim_qk;
  if (std::max(kv_values, q_values) > o_.max_tensor_values)
    return fmt::format("{} values in one tensor, more than the harness limit of {}",
                       std::max(kv_values, q_values), o_.max_tensor_values);
  ref::NumericsOptions no = InputOptions();
  device_inputs_ = o_.device_inputs && !d_.host_memory && gpu_;
  no.fill_values = !device_inputs_;
  auto in = ref::BuildMlaInputs(req_, no, &source_);
  if (in.ok() && device_inputs_ && !source_.plain) {  // values the device does not reproduce
    device_inputs_ = false;
    no.fill_values = true;
    in = ref::BuildMlaInputs(req_, no, &source_);
  }
  if (!in.ok())
    return "the numerics cannot model the request the engine hands this call (" +
           in.status().ToString() + "); the simulator's findings cover it";
  in_ = std::move(*in);
  host_values_ = !device_inputs_;
  ApplyIndexValues(c);
  return BuildTensors(c);
}

// The inputs' options: the campaign's seed and head dims, default scales (values rounded once).
ref::NumericsOptions StepChecker::InputOptions() const {
  ref::NumericsOptions no;
  no.seed = o_.input_seed;
  no.head_dim_qk = o_.head_dim_qk;
  no.head_dim_v = o_.head_dim_v;
  no.precision = KutPrecision(true);
  return no;
}

// Builds q's and the cache's values on the host when they were generated on the device (a CPU
// reference needs them): the same values, bit for bit. Returns why not, or "".
std::string StepChecker::EnsureHostValues() {
  if (host_values_) return "";
  auto full = ref::BuildMlaInputs(req_, InputOptions());
  if (!full.ok()) return "the host inputs: " + full.status().ToString();
  in_.q = std::move(full->q);
  in_.kv_cache = std::move(full->kv_cache);
  host_values_ = true;
  return "";
}

// q and the cache as device-generated tensors (the values of source_), their storage types
// from what the generated values fit exactly (0 when the kernel takes none that fits).
void StepChecker::BuildGeneratedInputs(const sim::Call& c, Tensor& q, Tensor& kv) {
  const int32_t H = in_.num_heads, D = in_.head_dim_qk, Dv = in_.head_dim_v;
  q.generated = kv.generated = true;
  q.gen.state = source_.q_state;
  kv.gen.state = source_.kv_state;
  q.gen.amplitude = kv.gen.amplitude = source_.amplitude;
  q.gen.format = static_cast<int32_t>(source_.q_format);
  kv.gen.format = static_cast<int32_t>(source_.kv_format);
  q.gen.rows = in_.q_rows();  // the q rows the numerics model; the call's may be fewer or more
  q.gen.cols = H * D;
  q.elements = c.q_rows * int64_t{H} * D;  // rows past the modelled ones are zero
  kv.gen.rows = int64_t{in_.num_pages} * in_.page_size;
  kv.gen.cols = D;
  kv.gen.row_stream = source_.kv_row_token;
  kv.elements = kv.gen.rows * D;
  const gpu::GeneratedStats qs = gpu::inspect_generated(q.gen, 0);
  const gpu::GeneratedStats ks = gpu::inspect_generated(kv.gen, Dv);
  kv_abs_max_ = ks.abs_max;
  q.dtype = PickDtype(d_.q_dtypes, source_.q_format, qs.exact_dtypes);
  kv.dtype = PickDtype(d_.kv_dtypes, source_.kv_format, ks.exact_dtypes);
}

// A modelled KV cache (docs/scenario.md "kv_cache"): the hostile values the last index fill of
// the call's index buffer wrote (-1, INT_MAX, ...) go into the page table the kernel reads.
void StepChecker::ApplyIndexValues(const sim::Call& c) {
  std::string buffer;
  for (const sim::TensorArg& a : c.args)
    if (a.role == "kv_indices") buffer = a.buffer;
  const sim::IndexContent* content = nullptr;
  for (const sim::Call& f : r_.trace.calls) {
    if (f.index >= c.index) break;
    if (f.kind == sim::CallKind::kIndexFill && !f.args.empty() && f.args[0].buffer == buffer &&
        f.fill_content)
      content = f.fill_content.get();
  }
  if (buffer.empty() || content == nullptr) return;
  for (const auto& [element, value] : content->values)
    if (element >= 0 && element < static_cast<int64_t>(in_.kv_indices.size()))
      in_.kv_indices[static_cast<size_t>(element)] =
          static_cast<int32_t>(std::clamp<int64_t>(value, INT32_MIN, INT32_MAX));
}

// The call's buffers: shapes, storage types and the bytes of the inputs.
std::string StepChecker::BuildTensors(const sim::Call& c) {
  tensors_.clear();
  const int32_t H = in_.num_heads, D = in_.head_dim_qk, Dv = in_.head_dim_v;
  auto ints = [&](const std::string& name, const auto& v, int32_t cols) {
    Tensor t =
        MakeTensor(name, static_cast<int64_t>(v.size()) / cols, 1, cols, MLASIM_KUT_INT32, true);
    t.bytes.resize(v.size() * 4);
    if (!v.empty()) std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
    tensors_.push_back(std::move(t));
  };
  Tensor q = MakeTensor("q", c.q_rows, H, D, 0, true);
  Tensor kv = MakeTensor("kv_cache", int64_t{in_.num_pages} * in_.page_size, 1, D, 0, true);
  if (device_inputs_) {
    BuildGeneratedInputs(c, q, kv);
  } else {
    q.dtype =
        PickDtype(d_.q_dtypes, ref::FormatForDType(req_.q_dtype, req_.target), in_.q, &q.bytes);
    kv.dtype = PickDtype(d_.kv_dtypes, ref::FormatForDType(req_.kv_dtype, req_.target),
                         in_.kv_cache, &kv.bytes);
  }
  kv.guard_before = true;
  if (q.dtype == 0 || kv.dtype == 0)
    return "the kernel takes no q / KV type that holds the inputs exactly (" +
           std::string(ref::NumFormatName(ref::FormatForDType(req_.kv_dtype, req_.target))) + ")";
  if (!q.generated) q.bytes.resize(static_cast<size_t>(q.rows * q.row_bytes()), 0);
  tensors_.push_back(std::move(q));
  tensors_.push_back(std::move(kv));
  ints("kv_indices", in_.kv_indices, 1);
  ints("topk_indices", in_.topk_indices, std::max(1, in_.topk));
  ints("kv_indptr", in_.kv_indptr, 1);
  ints("kv_last_page_lens", in_.kv_last_page_lens, 1);
  ints("qo_indptr", in_.qo_indptr, 1);
  const ref::Plan& p = snap_->plan;
  ints("work_indptr", p.work_indptr.data, 1);
  ints("work_info", p.work_info.data, 8);
  ints("reduce_indptr", p.reduce_indptr.data, 1);
  ints("reduce_final_map", p.reduce_final_map.data, 2);
  ints("reduce_partial_map", p.reduce_partial_map.data, 1);
  const bool o_bf16 = d_.o_dtypes & MLASIM_KUT_DTYPE_BIT(MLASIM_KUT_BF16);
  int64_t partial_rows = p.reduce_partial_map.size() * int64_t{std::max(1, req_.max_seqlen_qo)};
  for (const sim::TensorArg& a : c.args)
    if (a.role == "logits") partial_rows = a.rows;
  const int32_t fp32 = MLASIM_KUT_FP32;
  tensors_.push_back(MakeTensor("o", c.o_rows, H, Dv, o_bf16 ? MLASIM_KUT_BF16 : fp32, false));
  tensors_.push_back(MakeTensor("lse", c.o_rows, H, 1, fp32, false));
  tensors_.push_back(MakeTensor("partial_o", partial_rows, H, Dv, fp32, false));
  tensors_.push_back(MakeTensor("partial_lse", partial_rows, H, 1, fp32, false));
  Tensor log = MakeTensor("access_log", 1, 1, 8, MLASIM_KUT_INT32, false);
  const uint64_t init[4] = {~uint64_t{0}, 0, ~uint64_t{0}, 0};
  log.bytes.resize(sizeof init);
  std::memcpy(log.bytes.data(), init, sizeof init);
  tensors_.push_back(std::move(log));
  return "";
}

// The arena: sentinel rows enough for the farthest predicted access and a 64-row tile.
void StepChecker::Allocate(const std::vector<Predicted>& a, const std::vector<Predicted>& b) {
  PartTimer timer(out_.seconds, "buffers");
  arena_ = std::make_unique<KutArena>(
      d_.host_memory ? KutArena::Memory::kHost : KutArena::Memory::kDevice, o_.guard);
  for (const Tensor& t : tensors_) {
    int64_t rows = kMinSentinelRows;
    for (const auto* list : {&a, &b})
      for (const Predicted& p : *list)
        if (p.buffer == t.name)
          rows = std::max(rows, p.before ? -p.first + 1 : p.last - t.rows + 2);
    const int64_t rb = std::max<int64_t>(1, t.row_bytes());
    rows = std::max<int64_t>(1, std::min(rows, kMaxSentinelBytes / rb));
    KutBufferSpec spec{t.name, t.rows * t.row_bytes(), rb, rows, t.guard_before};
    spec.guard = o_.guard_only.empty() || o_.guard_only == t.name;
    arena_->Add(spec);
    if (t.generated)
      gpu::fill_generated(t.gen, t.dtype, arena_->Data(t.name), t.elements);
    else if (t.input || t.name == "access_log")
      arena_->Upload(t.name, t.bytes.data(), t.bytes.size());
    else
      arena_->Fill(t.name, 0xFF);  // NaN in every output element
  }
}

mlasim_kut_call StepChecker::Descriptor(int32_t op) const {
  mlasim_kut_call k{};
  k.abi_version = MLASIM_KUT_ABI_VERSION;
  k.struct_bytes = sizeof(k);
  k.op = op;
  k.config = d_.config.c_str();
  k.batch = in_.num_requests();
  k.num_heads = in_.num_heads;
  k.num_kv_heads = 1;
  k.head_dim_qk = in_.head_dim_qk;
  k.head_dim_v = in_.head_dim_v;
  k.page_size = in_.page_size;
  k.num_pages = in_.num_pages;
  k.max_seqlen_q = std::max(1, req_.max_seqlen_qo);
  k.causal = in_.is_causal && in_.topk < 0;
  k.topk = in_.topk;
  k.softmax_scale = static_cast<float>(in_.effective_sm_scale());
  k.q_scale = static_cast<float>(in_.q_scale);
  k.kv_scale = static_cast<float>(in_.kv_scale);
  for (const Tensor& t : tensors_) {
    mlasim_kut_tensor x{};
    x.data = arena_->Data(t.name);
    x.rows = t.rows;
    x.bytes = static_cast<uint64_t>(t.rows * t.row_bytes());
    x.row_stride = t.row_bytes();
    x.head_stride = t.heads > 1 ? int64_t{t.cols} * ElemBytes(t.dtype) : 0;
    x.heads = t.heads;
    x.cols = t.cols;
    x.dtype = t.dtype;
    if (t.name == "access_log") {
      k.access_log = static_cast<uint64_t*>(x.data);
      continue;
    }
    mlasim_kut_tensor* slots[] = {&k.q,
                                  &k.kv_cache,
                                  &k.kv_indices,
                                  &k.topk_indices,
                                  &k.kv_indptr,
                                  &k.kv_last_page_lens,
                                  &k.qo_indptr,
                                  &k.work_indptr,
                                  &k.work_info,
                                  &k.reduce_indptr,
                                  &k.reduce_final_map,
                                  &k.reduce_partial_map,
                                  &k.o,
                                  &k.lse,
                                  &k.partial_o,
                                  &k.partial_lse};
    const char* names[] = {"q",
                           "kv_cache",
                           "kv_indices",
                           "topk_indices",
                           "kv_indptr",
                           "kv_last_page_lens",
                           "qo_indptr",
                           "work_indptr",
                           "work_info",
                           "reduce_indptr",
                           "reduce_final_map",
                           "reduce_partial_map",
                           "o",
                           "lse",
                           "partial_o",
                           "partial_lse"};
    for (size_t i = 0; i < std::size(names); ++i)
      if (t.name == names[i]) *slots[i] = x;
  }
  return k;
}

// One kernel call: the hook, the call, the damage and the inputs. False when the call did not
// complete (an error return), so nothing after it is checked.
bool StepChecker::RunOne(int32_t op, const sim::Call& c, const std::vector<Predicted>& pred,
                         KutCallReport& rep) {
  const char* op_name = op == MLASIM_KUT_OP_DECODE ? "decode" : "reduce";
  json predicted = json::array();
  for (const Predicted& p : pred) {
    json pj = p.Json();
    pj["violations"] = json::array();
    for (const sim::Violation& v : p.from) pj["violations"].push_back(ViolationToJson(v));
    predicted.push_back(pj);
  }
  const json running = {
      {"call", c.index},          {"op", op_name},      {"step", c.step},        {"name", c.name},
      {"table_row", c.table_row}, {"kernel", c.kernel}, {"predicted", predicted}};
  if (before_) before_(running);
  std::vector<KutRowRange> expected;
  for (const Predicted& p : pred) expected.push_back({p.buffer, p.first, p.last});
  arena_->PublishForFaults(expected);
  std::string err;
  const mlasim_kut_call call = Descriptor(op);
  int rc;
  {
    // The arena's fills are asynchronous on the default stream; a kernel under test may launch
    // on a stream of its own, so they finish before it is called.
    if (!d_.host_memory) {
      PartTimer buffers(out_.seconds, "buffers");
      gpu::device_synchronize();
    }
    PartTimer timer(out_.seconds, "kernel");
    rc = lib_.Run(call, &err);
    if (!d_.host_memory) gpu::device_synchronize();  // a device fault throws: the worker ends
  }
  PartTimer timer(out_.seconds, "checks");
  const std::vector<KutDamage> damage = arena_->ScanAndRefill();
  json run = {{"op", op_name},
              {"call", c.index},
              {"predicted", json::array()},
              {"observed", json::array()}};
  for (const Predicted& p : pred) run["predicted"].push_back(p.Json());
  for (const KutDamage& d : damage) run["observed"].push_back(DamageJson(d));
  if (rc != MLASIM_KUT_OK) {
    run[rc == MLASIM_KUT_UNSUPPORTED ? "unsupported" : "error"] = err;
    rep.json["runs"].push_back(run);
    if (rc != MLASIM_KUT_UNSUPPORTED)
      rep.findings.push_back(KernelViolation(
          sim::ViolationKind::kKernelFault, kFaultClass, c, "", "run",
          fmt::format("{} returned error {} from the {} call: {}", d_.name, rc, op_name, err)));
    return false;
  }
  uint64_t log[4];
  arena_->Download("access_log", log, sizeof log);
  if (log[1] != 0) run["q_rows_read"] = {log[0], log[1] - 1};
  if (log[3] != 0) run["o_rows_written"] = {log[2], log[3] - 1};
  if (op == MLASIM_KUT_OP_DECODE) {  // the formats the harness handed the kernel (PickDtype)
    run["q_dtype"] = KutDtypeName(call.q.dtype);
    run["kv_dtype"] = KutDtypeName(call.kv_cache.dtype);
  }
  rep.json["runs"].push_back(run);
  CompareDamage(c, pred, damage, rep);
  CheckInputs(c, rep);
  return true;
}

// Observed damage against the predictions of the call (docs/kernel-under-test.md "Damage").
void StepChecker::CompareDamage(const sim::Call& c, const std::vector<Predicted>& pred,
                                const std::vector<KutDamage>& damage, KutCallReport& rep) {
  std::vector<bool> matched(pred.size(), false);
  for (const KutDamage& d : damage) {
    const char* where = d.before ? "before the start of" : "past the end of";
    const Predicted* p = nullptr;
    for (size_t i = 0; i < pred.size(); ++i)
      if (pred[i].buffer == d.buffer && pred[i].access == "write" && pred[i].before == d.before)
        p = &pred[i], matched[i] = true;
    if (p != nullptr && p->first == d.first_row && p->last == d.last_row) {
      for (sim::Violation v : p->from) {  // confirmed: the simulator's own finding
        if (!confirmed_.insert(Signature(v) + v.detail).second) continue;
        v.detail += fmt::format("; observed on {}: sentinel {} {} {} damaged", d_.name,
                                Rows(d.first_row, d.last_row), where, d.buffer);
        rep.findings.push_back(v);
      }
      continue;
    }
    rep.findings.push_back(KernelViolation(
        sim::ViolationKind::kKernelContract, kContractClass, c, d.buffer, "write",
        fmt::format("{} wrote {} {} {} ({} rows, {} bytes changed); its contract predicts {}",
                    d_.name, Rows(d.first_row, d.last_row), where, d.buffer, d.rows, d.bad_bytes,
                    p ? Rows(p->first, p->last) : std::string("no write there"))));
  }
  for (size_t i = 0; i < pred.size(); ++i) {
    const Predicted& p = pred[i];
    // Observable: a write into sentinel bytes (sentinel mode), any access on a guarded side.
    const bool observable = o_.guard ? GuardedSide(p) : p.access == "write";
    if (matched[i] || !observable || p.attribution_only) continue;
    rep.findings.push_back(KernelViolation(
        sim::ViolationKind::kKernelContract, kContractClass, c, p.buffer, p.access,
        fmt::format("{}: its contract predicts a {} of {} {} {}, which {} did not do", d_.name,
                    p.access, Rows(p.first, p.last),
                    p.before ? "before the start of" : "past the end of", p.buffer,
                    o_.guard ? "faulting on a guard page" : "damaging sentinel bytes")));
  }
}

// Every input buffer must hold what was uploaded (the device KV cache is not read back).
void StepChecker::CheckInputs(const sim::Call& c, KutCallReport& rep) {
  std::vector<unsigned char> now;
  for (const Tensor& t : tensors_) {
    if (!d_.host_memory && t.name == "kv_cache") continue;
    if (t.generated) {  // compared on the device with what was generated
      const gpu::GeneratedDiff diff =
          gpu::diff_generated(t.gen, t.dtype, arena_->Data(t.name), t.elements);
      if (diff.changed_bytes == 0) continue;
      rep.findings.push_back(KernelViolation(
          sim::ViolationKind::kKernelContract, kContractClass, c, t.name, "write",
          fmt::format("{} wrote inside its input {} ({} bytes changed, the first in row {})",
                      d_.name, t.name, diff.changed_bytes,
                      diff.first_byte / std::max<int64_t>(1, t.row_bytes()))));
      gpu::fill_generated(t.gen, t.dtype, arena_->Data(t.name), t.elements);
      continue;
    }
    if (!t.input || t.bytes.empty()) continue;
    now.resize(t.bytes.size());
    arena_->Download(t.name, now.data(), now.size());
    if (std::memcmp(now.data(), t.bytes.data(), now.size()) == 0) continue;
    int64_t first = -1, changed = 0;
    for (size_t i = 0; i < now.size(); ++i)
      if (now[i] != t.bytes[i]) changed += 1, first = first < 0 ? static_cast<int64_t>(i) : first;
    rep.findings.push_back(KernelViolation(
        sim::ViolationKind::kKernelContract, kContractClass, c, t.name, "write",
        fmt::format("{} wrote inside its input {} ({} bytes changed, the first in row {})", d_.name,
                    t.name, changed, first / std::max<int64_t>(1, t.row_bytes()))));
    arena_->Upload(t.name, t.bytes.data(), t.bytes.size());  // the reduce sees the real inputs
  }
}

}  // namespace mlasim::fuzz::kut_internal
