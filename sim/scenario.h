// File: sim/scenario.h
//
// One engine step to replay: model, parallelism, MTP K, the batch, graph padding, the target, the
// kernel variant, the allocator model and the engine behaviour profile. The JSON schema is in
// docs/scenario.md; parsing (sim/scenario_json.cpp) is strict and names the JSON path of every
// bad field. Sources: atom-mtp-flow.md §1-§3, §8, §10.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ref/target.h"

namespace mlasim::sim {

struct ModelSpec {
  std::string name = "model";
  int32_t heads = 16;          // total q heads (all ranks)
  int32_t kv_lora_rank = 512;  // latent width (V columns)
  int32_t rope_dim = 64;       // rope columns; a q/KV row is kv_lora_rank + rope_dim values
  ref::DType kv_dtype = ref::DType::kBf16;     // KV cache dtype; q uses it too (ATOM#287)
  ref::DType model_dtype = ref::DType::kBf16;  // o dtype
  bool sparse = false;                         // DSA: per-token top-k indices
  int32_t topk = 2048;
};

struct ParallelSpec {
  int32_t tp = 1;
  int32_t dp = 1;
  // Scheduled tokens of every DP rank (this rank first); empty = all ranks like this one.
  std::vector<int32_t> dp_scheduled_tokens;
  int32_t dcp = 1;             // decode context parallel world size W
  int32_t dcp_interleave = 1;  // S: KV position p lives on rank (p / S) % W
};

// One decode request on this rank.
struct RequestSpec {
  int32_t context = 0;        // context_lens[i] before this step: KV tokens incl. this verify's Q
  int32_t rejected_prev = 0;  // drafts the previous verify rejected (L = context - rejected_prev)
  int32_t rejected = 0;       // drafts this verify rejects (0..K)
};

struct GraphSpec {
  std::vector<int32_t> capture_sizes = {1, 2, 4, 8, 16, 32, 48, 64, 128, 256, 512};
  int32_t max_num_seqs = 512;
  int32_t max_num_batched_tokens = 16384;
  bool eager = false;              // enforce_eager
  int32_t max_model_len = 163840;  // sizes kv_indices (max_num_seqs x max_model_len tokens)
};

enum class AllocatorModel : uint8_t {
  kExact,    // every buffer mapped alone, ending at its mapping's end, a guard page after it
  kCaching,  // PyTorch-like: 512-byte rounding, packed into 2 MiB segments in allocation order
};

struct ExtraAllocation {
  std::string name;
  int64_t bytes = 0;
};

struct AllocatorSpec {
  AllocatorModel model = AllocatorModel::kExact;
  int64_t page_bytes = 4096;                // 4 KiB or 64 KiB
  int64_t segment_bytes = 2 * 1024 * 1024;  // caching: segment granularity
  // Other live tensors allocated just before each kernel call's own tensors (caching model):
  // they decide where q and o land inside a segment.
  std::vector<ExtraAllocation> live_before_call;
};

// A user's kernel contract in place of a built-in one (`--contract FILE`, sim/contract.h).
struct Contract;

// Engine behaviour: explicit flags, bundled into named presets (sim/engine_profile.cpp).
struct EngineProfile {
  std::string name;
  // The engine's call table (sim/call_table.h, sim/engines/<table>.json): a profile is that
  // table plus the flags below, which its expressions read.
  std::string table = "atom";
  // Which token count the sparse per-token MTP plan (T2) covers.
  enum class SparsePlanTokens : uint8_t {
    kRunning,
    kScheduled
  } sparse_mtp_plan_tokens = SparsePlanTokens::kRunning;
  // Rows of draft steps 1..K-1: B (snapshot, eager) or the target's padded rung R (>= #2042).
  enum class DraftRows : uint8_t { kScheduled, kPadded } draft_rows = DraftRows::kPadded;
  // _forward_decode refuses a plan wider than its q (host ints: eager calls and capture only).
  bool plan_rows_guard = false;
  // DCP per-layer rebuild slices cu_seqlens_q / last-page lens to B_q + 1 / B_q (#2715).
  bool dcp_slice_rebuild_inputs = false;
  // Dense draft steps patch the target plan with decode_update (ATOM#287) unless H == 32 (#484).
  bool incremental_update = true;
  // max_seqlen_qo handed to decode_update: the verify width Q (#460) or the draft width 1 (#287).
  bool update_uses_verify_width = true;
  std::string summary;  // what the preset encodes and its source
};

struct Scenario {
  std::string name = "case";
  std::string description;
  ModelSpec model;
  ParallelSpec parallel;
  int32_t mtp_k = 0;
  std::vector<RequestSpec> requests;
  GraphSpec graph;
  ref::Arch target = ref::Arch::kGfx942;
  ref::Revision revision = ref::Revision::k2026_08;
  int32_t cu_count = 0;  // 0 = the target's
  // The decode kernel variant: the `variant` of a built-in decode contract (asm, opus, hk), or of
  // a contract in `contracts`.
  std::string kernel = "asm";
  // Contracts that replace the built-in one of their call kind (`--contract FILE`); a decode
  // contract here is the kernel whatever `kernel` says.
  std::vector<std::shared_ptr<const Contract>> contracts;
  // aiter's planner dispatch: the parallel planner whenever eligible (default), or the serial one
  // (AITER_MLA_META_USE_PARALLEL=0). They differ on zero-KV requests, i.e. on graph padding.
  bool serial_planner = false;
  // The wrong-hypothesis twin of the seed (seed-fault.md §3): zero-KV work items read one
  // KV-index entry at kv_start. Off for every real kernel variant; a what-if switch.
  bool zero_kv_reads_index_row = false;
  AllocatorSpec allocator;
  EngineProfile engine;
};

// Engine presets by name: "atom-2026-03", "atom-2026-08" (before the fix), "atom-2026-11" (after).
StatusOr<EngineProfile> GetEngineProfile(const std::string& name, const std::string& field);
std::vector<std::string> EngineProfileNames();

}  // namespace mlasim::sim
