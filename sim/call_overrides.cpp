#include "sim/call_overrides.h"

#include <algorithm>

namespace mlasim::sim {
namespace {

// A form's name in the plural, as a key's list of calls it applies to reads.
const char* FormPlural(CallForm form) {
  switch (form) {
    case CallForm::kAiterPlanBuild: return "plan builds of aiter's planner";
    case CallForm::kDialectPlanBuild: return "plan builds of the flashmla / flashinfer planners";
    case CallForm::kPlanUpdate: return "plan updates";
    case CallForm::kIndexFill: return "index fills";
    case CallForm::kDecode: return "decode launches";
    case CallForm::kReduce: return "reduce launches";
  }
  return "?";
}

}  // namespace

std::string CallOverrideAppliesTo(const CallOverrideField& f) {
  std::string out;
  for (size_t i = 0; i < f.applies_to.size(); ++i)
    out += std::string(i == 0                         ? ""
                       : i + 1 == f.applies_to.size() ? " and "
                                                      : ", ") +
           FormPlural(f.applies_to[i]);
  return out;
}

namespace {

// `field` is `source` or one of its elements ("kv_indptr[3]").
bool Names(const std::string& field, const std::string& source) {
  return field == source || field.rfind(source + "[", 0) == 0;
}

const PlannerInputSource* SourceOf(const std::string& field) {
  for (const PlannerInputSource& s : PlannerInputSources())
    if (Names(field, s.planner_field)) return &s;
  return nullptr;
}

// A sizing entry's keys besides `buffers` (docs/scenario.md "sizing").
constexpr const char* kSizingKeys[] = {"batch", "qlen", "heads", "cu_count", "dtype", "is_sparse"};

bool SizingSets(const SizingOverride& z, const std::string& key) {
  if (key == "batch") return z.batch >= 0;
  if (key == "qlen") return z.qlen >= 0;
  if (key == "heads") return z.heads >= 0;
  if (key == "cu_count") return z.cu_count >= 0;
  if (key == "dtype") return !z.dtype.empty();
  if (key == "is_sparse") return z.is_sparse >= 0;
  return false;
}

}  // namespace

std::string CallFormName(CallForm form, const std::string& planner) {
  switch (form) {
    case CallForm::kAiterPlanBuild: return "a plan build";
    case CallForm::kDialectPlanBuild: return "a plan build of the " + planner + " planner";
    case CallForm::kPlanUpdate: return "a plan update";
    case CallForm::kIndexFill: return "an index fill";
    case CallForm::kDecode: return "a decode launch";
    case CallForm::kReduce: return "a reduce launch";
  }
  return "?";
}

const std::vector<CallOverrideField>& CallOverrideFields() {
  using F = CallForm;
  static const std::vector<CallOverrideField> kFields = {
      {"launch_grid",
       {F::kDecode},
       [](const CallOverride& o) { return o.launch_grid >= 0; },
       [](const CallOverride& from, CallOverride& to) { to.launch_grid = from.launch_grid; },
       "workgroups the engine launched (a captured grid) instead of the contract's grid"},
      {"q_rows",
       {F::kDecode},
       [](const CallOverride& o) { return o.q_rows >= 0; },
       [](const CallOverride& from, CallOverride& to) { to.q_rows = from.q_rows; },
       "q rows as allocated"},
      {"o_rows",
       {F::kDecode},
       [](const CallOverride& o) { return o.o_rows >= 0; },
       [](const CallOverride& from, CallOverride& to) { to.o_rows = from.o_rows; },
       "o rows as allocated (independently of q)"},
      {"kernel_heads",
       {F::kDecode},
       [](const CallOverride& o) { return o.kernel_heads > 0; },
       [](const CallOverride& from, CallOverride& to) { to.kernel_heads = from.kernel_heads; },
       "the kernel actually run strides q/o rows of this many heads"},
      {"kernel_q_cols",
       {F::kDecode},
       [](const CallOverride& o) { return o.kernel_q_cols > 0; },
       [](const CallOverride& from, CallOverride& to) { to.kernel_q_cols = from.kernel_q_cols; },
       "the kernel actually run strides q rows of this many columns"},
      {"planner_cu_count",
       {F::kAiterPlanBuild},
       [](const CallOverride& o) { return o.planner_cu_count > 0; },
       [](const CallOverride& from, CallOverride& to) {
         to.planner_cu_count = from.planner_cu_count;
       },
       "the CU count the planner is told, where the sizing was told otherwise"},
      {"planner_heads",
       {F::kAiterPlanBuild},
       [](const CallOverride& o) { return o.planner_heads > 0; },
       [](const CallOverride& from, CallOverride& to) { to.planner_heads = from.planner_heads; },
       "the heads the planner is told, where the sizing was told otherwise"},
      {"planner_dtype",
       {F::kAiterPlanBuild},
       [](const CallOverride& o) { return !o.planner_dtype.empty(); },
       [](const CallOverride& from, CallOverride& to) { to.planner_dtype = from.planner_dtype; },
       "the q and KV dtype the planner is told, where the sizing was told otherwise"},
      {"plan_from",
       {F::kDecode, F::kAiterPlanBuild},
       [](const CallOverride& o) { return !o.plan_from.empty(); },
       [](const CallOverride& from, CallOverride& to) { to.plan_from = from.plan_from; },
       "\"capture\" (the plan built at graph capture) or \"<step>.<call>\" (an earlier plan of "
       "the step): a plan build so marked is not run, a decode consumes that plan"},
  };
  return kFields;
}

Status CheckOverrideApplies(const CallOverride& o, size_t index, CallForm form,
                            const std::string& planner) {
  for (const CallOverrideField& f : CallOverrideFields()) {
    if (!f.is_set(o)) continue;
    if (std::find(f.applies_to.begin(), f.applies_to.end(), form) != f.applies_to.end()) continue;
    return InvalidArgumentError(CallOverridePath(index, f.key),
                                "does not apply to " + o.call + " (" + CallFormName(form, planner) +
                                    "); it applies to " + CallOverrideAppliesTo(f));
  }
  return OkStatus();
}

void MergeCallOverride(const CallOverride& from, CallOverride* into) {
  for (const CallOverrideField& f : CallOverrideFields())
    if (f.is_set(from)) f.copy(from, *into);
}

bool SetsAnySizing(const SizingOverride& z) {
  return std::any_of(std::begin(kSizingKeys), std::end(kSizingKeys),
                     [&](const char* key) { return SizingSets(z, key); });
}

std::string SizingKeys() {
  std::string keys;
  for (const char* key : kSizingKeys) keys += (keys.empty() ? "" : ", ") + std::string(key);
  return keys;
}

bool SetsAnyOverride(const CallOverride& o) {
  const auto& fields = CallOverrideFields();
  return std::any_of(fields.begin(), fields.end(),
                     [&](const CallOverrideField& f) { return f.is_set(o); });
}

std::string CallOverridePath(size_t index, const std::string& key) {
  return "$.calls[" + std::to_string(index) + "]." + key;
}

const std::vector<PlannerInputSource>& PlannerInputSources() {
  static const std::vector<PlannerInputSource> kSources = {
      {"heads_per_head_k", "$.model.heads", "heads", "planner_heads"},
      {"cu_count", "", "cu_count", "planner_cu_count"},
      {"q_dtype", "", "dtype", "planner_dtype"},
      {"kv_dtype", "", "dtype", "planner_dtype"},
      {"topk", "$.model.topk", "is_sparse", ""},
      {"qlen", "$.mtp.k", "qlen", ""},  // Q = K + 1 (mlasim's qlen limit)
      {"uni_seqlen_qo", "$.batch.q_lens", "qlen", ""},
      {"max_seqlen_qo", "$.batch.q_lens", "qlen", ""},
      {"qo_indptr", "$.batch.q_lens", "", ""},
      {"kv_indptr", "$.batch.contexts", "", ""},
      {"batch_size", "", "batch", ""},
  };
  return kSources;
}

std::string PlannerRefusalPath(const std::string& field, const CallOverride* o, size_t index) {
  const PlannerInputSource* s = SourceOf(field);
  if (s == nullptr) return "$";
  if (o != nullptr && *s->call_key != '\0')
    for (const CallOverrideField& f : CallOverrideFields())
      if (f.key == std::string(s->call_key) && f.is_set(*o))
        return CallOverridePath(index, s->call_key);
  return *s->scenario_path != '\0' ? s->scenario_path : "$";
}

std::string SizingRefusalPath(const std::string& field, const SizingOverride* z, size_t index) {
  const PlannerInputSource* s = SourceOf(field);
  if (s == nullptr) return "$";
  if (z != nullptr && SizingSets(*z, s->sizing_key))
    return "$.sizing[" + std::to_string(index) + "]." + s->sizing_key;
  return *s->scenario_path != '\0' ? s->scenario_path : "$";
}

}  // namespace mlasim::sim
