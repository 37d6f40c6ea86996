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
  // Sparse models: the indexer's top-k count of each of the request's Q verify tokens; empty =
  // the engine's min(L - Q + j + 1, topk) (atom-mtp-flow.md §4).
  std::vector<int32_t> topk_lengths;
  // Query tokens of this request in the verify step, 0..Q (batch.q_lens): the engine's
  // qo_indptr then advances by it. -1 = Q, the uniform length every MTP verify has. (Last, so
  // that aggregate initialisers of the fields above keep their meaning.)
  int32_t q_len = -1;
};

// The KV cache and what the index buffers hold (docs/scenario.md "kv_cache"). Without it the
// simulator tracks which index elements a kernel reads but not the KV rows they point to.
struct KvCacheSpec {
  bool modelled = false;  // the scenario has a "kv_cache" object
  // Tokens per page (power of two). The engine's kv_indptr then counts pages and
  // kv_last_page_lens the tokens of each last page; ATOM runs MLA at page 1 (a larger page is a
  // what-if for dense models: draft steps then grow each request by one token per step).
  int32_t page_size = 1;
  int64_t num_rows = 0;   // token rows of the cache; 0 = what the batch needs
  // An index element (sparse: slot `position` of token `token`'s top-k region of the verify
  // step's index buffer; dense: page `position` of request `token`) set to `value` by the
  // index fill, whatever the engine would write: -1, past the cache, INT_MAX.
  struct IndexValue {
    int32_t token = 0;
    int32_t position = 0;
    int64_t value = 0;
  };
  std::vector<IndexValue> index_values;
};

// One call of the step as the scenario overrides it (docs/scenario.md "calls"): the engine's
// disagreements stated as data. Fields left at -1 / empty keep the engine's values.
struct CallOverride {
  std::string call;  // "<step>.<call>", e.g. "draft_step_0.sparse_decode"
  // Kernel launches: workgroups launched (a captured grid), q / o rows as allocated.
  int32_t launch_grid = -1;
  int64_t q_rows = -1, o_rows = -1;
  // The kernel actually run: heads of one q row as it strides them, and columns of a row.
  int32_t kernel_heads = -1, kernel_q_cols = -1;
  // Plan builds: the planner's inputs that differ from the sizing's (CU count, heads, dtypes).
  int32_t planner_cu_count = -1, planner_heads = -1;
  std::string planner_dtype;  // q and kv dtype handed to the planner ("" = the engine's)
  // Metadata built elsewhere: "capture" (the plan the engine built at graph capture, over the
  // capture batch) or "<step>.<call>" (an earlier call's plan). A plan build so marked is not
  // run (its buffers keep that plan); a kernel call so marked consumes that plan.
  std::string plan_from;
};

// Sizing of a plan-buffer set (get_mla_metadata_info_v1) that differs from the engine's.
struct SizingOverride {
  std::string buffers;  // allocation prefix: "main." or "sparse_mtp."
  int32_t batch = -1, qlen = -1, heads = -1, cu_count = -1;
  std::string dtype;  // q and kv dtype the sizing is told
  int32_t is_sparse = -1;
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
  // On a ragged verify batch (batch.q_lens differ), the main plan passes uni_seqlen_qo = -1 and
  // so takes aiter's non-uniform path (rows from qo_indptr). No ATOM profile does: ATOM passes
  // uni_seqlen_qo = Q (atom-mtp-flow.md §6); a what-if for an engine that would.
  bool non_uniform_q_plan = false;
  // DCP per-layer rebuild slices cu_seqlens_q / last-page lens to B_q + 1 / B_q (#2715).
  bool dcp_slice_rebuild_inputs = false;
  // Dense draft steps patch the target plan with decode_update (ATOM#287) unless H == 32 (#484).
  bool incremental_update = true;
  // max_seqlen_qo handed to decode_update: the verify width Q (#460) or the draft width 1 (#287).
  bool update_uses_verify_width = true;
  // What the engine does with the padding rows of each decode output (docs/numerics.md "Padding
  // policy"): consumed (the next layer reads them too: NaN or garbage there is a finding, class
  // I) or dropped (sliced away before anything reads them). Default consumed: a profile says
  // dropped only where the engine's code shows the slice (`padding_source`).
  enum class Padding : uint8_t { kConsumed, kDropped };
  Padding o_padding = Padding::kConsumed;
  Padding lse_padding = Padding::kConsumed;
  // How the engine scales q when it casts it to fp8 (kv dtype fp8, ATOM#287): a static scale
  // (padding cannot change it), or a per-tensor scale computed over every row of q, padding rows
  // included (their values then change the real rows' quantisation), or over the real rows only.
  enum class QScale : uint8_t { kStatic, kPerTensorPadded, kPerTensorReal };
  QScale q_fp8_scale = QScale::kStatic;
  // vLLM / SGLang under CUDA graphs (docs/engines.md): which batch the planner runs over (the B
  // real requests, or the graph's padded batch R), the KV length the padding requests carry
  // when they are planned, how the engine extends num_splits from the planned batch to the
  // launched one, whether the metadata a replay consumes is rebuilt or the one built at capture,
  // and the FlashMLA revision the engine links.
  enum class PlanBatch : uint8_t { kReal, kPadded } plan_batch = PlanBatch::kPadded;
  int32_t pad_kv_len = 0;  // tokens, 0..kMaxPadKvLen
  enum class NumSplitsPad : uint8_t { kNone, kZero, kLast } num_splits_pad = NumSplitsPad::kNone;
  enum class Metadata : uint8_t { kReplanned, kCaptured } metadata = Metadata::kReplanned;
  std::string flashmla_revision = "9241ae3";  // or "414a2f3" (ref/flashmla/sched.h)
  // The engine's MLA attention backend, which selects its planner rows: "aiter" (ATOM),
  // "flashmla" or "flashinfer" (PlannerNames()).
  std::string attention_backend = "aiter";
  std::string padding_source;  // where the padding policy and the q scale come from
  std::string summary;         // what the preset encodes and its source
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
  int32_t kv_granularity = 16;      // planner knobs the engine passes (§3.1)
  int32_t max_split_per_batch = 16;
  KvCacheSpec kv_cache;
  // The batch the engine captured its graphs with (plan_from "capture"): context lengths of the
  // R capture requests; empty = every request holds Q tokens.
  std::vector<int32_t> capture_contexts;
  std::vector<CallOverride> calls;
  std::vector<SizingOverride> sizing;
  // The wrong-hypothesis twin of the seed (seed-fault.md §3): zero-KV work items read one
  // KV-index entry at kv_start. Off for every real kernel variant; a what-if switch.
  bool zero_kv_reads_index_row = false;
  AllocatorSpec allocator;
  EngineProfile engine;
};

// Request i's verify q length (RequestSpec::q_len, -1 = Q = K + 1).
inline int32_t QLen(const Scenario& s, const RequestSpec& r) {
  return r.q_len < 0 ? s.mtp_k + 1 : r.q_len;
}
// True when the scenario states per-request q lengths (batch.q_lens), uniform or not.
inline bool StatesQLens(const Scenario& s) {
  for (const RequestSpec& r : s.requests)
    if (r.q_len >= 0) return true;
  return false;
}
// Scheduled tokens T_s: the sum of the q lengths (B x Q when uniform).
inline int32_t ScheduledTokens(const Scenario& s) {
  int32_t t = 0;
  for (const RequestSpec& r : s.requests) t += QLen(s, r);
  return t;
}

const char* PaddingName(EngineProfile::Padding p);  // "consumed" | "dropped"
const char* QScaleName(EngineProfile::QScale q);    // "static" | "per_tensor_padded" | ...
const char* PlanBatchName(EngineProfile::PlanBatch b);        // "real" | "padded"
const char* NumSplitsPadName(EngineProfile::NumSplitsPad p);  // "none" | "zero" | "last"
const char* MetadataName(EngineProfile::Metadata m);          // "replanned" | "captured"
inline constexpr int32_t kMaxPadKvLen = 1 << 20;  // pad_kv_len bound (tokens)

// Engine presets by name: "atom-2026-03", "atom-2026-08" (before the fix), "atom-2026-11" (after).
StatusOr<EngineProfile> GetEngineProfile(const std::string& name, const std::string& field);
std::vector<std::string> EngineProfileNames();

}  // namespace mlasim::sim
