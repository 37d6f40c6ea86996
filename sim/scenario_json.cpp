#include "sim/scenario_json.h"

#include "ref/limits.h"
#include "sim/call_overrides.h"
#include "sim/call_table.h"
#include "sim/contract.h"
#include "sim/json_input.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace mlasim::sim {
namespace {

using nlohmann::json;

// Tokens of one scenario value (contexts, rows, positions): ref/limits.h scenario_tokens.
int64_t MaxTokens() {
  return ref::Limit(ref::LimitId::kScenarioTokens);
}

bool SameFlags(const EngineProfile& a, const EngineProfile& b) {
  return a.sparse_mtp_plan_tokens == b.sparse_mtp_plan_tokens && a.draft_rows == b.draft_rows &&
         a.plan_rows_guard == b.plan_rows_guard && a.non_uniform_q_plan == b.non_uniform_q_plan &&
         a.dcp_slice_rebuild_inputs == b.dcp_slice_rebuild_inputs &&
         a.incremental_update == b.incremental_update &&
         a.update_uses_verify_width == b.update_uses_verify_width && a.o_padding == b.o_padding &&
         a.lse_padding == b.lse_padding && a.q_fp8_scale == b.q_fp8_scale &&
         a.plan_batch == b.plan_batch && a.pad_kv_len == b.pad_kv_len &&
         a.num_splits_pad == b.num_splits_pad && a.metadata == b.metadata &&
         a.flashmla_revision == b.flashmla_revision && a.attention_backend == b.attention_backend;
}  // 16M tokens per request is beyond any deployment

// Names and descriptions are printed by the text reports: PrintableText (sim/json_input.h)
// refuses the control characters that would reach the user's terminal as is (a description keeps
// its line breaks and tabs).
Status ParseModel(const json& j, ModelSpec* m) {
  ObjectReader r(j, "$.model");
  MLASIM_RETURN_IF_ERROR(r.Check());
  MLASIM_RETURN_IF_ERROR(r.String("name", &m->name));
  MLASIM_RETURN_IF_ERROR(PrintableText("$.model.name", m->name));
  MLASIM_RETURN_IF_ERROR(r.Int("heads", &m->heads, 1, 1024, true));
  MLASIM_RETURN_IF_ERROR(r.Int("kv_lora_rank", &m->kv_lora_rank, 1, 4096));
  MLASIM_RETURN_IF_ERROR(r.Int("rope_dim", &m->rope_dim, 0, 1024));
  std::string s;
  if (r.Has("kv_dtype")) {
    MLASIM_RETURN_IF_ERROR(r.String("kv_dtype", &s));
    MLASIM_ASSIGN_OR_RETURN(m->kv_dtype, ref::ParseDType(s, r.Path("kv_dtype")));
  }
  if (r.Has("model_dtype")) {
    MLASIM_RETURN_IF_ERROR(r.String("model_dtype", &s));
    MLASIM_ASSIGN_OR_RETURN(m->model_dtype, ref::ParseDType(s, r.Path("model_dtype")));
  }
  MLASIM_RETURN_IF_ERROR(r.Bool("sparse", &m->sparse));
  MLASIM_RETURN_IF_ERROR(r.Int("topk", &m->topk, 1, 1 << 20));
  return r.Finish();
}

Status ParseParallel(const json& j, ParallelSpec* p) {
  ObjectReader r(j, "$.parallelism");
  MLASIM_RETURN_IF_ERROR(r.Check());
  MLASIM_RETURN_IF_ERROR(r.Int("tp", &p->tp, 1, 64));
  MLASIM_RETURN_IF_ERROR(r.Int("dp", &p->dp, 1, 64));
  MLASIM_RETURN_IF_ERROR(
      r.IntArray("dp_scheduled_tokens", &p->dp_scheduled_tokens, 0, MaxTokens()));
  MLASIM_RETURN_IF_ERROR(r.Int("dcp", &p->dcp, 1, 64));
  MLASIM_RETURN_IF_ERROR(r.Int("dcp_interleave", &p->dcp_interleave, 1, 1 << 16));
  MLASIM_RETURN_IF_ERROR(r.Finish());
  if (!p->dp_scheduled_tokens.empty() &&
      static_cast<int32_t>(p->dp_scheduled_tokens.size()) != p->dp)
    return InvalidArgumentError("$.parallelism.dp_scheduled_tokens",
                                "needs one entry per DP rank (dp = " + std::to_string(p->dp) + ")");
  return OkStatus();
}

// Request `i`'s own bounds: q length <= Q, rejections <= K and <= its drafts (q_i - 1), a
// context that holds its q_i verify tokens.
Status CheckRequest(const RequestSpec& req, size_t i, int32_t k) {
  const int32_t q = k + 1;
  const std::string idx = "[" + std::to_string(i) + "]";
  if (req.q_len > q)
    return InvalidArgumentError("$.batch.q_lens" + idx, "at most Q = K + 1 = " + std::to_string(q) +
                                                            " q tokens per request (got " +
                                                            std::to_string(req.q_len) + ")");
  const int32_t qi = req.q_len < 0 ? q : req.q_len;
  if (req.rejected > k)
    return InvalidArgumentError("$.batch.rejected" + idx,
                                "at most K = " + std::to_string(k) + " drafts can be rejected");
  if (req.rejected_prev > k)
    return InvalidArgumentError("$.batch.rejected_prev" + idx,
                                "at most K = " + std::to_string(k) + " drafts can be rejected");
  // A request of q_i verify tokens verifies q_i - 1 drafts (none when it has no query).
  const int32_t drafts = std::max(qi - 1, 0);
  if (req.q_len >= 0 && req.rejected > drafts)
    return InvalidArgumentError("$.batch.rejected" + idx,
                                "at most q_lens - 1 = " + std::to_string(drafts) +
                                    " drafts can be rejected (the request verifies " +
                                    std::to_string(qi) + " q tokens; got " +
                                    std::to_string(req.rejected) + ")");
  if (req.context - req.rejected_prev < qi)
    return InvalidArgumentError("$.batch.contexts" + idx,
                                "context minus rejected_prev must hold this step's " +
                                    std::to_string(qi) + " verify tokens (got " +
                                    std::to_string(req.context - req.rejected_prev) + ")");
  return OkStatus();
}

// Request `i`'s row of batch.topk_lengths (`topk`, one array per request of `requests`): one
// count per verify token, each 0..2^20.
Status ParseTopkRow(const json& topk, size_t i, size_t requests, int32_t qi, bool stated,
                    RequestSpec* req) {
  const std::string p = "$.batch.topk_lengths[" + std::to_string(i) + "]";
  if (!topk.is_array() || topk.size() != requests)
    return InvalidArgumentError("$.batch.topk_lengths",
                                "needs one array per request (" + std::to_string(requests) + ")");
  const json& row = topk[i];
  if (!row.is_array() || static_cast<int32_t>(row.size()) != qi)
    return InvalidArgumentError(p, "needs one count per verify token (" +
                                       std::string(stated ? "q_lens = " : "Q = ") +
                                       std::to_string(qi) + ")");
  for (size_t t = 0; t < row.size(); ++t) {
    if (std::string why = IntegerRangeReason(row[t], 0, 1 << 20); !why.empty())
      return InvalidArgumentError(p + "[" + std::to_string(t) + "]", why);
    req->topk_lengths.push_back(static_cast<int32_t>(row[t].get<int64_t>()));
  }
  return OkStatus();
}

Status ParseBatch(const json& j, int32_t k, std::vector<RequestSpec>* out) {
  ObjectReader r(j, "$.batch");
  MLASIM_RETURN_IF_ERROR(r.Check());
  std::vector<int32_t> ctx, prev, rej, qlens;
  MLASIM_RETURN_IF_ERROR(r.IntArray("contexts", &ctx, 0, MaxTokens()));
  MLASIM_RETURN_IF_ERROR(r.IntArray("q_lens", &qlens, 0, MaxTokens()));
  MLASIM_RETURN_IF_ERROR(r.IntArray("rejected_prev", &prev, 0, 64));
  MLASIM_RETURN_IF_ERROR(r.IntArray("rejected", &rej, 0, 64));
  const json* topk = r.Child("topk_lengths");
  MLASIM_RETURN_IF_ERROR(r.Finish());
  if (!r.Has("contexts"))
    return InvalidArgumentError("$.batch.contexts", "required key is missing");
  if (ctx.empty()) return InvalidArgumentError("$.batch.contexts", "needs at least one request");
  const std::string per_request =
      "needs one entry per request (" + std::to_string(ctx.size()) + ")";
  if (r.Has("rejected_prev") && prev.size() != ctx.size())
    return InvalidArgumentError("$.batch.rejected_prev", per_request);
  if (r.Has("rejected") && rej.size() != ctx.size())
    return InvalidArgumentError("$.batch.rejected", per_request);
  if (r.Has("q_lens") && qlens.size() != ctx.size())
    return InvalidArgumentError("$.batch.q_lens", per_request);
  for (size_t i = 0; i < ctx.size(); ++i) {
    RequestSpec req;
    req.context = ctx[i];
    req.rejected_prev = prev.empty() ? 0 : prev[i];
    req.rejected = rej.empty() ? 0 : rej[i];
    req.q_len = qlens.empty() ? -1 : qlens[i];
    MLASIM_RETURN_IF_ERROR(CheckRequest(req, i, k));
    const int32_t qi = req.q_len < 0 ? k + 1 : req.q_len;
    if (topk) MLASIM_RETURN_IF_ERROR(ParseTopkRow(*topk, i, ctx.size(), qi, req.q_len >= 0, &req));
    out->push_back(req);
  }
  return OkStatus();
}

Status ParseGraph(const json& j, GraphSpec* g) {
  ObjectReader r(j, "$.graph");
  MLASIM_RETURN_IF_ERROR(r.Check());
  MLASIM_RETURN_IF_ERROR(r.IntArray("capture_sizes", &g->capture_sizes, 1, 1 << 16));
  MLASIM_RETURN_IF_ERROR(r.Int("max_num_seqs", &g->max_num_seqs, 1, 1 << 16));
  MLASIM_RETURN_IF_ERROR(r.Int("max_num_batched_tokens", &g->max_num_batched_tokens, 1, 1 << 22));
  MLASIM_RETURN_IF_ERROR(r.Bool("eager", &g->eager));
  MLASIM_RETURN_IF_ERROR(r.Int("max_model_len", &g->max_model_len, 1, 1 << 24));
  MLASIM_RETURN_IF_ERROR(r.Finish());
  for (size_t i = 1; i < g->capture_sizes.size(); ++i)
    if (g->capture_sizes[i] <= g->capture_sizes[i - 1])
      return InvalidArgumentError("$.graph.capture_sizes[" + std::to_string(i) + "]",
                                  "capture sizes must be strictly increasing");
  return OkStatus();
}

Status ParseAllocator(const json& j, AllocatorSpec* a) {
  ObjectReader r(j, "$.allocator");
  MLASIM_RETURN_IF_ERROR(r.Check());
  std::string model;
  MLASIM_RETURN_IF_ERROR(r.String("model", &model));
  if (r.Has("model")) {
    if (model == "exact")
      a->model = AllocatorModel::kExact;
    else if (model == "caching")
      a->model = AllocatorModel::kCaching;
    else
      return InvalidArgumentError("$.allocator.model", "must be \"exact\" or \"caching\"");
  }
  MLASIM_RETURN_IF_ERROR(r.Int64("page_bytes", &a->page_bytes, 1, int64_t{1} << 30));
  if (a->page_bytes != 4096 && a->page_bytes != 65536)
    return InvalidArgumentError("$.allocator.page_bytes", "must be 4096 or 65536");
  MLASIM_RETURN_IF_ERROR(r.Int64("segment_bytes", &a->segment_bytes, 1, int64_t{1} << 40));
  if (a->segment_bytes % a->page_bytes != 0)
    return InvalidArgumentError("$.allocator.segment_bytes", "must be a multiple of page_bytes");
  if (const json* live = r.Child("live_before_call")) {
    if (!live->is_array())
      return InvalidArgumentError("$.allocator.live_before_call", "must be an array of objects");
    if (live->size() > 256)
      return InvalidArgumentError("$.allocator.live_before_call", "at most 256 entries");
    for (size_t i = 0; i < live->size(); ++i) {
      ObjectReader e((*live)[i], "$.allocator.live_before_call[" + std::to_string(i) + "]");
      MLASIM_RETURN_IF_ERROR(e.Check());
      ExtraAllocation x;
      MLASIM_RETURN_IF_ERROR(e.String("name", &x.name, true));
      MLASIM_RETURN_IF_ERROR(PrintableText(e.Path("name"), x.name));
      MLASIM_RETURN_IF_ERROR(e.Int64("bytes", &x.bytes, 1, int64_t{1} << 40));
      if (!e.Has("bytes")) return InvalidArgumentError(e.Path("bytes"), "required key is missing");
      MLASIM_RETURN_IF_ERROR(e.Finish());
      a->live_before_call.push_back(x);
    }
  }
  return r.Finish();
}

Status ParsePlanner(const json& j, Scenario* s) {
  std::string dispatch;
  if (j.is_string()) {
    dispatch = j.get<std::string>();
  } else if (!j.is_object()) {
    return InvalidArgumentError("$.planner", "must be \"aiter-dispatch\", \"serial\" or an object");
  } else {
    ObjectReader r(j, "$.planner");
    MLASIM_RETURN_IF_ERROR(r.Check());
    dispatch = "aiter-dispatch";
    MLASIM_RETURN_IF_ERROR(r.String("dispatch", &dispatch));
    MLASIM_RETURN_IF_ERROR(r.Int("kv_granularity", &s->kv_granularity, 1, 1 << 16));
    if ((s->kv_granularity & (s->kv_granularity - 1)) != 0)
      return InvalidArgumentError("$.planner.kv_granularity", "must be a power of two");
    MLASIM_RETURN_IF_ERROR(r.Int("max_split_per_batch", &s->max_split_per_batch, -1, 1 << 16));
    if (s->max_split_per_batch == 0)
      return InvalidArgumentError("$.planner.max_split_per_batch", "must be -1 (none) or >= 1");
    MLASIM_RETURN_IF_ERROR(r.Finish());
  }
  if (dispatch == "aiter-dispatch")
    s->serial_planner = false;
  else if (dispatch == "serial")
    s->serial_planner = true;
  else
    return InvalidArgumentError(j.is_string() ? "$.planner" : "$.planner.dispatch",
                                "must be \"aiter-dispatch\" or \"serial\"");
  return OkStatus();
}

Status ParseKvCache(const json& j, Scenario* s) {
  ObjectReader r(j, "$.kv_cache");
  MLASIM_RETURN_IF_ERROR(r.Check());
  KvCacheSpec& kv = s->kv_cache;
  kv.modelled = true;
  MLASIM_RETURN_IF_ERROR(r.Int("page_size", &kv.page_size, 1, 1024));
  if ((kv.page_size & (kv.page_size - 1)) != 0)
    return InvalidArgumentError("$.kv_cache.page_size", "must be a power of two");
  if (kv.page_size > 1 && s->model.sparse)
    return InvalidArgumentError("$.kv_cache.page_size",
                                "sparse models are planned per token (page 1) in the ATOM call "
                                "table; page_size > 1 is modelled for dense models");
  MLASIM_RETURN_IF_ERROR(r.Int64("num_rows", &kv.num_rows, 0, int64_t{1} << 32));
  if (const json* values = r.Child("index_values")) {
    if (!values->is_array() || values->size() > 4096)
      return InvalidArgumentError("$.kv_cache.index_values",
                                  "must be an array of at most 4096 objects");
    std::map<std::pair<int32_t, int32_t>, size_t> slots;  // (token, position) -> first entry
    for (size_t i = 0; i < values->size(); ++i) {
      const std::string path = "$.kv_cache.index_values[" + std::to_string(i) + "]";
      ObjectReader e((*values)[i], path);
      MLASIM_RETURN_IF_ERROR(e.Check());
      KvCacheSpec::IndexValue v;
      MLASIM_RETURN_IF_ERROR(e.Int("token", &v.token, 0, MaxTokens(), true));
      MLASIM_RETURN_IF_ERROR(e.Int("position", &v.position, 0, MaxTokens(), true));
      MLASIM_RETURN_IF_ERROR(e.Int64("value", &v.value, INT32_MIN, INT32_MAX, true));
      MLASIM_RETURN_IF_ERROR(e.Finish());
      // Two values for one slot: which one the slot holds would be a guess.
      if (const auto [at, fresh] = slots.emplace(std::make_pair(v.token, v.position), i); !fresh)
        return InvalidArgumentError(
            path, "token " + std::to_string(v.token) + " position " + std::to_string(v.position) +
                      " is already set by $.kv_cache.index_values[" +
                      std::to_string(at->second) + "]; a slot takes one value");
      kv.index_values.push_back(v);
    }
  }
  return r.Finish();
}

Status ParseCalls(const json& j, Scenario* s) {
  if (!j.is_array() || j.size() > 256)
    return InvalidArgumentError("$.calls", "must be an array of at most 256 objects");
  std::map<std::string, size_t> entries;  // call -> its entry
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string path = "$.calls[" + std::to_string(i) + "]";
    ObjectReader r(j[i], path);
    MLASIM_RETURN_IF_ERROR(r.Check());
    CallOverride c;
    MLASIM_RETURN_IF_ERROR(r.String("call", &c.call, true));
    if (c.call.find('.') == std::string::npos)
      return InvalidArgumentError(path + ".call",
                                  "must be <step>.<call>, e.g. "
                                  "draft_step_0.sparse_decode");
    MLASIM_RETURN_IF_ERROR(r.Int("launch_grid", &c.launch_grid, 0, 1 << 20));
    MLASIM_RETURN_IF_ERROR(r.Int64("q_rows", &c.q_rows, 0, MaxTokens()));
    MLASIM_RETURN_IF_ERROR(r.Int64("o_rows", &c.o_rows, 0, MaxTokens()));
    MLASIM_RETURN_IF_ERROR(r.Int("kernel_heads", &c.kernel_heads, 1, 1024));
    MLASIM_RETURN_IF_ERROR(r.Int("kernel_q_cols", &c.kernel_q_cols, 1, 8192));
    MLASIM_RETURN_IF_ERROR(r.Int("planner_cu_count", &c.planner_cu_count, 1, 4096));
    MLASIM_RETURN_IF_ERROR(r.Int("planner_heads", &c.planner_heads, 1, 1024));
    if (r.Has("planner_dtype")) {
      MLASIM_RETURN_IF_ERROR(r.String("planner_dtype", &c.planner_dtype));
      MLASIM_RETURN_IF_ERROR(ref::ParseDType(c.planner_dtype, r.Path("planner_dtype")).status());
    }
    MLASIM_RETURN_IF_ERROR(r.String("plan_from", &c.plan_from));
    if (!c.plan_from.empty() && c.plan_from != "capture" &&
        c.plan_from.find('.') == std::string::npos)
      return InvalidArgumentError(path + ".plan_from",
                                  "must be \"capture\" or <step>.<call> of an earlier plan");
    MLASIM_RETURN_IF_ERROR(r.Finish());
    if (!SetsAnyOverride(c)) {
      std::string keys;
      for (const CallOverrideField& f : CallOverrideFields())
        keys += (keys.empty() ? "" : ", ") + std::string(f.key);
      return InvalidArgumentError(path,
                                  "overrides nothing of " + c.call + " (give one of " + keys + ")");
    }
    // Two entries for one call: which one the engine follows would be a guess.
    if (const auto [at, fresh] = entries.emplace(c.call, i); !fresh)
      return InvalidArgumentError(path + ".call", c.call + " is already overridden by $.calls[" +
                                                      std::to_string(at->second) +
                                                      "]; a call takes one entry");
    s->calls.push_back(std::move(c));
  }
  return OkStatus();
}

Status ParseSizing(const json& j, Scenario* s) {
  if (!j.is_array() || j.size() > 16)
    return InvalidArgumentError("$.sizing", "must be an array of at most 16 objects");
  std::map<std::string, size_t> entries;  // buffers -> its entry
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string path = "$.sizing[" + std::to_string(i) + "]";
    ObjectReader r(j[i], path);
    MLASIM_RETURN_IF_ERROR(r.Check());
    SizingOverride z;
    MLASIM_RETURN_IF_ERROR(r.String("buffers", &z.buffers, true));
    MLASIM_RETURN_IF_ERROR(r.Int("batch", &z.batch, 1, 1 << 20));
    MLASIM_RETURN_IF_ERROR(r.Int("qlen", &z.qlen, 1, 64));
    MLASIM_RETURN_IF_ERROR(r.Int("heads", &z.heads, 1, 1024));
    MLASIM_RETURN_IF_ERROR(r.Int("cu_count", &z.cu_count, 1, 4096));
    if (r.Has("dtype")) {
      MLASIM_RETURN_IF_ERROR(r.String("dtype", &z.dtype));
      MLASIM_RETURN_IF_ERROR(ref::ParseDType(z.dtype, r.Path("dtype")).status());
    }
    bool sparse = false;
    if (r.Has("is_sparse")) {
      MLASIM_RETURN_IF_ERROR(r.Bool("is_sparse", &sparse));
      z.is_sparse = sparse;
    }
    MLASIM_RETURN_IF_ERROR(r.Finish());
    if (!SetsAnySizing(z))
      return InvalidArgumentError(
          path, "sizes " + z.buffers + " as the engine does (give one of " + SizingKeys() + ")");
    // Two entries for one buffer set: which sizing the engine follows would be a guess.
    if (const auto [at, fresh] = entries.emplace(z.buffers, i); !fresh)
      return InvalidArgumentError(
          path + ".buffers", "\"" + z.buffers + "\" is already sized by $.sizing[" +
                                 std::to_string(at->second) + "]; a buffer set takes one entry");
    s->sizing.push_back(std::move(z));
  }
  return OkStatus();
}

Status ParseEngine(const json& j, EngineProfile* e) {
  if (j.is_string()) {
    MLASIM_ASSIGN_OR_RETURN(*e, GetEngineProfile(j.get<std::string>(), "$.engine"));
    return OkStatus();
  }
  if (!j.is_object())
    return InvalidArgumentError("$.engine", "must be a profile name or an object");
  ObjectReader r(j, "$.engine");
  MLASIM_RETURN_IF_ERROR(r.Check());
  std::string preset;
  MLASIM_RETURN_IF_ERROR(r.String("preset", &preset, true));
  MLASIM_ASSIGN_OR_RETURN(*e, GetEngineProfile(preset, "$.engine.preset"));
  r.Child("preset");
  MLASIM_RETURN_IF_ERROR(ParseEngineFlags(j, "$.engine", e, {"preset"}));
  // Named after the preset unless a flag differs from it.
  if (!SameFlags(*e, *GetEngineProfile(preset, "$.engine.preset"))) e->name = preset + "+overrides";
  return OkStatus();
}

}  // namespace

namespace {

Status ParseMtp(const json& j, Scenario* s) {
  ObjectReader m(j, "$.mtp");
  MLASIM_RETURN_IF_ERROR(m.Check());
  MLASIM_RETURN_IF_ERROR(m.Int("k", &s->mtp_k, 0, 7, true));
  return m.Finish();
}

// target, revision, cu_count, kernel, planner, zero_kv_reads_index_row, allocator, kv_cache.
Status ParseTargetAndKernel(ObjectReader& r, Scenario* s) {
  std::string text;
  if (r.Has("target")) {
    MLASIM_RETURN_IF_ERROR(r.String("target", &text));
    MLASIM_ASSIGN_OR_RETURN(s->target, ref::ParseArch(text, "$.target"));
  }
  if (r.Has("revision")) {
    MLASIM_RETURN_IF_ERROR(r.String("revision", &text));
    MLASIM_ASSIGN_OR_RETURN(s->revision, ref::ParseRevision(text, "$.revision"));
  }
  MLASIM_RETURN_IF_ERROR(r.Int("cu_count", &s->cu_count, 1, 4096));
  if (r.Has("kernel")) MLASIM_RETURN_IF_ERROR(r.String("kernel", &s->kernel));
  if (const json* planner = r.Child("planner")) MLASIM_RETURN_IF_ERROR(ParsePlanner(*planner, s));
  MLASIM_RETURN_IF_ERROR(r.Bool("zero_kv_reads_index_row", &s->zero_kv_reads_index_row));
  if (const json* a = r.Child("allocator"))
    MLASIM_RETURN_IF_ERROR(ParseAllocator(*a, &s->allocator));
  if (const json* kv = r.Child("kv_cache")) MLASIM_RETURN_IF_ERROR(ParseKvCache(*kv, s));
  return OkStatus();
}

Status ParseCapture(const json& j, Scenario* s) {
  ObjectReader c(j, "$.capture");
  MLASIM_RETURN_IF_ERROR(c.Check());
  MLASIM_RETURN_IF_ERROR(c.IntArray("contexts", &s->capture_contexts, 0, MaxTokens()));
  return c.Finish();
}

// Kernel contracts that replace the built-in one of their call kind, inline (a finding of
// `fuzz --contract` carries its contract, so it replays anywhere).
Status ParseContracts(const json& contracts, Scenario* s) {
  if (!contracts.is_array() || contracts.size() > 8)
    return InvalidArgumentError("$.contracts", "must be an array of at most 8 contracts");
  for (size_t i = 0; i < contracts.size(); ++i) {
    const std::string path = "$.contracts[" + std::to_string(i) + "]";
    MLASIM_ASSIGN_OR_RETURN(Contract c, ParseContract(contracts[i], path));
    for (const auto& prev : s->contracts)
      if (prev->call == c.call)
        return InvalidArgumentError(path, "a second " + std::string(CallKindName(c.call)) +
                                              " contract (one per call kind)");
    s->contracts.push_back(std::make_shared<const Contract>(std::move(c)));
  }
  return OkStatus();
}

// Checks across fields: the decode kernel exists, TP divides the heads, the batch fits the
// graph's and the model's limits, this DP rank's scheduled tokens.
Status CheckCrossFields(const Scenario& s) {
  bool own_decode = false;
  for (const auto& c : s.contracts) own_decode = own_decode || c->call == CallKind::kDecode;
  if (!own_decode)
    MLASIM_RETURN_IF_ERROR(BuiltinContract(CallKind::kDecode, s.kernel, "$.kernel").status());
  if (s.model.heads % s.parallel.tp != 0)
    return InvalidArgumentError("$.parallelism.tp",
                                "must divide model.heads (" + std::to_string(s.model.heads) + ")");
  const int32_t q = s.mtp_k + 1;
  int64_t total_kv = 0;
  for (const RequestSpec& req : s.requests) total_kv += req.context;
  if (total_kv > (int64_t{1} << 30))
    return InvalidArgumentError("$.batch.contexts", "the batch holds " + std::to_string(total_kv) +
                                                        " KV tokens; mlasim models up to 2^30");
  for (size_t i = 0; i < s.requests.size(); ++i)
    if (s.requests[i].context > s.graph.max_model_len)
      return InvalidArgumentError(
          "$.batch.contexts[" + std::to_string(i) + "]",
          "longer than graph.max_model_len (" + std::to_string(s.graph.max_model_len) + ")");
  if (static_cast<int64_t>(s.requests.size()) * q > s.graph.max_num_batched_tokens)
    return InvalidArgumentError("$.batch.contexts",
                                "the batch needs " + std::to_string(s.requests.size() * q) +
                                    " tokens, above graph.max_num_batched_tokens");
  if (static_cast<int32_t>(s.requests.size()) > s.graph.max_num_seqs)
    return InvalidArgumentError("$.batch.contexts", "more requests than graph.max_num_seqs");
  if (!s.parallel.dp_scheduled_tokens.empty() &&
      s.parallel.dp_scheduled_tokens[0] != ScheduledTokens(s))
    return InvalidArgumentError("$.parallelism.dp_scheduled_tokens[0]",
                                "this rank's entry must equal its scheduled tokens (" +
                                    std::to_string(ScheduledTokens(s)) + ")");
  return OkStatus();
}

}  // namespace

StatusOr<Scenario> ParseScenario(const json& doc) {
  ObjectReader r(doc, "$");
  MLASIM_RETURN_IF_ERROR(r.Check());
  Scenario s;
  MLASIM_RETURN_IF_ERROR(r.String("name", &s.name));
  MLASIM_RETURN_IF_ERROR(PrintableText("$.name", s.name));
  MLASIM_RETURN_IF_ERROR(r.String("description", &s.description));
  MLASIM_RETURN_IF_ERROR(PrintableText("$.description", s.description, true));
  // Provenance of a fuzz finding (seed, shrink path, signature): kept by `mlasim fuzz`, ignored
  // by replay.
  if (const json* finding = r.Child("finding")) {
    if (!finding->is_object()) return InvalidArgumentError("$.finding", "must be an object");
  }
  const json* model = r.Child("model");
  if (!model) return InvalidArgumentError("$.model", "required key is missing");
  MLASIM_RETURN_IF_ERROR(ParseModel(*model, &s.model));
  if (const json* p = r.Child("parallelism"))
    MLASIM_RETURN_IF_ERROR(ParseParallel(*p, &s.parallel));
  if (const json* mtp = r.Child("mtp")) MLASIM_RETURN_IF_ERROR(ParseMtp(*mtp, &s));
  const json* batch = r.Child("batch");
  if (!batch) return InvalidArgumentError("$.batch", "required key is missing");
  MLASIM_RETURN_IF_ERROR(ParseBatch(*batch, s.mtp_k, &s.requests));
  if (const json* g = r.Child("graph")) MLASIM_RETURN_IF_ERROR(ParseGraph(*g, &s.graph));
  MLASIM_RETURN_IF_ERROR(ParseTargetAndKernel(r, &s));
  if (const json* cap = r.Child("capture")) MLASIM_RETURN_IF_ERROR(ParseCapture(*cap, &s));
  if (const json* calls = r.Child("calls")) MLASIM_RETURN_IF_ERROR(ParseCalls(*calls, &s));
  if (const json* contracts = r.Child("contracts"))
    MLASIM_RETURN_IF_ERROR(ParseContracts(*contracts, &s));
  if (const json* sizing = r.Child("sizing")) MLASIM_RETURN_IF_ERROR(ParseSizing(*sizing, &s));
  const json* engine = r.Child("engine");
  if (!engine) return InvalidArgumentError("$.engine", "required key is missing (a preset name)");
  MLASIM_RETURN_IF_ERROR(ParseEngine(*engine, &s.engine));
  MLASIM_RETURN_IF_ERROR(r.Finish());
  MLASIM_RETURN_IF_ERROR(CheckCrossFields(s));
  return s;
}

StatusOr<Scenario> LoadScenarioFile(const std::string& path) {
  StatusOr<std::string> text = ReadTextFile(path, path);
  if (!text.ok()) return text.status();
  StatusOr<json> doc = ParseJsonStrict(*text, path);
  if (!doc.ok()) return doc.status();
  StatusOr<Scenario> s = ParseScenario(*doc);
  if (s.ok()) return s;
  return InScenarioFile(path, s.status());  // as the read and JSON errors name the file
}

Status InScenarioFile(const std::string& path, const Status& st) {
  if (st.ok() || path.empty()) return st;
  if (st.field().empty()) return Status(st.code(), path + ": $", st.message());
  if (st.field()[0] != '$') return st;
  return Status(st.code(), path + ": " + st.field(), st.message());
}

namespace {

// `batch`: contexts and rejections always; q_lens and topk_lengths only when stated.
json BatchJson(const Scenario& s) {
  json reqs_ctx = json::array(), reqs_prev = json::array(), reqs_rej = json::array();
  for (const RequestSpec& r : s.requests) {
    reqs_ctx.push_back(r.context);
    reqs_prev.push_back(r.rejected_prev);
    reqs_rej.push_back(r.rejected);
  }
  json out = {{"contexts", reqs_ctx}, {"rejected_prev", reqs_prev}, {"rejected", reqs_rej}};
  if (StatesQLens(s)) {
    json lens = json::array();
    for (const RequestSpec& r : s.requests) lens.push_back(QLen(s, r));
    out["q_lens"] = lens;
  }
  bool topk = false;
  for (const RequestSpec& r : s.requests) topk = topk || !r.topk_lengths.empty();
  if (topk) {
    json lens = json::array();
    for (const RequestSpec& r : s.requests) lens.push_back(r.topk_lengths);
    out["topk_lengths"] = lens;
  }
  return out;
}

// `engine`: the preset's name when no flag differs from it, else the preset and the flags.
json EngineJson(const EngineProfile& e) {
  std::string preset = e.name;
  const auto plus = preset.find('+');
  if (plus != std::string::npos) preset = preset.substr(0, plus);
  auto base = GetEngineProfile(preset, "engine");
  // A preset with no flag changed is written as its name, so that editing the name changes it.
  if (base.ok() && SameFlags(e, *base)) return preset;
  json out = {
      {"preset", preset},
      {"sparse_mtp_plan_tokens",
       e.sparse_mtp_plan_tokens == EngineProfile::SparsePlanTokens::kRunning ? "running_tokens"
                                                                             : "scheduled_tokens"},
      {"draft_rows", e.draft_rows == EngineProfile::DraftRows::kPadded ? "padded" : "scheduled"},
      {"plan_rows_guard", e.plan_rows_guard},
      {"dcp_slice_rebuild_inputs", e.dcp_slice_rebuild_inputs},
      {"incremental_update", e.incremental_update},
      {"update_uses_verify_width", e.update_uses_verify_width}};
  // Padding policy, q scale and the CUDA-graph flags of vLLM / SGLang profiles
  // (docs/engines.md): written where they differ from the preset's (round-1 scenarios write the
  // same bytes).
  const EngineProfile fallback;
  const EngineProfile& ref_flags = base.ok() ? *base : fallback;
  const bool all = !base.ok();
  if (all || e.o_padding != ref_flags.o_padding) out["o_padding"] = PaddingName(e.o_padding);
  if (all || e.lse_padding != ref_flags.lse_padding)
    out["lse_padding"] = PaddingName(e.lse_padding);
  if (all || e.q_fp8_scale != ref_flags.q_fp8_scale) out["q_fp8_scale"] = QScaleName(e.q_fp8_scale);
  if (e.non_uniform_q_plan != ref_flags.non_uniform_q_plan)
    out["non_uniform_q_plan"] = e.non_uniform_q_plan;
  if (all || e.plan_batch != ref_flags.plan_batch) out["plan_batch"] = PlanBatchName(e.plan_batch);
  if (all || e.pad_kv_len != ref_flags.pad_kv_len) out["pad_kv_len"] = e.pad_kv_len;
  if (all || e.num_splits_pad != ref_flags.num_splits_pad)
    out["num_splits_pad"] = NumSplitsPadName(e.num_splits_pad);
  if (all || e.metadata != ref_flags.metadata) out["metadata"] = MetadataName(e.metadata);
  if (all || e.flashmla_revision != ref_flags.flashmla_revision)
    out["flashmla_revision"] = e.flashmla_revision;
  if (all || e.attention_backend != ref_flags.attention_backend)
    out["attention_backend"] = e.attention_backend;
  return out;
}

json CallsJson(const std::vector<CallOverride>& calls) {
  json out = json::array();
  for (const CallOverride& c : calls) {
    json j = {{"call", c.call}};
    auto put = [&](const char* k, int64_t v) {
      if (v >= 0) j[k] = v;
    };
    put("launch_grid", c.launch_grid);
    put("q_rows", c.q_rows);
    put("o_rows", c.o_rows);
    put("kernel_heads", c.kernel_heads);
    put("kernel_q_cols", c.kernel_q_cols);
    put("planner_cu_count", c.planner_cu_count);
    put("planner_heads", c.planner_heads);
    if (!c.planner_dtype.empty()) j["planner_dtype"] = c.planner_dtype;
    if (!c.plan_from.empty()) j["plan_from"] = c.plan_from;
    out.push_back(j);
  }
  return out;
}

json SizingJson(const std::vector<SizingOverride>& sizing) {
  json out = json::array();
  for (const SizingOverride& z : sizing) {
    json j = {{"buffers", z.buffers}};
    if (z.batch >= 0) j["batch"] = z.batch;
    if (z.qlen >= 0) j["qlen"] = z.qlen;
    if (z.heads >= 0) j["heads"] = z.heads;
    if (z.cu_count >= 0) j["cu_count"] = z.cu_count;
    if (!z.dtype.empty()) j["dtype"] = z.dtype;
    if (z.is_sparse >= 0) j["is_sparse"] = z.is_sparse == 1;
    out.push_back(j);
  }
  return out;
}

json KvCacheJson(const KvCacheSpec& kv) {
  json values = json::array();
  for (const KvCacheSpec::IndexValue& v : kv.index_values)
    values.push_back({{"token", v.token}, {"position", v.position}, {"value", v.value}});
  return {{"page_size", kv.page_size}, {"num_rows", kv.num_rows}, {"index_values", values}};
}

// The fields every scenario writes (round 1).
json CoreJson(const Scenario& s) {
  json live = json::array();
  for (const ExtraAllocation& x : s.allocator.live_before_call)
    live.push_back(json{{"name", x.name}, {"bytes", x.bytes}});
  return {{"name", s.name},
          {"description", s.description},
          {"model",
           {{"name", s.model.name},
            {"heads", s.model.heads},
            {"kv_lora_rank", s.model.kv_lora_rank},
            {"rope_dim", s.model.rope_dim},
            {"kv_dtype", ref::DTypeName(s.model.kv_dtype)},
            {"model_dtype", ref::DTypeName(s.model.model_dtype)},
            {"sparse", s.model.sparse},
            {"topk", s.model.topk}}},
          {"parallelism",
           {{"tp", s.parallel.tp},
            {"dp", s.parallel.dp},
            {"dp_scheduled_tokens", s.parallel.dp_scheduled_tokens},
            {"dcp", s.parallel.dcp},
            {"dcp_interleave", s.parallel.dcp_interleave}}},
          {"mtp", {{"k", s.mtp_k}}},
          {"graph",
           {{"capture_sizes", s.graph.capture_sizes},
            {"max_num_seqs", s.graph.max_num_seqs},
            {"max_num_batched_tokens", s.graph.max_num_batched_tokens},
            {"eager", s.graph.eager},
            {"max_model_len", s.graph.max_model_len}}},
          {"target", ref::ArchName(s.target)},
          {"revision", ref::RevisionName(s.revision)},
          {"kernel", s.kernel},
          {"planner", s.serial_planner ? "serial" : "aiter-dispatch"},
          {"zero_kv_reads_index_row", s.zero_kv_reads_index_row},
          {"allocator",
           {{"model", s.allocator.model == AllocatorModel::kExact ? "exact" : "caching"},
            {"page_bytes", s.allocator.page_bytes},
            {"segment_bytes", s.allocator.segment_bytes},
            {"live_before_call", live}}}};
}

}  // namespace

json ScenarioToJson(const Scenario& s) {
  json out = CoreJson(s);
  out["batch"] = BatchJson(s);
  out["engine"] = EngineJson(s.engine);
  if (s.cu_count > 0) out["cu_count"] = s.cu_count;
  // Round-2 fields are written only when set, so round-1 scenarios write the same bytes.
  if (s.kv_granularity != 16 || s.max_split_per_batch != 16)
    out["planner"] = {{"dispatch", s.serial_planner ? "serial" : "aiter-dispatch"},
                      {"kv_granularity", s.kv_granularity},
                      {"max_split_per_batch", s.max_split_per_batch}};
  if (s.kv_cache.modelled) out["kv_cache"] = KvCacheJson(s.kv_cache);
  if (!s.capture_contexts.empty()) out["capture"] = {{"contexts", s.capture_contexts}};
  if (!s.contracts.empty()) {
    json contracts = json::array();
    for (const auto& c : s.contracts) contracts.push_back(c->doc);
    out["contracts"] = contracts;
  }
  if (!s.calls.empty()) out["calls"] = CallsJson(s.calls);
  if (!s.sizing.empty()) out["sizing"] = SizingJson(s.sizing);
  return out;
}

}  // namespace mlasim::sim
