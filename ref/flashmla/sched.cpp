#include "ref/flashmla/sched.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace mlasim::ref::flashmla {
namespace {

constexpr int32_t kMaxTokens = 1 << 30;      // seqlens, topk, topk lengths: block math fits int32
constexpr int32_t kMaxBlockSizeN = 1 << 20;  // block_size_n and the fixed overhead
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

int32_t CeilDiv(int32_t a, int32_t b) {
  return (a + b - 1) / b;  // cutlass::ceil_div / ku::ceil_div, a >= 0
}

// Per-request counts of the lanes' loop: the tokens the scheduler counts and its block range
// [first_block, last_block] (first_block is 0 at both revisions).
struct RequestCounts {
  std::vector<int32_t> seqlen_used;
  std::vector<int32_t> last_block;  // 9241ae3 last_block_idx_shared; 414a2f3: unused
  std::vector<int32_t> num_blocks;
  int64_t total = 0;  // sum(num_blocks + fixed_overhead), in int64 to detect int32 overflow
};

// 9241ae3 lane body (get_decoding_sched_meta.cu:29-55): dense takes seqlens_k; sparse takes topk
// (or topk_length[i]), 0 -> 1 so the main loop is never empty, then when extra_topk != 0 rounds up
// to whole blocks and adds the extra top-k.
int32_t SeqlenUsed9241(const SchedInput& in, int32_t i) {
  if (in.topk == -1) return in.seqlens_k[i];
  int32_t s = in.topk_length.empty() ? in.topk : in.topk_length[i];
  if (s == 0) s = 1;
  if (in.extra_topk != 0) {
    s = CeilDiv(s, in.block_size_n) * in.block_size_n;  // ku::ceil
    s += in.extra_topk_length.empty() ? in.extra_topk : in.extra_topk_length[i];
  }
  return s;
}

RequestCounts CountRequests(const SchedInput& in) {
  RequestCounts c;
  const int32_t b = in.batch_size;
  c.seqlen_used.resize(b);
  c.last_block.resize(b);
  c.num_blocks.resize(b);
  for (int32_t i = 0; i < b; ++i) {
    if (in.revision == Revision::k9241ae3) {
      const int32_t s = SeqlenUsed9241(in, i);
      // Tokens [0, max(s-1, 0)], blocks [0, last]: a zero-length request still counts 1 block.
      c.seqlen_used[i] = s;
      c.last_block[i] = std::max(s - 1, 0) / in.block_size_n;
      c.num_blocks[i] = c.last_block[i] + 1;
    } else {
      c.seqlen_used[i] = in.seqlens_k[i];
      c.num_blocks[i] = CeilDiv(in.seqlens_k[i], in.block_size_n);  // 0 for a zero length
    }
    c.total += int64_t{c.num_blocks[i]} + in.fixed_overhead_num_blocks;
  }
  return c;
}

Status CheckLengths(const std::vector<int32_t>& v, const char* field, int32_t b, int32_t max) {
  if (static_cast<int64_t>(v.size()) != b)
    return InvalidArgumentError(field,
                                fmt::format("has {} entries, batch_size is {}", v.size(), b));
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] < 0 || v[i] > max)
      return InvalidArgumentError(fmt::format("{}[{}]", field, i),
                                  fmt::format("is {}, must be in [0, {}]", v[i], max));
  }
  return OkStatus();
}

Status ValidateShape(const SchedInput& in) {
  if (in.revision != Revision::k414a2f3 && in.revision != Revision::k9241ae3)
    return InvalidArgumentError("revision", "unknown FlashMLA revision");
  if (in.batch_size < 1 || in.batch_size > kMaxBatchSize)
    return InvalidArgumentError(
        "batch_size", fmt::format("is {}, must be in [1, {}]: FlashMLA's decode APIs refuse b = 0 "
                                  "and the scheduler would then read memory it never wrote",
                                  in.batch_size, kMaxBatchSize));
  if (in.num_sm_parts < 1 || in.num_sm_parts > kMaxNumSmParts)
    return InvalidArgumentError(
        "num_sm_parts", fmt::format("is {}, must be in [1, {}] (0 divides by zero in the payload)",
                                    in.num_sm_parts, kMaxNumSmParts));
  if (in.block_size_n < 1 || in.block_size_n > kMaxBlockSizeN)
    return InvalidArgumentError(
        "block_size_n", fmt::format("is {}, must be in [1, {}]", in.block_size_n, kMaxBlockSizeN));
  if (in.fixed_overhead_num_blocks < 0 || in.fixed_overhead_num_blocks > kMaxBlockSizeN)
    return InvalidArgumentError(
        "fixed_overhead_num_blocks",
        fmt::format("is {}, must be in [0, {}]", in.fixed_overhead_num_blocks, kMaxBlockSizeN));
  return OkStatus();
}

Status ValidateCapacity(const SchedInput& in) {
  if (in.revision == Revision::k414a2f3 && in.batch_size >= kMaxBatchSize414a2f3)
    return OutOfRangeError(
        "batch_size",
        fmt::format("is {}: 414a2f3 keeps per-request arrays in {} ints of static shared memory "
                    "and asserts batch_size < {}",
                    in.batch_size, kMaxBatchSize414a2f3, kMaxBatchSize414a2f3));
  const int64_t smem = 4 * (5 * int64_t{in.batch_size} + 1);
  if (in.revision == Revision::k9241ae3 && smem > in.max_dynamic_smem_bytes)
    return OutOfRangeError("batch_size",
                           fmt::format("is {}: 9241ae3 asks for 4 * (5b + 1) = {} bytes of dynamic "
                                       "shared memory, the device allows {}",
                                       in.batch_size, smem, in.max_dynamic_smem_bytes));
  return OkStatus();
}

Status ValidateDense(const SchedInput& in) {
  MLASIM_RETURN_IF_ERROR(CheckLengths(in.seqlens_k, "seqlens_k", in.batch_size, kMaxTokens));
  if (!in.topk_length.empty() || !in.extra_topk_length.empty())
    return InvalidArgumentError(
        in.topk_length.empty() ? "extra_topk_length" : "topk_length",
        "given for dense decode (topk == -1): the dense API passes nullptr");
  return OkStatus();
}

Status ValidateSparse(const SchedInput& in) {
  if (in.revision == Revision::k414a2f3)
    return InvalidArgumentError("topk", "414a2f3 has no sparse scheduler: topk must be -1");
  if (in.topk > kMaxTokens)
    return InvalidArgumentError("topk", fmt::format("is {}, above {}", in.topk, kMaxTokens));
  if (!in.seqlens_k.empty())
    return InvalidArgumentError("seqlens_k",
                                "given for sparse decode (topk > 0): the sparse API "
                                "passes nullptr and the scheduler reads topk");
  if (!in.topk_length.empty())
    MLASIM_RETURN_IF_ERROR(CheckLengths(in.topk_length, "topk_length", in.batch_size, in.topk));
  if (in.extra_topk < -1 || in.extra_topk > kMaxTokens)
    return InvalidArgumentError(
        "extra_topk", fmt::format("is {}, must be in [-1, {}]", in.extra_topk, kMaxTokens));
  if (!in.extra_topk_length.empty()) {
    if (in.extra_topk == 0)
      return InvalidArgumentError("extra_topk_length",
                                  "given with extra_topk == 0 (no extra cache)");
    MLASIM_RETURN_IF_ERROR(
        CheckLengths(in.extra_topk_length, "extra_topk_length", in.batch_size, kMaxTokens));
  }
  return OkStatus();
}

Status ValidateTotal(const SchedInput& in, const RequestCounts& c) {
  // total_num_blocks, total + num_sm_parts - 1 (ceil_div) and payload are int32 on the device.
  if (c.total + in.num_sm_parts + in.fixed_overhead_num_blocks > kInt32Max)
    return OutOfRangeError(
        in.topk == -1 ? "seqlens_k" : "topk",
        fmt::format("sum(blocks + fixed_overhead_num_blocks) = {}: with num_sm_parts {} the "
                    "kernel's int32 total_num_blocks / payload would overflow",
                    c.total, in.num_sm_parts));
  return OkStatus();
}

// Lane 0's cursor: request, blocks of it already given out, its split index, splits so far.
struct Cursor {
  int32_t req = 0;
  int32_t block = 0;
  int32_t split = 0;
  int32_t cum_num_splits = 0;
};

// One part of lane 0's loop (identical at both revisions; 9241ae3 get_decoding_sched_meta.cu:66-91,
// 414a2f3 flash_fwd_mla_kernel.h:641-660): whole requests while the budget
// covers (remaining blocks + overhead), then a split taking (budget - overhead) blocks if
// positive.
void FillPart(const RequestCounts& c, int32_t payload, int32_t overhead, Cursor* cur,
              std::vector<int32_t>* num_splits) {
  const int32_t b = static_cast<int32_t>(c.num_blocks.size());
  int32_t remain = payload;
  while (cur->req < b) {
    const int32_t remain_blocks = c.num_blocks[cur->req] - cur->block;
    if (remain >= remain_blocks + overhead) {
      cur->cum_num_splits += cur->split + 1;
      (*num_splits)[cur->req + 1] = cur->cum_num_splits;
      remain -= remain_blocks + overhead;
      ++cur->req;
      cur->block = 0;
      cur->split = 0;
    } else {
      if (remain - overhead > 0) {
        cur->block += remain - overhead;
        ++cur->split;
      }
      break;
    }
  }
}

// 9241ae3 keeps its per-request arrays in one dynamic shared buffer laid out as
// [num_blocks b][num_splits b+1][seqlens b][first_block b][last_block b]. first_block of every
// real request is 0; a row that begins after the last request reads first_block[b], which is
// last_block[0] in that layout. The model reproduces the read.
int32_t FirstBlockShared(const RequestCounts& c, int32_t req) {
  return req < static_cast<int32_t>(c.num_blocks.size()) ? 0 : c.last_block[0];
}

SchedRow Row9241(const RequestCounts& c, const Cursor& before, const Cursor& after) {
  SchedRow r;
  r.begin_req_idx = before.req;
  r.begin_pos = before.block + FirstBlockShared(c, before.req);
  r.begin_split_idx = before.split;
  r.is_first_req_splitted = before.block != 0;
  const bool mid = after.block > 0;
  MLASIM_ASSERT(mid || after.req >= 1, "a part ended before consuming request 0");
  r.end_req_idx = mid ? after.req : after.req - 1;
  r.end_pos = mid ? after.block + FirstBlockShared(c, after.req)
                  : (c.seqlen_used[after.req - 1] == 0 ? 0 : c.last_block[after.req - 1] + 1);
  r.is_last_req_splitted =
      r.end_pos != c.last_block[r.end_req_idx] + 1 && c.seqlen_used[r.end_req_idx] != 0;
  if (r.begin_req_idx == r.end_req_idx) {
    const int32_t either = r.is_first_req_splitted || r.is_last_req_splitted;
    r.is_first_req_splitted = r.is_last_req_splitted = either;
  }
  return r;
}

SchedRow Row414(const SchedInput& in, const Cursor& before, const Cursor& after) {
  SchedRow r;
  r.begin_req_idx = before.req;
  r.begin_pos = before.block * in.block_size_n;
  r.begin_split_idx = before.split;
  const bool mid = after.block > 0;
  MLASIM_ASSERT(mid || after.req >= 1, "a part ended before consuming request 0");
  r.end_req_idx = mid ? after.req : after.req - 1;
  r.end_pos = mid ? after.block * in.block_size_n : in.seqlens_k[after.req - 1];
  return r;
}

}  // namespace

const char* RevisionName(Revision r) {
  switch (r) {
    case Revision::k414a2f3: return "414a2f3";
    case Revision::k9241ae3: return "9241ae3";
  }
  return "unknown";
}

StatusOr<Revision> ParseRevision(const std::string& name) {
  for (Revision r : {Revision::k414a2f3, Revision::k9241ae3})
    if (name == RevisionName(r)) return r;
  return InvalidArgumentError(
      "revision", fmt::format("'{}' is not a FlashMLA revision (414a2f3, 9241ae3)", name));
}

bool operator==(const SchedRow& a, const SchedRow& b) {
  return RowWords(Revision::k9241ae3, a) == RowWords(Revision::k9241ae3, b);
}

int32_t WrittenRowWords(Revision revision) {
  return revision == Revision::k9241ae3 ? 7 : 5;
}

std::vector<int32_t> RowWords(Revision revision, const SchedRow& r) {
  if (revision == Revision::k414a2f3)
    return {r.begin_req_idx, r.begin_pos, r.end_req_idx, r.end_pos, r.begin_split_idx};
  return {r.begin_req_idx,   r.end_req_idx,           r.begin_pos,           r.end_pos,
          r.begin_split_idx, r.is_first_req_splitted, r.is_last_req_splitted};
}

StatusOr<SchedRow> RowFromWords(Revision revision, const std::vector<int32_t>& w) {
  if (static_cast<int32_t>(w.size()) != WrittenRowWords(revision))
    return InvalidArgumentError(
        "row", fmt::format("has {} words, revision {} writes {}", w.size(), RevisionName(revision),
                           WrittenRowWords(revision)));
  SchedRow r;
  if (revision == Revision::k414a2f3) {
    r = {w[0], w[2], w[1], w[3], w[4], 0, 0};
  } else {
    r = {w[0], w[1], w[2], w[3], w[4], w[5], w[6]};
  }
  return r;
}

Status ValidateSchedInput(const SchedInput& in) {
  MLASIM_RETURN_IF_ERROR(ValidateShape(in));
  MLASIM_RETURN_IF_ERROR(ValidateCapacity(in));
  if (in.topk == -1) {
    MLASIM_RETURN_IF_ERROR(ValidateDense(in));
  } else if (in.topk > 0) {
    MLASIM_RETURN_IF_ERROR(ValidateSparse(in));
  } else {
    return InvalidArgumentError("topk", fmt::format("is {}, must be -1 (dense) or > 0", in.topk));
  }
  return ValidateTotal(in, CountRequests(in));
}

StatusOr<SchedMeta> GetDecodingSchedMeta(const SchedInput& in) {
  MLASIM_RETURN_IF_ERROR(ValidateSchedInput(in));
  const RequestCounts c = CountRequests(in);
  SchedMeta out;
  out.revision = in.revision;
  out.total_num_blocks = static_cast<int32_t>(c.total);
  out.payload = CeilDiv(out.total_num_blocks, in.num_sm_parts) + in.fixed_overhead_num_blocks;
  out.num_splits.assign(in.batch_size + 1, 0);
  out.rows.reserve(in.num_sm_parts);
  Cursor cur;
  for (int32_t part = 0; part < in.num_sm_parts; ++part) {
    const Cursor before = cur;
    FillPart(c, out.payload, in.fixed_overhead_num_blocks, &cur, &out.num_splits);
    out.rows.push_back(in.revision == Revision::k9241ae3 ? Row9241(c, before, cur)
                                                         : Row414(in, before, cur));
  }
  // Proof (the kernel's FLASH_DEVICE_ASSERT, get_decoding_sched_meta.cu:100): let R be the cost
  // left, sum over unconsumed requests of (remaining blocks + overhead); initially R = total. A
  // part that does not finish the batch lowers R by at least payload - overhead = ceil(total /
  // num_sm_parts): whole requests lower it by what they spend, a split by (budget - overhead), and
  // a stop without a split leaves at most `overhead` unspent. num_sm_parts parts thus cover the
  // total.
  MLASIM_ASSERT(cur.req == in.batch_size && cur.block == 0 && cur.split == 0,
                fmt::format("scheduler ended at request {} block {} split {}", cur.req, cur.block,
                            cur.split));
  out.seqlen_used = c.seqlen_used;
  out.num_blocks = c.num_blocks;
  out.dynamic_smem_bytes =
      in.revision == Revision::k9241ae3 ? 4 * (5 * int64_t{in.batch_size} + 1) : 0;
  return out;
}

}  // namespace mlasim::ref::flashmla
