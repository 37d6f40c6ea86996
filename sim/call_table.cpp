#include "sim/call_table.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "ref/flashmla/sched.h"
#include "sim/json_input.h"
#include "sim/violation.h"

namespace mlasim::sim {

// Generated from sim/engines/*.json by CMake (cmake/EmbedContracts.cmake).
struct EmbeddedTable {
  const char* file;
  const char* text;
};
extern const EmbeddedTable kEmbeddedTables[];
extern const int kEmbeddedTablesCount;

namespace {

// `name` (at `path`) as a finding's signature takes it (IsSignatureName): a step or call of
// [A-Za-z0-9_-], a buffer also with dots, 1..128 characters. A call named "a.b" made findings
// that `fuzz --resume` and `fuzz merge` refuse.
Status SignatureName(const std::string& path, const std::string& name, bool dots) {
  if (IsSignatureName(name, dots)) return OkStatus();
  return InvalidArgumentError(
      path, "\"" + name + "\" must be 1..128 of [A-Za-z0-9_" + (dots ? ".-" : "-") +
                "] (a finding's signature names it; fuzz --resume and merge refuse other "
                "characters)");
}

using nlohmann::json;

constexpr const char* kVarNames[kEngineVarCount] = {
    "B",       "R",           "Q",
    "K",       "T_s",         "T_r",
    "H",       "Hk",          "sparse",
    "dcp",     "dp",          "graph",
    "topk",    "max_num_seqs", "max_num_batched_tokens",
    "max_model_len", "kv_width", "plan_over_scheduled",
    "draft_rows_padded", "plan_rows_guard", "dcp_slice_rebuild_inputs",
    "incremental_update", "update_uses_verify_width", "plan_over_padded",
    "pad_kv_len", "num_splits_pad", "metadata_captured", "backend_flashmla",
    "backend_flashinfer"};

class TableParser {
 public:
  TableParser(CallTable* t, std::string file, const std::map<std::string, std::string>& overrides)
      : t_(t), file_(std::move(file)), overrides_(overrides) {
    for (int32_t v = 0; v < kEngineVarCount; ++v) scope_.Var(kVarNames[v], v);
  }

  Status Run(const json& doc) {
    ObjectReader r(doc, file_ + ": $");
    MLASIM_RETURN_IF_ERROR(r.Check());
    int64_t version = 0;
    MLASIM_RETURN_IF_ERROR(r.Int64("engine_table", &version, 1, 1, true));
    MLASIM_RETURN_IF_ERROR(r.String("name", &t_->name, true));
    MLASIM_RETURN_IF_ERROR(r.String("source", &t_->source, true));
    MLASIM_RETURN_IF_ERROR(Array(r, "profiles", [&](const json& j, const std::string& p) {
      return Profile(j, p);
    }));
    MLASIM_RETURN_IF_ERROR(Array(r, "variables", [&](const json& j, const std::string& p) {
      return Variable(j, p);
    }));
    for (const auto& override_entry : overrides_) {
      const std::string& name = override_entry.first;  // not a structured binding: clang 14 cannot capture one
      const bool known = std::any_of(t_->variables.begin(), t_->variables.end(),
                                     [&](const TableVariable& v) { return v.name == name; });
      if (!known)
        return InvalidArgumentError(file_ + ": variables",
                                    "no variable \"" + name + "\" to override");
    }
    MLASIM_RETURN_IF_ERROR(Array(r, "plan_buffers", [&](const json& j, const std::string& p) {
      return Buffers(j, p);
    }));
    MLASIM_RETURN_IF_ERROR(Array(r, "persistent", [&](const json& j, const std::string& p) {
      return Persistent(j, p);
    }));
    MLASIM_RETURN_IF_ERROR(Array(r, "steps", [&](const json& j, const std::string& p) {
      return Step(j, p);
    }));
    return r.Finish();
  }

 private:
  template <class F>
  Status Array(ObjectReader& r, const char* key, F each) {
    const json* a = r.Child(key);
    if (!a) return InvalidArgumentError(r.Path(key), "required key is missing");
    if (!a->is_array() || a->size() > 1024)
      return InvalidArgumentError(r.Path(key), "must be an array (at most 1024 entries)");
    for (size_t i = 0; i < a->size(); ++i)
      MLASIM_RETURN_IF_ERROR(each((*a)[i], r.Path(key) + "[" + std::to_string(i) + "]"));
    return OkStatus();
  }
  Status ExprAt(ObjectReader& r, const char* key, Expr* out, bool required = false) {
    const json* j = r.Child(key);
    if (!j) {
      if (required) return InvalidArgumentError(r.Path(key), "required key is missing");
      return OkStatus();
    }
    if (j->is_number_integer() && IsInt64(*j)) {
      *out = Expr::Constant(j->get<int64_t>());
      return OkStatus();
    }
    if (j->is_number_integer() || IsIntegerBeyond64Bits(*j))  // beyond int64
      return InvalidArgumentError(r.Path(key), IntegerRangeReason(*j, INT64_MIN, INT64_MAX));
    if (!j->is_string())
      return InvalidArgumentError(r.Path(key), "must be an expression (a string) or an integer");
    MLASIM_ASSIGN_OR_RETURN(*out, Expr::Compile(j->get<std::string>(), scope_, r.Path(key)));
    return OkStatus();
  }
  Status Name(ObjectReader& r, const char* key, const std::vector<std::string>& allowed,
              std::string* out) {
    MLASIM_RETURN_IF_ERROR(r.String(key, out, true));
    if (std::find(allowed.begin(), allowed.end(), *out) != allowed.end()) return OkStatus();
    std::string known;
    for (const std::string& a : allowed) known += (known.empty() ? "" : ", ") + a;
    return InvalidArgumentError(r.Path(key), "unknown \"" + *out + "\" (known: " + known + ")");
  }

  Status Profile(const json& j, const std::string& path) {
    ObjectReader r(j, path);
    MLASIM_RETURN_IF_ERROR(r.Check());
    EngineProfile e;
    e.table = t_->name;
    MLASIM_RETURN_IF_ERROR(r.String("name", &e.name, true));
    MLASIM_RETURN_IF_ERROR(r.String("summary", &e.summary, true));
    MLASIM_RETURN_IF_ERROR(r.String("padding_source", &e.padding_source));
    const json* flags = r.Child("flags");
    if (!flags) return InvalidArgumentError(r.Path("flags"), "required key is missing");
    MLASIM_RETURN_IF_ERROR(ParseEngineFlags(*flags, r.Path("flags"), &e));
    t_->profiles.push_back(std::move(e));
    return r.Finish();
  }

  Status Variable(const json& j, const std::string& path) {
    ObjectReader r(j, path);
    MLASIM_RETURN_IF_ERROR(r.Check());
    TableVariable v;
    MLASIM_RETURN_IF_ERROR(r.String("name", &v.name, true));
    MLASIM_RETURN_IF_ERROR(r.String("source", &v.source));
    const auto o = overrides_.find(v.name);
    if (o != overrides_.end()) {
      r.Child("value");
      MLASIM_ASSIGN_OR_RETURN(v.value, Expr::Compile(o->second, scope_, "override of " + v.name));
    } else {
      MLASIM_RETURN_IF_ERROR(ExprAt(r, "value", &v.value, true));
    }
    v.slot = t_->num_slots++;
    scope_.Var(v.name, v.slot);
    t_->variables.push_back(std::move(v));
    return r.Finish();
  }

  Status Buffers(const json& j, const std::string& path) {
    ObjectReader r(j, path);
    MLASIM_RETURN_IF_ERROR(r.Check());
    PlanBufferSet b;
    MLASIM_RETURN_IF_ERROR(r.String("prefix", &b.prefix, true));
    MLASIM_RETURN_IF_ERROR(SignatureName(r.Path("prefix"), b.prefix, true));
    MLASIM_RETURN_IF_ERROR(r.String("source", &b.source));
    if (r.Has("planner")) MLASIM_RETURN_IF_ERROR(Name(r, "planner", PlannerNames(), &b.planner));
    MLASIM_RETURN_IF_ERROR(ExprAt(r, "when", &b.when));
    MLASIM_RETURN_IF_ERROR(ExprAt(r, "sizing_batch", &b.sizing_batch, true));
    MLASIM_RETURN_IF_ERROR(ExprAt(r, "qlen", &b.qlen, true));
    MLASIM_RETURN_IF_ERROR(ExprAt(r, "topk", &b.topk, b.planner == "aiter"));
    t_->plan_buffers.push_back(std::move(b));
    return r.Finish();
  }

  Status Persistent(const json& j, const std::string& path) {
    ObjectReader r(j, path);
    MLASIM_RETURN_IF_ERROR(r.Check());
    PersistentSpec p;
    MLASIM_RETURN_IF_ERROR(r.String("name", &p.name, true));
    MLASIM_RETURN_IF_ERROR(SignatureName(r.Path("name"), p.name, true));
    MLASIM_RETURN_IF_ERROR(ExprAt(r, "when", &p.when));
    MLASIM_RETURN_IF_ERROR(ExprAt(r, "rows", &p.rows, true));
    t_->persistent.push_back(std::move(p));
    return r.Finish();
  }

  Status Step(const json& j, const std::string& path) {
    ObjectReader r(j, path);
    MLASIM_RETURN_IF_ERROR(r.Check());
    StepSpec s;
    MLASIM_RETURN_IF_ERROR(r.String("step", &s.step, true));
    MLASIM_RETURN_IF_ERROR(ExprAt(r, "when", &s.when));
    MLASIM_RETURN_IF_ERROR(r.String("for", &s.loop_var));
    ExprScope saved = scope_;
    if (!s.loop_var.empty()) {
      MLASIM_RETURN_IF_ERROR(ExprAt(r, "from", &s.from, true));
      MLASIM_RETURN_IF_ERROR(ExprAt(r, "to", &s.to, true));
      s.loop_slot = t_->num_slots++;
      scope_.Var(s.loop_var, s.loop_slot);
      if (s.step.find("{" + s.loop_var + "}") == std::string::npos)
        return InvalidArgumentError(r.Path("step"),
                                    "a repeated step's name must contain {" + s.loop_var + "}");
    }
    MLASIM_RETURN_IF_ERROR(SignatureName(r.Path("step"), StepName(s, 0), false));
    MLASIM_RETURN_IF_ERROR(Array(r, "calls", [&](const json& c, const std::string& p) {
      CallRow row;
      MLASIM_RETURN_IF_ERROR(Row(c, p, &row));
      s.calls.push_back(std::move(row));
      return OkStatus();
    }));
    scope_ = saved;
    t_->steps.push_back(std::move(s));
    return r.Finish();
  }

  // A plan build writes buffers sized by its own planner's host sizing.
  Status PlannerOfCapacity(ObjectReader& r, const CallRow& c) {
    for (const PlanBufferSet& b : t_->plan_buffers) {
      if (b.prefix != c.capacity) continue;
      if (b.planner == c.planner) return OkStatus();
      return InvalidArgumentError(r.Path("capacity"), "\"" + c.capacity + "\" is sized by the " +
                                                          b.planner + " planner, the row runs " +
                                                          c.planner);
    }
    return InvalidArgumentError(r.Path("capacity"),
                                "no plan_buffers set \"" + c.capacity + "\"");
  }

  Status Row(const json& j, const std::string& path, CallRow* c) {
    ObjectReader r(j, path);
    MLASIM_RETURN_IF_ERROR(r.Check());
    MLASIM_RETURN_IF_ERROR(r.String("row", &c->row, true));
    MLASIM_RETURN_IF_ERROR(r.String("call", &c->call, true));
    MLASIM_RETURN_IF_ERROR(SignatureName(r.Path("call"), c->call, false));
    MLASIM_RETURN_IF_ERROR(r.String("source", &c->source));
    std::string kind;
    MLASIM_RETURN_IF_ERROR(r.String("kind", &kind, true));
    MLASIM_ASSIGN_OR_RETURN(c->kind, ParseCallKind(kind, r.Path("kind")));
    MLASIM_RETURN_IF_ERROR(ExprAt(r, "when", &c->when));
    static const std::vector<std::string> kHandles = {"main", "sparse_mtp", "draft_sparse",
                                                      "last"};
    switch (c->kind) {
      case CallKind::kPlanBuild:
      case CallKind::kPlanUpdate: {
        MLASIM_RETURN_IF_ERROR(Name(r, "inputs", InputBuilders(), &c->inputs));
        MLASIM_RETURN_IF_ERROR(ExprAt(r, "tokens", &c->tokens));
        MLASIM_RETURN_IF_ERROR(ExprAt(r, "q_entries", &c->q_entries));
        MLASIM_RETURN_IF_ERROR(ExprAt(r, "real", &c->real, true));
        MLASIM_RETURN_IF_ERROR(ExprAt(r, "rejects", &c->rejects));
        MLASIM_RETURN_IF_ERROR(ExprAt(r, "reuse", &c->reuse));
        if (r.Has("reuse_plan"))
          MLASIM_RETURN_IF_ERROR(Name(r, "reuse_plan", kHandles, &c->reuse_plan));
        if (c->kind == CallKind::kPlanUpdate) {
          MLASIM_RETURN_IF_ERROR(Name(r, "plan", kHandles, &c->plan));
        } else {
          if (r.Has("planner"))
            MLASIM_RETURN_IF_ERROR(Name(r, "planner", PlannerNames(), &c->planner));
          MLASIM_RETURN_IF_ERROR(r.String("buffers", &c->buffers, true));
          MLASIM_RETURN_IF_ERROR(r.String("capacity", &c->capacity, true));
          MLASIM_RETURN_IF_ERROR(PlannerOfCapacity(r, *c));
        }
        if (const json* sets = r.Child("sets")) {
          if (!sets->is_array()) return InvalidArgumentError(r.Path("sets"), "must be an array");
          for (const json& h : *sets) {
            if (!h.is_string() ||
                std::find(kHandles.begin(), kHandles.end(), h.get<std::string>()) ==
                    kHandles.end())
              return InvalidArgumentError(r.Path("sets"), "entries must be plan handles: main, "
                                                          "sparse_mtp, draft_sparse, last");
            c->sets.push_back(h.get<std::string>());
          }
        }
        break;
      }
      case CallKind::kIndexFill:
        MLASIM_RETURN_IF_ERROR(r.String("kernel", &c->kernel, true));
        MLASIM_RETURN_IF_ERROR(r.String("indices", &c->indices, true));
        MLASIM_RETURN_IF_ERROR(Name(r, "indptr", NamedIndptrs(), &c->indptr));
        MLASIM_RETURN_IF_ERROR(ExprAt(r, "tokens", &c->tokens, true));
        MLASIM_RETURN_IF_ERROR(ExprAt(r, "graph", &c->graph, true));
        break;
      case CallKind::kDecode:
        MLASIM_RETURN_IF_ERROR(
            SignatureName(r.Path("call") + " (its reduce)", ReduceCallName(c->call), false));
        MLASIM_RETURN_IF_ERROR(Name(r, "plan", kHandles, &c->plan));
        MLASIM_RETURN_IF_ERROR(ExprAt(r, "q_rows", &c->q_rows, true));
        MLASIM_RETURN_IF_ERROR(ExprAt(r, "sparse", &c->sparse, true));
        if (!(c->sparse.is_constant() && c->sparse.constant_value() == 0)) t_->sparse_decode = true;
        MLASIM_RETURN_IF_ERROR(ExprAt(r, "graph", &c->graph, true));
        MLASIM_RETURN_IF_ERROR(ExprAt(r, "max_seqlen_q", &c->max_seqlen_q, true));
        MLASIM_RETURN_IF_ERROR(ExprAt(r, "guard", &c->guard));
        MLASIM_RETURN_IF_ERROR(ExprAt(r, "launch", &c->launch));
        MLASIM_RETURN_IF_ERROR(ExprAt(r, "num_splits_tail", &c->num_splits_tail));
        break;
      case CallKind::kReduce:
        return InvalidArgumentError(r.Path("kind"),
                                    "a reduce follows its decode row; it has no row of its own");
    }
    return r.Finish();
  }

  CallTable* t_;
  std::string file_;
  const std::map<std::string, std::string>& overrides_;
  ExprScope scope_;
};

// One of `names` (index = the enum's value) under `key`, when present.
template <class E>
Status Choice(ObjectReader& r, const char* key, std::initializer_list<const char*> names,
              E* out) {
  std::string v;
  MLASIM_RETURN_IF_ERROR(r.String(key, &v));
  if (!r.Has(key)) return OkStatus();
  std::string known;
  int i = 0;
  for (const char* n : names) {
    if (v == n) {
      *out = static_cast<E>(i);
      return OkStatus();
    }
    known += std::string(known.empty() ? "" : " or ") + "\"" + n + "\"";
    ++i;
  }
  return InvalidArgumentError(r.Path(key), "must be " + known);
}

// The flags of engines that plan around CUDA graphs (vLLM, SGLang; docs/engines.md).
Status ParseGraphFlags(ObjectReader& r, EngineProfile* e) {
  MLASIM_RETURN_IF_ERROR(Choice(r, "plan_batch", {"real", "padded"}, &e->plan_batch));
  MLASIM_RETURN_IF_ERROR(r.Int("pad_kv_len", &e->pad_kv_len, 0, kMaxPadKvLen));
  MLASIM_RETURN_IF_ERROR(
      Choice(r, "num_splits_pad", {"none", "zero", "last"}, &e->num_splits_pad));
  MLASIM_RETURN_IF_ERROR(Choice(r, "metadata", {"replanned", "captured"}, &e->metadata));
  MLASIM_RETURN_IF_ERROR(r.String("flashmla_revision", &e->flashmla_revision));
  if (r.Has("flashmla_revision") && !ref::flashmla::ParseRevision(e->flashmla_revision).ok())
    return InvalidArgumentError(r.Path("flashmla_revision"), "must be \"9241ae3\" or \"414a2f3\"");
  MLASIM_RETURN_IF_ERROR(r.String("attention_backend", &e->attention_backend));
  const auto& known = PlannerNames();
  if (std::find(known.begin(), known.end(), e->attention_backend) == known.end())
    return InvalidArgumentError(r.Path("attention_backend"),
                                "must be \"aiter\", \"flashmla\" or \"flashinfer\"");
  return OkStatus();
}

}  // namespace

const char* PlanBatchName(EngineProfile::PlanBatch b) {
  return b == EngineProfile::PlanBatch::kReal ? "real" : "padded";
}
const char* NumSplitsPadName(EngineProfile::NumSplitsPad p) {
  return p == EngineProfile::NumSplitsPad::kNone   ? "none"
         : p == EngineProfile::NumSplitsPad::kZero ? "zero"
                                                   : "last";
}
const char* MetadataName(EngineProfile::Metadata m) {
  return m == EngineProfile::Metadata::kCaptured ? "captured" : "replanned";
}

const std::vector<std::string>& PlannerNames() {
  static const std::vector<std::string> k = {"aiter", "flashmla", "flashinfer"};
  return k;
}

Status ParseEngineFlags(const json& j, const std::string& path, EngineProfile* e,
                        const std::vector<std::string>& extra_keys) {
  ObjectReader r(j, path);
  MLASIM_RETURN_IF_ERROR(r.Check());
  for (const std::string& k : extra_keys) r.Child(k);
  std::string tokens;
  MLASIM_RETURN_IF_ERROR(r.String("sparse_mtp_plan_tokens", &tokens));
  if (r.Has("sparse_mtp_plan_tokens")) {
    if (tokens == "running_tokens")
      e->sparse_mtp_plan_tokens = EngineProfile::SparsePlanTokens::kRunning;
    else if (tokens == "scheduled_tokens")
      e->sparse_mtp_plan_tokens = EngineProfile::SparsePlanTokens::kScheduled;
    else
      return InvalidArgumentError(r.Path("sparse_mtp_plan_tokens"),
                                  "must be \"running_tokens\" or \"scheduled_tokens\"");
  }
  std::string rows;
  MLASIM_RETURN_IF_ERROR(r.String("draft_rows", &rows));
  if (r.Has("draft_rows")) {
    if (rows == "scheduled")
      e->draft_rows = EngineProfile::DraftRows::kScheduled;
    else if (rows == "padded")
      e->draft_rows = EngineProfile::DraftRows::kPadded;
    else
      return InvalidArgumentError(r.Path("draft_rows"), "must be \"scheduled\" or \"padded\"");
  }
  MLASIM_RETURN_IF_ERROR(r.Bool("plan_rows_guard", &e->plan_rows_guard));
  MLASIM_RETURN_IF_ERROR(r.Bool("non_uniform_q_plan", &e->non_uniform_q_plan));
  MLASIM_RETURN_IF_ERROR(r.Bool("dcp_slice_rebuild_inputs", &e->dcp_slice_rebuild_inputs));
  MLASIM_RETURN_IF_ERROR(r.Bool("incremental_update", &e->incremental_update));
  MLASIM_RETURN_IF_ERROR(r.Bool("update_uses_verify_width", &e->update_uses_verify_width));
  for (auto [key, out] :
       {std::pair<const char*, EngineProfile::Padding*>{"o_padding", &e->o_padding},
        {"lse_padding", &e->lse_padding}}) {
    std::string v;
    MLASIM_RETURN_IF_ERROR(r.String(key, &v));
    if (!r.Has(key)) continue;
    if (v == "consumed")
      *out = EngineProfile::Padding::kConsumed;
    else if (v == "dropped")
      *out = EngineProfile::Padding::kDropped;
    else
      return InvalidArgumentError(r.Path(key), "must be \"consumed\" or \"dropped\"");
  }
  MLASIM_RETURN_IF_ERROR(ParseGraphFlags(r, e));
  std::string scale;
  MLASIM_RETURN_IF_ERROR(r.String("q_fp8_scale", &scale));
  if (r.Has("q_fp8_scale")) {
    bool known = false;
    for (auto q : {EngineProfile::QScale::kStatic, EngineProfile::QScale::kPerTensorPadded,
                   EngineProfile::QScale::kPerTensorReal})
      if (scale == QScaleName(q)) e->q_fp8_scale = q, known = true;
    if (!known)
      return InvalidArgumentError(
          r.Path("q_fp8_scale"),
          "must be \"static\", \"per_tensor_padded\" or \"per_tensor_real\"");
  }
  return r.Finish();
}

const char* PaddingName(EngineProfile::Padding p) {
  return p == EngineProfile::Padding::kDropped ? "dropped" : "consumed";
}

const char* QScaleName(EngineProfile::QScale q) {
  switch (q) {
    case EngineProfile::QScale::kStatic: return "static";
    case EngineProfile::QScale::kPerTensorPadded: return "per_tensor_padded";
    case EngineProfile::QScale::kPerTensorReal: return "per_tensor_real";
  }
  return "?";
}

const std::vector<EngineProfile>& BuiltinProfiles() {
  static const std::vector<EngineProfile> kAll = [] {
    std::vector<EngineProfile> out;
    for (int i = 0; i < kEmbeddedTablesCount; ++i) {
      std::string name = kEmbeddedTables[i].file;
      name = name.substr(0, name.size() - 5);
      auto t = BuiltinCallTable(name);
      MLASIM_ASSERT(t.ok(), t.status().ToString());
      for (const EngineProfile& e : (*t)->profiles) out.push_back(e);
    }
    return out;
  }();
  return kAll;
}

const char* EngineVarName(int32_t v) {
  return v >= 0 && v < kEngineVarCount ? kVarNames[v] : "?";
}

const std::vector<std::string>& InputBuilders() {
  static const std::vector<std::string> k = {
      "verify_padded", "verify_real_cprr", "per_token",    "dcp_rebuild",  "draft_sparse",
      "draft_fresh",   "draft_update",     "engine_batch", "capture_batch"};
  return k;
}

const std::vector<std::string>& NamedIndptrs() {
  static const std::vector<std::string> k = {"verify_kv_indptr", "sparse_kv_indptr",
                                             "draft_kv_indptr", "draft_sparse_indptr",
                                             "engine_kv_indptr"};
  return k;
}

std::string ReduceCallName(const std::string& decode) {
  return decode.substr(0, decode.find("_decode")) + "_reduce";
}

std::string StepName(const StepSpec& step, int64_t s) {
  if (step.loop_var.empty()) return step.step;
  std::string name = step.step;
  const std::string pattern = "{" + step.loop_var + "}";
  return name.replace(name.find(pattern), pattern.size(), std::to_string(s));
}

StatusOr<CallTable> ParseCallTable(const json& doc, const std::string& file,
                                   const std::map<std::string, std::string>& overrides) {
  CallTable t;
  t.file = file;
  t.doc = doc;
  TableParser p(&t, file, overrides);
  MLASIM_RETURN_IF_ERROR(p.Run(doc));
  return t;
}

bool ProfileHasSparseDecode(const EngineProfile& e) {
  static const std::map<std::string, bool> by_table = [] {
    std::map<std::string, bool> out;
    for (const EngineProfile& p : BuiltinProfiles()) {
      auto table = BuiltinCallTable(p.table);
      out[p.table] = table.ok() && (*table)->sparse_decode;
    }
    return out;
  }();
  const auto it = by_table.find(e.table);
  return it != by_table.end() && it->second;
}

StatusOr<std::shared_ptr<const CallTable>> BuiltinCallTable(
    const std::string& name, const std::map<std::string, std::string>& overrides) {
  static std::mutex mu;
  static std::map<std::pair<std::string, std::map<std::string, std::string>>,
                  std::shared_ptr<const CallTable>>
      cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[{name, overrides}];
  if (slot) return slot;
  for (int i = 0; i < kEmbeddedTablesCount; ++i) {
    if (std::string(kEmbeddedTables[i].file) != name + ".json") continue;
    const std::string file = std::string("builtin:") + kEmbeddedTables[i].file;
    auto doc = ParseJsonStrict(kEmbeddedTables[i].text, file);
    MLASIM_ASSERT(doc.ok(), doc.status().ToString());
    MLASIM_ASSIGN_OR_RETURN(CallTable t, ParseCallTable(*doc, file, overrides));
    slot = std::make_shared<const CallTable>(std::move(t));
    return slot;
  }
  cache.erase({name, overrides});
  std::string known;
  for (int i = 0; i < kEmbeddedTablesCount; ++i) {
    std::string f = kEmbeddedTables[i].file;
    known += (known.empty() ? "" : ", ") + f.substr(0, f.size() - 5);
  }
  return InvalidArgumentError("engine.table", "no built-in call table \"" + name +
                                                  "\" (known: " + known + ")");
}

}  // namespace mlasim::sim
