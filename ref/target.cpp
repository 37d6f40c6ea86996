#include "ref/target.h"

#include <string>

namespace mlasim::ref {
namespace {

constexpr uint8_t kAnyArch = 0;
constexpr uint8_t Bit(Arch a) {
  return static_cast<uint8_t>(1u << static_cast<unsigned>(a));
}
constexpr uint8_t kGfx942 = Bit(Arch::kGfx942);
constexpr uint8_t kGfx950 = Bit(Arch::kGfx950);
constexpr uint8_t kMi300Plus = kGfx942 | kGfx950;

bool IsFp8(DType d) {
  return d == DType::kFp8;
}

bool DTypesMatch(DTypeReq req, DType q, DType kv) {
  switch (req) {
    case DTypeReq::kAny: return true;
    case DTypeReq::kBothFp8: return IsFp8(q) && IsFp8(kv);
    case DTypeReq::kNeitherFp8: return !IsFp8(q) && !IsFp8(kv);
    case DTypeReq::kBothBf16: return q == DType::kBf16 && kv == DType::kBf16;
  }
  return false;
}

RevisionRules MakeRules2026_08() {
  RevisionRules r;
  r.revision = Revision::k2026_08;
  // §4.2 HEAD column (experimental HK shapes off: AITER_ENABLE_EXPERIMENTAL is not modelled).
  r.planner_native = {
      {kAnyArch, 16, 0, DTypeReq::kAny, "16 heads: every kernel's native width"},
      {kMi300Plus, 64, 1, DTypeReq::kBothFp8, "gfx942/gfx950 fp8 64 heads, qlen 1"},
      {kGfx950, 0, 0, DTypeReq::kNeitherFp8, "gfx950 bf16/bf16, any head count"},
      {kGfx942, 128, 0, DTypeReq::kBothFp8, "gfx942 fp8 128 heads"},
      {kGfx950, 32, 0, DTypeReq::kBothFp8, "gfx950 fp8 32 heads"},
      {kGfx950, 64, 0, DTypeReq::kBothFp8, "gfx950 fp8 64 heads"},
      {kGfx950, 128, 0, DTypeReq::kBothFp8, "gfx950 fp8 128 heads"},
  };
  // §4.1 AITER_CHECK, evaluated on the heads after folding.
  r.planner_supported = {
      {kAnyArch, 16, 0, DTypeReq::kAny, "16 heads"},
      {kAnyArch, 128, 0, DTypeReq::kAny, "128 heads"},
      {kAnyArch, 32, 0, DTypeReq::kBothFp8, "32 heads fp8"},
      {kAnyArch, 64, 1, DTypeReq::kBothFp8, "64 heads fp8 qlen 1"},
      {kGfx950, 8, 4, DTypeReq::kBothFp8, "gfx950 8 heads fp8 qlen 4"},
      {kGfx942, 8, 2, DTypeReq::kNeitherFp8, "gfx942 8 heads bf16 qlen 2"},
      {kGfx950, 0, 0, DTypeReq::kNeitherFp8, "gfx950 bf16"},
      {kGfx950, 32, 4, DTypeReq::kBothFp8, "gfx950 fp8 32 heads qlen 4"},
      {kGfx950, 64, 0, DTypeReq::kBothFp8, "gfx950 fp8 64 heads"},
  };
  // §4.1 pack: 64-row q tiles (heads after folding, max_seqlen_qo).
  r.pack64 = {
      {kGfx950, 0, 0, DTypeReq::kNeitherFp8, "gfx950 bf16, 64 <= H*qlen < 128, H <= 64", 0, 64, 64,
       127},
      {kGfx950, 48, 0, DTypeReq::kNeitherFp8, "gfx950 bf16 48 heads, H*qlen >= 64", 0, INT32_MAX,
       64},
      {kGfx950, 32, 3, DTypeReq::kBothFp8, "gfx950 fp8 32 heads qlen 3"},
  };
  // §9.3: the Python update's list (narrower than the planner's at HEAD).
  r.update_native = {
      {kAnyArch, 16, 0, DTypeReq::kAny, "16 heads"},
      {kGfx950, 32, 4, DTypeReq::kBothFp8, "gfx950 fp8 32 heads qlen 4"},
      {kMi300Plus, 128, 0, DTypeReq::kBothFp8, "gfx942/gfx950 fp8 128 heads"},
  };
  // §2 override A: 64-row tiles (original heads, effective q length).
  r.sizing_pack64 = {
      {kGfx950, 0, 0, DTypeReq::kBothBf16, "gfx950 bf16, 64 <= packed < 128, heads <= 64", 0, 64,
       64, 127},
      {kGfx950, 48, 0, DTypeReq::kBothBf16, "gfx950 bf16 48 heads, packed >= 64", 0, INT32_MAX, 64},
      {kGfx950, 32, 3, DTypeReq::kBothFp8, "gfx950 fp8 32 heads qlen 3"},
  };
  // §2 override C: gfx950 bf16 wide shapes (48 heads is caught by override A first).
  r.sizing_wide128 = {
      {kGfx950, 0, 0, DTypeReq::kBothBf16, "gfx950 bf16, packed >= 128", 0, INT32_MAX, 128},
      {kGfx950, 0, 0, DTypeReq::kBothBf16, "gfx950 bf16, heads > 64", 65},
  };
  // §2 override B: 128-row tiles.
  r.sizing_pack128 = {
      {kAnyArch, 16, 0, DTypeReq::kAny, "16 heads"},
      {kGfx942, 128, 0, DTypeReq::kBothFp8, "gfx942 fp8 128 heads"},
      {kGfx950, 32, 4, DTypeReq::kBothFp8, "gfx950 fp8 32 heads qlen 4"},
      {kGfx950, 64, 0, DTypeReq::kBothFp8, "gfx950 fp8 64 heads"},
      {kGfx950, 128, 0, DTypeReq::kBothFp8, "gfx950 fp8 128 heads"},
      {kMi300Plus, 64, 1, DTypeReq::kBothFp8, "gfx942/gfx950 fp8 64 heads qlen 1"},
  };
  r.sizing_has_occupancy = true;
  r.sizing_has_max_split_per_batch = true;
  r.causal_trim_needs_is_causal = true;
  r.sparse_batch_idx_is_request = true;
  r.sparse_kv_offset_adds_token_tail = true;
  r.has_parallel_planner = true;
  r.info_heads_multiple = 8;
  return r;
}

RevisionRules MakeRules2026_03() {
  RevisionRules r;
  r.revision = Revision::k2026_03;
  // §4.2 A-mar column.
  r.planner_native = {
      {kAnyArch, 16, 0, DTypeReq::kAny, "16 heads"},
      {kGfx950, 32, 4, DTypeReq::kBothFp8, "gfx950 fp8 32 heads qlen 4"},
      {kGfx942, 128, 0, DTypeReq::kBothFp8, "gfx942 fp8 128 heads"},
  };
  r.planner_supported = {
      {kAnyArch, 16, 0, DTypeReq::kAny, "16 heads"},
      {kAnyArch, 128, 0, DTypeReq::kAny, "128 heads"},
      {kGfx950, 32, 4, DTypeReq::kBothFp8, "gfx950 fp8 32 heads qlen 4"},
  };
  r.pack64 = {};
  r.update_native = {
      {kAnyArch, 16, 0, DTypeReq::kAny, "16 heads"},
      {kGfx950, 32, 4, DTypeReq::kBothFp8, "gfx950 fp8 32 heads qlen 4"},
      {kGfx942, 128, 0, DTypeReq::kBothFp8, "gfx942 fp8 128 heads"},
  };
  r.sizing_pack128 = {
      {kAnyArch, 16, 0, DTypeReq::kAny, "16 heads"},
      {kGfx942, 128, 0, DTypeReq::kBothFp8, "gfx942 fp8 128 heads"},
  };
  r.sizing_has_occupancy = false;
  r.sizing_has_max_split_per_batch = false;
  r.causal_trim_needs_is_causal = false;
  r.sparse_batch_idx_is_request = false;
  r.sparse_kv_offset_adds_token_tail = false;
  r.has_parallel_planner = false;
  r.info_heads_multiple = 16;
  return r;
}

}  // namespace

const char* DTypeName(DType d) {
  return NameOf(kDTypeNames, d);
}

const char* ArchName(Arch a) {
  return NameOf(kArchNames, a);
}

const char* RevisionName(Revision r) {
  return NameOf(kRevisionNames, r);
}

StatusOr<DType> ParseDType(std::string_view text, std::string_view field) {
  return ParseEnum(kDTypeNames, text, field, "dtype");
}

StatusOr<Arch> ParseArch(std::string_view text, std::string_view field) {
  return ParseEnum(kArchNames, text, field, "target");
}

StatusOr<Revision> ParseRevision(std::string_view text, std::string_view field) {
  return ParseEnum(kRevisionNames, text, field, "aiter revision");
}

const std::vector<TargetProfile>& AllTargetProfiles() {
  // CU counts: aiter-mla-metadata.md §15; LDS sizes as the golden corpus assumed them.
  static const std::vector<TargetProfile> kProfiles = {
      {Arch::kGfx942, ArchName(Arch::kGfx942), "MI300X/MI325X", 304, 64 * 1024, 64, Arch::kGfx942},
      {Arch::kGfx950, ArchName(Arch::kGfx950), "MI350X/MI355X", 256, 160 * 1024, 64, Arch::kGfx950},
      {Arch::kSm90, ArchName(Arch::kSm90), "H200", 132, 228 * 1024, 32, Arch::kGfx942},
  };
  return kProfiles;
}

const TargetProfile& GetTargetProfile(Arch arch) {
  for (const TargetProfile& p : AllTargetProfiles())
    if (p.arch == arch) return p;
  MLASIM_ASSERT(false, "no profile for architecture");
}

bool RuleMatches(const ShapeRule& rule, const ShapeKey& key) {
  if (rule.arch_mask != 0 && (rule.arch_mask & Bit(key.arch)) == 0) return false;
  if (rule.heads != 0 && rule.heads != key.heads) return false;
  if (rule.seqlen_qo != 0 && rule.seqlen_qo != key.seqlen_qo) return false;
  if (key.heads < rule.heads_min || key.heads > rule.heads_max) return false;
  const int64_t packed = int64_t{key.heads} * key.seqlen_qo;
  if (packed < rule.packed_min || packed > rule.packed_max) return false;
  return DTypesMatch(rule.dtypes, key.q_dtype, key.kv_dtype);
}

bool AnyRuleMatches(const std::vector<ShapeRule>& rules, const ShapeKey& key) {
  for (const ShapeRule& rule : rules)
    if (RuleMatches(rule, key)) return true;
  return false;
}

const RevisionRules& GetRevisionRules(Revision revision) {
  static const RevisionRules k03 = MakeRules2026_03();
  static const RevisionRules k08 = MakeRules2026_08();
  return revision == Revision::k2026_03 ? k03 : k08;
}

}  // namespace mlasim::ref
