// File: ref/target.h
//
// Target profiles and aiter's per-revision decision tables, kept as data. Every rule that the
// planner, the sizing helper or decode_update consults about heads, dtypes and architectures
// lives here, in one table per decision, so a revision is a row set rather than scattered ifs.
//
// Sources: aiter-mla-metadata.md §2 (sizing overrides), §4.1 (clusters, pack, supported
// shapes), §4.2 (native vs folded heads), §9.3 (decode_update's own native list), §16 (the
// 2026-03 vs 2026-08 differences).
#pragma once

#include <climits>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ref/enum_names.h"
#include "ref/status.h"

namespace mlasim::ref {

// Element types as the planner sees them. Only "is fp8" and "is bf16" change decisions; kFp8 is
// the target's native fp8 (e4m3fnuz on gfx942, e4m3fn on gfx950, aiter-mla-metadata.md §15).
enum class DType : uint8_t { kBf16, kFp16, kFp8, kFp32 };

// The GPU architecture whose aiter rules apply. sm90 (H200) is our own NVIDIA target: aiter has no
// sm90 planner, so its profile borrows gfx942's rule rows (documented in docs/planner.md).
enum class Arch : uint8_t { kGfx942, kGfx950, kSm90 };

// aiter revisions modelled: `A-mar` (b3037388f4, 2026-03-23) and HEAD (e4048607, 2026-08-22).
enum class Revision : uint8_t { k2026_03, k2026_08 };

// The name tables (ref/enum_names.h). fp8 is also accepted under the names of the two formats
// aiter's callers pass (e4m3fn on gfx950, e4m3fnuz on gfx942).
inline constexpr EnumName<DType> kDTypeNames[] = {
    {DType::kBf16, "bf16"}, {DType::kFp16, "fp16"},      {DType::kFp8, "fp8"},
    {DType::kFp32, "fp32"}, {DType::kFp8, "fp8_e4m3fn"}, {DType::kFp8, "fp8_e4m3fnuz"}};
inline constexpr EnumName<Arch> kArchNames[] = {
    {Arch::kGfx942, "gfx942"}, {Arch::kGfx950, "gfx950"}, {Arch::kSm90, "sm90"}};
inline constexpr EnumName<Revision> kRevisionNames[] = {{Revision::k2026_03, "2026-03"},
                                                        {Revision::k2026_08, "2026-08"}};

const char* DTypeName(DType d);
const char* ArchName(Arch a);
const char* RevisionName(Revision r);
// Errors: InvalidArgument(field), "unknown dtype|target|aiter revision '...' (expected ...)".
StatusOr<DType> ParseDType(std::string_view text, std::string_view field);
StatusOr<Arch> ParseArch(std::string_view text, std::string_view field);
StatusOr<Revision> ParseRevision(std::string_view text, std::string_view field);

// One GPU: compute units, LDS per CU (bytes) and wave size. Devices are inputs, never queries.
struct TargetProfile {
  Arch arch;
  const char* name;    // ArchName(arch): "gfx942", "gfx950", "sm90"
  const char* device;  // a product the numbers come from
  int32_t cu_count;    // multiProcessorCount
  int32_t lds_bytes;   // maxSharedMemoryPerMultiProcessor (gates the planner dispatch, §4.6)
  int32_t warp_size;   // 64 on gfx9, 32 on NVIDIA
  Arch rules_arch;     // whose aiter rule rows apply (sm90 -> gfx942)
};

const TargetProfile& GetTargetProfile(Arch arch);
const std::vector<TargetProfile>& AllTargetProfiles();

// The facts one decision needs: heads as the rule sees them (before or after folding, as each
// table says), q length, dtypes, architecture.
struct ShapeKey {
  Arch arch;  // rules_arch of the target
  int32_t heads;
  int32_t seqlen_qo;  // max_seqlen_qo (planner) or effective q length (sizing)
  DType q_dtype;
  DType kv_dtype;
};

// Requirement on the (q, kv) dtype pair in a rule row.
enum class DTypeReq : uint8_t {
  kAny,
  kBothFp8,     // q and kv are fp8
  kNeitherFp8,  // q and kv are not fp8 (bf16 or fp16): aiter's `!q_is_fp8 && !kv_is_fp8`
  kBothBf16,    // q and kv are exactly bf16 (the Python sizing helper compares to bf16)
};

// One row of a decision table; a key matches when every constrained field matches.
struct ShapeRule {
  uint8_t arch_mask;  // bit (1 << Arch); 0 = any architecture
  int32_t heads;      // 0 = any head count
  int32_t seqlen_qo;  // 0 = any q length
  DTypeReq dtypes;
  const char* why;                 // the source this row models
  int32_t heads_min = 0;           // inclusive
  int32_t heads_max = INT32_MAX;   // inclusive
  int32_t packed_min = 0;          // heads * seqlen_qo, inclusive
  int32_t packed_max = INT32_MAX;  // heads * seqlen_qo, inclusive
};

bool RuleMatches(const ShapeRule& rule, const ShapeKey& key);
bool AnyRuleMatches(const std::vector<ShapeRule>& rules, const ShapeKey& key);

// All decision tables of one aiter revision.
struct RevisionRules {
  Revision revision;
  // C++ planner: shapes the main kernel runs natively (no head folding). Key: original heads,
  // max_seqlen_qo. §4.2.
  std::vector<ShapeRule> planner_native;
  // C++ planner: shapes accepted after folding (the AITER_CHECK of §4.1). Key: heads after
  // folding, max_seqlen_qo. Anything natively supported is accepted too.
  std::vector<ShapeRule> planner_supported;
  // C++ planner: shapes that use a 64-row q tile instead of 128. Key: heads after folding.
  std::vector<ShapeRule> pack64;
  // decode_update_mla_metadata_v1 (Python): its own, narrower native list. §9.3.
  std::vector<ShapeRule> update_native;
  // get_mla_metadata_info_v1: tile-per-batch overrides (§2). Key: original heads, effective
  // q length (1 when sparse). Checked in order A, B, C; the first match decides.
  std::vector<ShapeRule> sizing_pack64;   // override A: tiles of 64 packed rows
  std::vector<ShapeRule> sizing_pack128;  // override B: tiles of 128 packed rows
  std::vector<ShapeRule> sizing_wide128;  // override C: gfx950 bf16 wide shapes
  bool sizing_has_occupancy;              // 2026-08: clusters = CU x occupancy
  bool sizing_has_max_split_per_batch;    // 2026-08 only
  bool causal_trim_needs_is_causal;       // 2026-08: bt only if is_causal; 2026-03 always
  bool sparse_batch_idx_is_request;       // 2026-08 (#3310); 2026-03: virtual index
  bool sparse_kv_offset_adds_token_tail;  // 2026-08 (#2727): kv_offset += L-1-s
  bool has_parallel_planner;              // 2026-08 (#3465)
  int32_t info_heads_multiple;            // info_v1 asserts heads % this == 0 (8, or 16 in 03)
};

const RevisionRules& GetRevisionRules(Revision revision);

}  // namespace mlasim::ref
