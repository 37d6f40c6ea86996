// File: sim/call_check.h
//
// One kernel call checked on its own: the call's access contract (sim/contract.h) run by the
// simulator's executor (sim/executor.h) over plan buffers and tensor extents an engine actually
// passes, instead of over a simulated step. This is the entry point of `mlasim check CASE_DIR`
// (tools/io/case_contracts.h, captured buffers and shapes) and of `mlasim.check_call` in Python
// (python/src/bindings.cpp, live buffers and shapes): the generalisation of ATOM #2715's host
// assert (plan rows <= q rows) to every buffer a contract names (docs/contracts.md).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ref/status.h"
#include "sim/contract.h"
#include "sim/executor.h"

namespace mlasim::sim {

// A tensor as the kernel views it: `rows` rows of `heads` x `cols` elements of `elem_bytes`
// bytes. For q / o / logits / attn_lse of a folded plan the rows are the folded view's
// (tokens x fold_ratio rows of heads / fold_ratio heads, aiter-mla-metadata.md §10.3).
struct CallTensor {
  std::string role;  // a CallRoles(contract->call) name: "q", "o", "logits", "kv_indices", ...
  int64_t rows = 0;
  int32_t heads = 1;
  int32_t cols = 1;
  int32_t elem_bytes = 4;
};

// Everything one call receives. Plan buffers are int32 as get_mla_metadata_v1 writes them
// (work_info rows of 8, reduce_final_map rows of 2); an empty vector is a buffer not passed.
struct CallCheckInput {
  std::string call = "call";  // the call's name in findings ("mla_decode_fwd")
  std::shared_ptr<const Contract> contract;
  std::vector<int32_t> work_indptr, work_info, reduce_indptr, reduce_final_map, reduce_partial_map;
  std::vector<int32_t> qo_indptr, kv_indptr, kv_last_page_lens;  // what `load` may read
  std::vector<CallTensor> tensors;
  int32_t fold_ratio = 1;     // the plan's head-fold ratio R (1 when unfolded)
  int32_t max_seqlen_q = 1;   // tokens per request (partial buffers hold P x this rows)
  int32_t page_size = 1;      // KV page size, tokens
  int32_t num_clusters = -1;  // the planner's num_clusters; -1: work_indptr.size() - 1
  int32_t launch_grid = -1;   // workgroups launched; -1: the contract's launch.grid
  // The values of the `kv_indices` tensor, when the caller has them (a case's captured page
  // table): with a `kv_cache` tensor among `tensors` (rows = KV tokens: pages x page_size), the
  // KV rows the contract's gathers read through them are checked too, and an index outside the
  // cache does what the contract's semantics.invalid_index says (`fault`: a read of kv_cache
  // outside it, class G). Empty: not given (the KV rows are not checked).
  std::vector<int32_t> kv_indices_values;
  // A value of kv_indices_values the caller marks "no entry" (aiter's sparse index matrix: -1):
  // such elements hold nothing the gathers read, so they make no finding. nullopt: none.
  std::optional<int32_t> kv_indices_masked;
};

// Limits on one call's inputs (elements): above them CheckCall refuses rather than allocates.
inline constexpr int64_t kMaxCallBufferElements = int64_t{1} << 26;

// Runs `in.contract`'s program over `in` (sim/executor.cpp: one kernel call, nothing allocated
// before it) and returns its accesses outside a tensor (ViolationKind::kOutOfBounds: rows past
// the end or before the start), one Violation per (tensor, read/write, past/before), in the
// executor's order, with the responsible work items (decode) or tiles (reduce), and a loop of
// more trips than loop_trips / call_trips (ViolationKind::kUnboundedLoop, class J, e.g. a
// work_indptr entry of 2^31 - 1: the executor runs none of its trips, so it is the only finding
// they make; a contract bound's hang is not reported, its bound may read an extent the call was
// not given). Reads of data
// no call wrote are not findings here (a single call cannot know what the engine wrote).
// Errors: InvalidArgument for a null contract or a plan call ("contract"), a tensor role the
// call kind does not pass or given twice ("tensors.ROLE"), work_info / reduce_final_map sizes
// that are not whole rows, non-positive rows/heads/cols/fold/page size, buffers above
// kMaxCallBufferElements (field: the buffer's name), kv_indices values without a kv_indices
// tensor or of another count than its rows ("kv_indices").
StatusOr<std::vector<Violation>> CheckCall(const CallCheckInput& in);

// One sentence for a CheckCall finding: "CALL (CONTRACT) reads q rows 61..63 of 61: 3 rows past
// its end (3 work items: 61, 62, 63)"; at most `max_items` work items (reduce: tiles) listed. A
// loop that would not finish: "CALL (CONTRACT) does not finish: " and the violation's detail.
std::string CallViolationText(const std::string& call, const Contract& contract, const Violation& v,
                              size_t max_items = 8);

// The call kind of the engine call named `call`: ParseCallKind(kind) when `kind` is given, else
// from the name: one containing "metadata" is aiter's planner (a plan update when it also
// contains "update": decode_update_mla_metadata_v1; else a plan build: get_mla_metadata_v1),
// then one containing "reduce" is a reduce, one containing "decode" a decode (mla_decode_fwd,
// mla_decode_stage1_asm_fwd, mla_reduce_v1). Errors: InvalidArgument (`field`) naming the call
// when none decides.
StatusOr<CallKind> CallKindOf(const std::string& call, const std::string& kind,
                              const std::string& field);

// Whether `contract` names a contract file rather than a built-in: it holds a '/' or ends in
// ".json" (ResolveCallContract's rule; a case resolves such a relative name in its directory).
bool NamesContractFile(const std::string& contract);

// The KV cache as a decode contract's gathers read it: rows are KV tokens, every dimension of
// `shape` but the last (pages x page size), cols the last; one element of `itemsize` bytes.
// Errors: InvalidArgument(field) for a rank below 2, a last dimension below 1, or more rows than
// kMaxCallBufferElements. (Used by `mlasim check` and Python's check_call(check_kv=True).)
StatusOr<CallTensor> KvCacheTensor(const std::vector<int64_t>& shape, int32_t itemsize,
                                   const std::string& field);

// The contract a `kind` call is checked with: `contract` empty gives the default built-in
// (decode: "asm", reduce: "mla_reduce_v1"); a name with a '/' or ending in ".json" is a
// contract file (LoadContractFile), which must be written for `kind`; any other name is a
// built-in variant or contract name of that kind (BuiltinContract). Errors: InvalidArgument
// (`field`) naming the unknown variant (and the known ones), the file's error, or the kind
// mismatch.
StatusOr<std::shared_ptr<const Contract>> ResolveCallContract(CallKind kind,
                                                              const std::string& contract,
                                                              const std::string& field);

// A tensor's extent in the kernel's view from its shape (elements per dimension, torch order)
// and element size: rows = shape[0] (x fold_ratio for q and o, whose heads fold into rows,
// aiter-mla-metadata.md §10.3), heads = shape[1] (/ fold_ratio for q and o) for rank >= 3,
// cols = the product of the remaining dimensions; a 1-d tensor is rows of one element; a 0-d
// tensor one row. Index arrays (kv_indices, an index fill's indices) are flat whatever their
// shape: rows = every element (aiter's sparse decode passes a [tokens, topk] matrix as
// `view(-1)`, and the contracts address its elements). Errors: InvalidArgument (`field`) when
// q / o are not of rank 3 ([tokens, heads, D]) or their heads are not a multiple of the fold
// ratio, a dimension is negative, or a dimension past the first is 0 (index arrays excepted).
StatusOr<CallTensor> CallTensorFromShape(const std::string& role, const std::vector<int64_t>& shape,
                                         int32_t itemsize, int32_t fold_ratio,
                                         const std::string& field);

}  // namespace mlasim::sim
