#include "sim/mutants.h"

#include <algorithm>
#include <vector>

#include "sim/call_overrides.h"
#include "sim/call_table.h"
#include "sim/index_values.h"

namespace mlasim::sim {
namespace {

constexpr const char* kNames[] = {
    "none",
    "engine-sparse-plan-over-running-tokens",
    "engine-draft-steps-at-scheduled-rows",
    "kernel-assumes-576-column-rows",
    "sizing-for-scheduled-batch",
    "sizing-partial-map-one-per-tile",
    "engine-stale-plan-after-lengths-grew",
    "kernel-zero-kv-reads-index-row",
    "planner-reduce-map-off-by-one-tile",
    "planner-drops-tail-rule",
    "kernel-zero-kv-page-count-underflow",
    "contract-read-past-q-tile",
    "contract-drops-output-write",
    "contract-let-kv-end-too-far",
    "contract-gather-before-start",
    "contract-loop-walks-one-more-work",
    "contract-grid-one-more-workgroup",
    "contract-reduce-if-any-tile",
    "contract-kv-loop-past-bound",
    "contract-zero-kv-skips-consumed-padding",
    "contract-invalid-index-fault",
    "contract-invalid-index-clamp-to-zero",
    "contract-invalid-index-wrap",
    "contract-invalid-index-minus-one-masked",
    "contract-partial-write-when-off-by-one",
    "contract-unit-rows-for-head-row-bounds",
    "contract-extends-wrong-base",
    "contract-empty-rows-pos-inf-consumed-lse-padding",
    "engine-launch-grid-captured",
    "engine-decode-plan-from-capture",
    "sizing-main-plan-for-one-request",
    "engine-per-token-plan-ignores-q-lens",
};
static_assert(std::size(kNames) == static_cast<size_t>(SimMutant::kCount));

// JSON paths of the decode program's statements (sim/contracts/aiter-decode-asm.json; hk and
// opus extend it): the work-item loop's body.
const std::string kWorkBody = "/program/0/body/0/body";

// The setting of the invalid-index mutants: hostile values in the index buffer of a kernel that
// masks them (a correct kernel: invalid_index = masked), so the mutation is what breaks it.
MutantSetting HostileIndices() {
  MutantSetting m;
  m.kernel = "asm";
  m.hostile_indices = {{0, 0, -1}, {0, 1, 2147480000}, {0, 2, 2147483647}};
  m.contract_edits = {{CallKind::kDecode, "/semantics/invalid_index", "masked"}};
  return m;
}

// Contract-feature mutants break the asm program (the one hk and opus extend).
MutantSetting AsmKernel() {
  MutantSetting m;
  m.kernel = "asm";
  return m;
}

// The spec of `id` in `v` (indexed by SimMutant), its id set.
SimMutantSpec& At(std::vector<SimMutantSpec>& v, SimMutant id) {
  SimMutantSpec& x = v[static_cast<size_t>(id)];
  x.id = id;
  return x;
}

// The simulator mutants: call-table variables, planner mutants and contract constants.
void AddSimulatorMutants(std::vector<SimMutantSpec>& v) {
  auto at = [&](SimMutant id) -> SimMutantSpec& { return At(v, id); };
  at(SimMutant::kNone);
  at(SimMutant::kFoundingFault).table_variables = {{"sparse_plan_tokens", "T_r"}};
  at(SimMutant::kDraftRowsScheduled).table_variables = {{"draft_rows", "B"}};
  // B x Q = T_s only when every request has Q tokens: a ragged batch (batch.q_lens) kills it.
  at(SimMutant::kPerTokenPlanIgnoresQLens).table_variables = {{"sparse_plan_tokens", "B * Q"}};
  at(SimMutant::kKernelAssumes576Rows).table_variables = {{"kernel_q_cols", "576"}};
  at(SimMutant::kSizingScheduledBatch).table_variables = {{"sizing_batch", "B"}};
  at(SimMutant::kSizingPartialMapPerTile).table_variables = {{"sizing_batch", "B"},
                                                             {"partial_map_per_tile", "1"}};
  at(SimMutant::kStalePlanAfterGrowth).table_variables = {{"stale_sparse_draft_plan", "1"}};
  at(SimMutant::kZeroKvReadsIndexRow).contract_constants = {{"zero_kv_reads_index_row", 1}};
  at(SimMutant::kReduceMapOffByOne).planner = ref::PlannerMutant::kPartialMapOffByOne;
  at(SimMutant::kNoTailRule).planner = ref::PlannerMutant::kNoTailRule;
  at(SimMutant::kZeroKvPageUnderflow).contract_constants = {{"page_count_underflows", 1}};
}

// The contract mutants that edit asm's program: each a contract feature broken as data.
void AddContractProgramMutants(std::vector<SimMutantSpec>& v) {
  auto at = [&](SimMutant id) -> SimMutantSpec& { return At(v, id); };
  const auto decode = CallKind::kDecode;
  auto edit = [&](SimMutant id, std::vector<ContractEdit> e) {
    at(id).contract_edits = std::move(e);
    at(id).setting = AsmKernel();
  };
  edit(SimMutant::kContractReadPastTile, {{decode, kWorkBody + "/7/rows/1", "qo_end + 1"}});
  edit(SimMutant::kContractDropsOutputWrite, {{decode, kWorkBody + "/8", nullptr}});
  edit(SimMutant::kContractLetKvEndTooFar,
       {{decode, kWorkBody + "/4/value", "work_info[w].kv_end + 64"}});
  edit(SimMutant::kContractGatherBeforeStart,
       {{decode, kWorkBody + "/12/positions/0", "kv_start * page_size - 1"}});
  edit(SimMutant::kContractLoopOneMoreWork,
       {{decode, "/program/0/body/0/to", "work_indptr[c + 1] + 1"}});
  edit(SimMutant::kContractGridOneMore, {{decode, "/launch/grid", "work_indptr_rows"}});
  edit(SimMutant::kContractReduceIfAnyTile,
       {{CallKind::kReduce, "/program/1/body/2/if", "splits >= 0"}});
  edit(SimMutant::kContractKvLoopUnbounded, {{decode, kWorkBody + "/14/bound", "0"}});
  edit(SimMutant::kContractWhenSkipsPartial0,
       {{decode, kWorkBody + "/9/when",
         "partial_qo_loc > 0 && (kv_len > 0 || zero_kv_writes_output)"}});
  // The q read's bounds counted in head rows (a kernel addressing one head at a time) under
  // `unit` rows: `head_rows` would make them right.
  edit(SimMutant::kContractUnitRowsForHeadRows,
       {{decode, kWorkBody + "/7/rows",
         nlohmann::json::array({"qo_start * heads", "qo_end * heads"})},
        {decode, kWorkBody + "/7/unit", "rows"}});
  // `extends`: a user's contract for an asm build that only names itself starts from hk instead
  // of asm, so it inherits hk's zero_kv (reads q only) and empty_rows (unwritten): on an engine
  // that consumes padding rows the zero-KV padding rows stay garbage. With `extends: asm` the
  // same document is asm's behaviour and the step is clean.
}

// The contract mutants that edit a contract's semantics or its extends, each in the world
// (engine flags, planner, hostile indices) where the edit matters.
void AddContractSemanticsMutants(std::vector<SimMutantSpec>& v) {
  auto at = [&](SimMutant id) -> SimMutantSpec& { return At(v, id); };
  const auto decode = CallKind::kDecode;
  auto edit = [&](SimMutant id, std::vector<ContractEdit> e) {
    at(id).contract_edits = std::move(e);
    at(id).setting = AsmKernel();
  };
  at(SimMutant::kContractExtendsWrongBase).contract_edits = {{decode, "/extends", "hk", true}};
  at(SimMutant::kContractExtendsWrongBase).setting.serial_planner = true;
  at(SimMutant::kContractExtendsWrongBase).setting.engine_flags = {{"o_padding", "consumed"}};
  at(SimMutant::kContractExtendsWrongBase).setting.user_decode_contract = {
      {"extends", "asm"},
      {"name", "user-asm-build"},
      {"source", "a user's contract: aiter's asm decode as built here (mutant world)"}};
  edit(SimMutant::kContractZeroKvSkips, {{decode, "/semantics/zero_kv", "skips"}});
  // An engine that consumes padding rows, with the serial planner (every zero-KV padding
  // request gets a work item): asm writes every padding row, a kernel that skips them does not.
  at(SimMutant::kContractZeroKvSkips).setting.serial_planner = true;
  at(SimMutant::kContractZeroKvSkips).setting.engine_flags = {{"o_padding", "consumed"}};
  // An engine that consumes the padding rows' lse, with the serial planner (every zero-KV padding
  // request gets a work item, which asm runs: its rows see no key): asm writes lse = -inf there,
  // a kernel of FlashMLA's empty_rows writes +inf.
  edit(SimMutant::kContractEmptyRowsPosInf,
       {{decode, "/semantics/empty_rows", "zero_and_pos_inf_lse"}});
  at(SimMutant::kContractEmptyRowsPosInf).setting.serial_planner = true;
  at(SimMutant::kContractEmptyRowsPosInf).setting.engine_flags = {{"lse_padding", "consumed"}};
  for (auto [id, use] :
       {std::pair<SimMutant, const char*>{SimMutant::kContractInvalidIndexFault, "fault"},
        {SimMutant::kContractInvalidIndexClamp, "clamp_to_zero"},
        {SimMutant::kContractInvalidIndexWrap, "wrap"},
        {SimMutant::kContractInvalidIndexMinusOne, "minus_one_masked"}}) {
    at(id).setting = HostileIndices();
    at(id).contract_edits = {{decode, "/semantics/invalid_index", use}};
  }
}

// The scenario mutants: per-call and sizing overrides stated as data.
void AddScenarioMutants(std::vector<SimMutantSpec>& v) {
  auto at = [&](SimMutant id) -> SimMutantSpec& { return At(v, id); };
  CallOverride grid;
  grid.call = "verify.{decode}";
  grid.launch_grid = 4096;
  at(SimMutant::kCallLaunchGridCaptured).calls = {grid};
  CallOverride capture;
  capture.call = "verify.{decode}";
  capture.plan_from = "capture";
  at(SimMutant::kCallPlanFromCapture).calls = {capture};
  SizingOverride one;
  one.buffers = "main.";
  one.batch = 1;
  at(SimMutant::kSizingForOneRequest).sizing = {one};
}

std::vector<SimMutantSpec> Build() {
  std::vector<SimMutantSpec> v(static_cast<size_t>(SimMutant::kCount));
  AddSimulatorMutants(v);
  AddContractProgramMutants(v);
  AddContractSemanticsMutants(v);
  AddScenarioMutants(v);
  return v;
}

Status ApplyEdits(const std::vector<ContractEdit>& edits, Scenario& s) {
  for (CallKind call : {CallKind::kDecode, CallKind::kReduce}) {
    std::vector<const ContractEdit*> mine;
    for (const ContractEdit& e : edits)
      if (e.call == call) mine.push_back(&e);
    if (mine.empty()) continue;
    MLASIM_ASSIGN_OR_RETURN(
        std::shared_ptr<const Contract> base,
        ContractFor(s, call, call == CallKind::kDecode ? s.kernel : "mla_reduce_v1", "mutant"));
    nlohmann::json doc = base->doc;
    for (const ContractEdit* e : mine) {
      const nlohmann::json::json_pointer p(e->pointer);
      const bool adds = !doc.contains(p) && !e->value.is_null() &&
                        doc.contains(p.parent_pointer()) &&
                        doc.at(p.parent_pointer()).is_object();  // a new member (RFC 6902 add)
      if (!doc.contains(p) && !adds)
        return InvalidArgumentError("mutant", base->file + " has no " + e->pointer);
      if (e->value.is_null())
        doc.at(p.parent_pointer())
            .erase(doc.at(p.parent_pointer()).is_array()
                       ? doc.at(p.parent_pointer()).begin() + std::stoi(p.back())
                       : doc.at(p.parent_pointer()).find(p.back()));
      else
        doc[p] = e->value;
    }
    doc.erase("extends");
    MLASIM_ASSIGN_OR_RETURN(Contract c, ParseContract(doc, "mutant:" + base->file));
    // The edited contract replaces the built-in one of its kind (as `--contract` does).
    std::vector<std::shared_ptr<const Contract>> kept;
    for (const auto& x : s.contracts)
      if (x->call != call) kept.push_back(x);
    kept.push_back(std::make_shared<const Contract>(std::move(c)));
    s.contracts = std::move(kept);
  }
  return OkStatus();
}

// The world's user decode contract, with the as-written edits of `edits`, replacing the
// scenario's decode contract (as `--contract` does).
Status ApplyUserContract(const MutantSetting& m, const std::vector<ContractEdit>& edits,
                         Scenario& s) {
  if (m.user_decode_contract.is_null()) return OkStatus();
  nlohmann::json doc = m.user_decode_contract;
  for (const ContractEdit& e : edits)
    if (e.as_written) doc[nlohmann::json::json_pointer(e.pointer)] = e.value;
  MLASIM_ASSIGN_OR_RETURN(Contract c, ParseContract(doc, "mutant:user-contract.json"));
  std::vector<std::shared_ptr<const Contract>> kept;
  for (const auto& x : s.contracts)
    if (x->call != CallKind::kDecode) kept.push_back(x);
  kept.push_back(std::make_shared<const Contract>(std::move(c)));
  s.contracts = std::move(kept);
  return OkStatus();
}

Status ApplySetting(const MutantSetting& m, Scenario& s) {
  if (!m.kernel.empty() && s.contracts.empty()) s.kernel = m.kernel;
  if (m.serial_planner) s.serial_planner = true;
  if (!m.engine_flags.empty()) {
    MLASIM_RETURN_IF_ERROR(ParseEngineFlags(m.engine_flags, "mutant.engine", &s.engine));
    if (s.engine.name.find('+') == std::string::npos) s.engine.name += "+overrides";
  }
  if (!m.hostile_indices.empty()) {
    s.kv_cache.modelled = true;
    for (const KvCacheSpec::IndexValue& x : m.hostile_indices) s.kv_cache.index_values.push_back(x);
    // A step whose token 0 has fewer slots than the world's values: the ones past its region
    // would be refused by `mlasim replay` of the counterexample (sim/index_values.h).
    DropUnplacedIndexValues(s);
  }
  return OkStatus();
}

}  // namespace

const char* SimMutantName(SimMutant m) {
  const auto i = static_cast<size_t>(m);
  return i < std::size(kNames) ? kNames[i] : "?";
}

SimMutant SimMutantByName(const std::string& name) {
  for (size_t i = 1; i < std::size(kNames); ++i)
    if (name == kNames[i]) return static_cast<SimMutant>(i);
  return SimMutant::kNone;
}

const SimMutantSpec& GetSimMutantSpec(SimMutant m) {
  static const std::vector<SimMutantSpec> kSpecs = Build();
  return kSpecs.at(static_cast<size_t>(m));
}

StatusOr<Scenario> MutantScenario(const Scenario& s, SimMutant m, bool mutated) {
  const SimMutantSpec& spec = GetSimMutantSpec(m);
  Scenario out = s;
  MLASIM_RETURN_IF_ERROR(ApplySetting(spec.setting, out));
  std::vector<ContractEdit> edits = spec.setting.contract_edits;
  if (mutated) {
    edits.insert(edits.end(), spec.contract_edits.begin(), spec.contract_edits.end());
    // One entry per call and per buffer set (the engine reads the first of a call's entries):
    // the mutant's keys go into the scenario's own entry, replacing its values of those keys.
    for (CallOverride c : spec.calls) {
      const auto at = c.call.find("{decode}");
      if (at != std::string::npos)
        c.call.replace(at, 8, out.model.sparse ? "sparse_decode" : "dense_decode");
      auto same = std::find_if(out.calls.begin(), out.calls.end(),
                               [&](const CallOverride& o) { return o.call == c.call; });
      if (same == out.calls.end())
        out.calls.push_back(c);
      else
        MergeCallOverride(c, &*same);
    }
    for (const SizingOverride& z : spec.sizing) {
      auto same = std::find_if(out.sizing.begin(), out.sizing.end(),
                               [&](const SizingOverride& o) { return o.buffers == z.buffers; });
      if (same == out.sizing.end()) {
        out.sizing.push_back(z);
        continue;
      }
      if (z.batch >= 0) same->batch = z.batch;
      if (z.qlen >= 0) same->qlen = z.qlen;
      if (z.heads >= 0) same->heads = z.heads;
      if (z.cu_count >= 0) same->cu_count = z.cu_count;
      if (!z.dtype.empty()) same->dtype = z.dtype;
      if (z.is_sparse >= 0) same->is_sparse = z.is_sparse;
    }
  }
  MLASIM_RETURN_IF_ERROR(ApplyUserContract(spec.setting, edits, out));
  std::vector<ContractEdit> parsed;
  for (const ContractEdit& e : edits)
    if (!e.as_written) parsed.push_back(e);
  MLASIM_RETURN_IF_ERROR(ApplyEdits(parsed, out));
  return out;
}

}  // namespace mlasim::sim
