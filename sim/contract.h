// File: sim/contract.h
//
// Kernel access contracts as data (docs/contracts.md). A contract describes one kernel of one call
// kind: its launch grid, the program of loops and accesses every workgroup runs (which rows of
// which buffer it reads and writes, as expressions over the plan's fields and the launch's
// parameters, sim/expr.h), and the semantics the numerics and the GPU runner need (what a zero-KV
// work item does, whether masked keys are read, what an invalid index does, what a row with no
// keys holds). The built-in contracts are JSON files in sim/contracts/ compiled into the binary;
// `--contract FILE` puts a user's contract in place of a built-in one. One description, three
// readers: the simulator's executor (sim/executor.cpp), the GPU runner (kernels/, through
// DecodeSemantics) and a kernel under test.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ref/status.h"
#include "sim/expr.h"
#include "sim/scenario.h"

namespace mlasim::sim {

// The call kinds of an engine step (sim/trace.h uses the same enum).
enum class CallKind : uint8_t {
  kPlanBuild,   // get_mla_metadata_v1 into a plan's buffers
  kPlanUpdate,  // decode_update_mla_metadata_v1 on a plan's buffers, in place
  kIndexFill,   // writes index elements (indexer top-k gather, kv_indices generation)
  kDecode,      // persistent MLA decode (stage 1)
  kReduce,      // mla_reduce_v1 (stage 2)
};
const char* CallKindName(CallKind k);
StatusOr<CallKind> ParseCallKind(const std::string& s, const std::string& field);

// What a decode work item whose KV range is empty does (aiter-mla-metadata.md §11.5).
enum class ZeroKv : uint8_t {
  kReadsQWritesOutput,  // reads its q rows and writes o (or partial rows) anyway
  kReadsQOnly,          // reads q, writes nothing (its epilogue never runs)
  kSkips,               // returns before touching q or o
};
// Keys a row may not see (causal mask, the unused tail of a last page, invalid sparse slots).
enum class MaskedKeys : uint8_t {
  kNeverRead,     // never loaded
  kReadThenMask,  // loaded, then masked: a NaN there reaches the output through 0 x NaN
};
// A page id or sparse index outside the cache (-1, past the cache, INT_MAX).
enum class InvalidIndex : uint8_t {
  kFault,        // dereferenced as is: a read outside the KV cache
  kClampToZero,  // read slot 0 instead (a wrong but mapped row)
  kWrap,         // read slot (index mod cache rows)
  kMasked,       // recognised and skipped
  kMinusOneMasked,  // -1 recognised and skipped; any other index read as is (FlashMLA's sparse
                    // decode: only -1 marks an invalid top-k slot)
};
// Output of a row that sees no key at all.
enum class EmptyRows : uint8_t {
  kZeroAndNegInfLse,  // o = 0, lse = -inf
  kNan,               // 0 / 0
  kUnwritten,         // left as it was
  kZeroAndPosInfLse,  // o = 0, lse = +inf (FlashMLA: a row whose softmax sum is 0 stores +inf;
                      // its split pieces store lse -inf, which its combine turns into +inf)
};

struct DecodeSemantics {
  ZeroKv zero_kv = ZeroKv::kReadsQWritesOutput;
  MaskedKeys masked_keys = MaskedKeys::kNeverRead;
  InvalidIndex invalid_index = InvalidIndex::kFault;
  EmptyRows empty_rows = EmptyRows::kZeroAndNegInfLse;
  // Where each field comes from ("aiter-mla-metadata.md §11.5: ..."), keyed by field name.
  std::map<std::string, std::string> sources;
};

const char* ZeroKvName(ZeroKv z);
const char* MaskedKeysName(MaskedKeys m);
const char* InvalidIndexName(InvalidIndex i);
const char* EmptyRowsName(EmptyRows e);

// How an access's begin/end count: rows of the tensor as the call passes it (the default),
// head rows (rows x heads; partial buffers addressed per head), elements, or bytes.
enum class AccessUnit : uint8_t { kRows, kHeadRows, kElements, kBytes };

// Which loop a finding is attributed to: the work items (decode) or tiles (reduce) it lists.
enum class LoopAttribution : uint8_t { kNone, kWorkgroup, kWorkItem, kTile };

// A run of lets that load fields of one row with the same index variable
// (`let qo_start = work_info[w].qo_start`, `let qo_end = work_info[w].qo_end`, ...): the
// executor runs it as one row load. Found when the program is compiled; the lets stay in the
// program for every other reader.
struct LetRow {
  int32_t buffer = -1, index_slot = -1, width = 1;      // Expr::RowLoad of every let of the run
  std::vector<std::pair<int32_t, int32_t>> slot_field;  // (let slot, field), in program order
  // A row of 8 one-byte cells (work_info): the run's fields as a mask over the row's cells read
  // as one word (0xff in each byte the run loads); 0 for any other width.
  uint64_t cell_mask = 0;
};

// A loop over `v` whose body walks one range of an indptr buffer (a CSR walk): the decode's
// `loop w from work_indptr[c] to work_indptr[c + 1]` inside `loop c`, the reduce's `let first =
// reduce_indptr[t]`, `let splits = reduce_indptr[t + 1] - first`, `if splits >= 2` inside `loop
// t`. Found when the program is compiled: the loop's body is lets (without `when`) that load
// `buffer[v + offset]`, or that minus an earlier such let, then one statement without `when`: a
// loop or an `if` whose bounds or condition depend only on those lets, those loads and
// constants, so that it does nothing when
//     gate = coef[0] * buffer[e0] + coef[1] * buffer[e1] + constant <= 0,
// e_i = (v + offset[i]) * width + field. The executor skips an iteration whose elements are
// loadable (in the buffer and written) and whose gate is <= 0: the walk would have loaded those
// elements, without a finding, and nothing else. Any other iteration runs the body as written.
// Empty `loads`: not a CSR walk.
struct CsrWalk {
  int32_t buffer = -1, width = 1, field = 0;
  int32_t loads = 0;  // elements per iteration (1 or 2): offset[0 .. loads)
  int64_t offset[2] = {0, 0};
  int64_t coef[2] = {0, 0}, constant = 0;
};

struct FlatBody;  // sim/flat.h

// One statement of a contract's program.
struct Statement {
  enum class Kind : uint8_t { kRead, kWrite, kGather, kLoop, kLet, kIf };
  Kind kind = Kind::kRead;
  std::string path;    // JSON path, for reports and errors ("$.program[0].body[1]")
  std::string source;  // where this access is documented
  // kRead / kWrite / kGather: the tensor role ("q", "o", "logits", "kv_cache", ...) and its
  // index in CallRoles(call) (`role`; also `index_role`, `hang_role` for the names below).
  std::string buffer;
  int32_t role = -1, index_role = -1, hang_role = -1;
  AccessUnit unit = AccessUnit::kRows;
  Expr begin, end;  // rows (read/write), token positions (gather), loop range [begin, end)
  Expr when;        // empty = always
  // kGather: token positions [begin, end) of the page list `index`; element p / page_size of
  // `index` holds the page, row page * page_size + p % page_size of `buffer` is read.
  std::string index;
  Expr page_size;
  // kLoop / kLet: the variable's slot. kLoop: attribution, and the trip-count bound beyond which
  // the loop is a hang (class J), named `hang_buffer` / `hang_row` in the finding.
  int32_t slot = -1;
  std::string var;
  LoopAttribution attribute = LoopAttribution::kNone;
  Expr bound;
  std::string bound_what;  // "KV blocks"
  std::string exceeded;    // the sentence of the finding ("the page count underflowed")
  std::string hang_buffer;
  Expr hang_row;
  Expr value;      // kLet
  LetRow let_row;  // kLet: the run of row loads this let starts (empty slot_field: none)
  CsrWalk csr;     // kLoop: the CSR walk its body is (loads 0: none)
  std::vector<Statement> body;
  // kLoop: `body` compiled into flat records (sim/flat.h); null: the interpreter runs it.
  std::shared_ptr<const FlatBody> flat;
};

// Variables every program may read; the executor fills them per call (docs/contracts.md).
enum LaunchVar : int32_t {
  kVarGrid = 0,         // workgroups launched (the contract's launch.grid)
  kVarClusters,         // the plan's num_clusters
  kVarWorks,            // the plan's work items
  kVarHeads,            // heads of one row of the kernel's q view (after folding)
  kVarFold,             // head-fold ratio R of the plan
  kVarMaxSeqlenQ,       // max_seqlen_q of the call (partial buffers hold P x this rows)
  kVarPageSize,         // KV page size, tokens
  kVarQRows,            // rows of q / o / partial buffers / index buffers as the call passes them
  kVarORows,
  kVarPartialRows,
  kVarIndexRows,
  kVarKvCacheRows,      // rows (tokens) of the KV cache, 0 when the scenario does not model it
  kVarTokens,           // index fills: the tokens the call runs over
  kVarCapturedGrid,     // the grid an engine captured for this call (scenario), else clusters
  kVarWorkIndptrRows,   // elements of each plan buffer as allocated (work_info: rows of 8)
  kVarWorkInfoRows,
  kVarReduceIndptrRows,
  kVarReduceFinalMapRows,
  kVarReducePartialMapRows,
  kVarBatch,            // decode: requests of the call's plan request (kv_indptr entries - 1)
  kLaunchVarCount,
};
const char* LaunchVarName(int32_t v);

// Int32 buffers a program may load from (expr.h), per slot.
enum LoadSlot : int32_t {
  kLoadWorkIndptr = 0,
  kLoadWorkInfo,
  kLoadReduceIndptr,
  kLoadReduceFinalMap,
  kLoadReducePartialMap,
  kLoadQoIndptr,
  kLoadKvIndptr,
  kLoadKvLastPageLens,
  kLoadIndptr,     // index fills: the per-token region indptr
  kLoadKvIndices,  // page ids / sparse slots, where the scenario models their values
  kLoadSlotCount,
};

struct Contract {
  std::string name;     // "aiter-asm-decode"
  std::string variant;  // what scenarios select: "asm"
  CallKind call = CallKind::kDecode;
  std::string source;
  std::string file;  // where it was loaded from ("builtin:asm.json" or a path)
  DecodeSemantics semantics;
  Expr grid;
  std::string grid_source;
  std::map<std::string, int64_t> constants;
  std::vector<Statement> program;
  int32_t num_slots = kLaunchVarCount;  // variable slots: launch vars, then loop/let variables
  // Compiled loop bodies (sim/flat.h): a slot that always holds 1, and sub-expressions over
  // launch variables only, evaluated once per call into their slots before the program runs.
  int32_t one_slot = -1;
  std::vector<std::pair<int32_t, Expr>> hoisted;
  std::string model;                    // plan_build / plan_update: the reference model run
  nlohmann::json doc;                   // the contract after `extends` was resolved
};

// Whether any expression of `program` (nested bodies included: bounds, conditions, lets, rows)
// loads from buffer slot `slot` (LoadSlot): e.g. kLoadWorkInfo for a kernel that walks aiter's
// work_info, which FlashMLA's and FlashInfer's contracts (they plan by themselves) never do.
bool ProgramLoads(const std::vector<Statement>& program, int32_t slot);

// Parses a contract document. `extends: NAME` starts from the built-in contract NAME (a variant
// name or a contract name) and merges this document over it (objects merge key by key; any other
// value, the program included, replaces). Errors: InvalidArgument naming the JSON path (the
// file name as prefix) and the reason: unknown keys, wrong types, unknown names in expressions,
// accesses to buffers the call kind does not pass, loops nested deeper than 8.
StatusOr<Contract> ParseContract(const nlohmann::json& doc, const std::string& file);
// Reads and parses a contract file (64 MiB bound, strict JSON: sim/json_input.h). A file that
// cannot be read is an error naming `field`: what gave the path (a flag, or a case manifest's
// config.contract).
StatusOr<Contract> LoadContractFile(const std::string& path,
                                    const std::string& field = "--contract");

// The built-in contracts (sim/contracts/*.json).
const std::vector<std::shared_ptr<const Contract>>& BuiltinContracts();
// The built-in contract of `call` whose variant (or name) is `variant`. Errors: InvalidArgument
// (field) listing the known variants of that call kind.
StatusOr<std::shared_ptr<const Contract>> BuiltinContract(CallKind call, const std::string& variant,
                                                          const std::string& field);
// Variant names of a call kind ("asm, hk, opus").
std::vector<std::string> BuiltinVariants(CallKind call);

// The contract a call of `call` runs under in scenario `s`: a contract of that kind in
// s.contracts (a user's, `--contract`), else the built-in one whose variant is `variant`.
// Errors: as BuiltinContract, with field `field`.
StatusOr<std::shared_ptr<const Contract>> ContractFor(const Scenario& s, CallKind call,
                                                      const std::string& variant,
                                                      const std::string& field);

// The decode variant a scenario runs: its decode contract's (a user's, `--contract`) or `kernel`.
std::string DecodeVariant(const Scenario& s);

// `c` with some of its `constants` set to other values: the what-if switches of a contract and
// the data variants that mutants are (docs/contracts.md). Cached, thread-safe: the same
// (contract, values) gives the same object. Errors: InvalidArgument("contract") naming a
// constant the contract does not declare.
StatusOr<std::shared_ptr<const Contract>> WithConstants(
    const std::shared_ptr<const Contract>& c, const std::map<std::string, int64_t>& values);

// The tensor roles each call kind passes (what contracts may read and write), at most
// kMaxRoles per kind.
inline constexpr int32_t kMaxRoles = 16;
const std::vector<std::string>& CallRoles(CallKind call);

}  // namespace mlasim::sim
