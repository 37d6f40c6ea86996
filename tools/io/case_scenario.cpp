// The engine step that reproduces a captured decode call (tools/io/case_scenario.h).
#include "tools/io/case_scenario.h"

#include <algorithm>

#include "sim/call_check.h"
#include "sim/engine.h"
#include "sim/replay.h"
#include "sim/scenario_json.h"

namespace mlasim::io {
namespace {

const nlohmann::json* ConfigObject(const CaseManifest& m, const char* key) {
  const auto it = m.config.find(key);
  return it != m.config.end() && it->is_object() ? &*it : nullptr;
}

std::string ConfigString(const CaseManifest& m, const char* key) {
  const auto it = m.config.find(key);
  return it != m.config.end() && it->is_string() ? it->get<std::string>() : "";
}

// A case dtype (torch's name) as the scenario spells it: "bfloat16" -> "bf16".
std::string ShortDType(const std::string& torch) {
  if (torch == "bfloat16") return "bf16";
  if (torch == "float16") return "fp16";
  if (torch == "float32") return "fp32";
  if (torch.rfind("float8_", 0) == 0) return "fp" + torch.substr(5);  // "fp8_e4m3fn"
  return torch;
}

// Real requests (the leading ones with KV) and their tokens; padding is the zero-KV tail.
struct Batch {
  std::vector<int32_t> contexts;
  int32_t padded = 0;
};

StatusOr<Batch> BatchOf(const ref::PlanRequest& r, const std::string& manifest) {
  Batch b;
  b.padded = static_cast<int32_t>(r.kv_indptr.size()) - 1;
  const int32_t q = r.max_seqlen_qo;
  for (int32_t i = 0; i < b.padded; ++i) {
    const int32_t pages = r.kv_indptr[i + 1] - r.kv_indptr[i];
    const int32_t rows = r.qo_indptr[i + 1] - r.qo_indptr[i];
    if (rows != q && !(pages == 0 && rows == 0))  // ATOM's padding has 0 q rows, a test's Q
      return InvalidArgumentError(manifest + ":tensors.qo_indptr",
                                  "request " + std::to_string(i) + " has " + std::to_string(rows) +
                                      " q rows, not max_seqlen_qo = " + std::to_string(q) +
                                      ": the engine's MTP step gives every request K + 1 rows");
    if (pages == 0) continue;
    if (static_cast<int32_t>(b.contexts.size()) != i)
      return InvalidArgumentError(manifest + ":tensors.kv_indptr",
                                  "request " + std::to_string(i) +
                                      " has KV after a zero-KV request: the engine pads the "
                                      "graph batch with zero-KV requests at its end only");
    const int32_t last = r.kv_last_page_lens.empty() ? r.page_size : r.kv_last_page_lens[i];
    b.contexts.push_back((pages - 1) * r.page_size + last);
  }
  if (b.contexts.empty())
    return InvalidArgumentError(manifest + ":tensors.kv_indptr",
                                "every request has zero KV: no real request to replay");
  return b;
}

// Model, parallelism and engine preset from the request and config.engine.
Status SetModel(const CaseManifest& m, const ref::PlanRequest& r, const std::string& manifest,
                sim::Scenario& s) {
  if (r.num_heads_k != 1)
    return InvalidArgumentError(manifest + ":config.planner.num_heads_k",
                                "the simulator's engine runs MLA with one KV head");
  if (r.q_dtype != r.kv_dtype)
    return InvalidArgumentError(manifest + ":config.planner.q_dtype",
                                "differs from kv_dtype: the simulator's engine passes q in the KV "
                                "dtype (ATOM#287)");
  if (r.max_seqlen_qo < 1 || r.max_seqlen_qo > 8)
    return InvalidArgumentError(manifest + ":config.planner.max_seqlen_qo",
                                "must be 1..8 (MTP K = max_seqlen_qo - 1 is 0..7)");
  std::string profile = "atom-2026-08";
  s.parallel.tp = 1;
  if (const nlohmann::json* e = ConfigObject(m, "engine")) {
    if (auto it = e->find("tp"); it != e->end()) {
      if (!sim::IsInt64(*it) || it->get<int64_t>() < 1 || it->get<int64_t>() > 64)
        return InvalidArgumentError(manifest + ":config.engine.tp",
                                    sim::IsIntegerBeyond64Bits(*it) ? sim::NotAnIntegerReason(*it)
                                                                    : "must be an integer 1..64");
      s.parallel.tp = it->get<int32_t>();
    }
    if (auto it = e->find("profile"); it != e->end()) {
      if (!it->is_string())
        return InvalidArgumentError(manifest + ":config.engine.profile", "must be a string");
      profile = it->get<std::string>();
    }
  }
  MLASIM_ASSIGN_OR_RETURN(s.engine,
                          sim::GetEngineProfile(profile, manifest + ":config.engine.profile"));
  s.model.name = ConfigString(m, "model").empty() ? "captured" : ConfigString(m, "model");
  s.model.heads = r.heads_per_head_k * s.parallel.tp;
  s.model.kv_dtype = r.kv_dtype;
  s.model.sparse = false;
  const CaseTensor* q = m.Find("q");
  const CaseTensor* o = m.Find("o");
  if (o && o->shape.size() == 3) {
    s.model.kv_lora_rank = static_cast<int32_t>(o->shape[2]);
    StatusOr<ref::DType> d = ref::ParseDType(ShortDType(o->dtype), manifest + ":tensors.o.dtype");
    if (!d.ok()) return d.status();
    s.model.model_dtype = *d;
  }
  if (q && q->shape.size() == 3 && q->shape[2] >= s.model.kv_lora_rank)
    s.model.rope_dim = static_cast<int32_t>(q->shape[2]) - s.model.kv_lora_rank;
  return OkStatus();
}

// The kernel: a built-in variant by name, or the contract itself.
Status SetKernel(const CaseFiles& files, const CaseManifest& m, const CaseContractOptions& o,
                 sim::Scenario& s) {
  const CaseContractSpec spec = CaseContractSpecOf(files, m, o);
  MLASIM_ASSIGN_OR_RETURN(std::shared_ptr<const sim::Contract> c,
                          sim::ResolveCallContract(sim::CallKind::kDecode, spec.spec, spec.field));
  if (c->file.rfind("builtin:", 0) == 0)
    s.kernel = c->variant;
  else
    s.contracts.push_back(c);
  return OkStatus();
}

// The same planner input. The planner places request b's q rows at b x uni_seqlen_qo (it refuses
// non-uniform lengths), whatever qo_indptr says -- ATOM's padding requests hold 0 rows there, a
// test's may hold Q -- so qo_indptr is not compared.
bool SameRequest(const ref::PlanRequest& a, const ref::PlanRequest& b) {
  return a.uni_seqlen_qo == b.uni_seqlen_qo && a.kv_indptr == b.kv_indptr &&
         a.max_seqlen_qo == b.max_seqlen_qo && a.heads_per_head_k == b.heads_per_head_k &&
         (a.page_size == 1 || a.kv_last_page_lens == b.kv_last_page_lens);
}

// The first decode call of the step that consumes the captured request with the captured rows.
const sim::Call* FindCall(const sim::Trace& t, const ref::PlanRequest& r, int64_t q_rows,
                          int64_t o_rows) {
  for (const sim::Call& c : t.calls)
    if (c.kind == sim::CallKind::kDecode && c.plan >= 0 && c.q_rows == q_rows &&
        c.o_rows == o_rows && SameRequest(t.plans[c.plan].request, r))
      return &c;
  return nullptr;
}

// The reduce that merges `decode`'s split pieces: the first reduce call after it in its step,
// over the same plan; null when the step has none.
const sim::Call* ReduceAfter(const sim::Trace& t, const sim::Call& decode) {
  for (const sim::Call& c : t.calls)
    if (c.index > decode.index && c.kind == sim::CallKind::kReduce && c.step == decode.step &&
        c.plan == decode.plan)
      return &c;
  return nullptr;
}

// The call kind the case captured: decode or reduce (other kinds are refused, naming the
// manifest's call or config.call_kind).
StatusOr<sim::CallKind> CaseCallKind(const CaseManifest& m, const std::string& manifest) {
  const std::string kind_name = ConfigString(m, "call_kind");
  MLASIM_ASSIGN_OR_RETURN(
      sim::CallKind kind,
      sim::CallKindOf(m.call, kind_name,
                      manifest + (kind_name.empty() ? ":call" : ":config.call_kind")));
  if (kind != sim::CallKind::kDecode && kind != sim::CallKind::kReduce)
    return InvalidArgumentError(manifest + ":call",
                                "--scenario-out reproduces decode and reduce calls; '" + m.call +
                                    "' is a " + sim::CallKindName(kind));
  return kind;
}

// The engine step around the planner request `r`: the batch (real contexts, padded to the graph
// size), the KV cache's page size and the planner's knobs.
Status SetStep(const ref::PlanRequest& r, const Batch& b, ref::PlannerChoice choice,
               sim::Scenario& s) {
  s.mtp_k = r.max_seqlen_qo - 1;
  for (int32_t c : b.contexts) s.requests.push_back({c, 0, 0, {}});
  s.graph.capture_sizes = {b.padded};
  s.graph.max_num_seqs = std::max(512, b.padded);
  s.graph.max_num_batched_tokens = std::max(16384, b.padded * r.max_seqlen_qo);
  if (r.page_size > 1) {
    s.kv_cache.modelled = true;
    s.kv_cache.page_size = r.page_size;
  }
  s.target = r.target;
  s.revision = r.revision;
  s.cu_count = r.cu_count;
  s.serial_planner = choice == ref::PlannerChoice::kSerial;
  s.kv_granularity = r.kv_granularity;
  s.max_split_per_batch = r.max_split_per_batch;
  return OkStatus();
}

// The call of `trace` that consumes the captured request with the captured rows; a reduce case:
// the reduce after the decode call with the captured o rows (a reduce captures no q, so the
// decode's q rows are the engine's, the plan's when the engine's differ). Null when none does.
const sim::Call* CapturedCall(const sim::Trace& trace, const ref::PlanRequest& r, bool reduce,
                              int64_t q_rows, int64_t o_rows) {
  const sim::Call* c = FindCall(trace, r, q_rows, o_rows);
  if (!c && reduce) {
    for (const sim::Call& d : trace.calls)
      if (!c && d.kind == sim::CallKind::kDecode && d.plan >= 0 && d.o_rows == o_rows &&
          SameRequest(trace.plans[d.plan].request, r) && ReduceAfter(trace, d))
        c = &d;
  }
  if (c && reduce) c = ReduceAfter(trace, *c);
  return c;
}

// No call of the engine's step has the captured rows: per-call overrides of verify's dense decode
// (and reduce) with them, checked by expanding the step again.
Status OverrideRows(bool reduce, int64_t q_rows, int64_t o_rows, const std::string& manifest,
                    CaseScenario& out) {
  sim::Scenario& s = out.scenario;
  for (const char* name : {"verify.dense_decode", "verify.dense_reduce"}) {
    if (!reduce && name == std::string("verify.dense_reduce")) break;
    sim::CallOverride ov;
    ov.call = name;
    ov.q_rows = q_rows;
    ov.o_rows = o_rows;
    s.calls.push_back(ov);
    out.call = ov.call;
  }
  out.overridden = true;
  StatusOr<sim::Trace> again = sim::ExpandStep(s);
  if (!again.ok())
    return InvalidArgumentError(manifest + ":" + again.status().field(), again.status().message());
  return OkStatus();
}

}  // namespace

StatusOr<CaseScenario> ScenarioFromCase(const CaseFiles& files, const CaseManifest& m,
                                        const CasePlanner& planner, ref::PlannerChoice choice,
                                        const CaseContractOptions& options) {
  const std::string manifest = files.Display(kCaseManifestName);
  if (!planner.request)
    return InvalidArgumentError(manifest,
                                "--scenario-out needs the planner request: the case has "
                                "no " +
                                    planner.missing_request);
  MLASIM_ASSIGN_OR_RETURN(const sim::CallKind kind, CaseCallKind(m, manifest));
  const bool reduce = kind == sim::CallKind::kReduce;
  const ref::PlanRequest& r = *planner.request;
  CaseScenario out;
  sim::Scenario& s = out.scenario;
  s.name = "case-" + m.call;
  s.description = "reproduces the " + m.call + " call of a case captured by mlasim.capture";
  MLASIM_RETURN_IF_ERROR(SetModel(m, r, manifest, s));
  MLASIM_RETURN_IF_ERROR(SetKernel(files, m, options, s));
  MLASIM_ASSIGN_OR_RETURN(Batch b, BatchOf(r, manifest));
  out.real_requests = static_cast<int32_t>(b.contexts.size());
  out.padded_requests = b.padded;
  MLASIM_RETURN_IF_ERROR(SetStep(r, b, choice, s));
  StatusOr<sim::Trace> trace = sim::ExpandStep(s);
  if (!trace.ok())
    return InvalidArgumentError(manifest + ":" + trace.status().field(), trace.status().message());
  // What `mlasim replay` will read: the scenario's own cross-field rules (docs/scenario.md).
  if (StatusOr<sim::Scenario> back = sim::ParseScenario(sim::ScenarioToJson(s)); !back.ok())
    return InvalidArgumentError(
        manifest, "the case does not make a valid scenario: " + back.status().field() + ": " +
                      back.status().message());
  // Rows as allocated: the captured q / o (tokens), else the engine's.
  const CaseTensor* q = m.Find("q");
  const CaseTensor* o = m.Find("o");
  const int64_t rows = r.qo_indptr.back();
  const int64_t q_rows = q && !q->shape.empty() ? q->shape[0] : rows;
  const int64_t o_rows = o && !o->shape.empty() ? o->shape[0] : q_rows;
  if (const sim::Call* c = CapturedCall(*trace, r, reduce, q_rows, o_rows)) {
    out.call = c->step + "." + c->name;
    return out;
  }
  MLASIM_RETURN_IF_ERROR(OverrideRows(reduce, q_rows, o_rows, manifest, out));
  return out;
}

}  // namespace mlasim::io
