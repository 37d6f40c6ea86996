// File: sim/call_table.h
//
// An engine's per-step call table as data (docs/engine-flow.md, docs/contracts.md "Call tables"):
// which plan builds, in-place updates, index fills and decode launches one engine step makes, in
// order, each row guarded by an expression over the step's shape and the engine profile's flags.
// The built-in tables are JSON files in sim/engines/ compiled into the binary; sim/engine.cpp
// interprets them. A profile is a table plus its flags (EngineProfile::table).
//
// Variables a table's expressions may use (EngineVar below): the step's shape (B, R, Q, K, T_s,
// T_r, H, Hk, ...), the scenario's sizes, the profile's flags, the table's own `variables` (in
// order; each may use the ones before), and the loop variable of a repeated step (`s`).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ref/status.h"
#include "sim/contract.h"
#include "sim/expr.h"

namespace mlasim::sim {

// Variables of the step and profile, filled by the engine before a table runs.
enum EngineVar : int32_t {
  kEvB = 0,                  // scheduled requests
  kEvR,                      // padded rung (R = B when eager)
  kEvQ,                      // K + 1
  kEvK,                      // MTP draft tokens
  kEvTs,                     // scheduled tokens B x Q
  kEvTr,                     // running tokens R x Q
  kEvH,                      // heads per rank
  kEvHk,                     // heads the kernel and plan see
  kEvSparse,                 // DSA model (0/1)
  kEvDcp,                    // decode context parallel world size
  kEvDp,                     // data parallel size
  kEvGraph,                  // a captured graph replays this step (0/1)
  kEvTopk,                   // sparse top-k
  kEvMaxNumSeqs,
  kEvMaxNumBatchedTokens,
  kEvMaxModelLen,
  kEvKvWidth,                // kv_lora_rank + rope_dim columns
  kEvPlanOverScheduled,      // profile: sparse_mtp_plan_tokens == scheduled_tokens
  kEvDraftRowsPadded,        // profile: draft_rows == padded
  kEvPlanRowsGuard,          // profile flags, 0/1
  kEvDcpSliceRebuildInputs,
  kEvIncrementalUpdate,
  kEvUpdateUsesVerifyWidth,
  kEvPlanOverPadded,         // profile: plan_batch == padded
  kEvPadKvLen,               // profile: pad_kv_len (tokens of each padding request)
  kEvNumSplitsPad,           // profile: num_splits_pad none 0, zero 1, last 2
  kEvMetadataCaptured,       // profile: metadata == captured
  kEvBackendFlashmla,        // profile: attention_backend == flashmla
  kEvBackendFlashinfer,      // profile: attention_backend == flashinfer
  kEngineVarCount,
};
const char* EngineVarName(int32_t v);

// One row of the table: one call of the step.
struct CallRow {
  std::string row;     // the call table's row label ("T1", "D0b", "Ms(a)")
  std::string call;    // call name ("main_plan", "sparse_decode")
  std::string source;  // where the engine makes this call
  CallKind kind = CallKind::kDecode;
  Expr when;           // empty: always
  // plan_build / plan_update: the named input builder (sim/engine.cpp), its token count, the
  // q entries it passes (dcp_rebuild), the requests that are real, the buffers it writes
  // (allocation prefix) and the capacity (sizing) they have; `sets`: plan handles that name its
  // result afterwards ("main", "sparse_mtp", ...; every plan call also sets "last").
  std::string inputs, buffers, capacity;
  Expr tokens, q_entries, real;
  std::vector<std::string> sets;
  // plan_build: the planner dialect it runs (PlannerNames(): "aiter", the default, as ATOM
  // calls get_mla_metadata_v1; "flashmla": get_mla_metadata / the decode scheduler of
  // ref/flashmla; "flashinfer": MLAPlan of ref/flashinfer). Its buffers (`capacity`) must be a
  // plan-buffer set of the same planner.
  std::string planner = "aiter";
  std::string plan;  // plan_update: the handle it patches; decode: the handle it consumes
  Expr rejects;      // plan_update: pass num_reject_tokens
  Expr reuse;        // plan_build: reuse the plan named `reuse_plan` instead of building
  std::string reuse_plan;
  // index_fill: the contract variant, the index buffer written and the named indptr.
  std::string kernel, indices, indptr;
  Expr graph;
  // decode (+ its reduce): q/o rows, sparse (per-token index lists), max_seqlen_q, and the
  // engine's host-side plan-rows guard, when it runs before this launch.
  Expr q_rows, sparse, max_seqlen_q, guard;
  // decode of a flashmla / flashinfer plan: the requests the kernel is launched over (the
  // graph's batch; empty: the plan's own), and how the engine extends num_splits from the
  // planned batch to the launched one (0: not at all, the kernel reads past the planned
  // entries; 1: zeros; 2: the last planned value).
  Expr launch, num_splits_tail;
};

struct StepSpec {
  std::string step;  // "verify", "draft_step_0", "draft_step_{s}"
  Expr when;
  std::string loop_var;  // repeated steps: name of the variable, [from, to)
  int32_t loop_slot = -1;
  Expr from, to;
  std::vector<CallRow> calls;
};

struct TableVariable {
  std::string name;
  std::string source;
  int32_t slot = -1;
  Expr value;
};

struct PlanBufferSet {
  std::string prefix;  // allocation-name prefix ("main.")
  std::string source;
  // The planner whose host sizing sizes the set: "aiter" (get_mla_metadata_info_v1; topk
  // required), "flashmla" (ref/flashmla/sizing.h: tile_scheduler_metadata [num_sm_parts, 8] and
  // num_splits [sizing_batch + 1]), "flashinfer" (ref/flashinfer MLAPlanWorkspaceSize: the int
  // and float workspaces).
  std::string planner = "aiter";
  Expr when, sizing_batch, qlen, topk;  // get_mla_metadata_info_v1 inputs
};

struct PersistentSpec {
  std::string name;
  Expr when, rows;  // int32 elements
};

struct CallTable {
  std::string name, source, file;
  std::vector<EngineProfile> profiles;  // the presets of this engine: the table plus flags
  std::vector<TableVariable> variables;
  std::vector<PlanBufferSet> plan_buffers;
  std::vector<PersistentSpec> persistent;
  std::vector<StepSpec> steps;
  int32_t num_slots = kEngineVarCount;
  nlohmann::json doc;
  // Whether some decode row can run a sparse decode (per-token index lists): its `sparse` is not
  // the constant 0. A table without one (vLLM's, SGLang's) models dense MLA only, and a sparse
  // model is refused there (sim/engine.cpp) instead of running its dense decode.
  bool sparse_decode = false;
};

// The reduce launch after decode `decode` ("sparse_decode" -> "sparse_reduce").
std::string ReduceCallName(const std::string& decode);

// The name of `step` at loop value `s` ("draft_step_{s}" -> "draft_step_2"; a step that does not
// repeat keeps its name).
std::string StepName(const StepSpec& step, int64_t s);

// Parses a call table. `overrides`: table variables whose value expression is replaced (the
// data variants mutants and what-ifs are, sim/mutants.h). Errors: InvalidArgument naming the
// file and JSON path (unknown keys and names, a kind without its fields, an unknown input
// builder, indptr or plan handle, an override of a variable the table does not have, a step,
// call (or its reduce), persistent buffer or plan-buffer prefix name a finding's signature
// cannot hold: sim::IsSignatureName, with the loop variable of a repeated step as 0).
StatusOr<CallTable> ParseCallTable(const nlohmann::json& doc, const std::string& file,
                                   const std::map<std::string, std::string>& overrides = {});

// The built-in table `name` ("atom"), with `overrides` applied; cached, thread-safe.
StatusOr<std::shared_ptr<const CallTable>> BuiltinCallTable(
    const std::string& name, const std::map<std::string, std::string>& overrides = {});

// Reads the flags of an engine profile (a preset's `flags`, or the overrides of a scenario's
// "engine" object: the keys sparse_mtp_plan_tokens, draft_rows, plan_rows_guard,
// dcp_slice_rebuild_inputs, incremental_update, update_uses_verify_width, o_padding,
// lse_padding, q_fp8_scale, plan_batch, pad_kv_len, num_splits_pad, metadata,
// flashmla_revision, attention_backend), each optional.
// `extra_keys` are other keys the object may hold (skipped here). Errors name `path`.
Status ParseEngineFlags(const nlohmann::json& j, const std::string& path, EngineProfile* e,
                        const std::vector<std::string>& extra_keys = {});

// Every preset of every built-in call table, in table order.
const std::vector<EngineProfile>& BuiltinProfiles();

// Whether the profile's built-in call table has a sparse decode (CallTable::sparse_decode): a
// sparse model runs only under such a profile (the step refuses it elsewhere; the generator and
// `triage` keep to it). The built-in tables' answers are read once; false for an unknown table.
bool ProfileHasSparseDecode(const EngineProfile& e);

// The plan-input builders, indptrs and plan handles a table may name (sim/engine.cpp).
const std::vector<std::string>& InputBuilders();
const std::vector<std::string>& PlannerNames();  // "aiter", "flashmla", "flashinfer"
const std::vector<std::string>& NamedIndptrs();

}  // namespace mlasim::sim
