#include "ref/flashmla/sizing.h"

#include <fmt/format.h>

#include <algorithm>

namespace mlasim::ref::flashmla {
namespace {

constexpr int32_t kMaxDim = 1024;  // heads and s_q: far above any model (keeps products in int32)
constexpr int32_t kMaxNumSms = 1 << 16;  // SM count: far above any device

Status CheckRange(int32_t v, const char* field, int32_t lo, int32_t hi) {
  if (v < lo || v > hi)
    return InvalidArgumentError(field, fmt::format("is {}, must be in [{}, {}]", v, lo, hi));
  return OkStatus();
}

Status CheckDenseShape(Revision revision, const DenseDecodeShape& s) {
  MLASIM_RETURN_IF_ERROR(CheckRange(s.batch_size, "batch_size", 1, kMaxBatchSize));
  MLASIM_RETURN_IF_ERROR(CheckRange(s.seqlen_q, "seqlen_q", 1, kMaxDim));
  MLASIM_RETURN_IF_ERROR(CheckRange(s.num_heads_q, "num_heads_q", 1, kMaxDim));
  MLASIM_RETURN_IF_ERROR(CheckRange(s.num_heads_k, "num_heads_k", 1, kMaxDim));
  MLASIM_RETURN_IF_ERROR(CheckRange(s.num_sms, "num_sms", 1, kMaxNumSms));
  if (s.num_heads_q % s.num_heads_k != 0)
    return InvalidArgumentError("num_heads_k", fmt::format("{} does not divide num_heads_q {}",
                                                           s.num_heads_k, s.num_heads_q));
  const bool k_ok =
      s.head_size_k == 576 || (revision == Revision::k9241ae3 && s.head_size_k == 512);
  if (!k_ok)
    return InvalidArgumentError(
        "head_size_k", fmt::format("is {}; {} supports {}", s.head_size_k, RevisionName(revision),
                                   revision == Revision::k9241ae3 ? "576 or 512" : "576"));
  if (s.head_size_v != kHeadSizeV)
    return InvalidArgumentError("head_size_v",
                                fmt::format("is {}, must be {}", s.head_size_v, kHeadSizeV));
  if (s.page_block_size != kBlockSizeN)
    return InvalidArgumentError("page_block_size",
                                fmt::format("is {}, must be {}", s.page_block_size, kBlockSizeN));
  return OkStatus();
}

// Fills the accumulator shapes and the counts that follow from num_sm_parts.
// dense_decode.h:164-166, sparse_decode.h:455-457, 414a2f3 flash_api.cpp:182-183.
Status FinishSizing(int32_t b, std::vector<int64_t> lse_inner, int32_t d_v, DecodeSizing* z) {
  MLASIM_ASSIGN_OR_RETURN(z->combine_max_splits, CombineMaxSplits(z->num_sm_parts));
  z->total_num_splits = b + z->num_sm_parts;
  z->lse_accum_shape = {z->total_num_splits};
  z->lse_accum_shape.insert(z->lse_accum_shape.end(), lse_inner.begin(), lse_inner.end());
  z->o_accum_shape = z->lse_accum_shape;
  z->o_accum_shape.push_back(d_v);
  int64_t lse_elems = 1;
  for (int64_t d : z->lse_accum_shape) lse_elems *= d;
  z->lse_accum_bytes = lse_elems * 4;
  z->o_accum_bytes = z->lse_accum_bytes * d_v;
  z->sched_meta_words = z->num_sm_parts * kRowWords;
  z->num_splits_len = b + 1;
  return OkStatus();
}

}  // namespace

const char* SparseImplName(SparseImpl impl) {
  switch (impl) {
    case SparseImpl::kSm90: return "Decode_Sm90_Impl";
    case SparseImpl::kSm100Head64: return "Decode_Sm100_Head64_Impl";
    case SparseImpl::kSm100Head64x2: return "Decode_Sm100_Head64x2_Impl";
    case SparseImpl::kSm100Head128: return "Decode_Sm100_Head128_Impl";
  }
  return "unknown";
}

StatusOr<int32_t> CombineMaxSplits(int32_t num_sm_parts) {
  for (int32_t bucket = 32; bucket <= kCombineMaxSplits; bucket += 32)
    if (num_sm_parts <= bucket) return bucket;
  return OutOfRangeError("num_sm_parts",
                         fmt::format("is {}: the combine kernel is instantiated for at most {} "
                                     "splits (MLA_NUM_SPLITS_SWITCH asserts)",
                                     num_sm_parts, kCombineMaxSplits));
}

StatusOr<DecodeSizing> SizeDenseDecode(Revision revision, const DenseDecodeShape& s) {
  MLASIM_RETURN_IF_ERROR(CheckDenseShape(revision, s));
  DecodeSizing z;
  z.revision = revision;
  const int32_t heads_per_hk = s.num_heads_q / s.num_heads_k;
  z.q_seq_per_hk = s.seqlen_q * heads_per_hk;
  const int32_t m_blocks = (z.q_seq_per_hk + kHeadBlockM - 1) / kHeadBlockM;
  // dense_decode.h:78 (max(.., 1)); 414a2f3 flash_api.cpp:38 (none)
  const int32_t parts = s.num_sms / s.num_heads_k / m_blocks;
  if (revision == Revision::k414a2f3 && parts < 1)
    return FailedPreconditionError(
        "num_sms", fmt::format("414a2f3 sizes num_sm_parts = {} / {} / {} = 0 (no max(.., 1) at "
                               "this revision): the scheduler would divide by zero",
                               s.num_sms, s.num_heads_k, m_blocks));
  z.num_sm_parts = std::max(parts, 1);
  z.topk = -1;
  z.extra_topk = -1;
  MLASIM_RETURN_IF_ERROR(
      FinishSizing(s.batch_size, {s.num_heads_k, z.q_seq_per_hk}, s.head_size_v, &z));
  return z;
}

StatusOr<SparseImpl> SelectSparseImpl(const SparseDecodeShape& s) {
  if (s.num_heads_q != 64 && s.num_heads_q != 128)
    return InvalidArgumentError(
        "num_heads_q", fmt::format("is {}; sparse decode supports 64 or 128", s.num_heads_q));
  if (s.head_size_qk != 576 && s.head_size_qk != 512)
    return InvalidArgumentError(
        "head_size_qk", fmt::format("is {}; sparse decode supports 576 or 512", s.head_size_qk));
  if (s.arch == Arch::kSm90a) return SparseImpl::kSm90;
  if (s.num_heads_q == 64) return SparseImpl::kSm100Head64;
  return s.head_size_qk == 576 ? SparseImpl::kSm100Head64x2 : SparseImpl::kSm100Head128;
}

StatusOr<DecodeSizing> SizeSparseDecode(const SparseDecodeShape& s) {
  MLASIM_RETURN_IF_ERROR(CheckRange(s.batch_size, "batch_size", 1, kMaxBatchSize));
  MLASIM_RETURN_IF_ERROR(CheckRange(s.seqlen_q, "seqlen_q", 1, kMaxDim));
  MLASIM_RETURN_IF_ERROR(CheckRange(s.num_sms, "num_sms", 1, kMaxNumSms));
  MLASIM_RETURN_IF_ERROR(CheckRange(s.num_heads_kv, "num_heads_kv", 1, 1));
  MLASIM_RETURN_IF_ERROR(CheckRange(s.head_size_v, "head_size_v", kHeadSizeV, kHeadSizeV));
  MLASIM_RETURN_IF_ERROR(CheckRange(s.topk, "topk", 1, 1 << 30));
  MLASIM_RETURN_IF_ERROR(CheckRange(s.extra_topk, "extra_topk", 0, 1 << 30));
  MLASIM_ASSIGN_OR_RETURN(const SparseImpl impl, SelectSparseImpl(s));
  if (impl == SparseImpl::kSm90 && s.topk % kBlockSizeN != 0)
    return InvalidArgumentError(
        "topk", fmt::format("is {}: the sm90 kernel asserts topk % {} == 0", s.topk, kBlockSizeN));
  if (impl == SparseImpl::kSm90 && s.head_size_qk == 576 && s.extra_topk > 0)
    return InvalidArgumentError("extra_topk", "the sm90 V3.2 kernel has no extra KV cache");
  DecodeSizing z;
  z.revision = Revision::k9241ae3;
  int32_t parts = s.num_sms / s.seqlen_q;  // sparse_decode.h get_meta() of each Decode_*_Impl
  if (impl == SparseImpl::kSm90) parts /= s.num_heads_q / 64;
  if (impl == SparseImpl::kSm100Head128) parts /= 2;
  z.num_sm_parts = std::max(parts, 1);
  z.fixed_overhead_num_blocks = impl == SparseImpl::kSm100Head128
                                    ? kSm100Head128FixedOverheadNumBlocks
                                    : kFixedOverheadNumBlocks;
  z.topk = s.topk;
  z.extra_topk = s.extra_topk;
  MLASIM_RETURN_IF_ERROR(
      FinishSizing(s.batch_size, {s.seqlen_q, s.num_heads_q}, s.head_size_v, &z));
  return z;
}

SchedInput DenseSchedInput(const DecodeSizing& z, std::vector<int32_t> seqlens_k) {
  SchedInput in;
  in.revision = z.revision;
  in.batch_size = static_cast<int32_t>(seqlens_k.size());
  in.num_sm_parts = z.num_sm_parts;
  in.block_size_n = z.block_size_n;
  in.fixed_overhead_num_blocks = z.fixed_overhead_num_blocks;
  in.seqlens_k = std::move(seqlens_k);
  in.topk = -1;
  in.extra_topk = -1;
  return in;
}

SchedInput SparseSchedInput(const DecodeSizing& z, int32_t batch_size,
                            std::vector<int32_t> topk_length,
                            std::vector<int32_t> extra_topk_length) {
  SchedInput in;
  in.revision = z.revision;
  in.batch_size = batch_size;
  in.num_sm_parts = z.num_sm_parts;
  in.block_size_n = z.block_size_n;
  in.fixed_overhead_num_blocks = z.fixed_overhead_num_blocks;
  in.topk = z.topk;
  in.extra_topk = z.extra_topk;
  in.topk_length = std::move(topk_length);
  in.extra_topk_length = std::move(extra_topk_length);
  return in;
}

}  // namespace mlasim::ref::flashmla
