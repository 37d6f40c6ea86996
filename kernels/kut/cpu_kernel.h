// kernels/kut/cpu_kernel.h - mlasim's CPU kernel under test (kernels/mlasim_kut.h): aiter's
// persistent MLA decode (docs/aiter-mla-metadata.md section 11) and mla_reduce_v1 (section 12)
// over the raw buffers of a mlasim_kut_call in host memory, as a GPU kernel would run them:
// every workgroup c in [0, work_indptr rows - 1) walks work_info rows [work_indptr[c],
// work_indptr[c + 1]), reads its q rows and the KV rows its positions name, and stores o / lse
// rows or partial rows. Nothing is range-checked that the real kernels do not check, so a plan
// or an index that points outside a buffer makes this kernel touch memory outside it, where
// mlasim's sentinel bytes and guard pages see it.
//
// Numerics as mlasim's GPU kernels and ref::RunPlanDriven with fp32 accumulation: logits
// s_j = (q . k_j) * softmax_scale * q_scale * kv_scale, P = exp(s - max) rounded to bf16 before
// P V (the row sum from the unrounded weights), o = P V * kv_scale / l stored in the o dtype, the
// natural-log LSE in fp32; split pieces store fp32 partial rows and their LSE. A row with no
// visible key: o = 0, lse = -inf (asm, opus), o = 0, lse = +inf (self, FlashMLA's contract), or
// nothing written (hk): its contract's
// empty_rows (ref::EmptyRowPolicy); what a zero-KV item does is its zero_kv (ref::ZeroKvPolicy).
//
// Header-only and self-contained (the C ABI, kut_config.h, <cmath>, <cstring>): each example kernel of
// tests/kut/lib/ is this kernel with one deliberate bug switched on (`Bugs`), built as its own .so.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/kut/kut_config.h"
#include "kernels/mlasim_kut.h"

namespace mlasim::kut_cpu {

// What a zero-KV work item does (the contract's semantics.zero_kv; `variant` in the config).
enum class ZeroKv { kReadsQWritesOutput, kReadsQOnly, kSkips };

struct Config {
  std::string variant = "asm";  // asm | opus | hk | self: the built-in decode contract it follows
  ZeroKv zero_kv = ZeroKv::kReadsQWritesOutput;
  bool write_empty_rows = true;  // a row with no visible key gets o = 0, lse = empty_row_lse
  // The lse of a row with no visible key in o (a split piece's partial row always gets -inf):
  // -inf (zero_and_neg_inf_lse: asm, opus) or +inf (zero_and_pos_inf_lse: FlashMLA, variant=self).
  float empty_row_lse = -std::numeric_limits<float>::infinity();
  // variant=self: the kernel plans by itself, one request per item from qo_indptr / kv_indptr,
  // aiter's plan buffers unread (FlashMLA's and FlashInfer's way; their contracts say so), so
  // campaigns run it over head-folded plans too.
  bool self_planning = false;
  // order=reverse: workgroups (and a self-planning kernel's requests) run last first. Hardware
  // fixes no order among the workgroups of a launch, so a plan whose result depends on it (two
  // work items storing one row) shows different values here than in plan order.
  bool reverse_order = false;
};

// The deliberate bugs of the example kernels (tests/kut/lib/); all off in mlasim's CPU kernel.
struct Bugs {
  bool store_tile64 = false;            // stores whole 64-row tiles from qo_start / partial_qo_loc
  bool zero_kv_reads_row_past = false;  // a zero-KV item reads q rows [qo_start, qo_end + 1)
  bool deref_minus_one = false;         // a -1 index (top-k entry or page id) is read as is
};

// Sets the variant's zero-KV and empty-row behaviour. False with `why` set for an unknown name.
inline bool SetVariant(const std::string& v, Config* cfg, std::string* why) {
  cfg->variant = v;
  cfg->self_planning = false;
  cfg->empty_row_lse = -std::numeric_limits<float>::infinity();
  if (v == "asm") {
    cfg->zero_kv = ZeroKv::kReadsQWritesOutput;
    cfg->write_empty_rows = true;
  } else if (v == "opus") {  // aiter-decode-opus.json: empty_rows zero_and_neg_inf_lse
    cfg->zero_kv = ZeroKv::kSkips;
    cfg->write_empty_rows = true;
  } else if (v == "hk") {
    cfg->zero_kv = ZeroKv::kReadsQOnly;
    cfg->write_empty_rows = false;
  } else if (v == "self") {
    cfg->zero_kv = ZeroKv::kReadsQWritesOutput;
    cfg->write_empty_rows = true;
    cfg->empty_row_lse = std::numeric_limits<float>::infinity();  // flashmla-dense-decode.json
    cfg->self_planning = true;
  } else {
    *why = "unknown variant '" + v + "' (asm, opus, hk or self)";
    return false;
  }
  return true;
}

// Parses the config (kut_config.h, CpuKeys): variant=asm|opus|hk|self (default asm) and
// order=forward|reverse (default forward), each key at most once. Empty: the defaults. False
// with `why` set for anything else (kut_config::Parse: an unknown key or value, an item without
// '=', an empty item such as a trailing comma, a key given twice).
inline bool ParseConfig(const char* text, Config* cfg, std::string* why) {
  using namespace kut_config;
  std::vector<int64_t> v;
  if (!Parse(text, CpuKeys(), &v, why)) return false;
  if (!SetVariant(CpuKeys()[kCpuVariant].words[v[kCpuVariant]], cfg, why)) return false;
  cfg->reverse_order = v[kCpuOrder] == 1;
  return true;
}

// ---- element access ---------------------------------------------------------------------------
inline float Bf16ToFloat(uint16_t x) {
  const uint32_t u = static_cast<uint32_t>(x) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t FloatToBf16(float f) {  // round to nearest even; NaN stays NaN
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float RoundBf16(float f) {
  return Bf16ToFloat(FloatToBf16(f));
}
inline float Fp8E4m3fnDecode(uint8_t x) {
  const int sign = x & 0x80, e = (x >> 3) & 0xF, m = x & 7;
  if (e == 15 && m == 7) return std::numeric_limits<float>::quiet_NaN();
  const float v = e == 0 ? std::ldexp(static_cast<float>(m), -9)
                         : std::ldexp(1.0f + static_cast<float>(m) / 8.0f, e - 7);
  return sign ? -v : v;
}
inline float Fp8E4m3fnToFloat(uint8_t x) {
  static const struct Table {
    float v[256];
    Table() {
      for (int i = 0; i < 256; ++i) v[i] = Fp8E4m3fnDecode(static_cast<uint8_t>(i));
    }
  } table;
  return table.v[x];
}

// Element c of (row, head) of `t` as float. No range check: the kernel trusts its indices.
inline float Load(const mlasim_kut_tensor& t, int64_t row, int64_t head, int64_t c) {
  const unsigned char* p =
      static_cast<const unsigned char*>(t.data) + row * t.row_stride + head * t.head_stride;
  switch (t.dtype) {
    case MLASIM_KUT_BF16: {
      uint16_t x;
      std::memcpy(&x, p + c * 2, 2);
      return Bf16ToFloat(x);
    }
    case MLASIM_KUT_FP8_E4M3FN: return Fp8E4m3fnToFloat(p[c]);
    default: {
      float x;
      std::memcpy(&x, p + c * 4, 4);
      return x;
    }
  }
}
inline void Store(const mlasim_kut_tensor& t, int64_t row, int64_t head, int64_t c, float v) {
  unsigned char* p =
      static_cast<unsigned char*>(t.data) + row * t.row_stride + head * t.head_stride;
  if (t.dtype == MLASIM_KUT_BF16) {
    const uint16_t x = FloatToBf16(v);
    std::memcpy(p + c * 2, &x, 2);
  } else {
    std::memcpy(p + c * 4, &v, 4);
  }
}
inline int32_t I32(const mlasim_kut_tensor& t, int64_t i) {
  int32_t x;
  std::memcpy(&x, static_cast<const unsigned char*>(t.data) + i * 4, 4);
  return x;
}

// ---- stage 1 ----------------------------------------------------------------------------------
class DecodeRun {
 public:
  DecodeRun(const mlasim_kut_call& c, const Config& cfg, const Bugs& bugs)
      : c_(c), cfg_(cfg), bugs_(bugs) {}

  void Run() {
    if (cfg_.self_planning) {  // one item per request: its q rows, its whole page list
      const int64_t n = c_.qo_indptr.rows - 1;
      for (int64_t i = 0; i < n; ++i) {
        const auto b = static_cast<int32_t>(cfg_.reverse_order ? n - 1 - i : i);
        RunWork(Work{b, -1, I32(c_.qo_indptr, b), I32(c_.qo_indptr, b + 1), I32(c_.kv_indptr, b),
                     I32(c_.kv_indptr, b + 1), 0});
      }
      return;
    }
    const int64_t grid = c_.work_indptr.rows - 1;
    for (int64_t i = 0; i < grid; ++i) {
      const int64_t cl = cfg_.reverse_order ? grid - 1 - i : i;
      const int32_t w0 = I32(c_.work_indptr, cl), w1 = I32(c_.work_indptr, cl + 1);
      for (int32_t w = w0; w < w1; ++w) RunWork(w);
    }
  }

  volatile float sink = 0;  // reads whose values are unused still happen

 private:
  struct Work {
    int32_t batch, partial, q0, q1, k0, k1, koff;
  };

  void RunWork(int32_t w) {
    const int64_t base = int64_t{w} * 8;
    RunWork(Work{I32(c_.work_info, base), I32(c_.work_info, base + 1), I32(c_.work_info, base + 2),
                 I32(c_.work_info, base + 3), I32(c_.work_info, base + 4),
                 I32(c_.work_info, base + 5), I32(c_.work_info, base + 6)});
  }

  void RunWork(const Work& wk) {
    const bool zero_kv = wk.k1 <= wk.k0;
    if (zero_kv) {
      if (cfg_.zero_kv == ZeroKv::kSkips) return;
      TouchQ(wk.q0, wk.q1 + (bugs_.zero_kv_reads_row_past ? 1 : 0));
      if (cfg_.zero_kv == ZeroKv::kReadsQOnly) return;
    }
    Keys(wk);
    GatherKeys(static_cast<int64_t>(rows_.size()));
    for (int32_t r = wk.q0; r < wk.q1; ++r) AttendRow(wk, r);
    if (bugs_.store_tile64) StoreTileTail(wk);
  }

  // Reads every element of q rows [r0, r1) (a zero-KV item's q load).
  void TouchQ(int64_t r0, int64_t r1) {
    float acc = 0;
    for (int64_t r = r0; r < r1; ++r)
      for (int32_t h = 0; h < c_.num_heads; ++h)
        for (int32_t d = 0; d < c_.head_dim_qk; ++d) acc += Load(c_.q, r, h, d);
    sink = sink + acc;
  }

  // The KV-cache row of each key position of the work item and whether it is read (masked keys
  // are never read).
  void Keys(const Work& wk) {
    rows_.clear();
    valid_.clear();
    const int64_t page = c_.page_size;
    const int64_t cache_rows = c_.kv_cache.rows;
    if (c_.topk >= 0) {
      for (int64_t p = wk.k0; p < wk.k1; ++p) {
        const int64_t r = I32(c_.topk_indices, p);
        const bool read_minus_one = r == -1 && bugs_.deref_minus_one;
        rows_.push_back(r);
        valid_.push_back((r >= 0 && r < cache_rows) || read_minus_one);
      }
      key_first_ = 0;
      causal_ = false;
      return;
    }
    const int64_t p0 = int64_t{wk.k0} * page;
    const int64_t p1 = (wk.koff != 0 || page == 1)
                           ? int64_t{wk.k1} * page
                           : int64_t{wk.k1 - 1} * page + I32(c_.kv_last_page_lens, wk.batch);
    for (int64_t p = p0; p < p1; ++p) {
      const int32_t id = I32(c_.kv_indices, p / page);
      const int64_t r = int64_t{id} * page + p % page;
      rows_.push_back(r);
      valid_.push_back((r >= 0 && r < cache_rows) || (id == -1 && bugs_.deref_minus_one));
    }
    causal_ = c_.causal != 0;
    if (causal_) {
      const int64_t pages = I32(c_.kv_indptr, wk.batch + 1) - I32(c_.kv_indptr, wk.batch);
      lk_ = pages == 0 ? 0 : (pages - 1) * page + I32(c_.kv_last_page_lens, wk.batch);
      lq_ = I32(c_.qo_indptr, wk.batch + 1) - I32(c_.qo_indptr, wk.batch);
      req_q0_ = I32(c_.qo_indptr, wk.batch);
      key_first_ = p0 - int64_t{I32(c_.kv_indptr, wk.batch)} * page;
    }
  }

  // The visible keys of the work item as float rows (read once, as a kernel stages them).
  void GatherKeys(int64_t n) {
    const int32_t D = c_.head_dim_qk;
    k_.resize(static_cast<size_t>(n * D));
    for (int64_t j = 0; j < n; ++j)
      if (valid_[j])
        for (int32_t d = 0; d < D; ++d) k_[j * D + d] = Load(c_.kv_cache, rows_[j], 0, d);
  }

  // One q row (token), every head: softmax over the visible keys, then the store.
  void AttendRow(const Work& wk, int64_t r) {
    const int32_t H = c_.num_heads, D = c_.head_dim_qk, Dv = c_.head_dim_v;
    const float scale = c_.softmax_scale * c_.q_scale * c_.kv_scale;
    const int64_t n = static_cast<int64_t>(rows_.size());
    const int64_t limit =
        causal_ ? std::min<int64_t>(n, (r - req_q0_) + lk_ - lq_ + 1 - key_first_) : n;
    q_.resize(static_cast<size_t>(D));
    s_.resize(static_cast<size_t>(n));
    o_.assign(static_cast<size_t>(H) * Dv, 0.f);
    lse_.assign(static_cast<size_t>(H),
                wk.partial >= 0 ? -std::numeric_limits<float>::infinity() : cfg_.empty_row_lse);
    bool any_key = false;
    for (int32_t h = 0; h < H; ++h) {
      for (int32_t d = 0; d < D; ++d) q_[d] = Load(c_.q, r, h, d) * scale;
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < limit; ++j) {
        if (!valid_[j]) continue;
        float dot = 0;
        const float* k = k_.data() + j * D;
        for (int32_t d = 0; d < D; ++d) dot += q_[d] * k[d];
        s_[j] = dot;
        mx = std::isnan(dot) || std::isnan(mx) ? std::numeric_limits<float>::quiet_NaN()
                                               : std::fmax(mx, dot);
      }
      if (mx == -std::numeric_limits<float>::infinity()) continue;  // no visible key
      any_key = true;
      float l = 0;
      float* out = o_.data() + int64_t{h} * Dv;
      for (int64_t j = 0; j < limit; ++j) {
        if (!valid_[j]) continue;
        const float p = std::exp(s_[j] - mx);
        l += p;
        const float pr = RoundBf16(p);
        const float* v = k_.data() + j * D;
        for (int32_t d = 0; d < Dv; ++d) out[d] += pr * v[d];
      }
      for (int32_t d = 0; d < Dv; ++d) out[d] *= c_.kv_scale / l;
      lse_[h] = mx + std::log(l);
    }
    if (!any_key && !cfg_.write_empty_rows) return;
    StoreRow(wk, r);
  }

  void StoreRow(const Work& wk, int64_t r) {
    const int32_t H = c_.num_heads, Dv = c_.head_dim_v;
    const bool split = wk.partial >= 0;
    const mlasim_kut_tensor& o = split ? c_.partial_o : c_.o;
    const mlasim_kut_tensor& lse = split ? c_.partial_lse : c_.lse;
    const int64_t row = split ? int64_t{wk.partial} + (r - wk.q0) : r;
    for (int32_t h = 0; h < H; ++h) {
      for (int32_t d = 0; d < Dv; ++d) Store(o, row, h, d, o_[int64_t{h} * Dv + d]);
      Store(lse, row, h, 0, lse_[h]);
    }
  }

  // The bug of kut_tile64: rows past qo_end up to the end of the item's last 64-row tile are
  // stored too (zeros), as a kernel storing whole tiles without a row mask would.
  void StoreTileTail(const Work& wk) {
    const int64_t rows = wk.q1 - wk.q0;
    const int64_t padded = (rows + 63) / 64 * 64;
    const bool split = wk.partial >= 0;
    const mlasim_kut_tensor& o = split ? c_.partial_o : c_.o;
    const mlasim_kut_tensor& lse = split ? c_.partial_lse : c_.lse;
    const int64_t first = split ? int64_t{wk.partial} : int64_t{wk.q0};
    for (int64_t i = rows; i < padded; ++i)
      for (int32_t h = 0; h < c_.num_heads; ++h) {
        for (int32_t d = 0; d < c_.head_dim_v; ++d) Store(o, first + i, h, d, 0.f);
        Store(lse, first + i, h, 0, 0.f);
      }
  }

  const mlasim_kut_call& c_;
  const Config& cfg_;
  const Bugs& bugs_;
  std::vector<int64_t> rows_;
  std::vector<uint8_t> valid_;
  std::vector<float> q_, s_, o_, lse_, k_;
  bool causal_ = false;
  int64_t lk_ = 0, lq_ = 0, req_q0_ = 0, key_first_ = 0;
};

// ---- stage 2: mla_reduce_v1 -------------------------------------------------------------------
// Every tile t with >= 2 pieces: M = max lse_i (NaN ignored), S = sum exp(lse_i - M),
// L = (S == 0 or NaN) ? +inf : M + ln S, o = sum exp(lse_i - L) partial_i, lse = L.
// `reverse`: tiles last first (Config::reverse_order).
inline void RunReduce(const mlasim_kut_call& c, bool reverse) {
  const int64_t tiles = c.reduce_indptr.rows - 1;
  const int32_t H = c.num_heads, Dv = c.head_dim_v;
  const float kInf = std::numeric_limits<float>::infinity();
  std::vector<float> out(static_cast<size_t>(Dv));
  for (int64_t i = 0; i < tiles; ++i) {
    const int64_t t = reverse ? tiles - 1 - i : i;
    const int32_t g0 = I32(c.reduce_indptr, t), g1 = I32(c.reduce_indptr, t + 1);
    if (g1 - g0 <= 1) continue;
    const int32_t q0 = I32(c.reduce_final_map, 2 * t), q1 = I32(c.reduce_final_map, 2 * t + 1);
    for (int64_t s = q0; s < q1; ++s)
      for (int32_t h = 0; h < H; ++h) {
        float mx = -kInf;
        for (int32_t i = g0; i < g1; ++i) {
          const float l = Load(c.partial_lse, I32(c.reduce_partial_map, i) + (s - q0), h, 0);
          if (!std::isnan(l)) mx = std::fmax(mx, l);
        }
        float sum = 0;
        for (int32_t i = g0; i < g1; ++i)
          sum += std::exp(Load(c.partial_lse, I32(c.reduce_partial_map, i) + (s - q0), h, 0) - mx);
        const float big_l = (sum == 0 || std::isnan(sum)) ? kInf : mx + std::log(sum);
        std::fill(out.begin(), out.end(), 0.f);
        for (int32_t i = g0; i < g1; ++i) {
          const int64_t prow = I32(c.reduce_partial_map, i) + (s - q0);
          const float wgt = std::exp(Load(c.partial_lse, prow, h, 0) - big_l);
          for (int32_t d = 0; d < Dv; ++d) out[d] += wgt * Load(c.partial_o, prow, h, d);
        }
        for (int32_t d = 0; d < Dv; ++d) Store(c.o, s, h, d, out[d]);
        Store(c.lse, s, h, 0, big_l);
      }
  }
}

// ---- the library's entry points, shared by mlasim's kernel and the example kernels ------------
inline std::string& LastError() {
  static thread_local std::string e;
  return e;
}

// Fills `info` for a kernel named `name` (variant from `config`). Returns an MLASIM_KUT_* code.
inline int Describe(const char* name, const char* config, mlasim_kut_info* info) {
  Config cfg;
  std::string why;
  if (!ParseConfig(config, &cfg, &why)) {
    LastError() = why;
    return MLASIM_KUT_UNSUPPORTED;
  }
  // The built-in contract of the variant, with the one thing this kernel does differently: an
  // index outside the cache is masked (never read), where aiter's asm kernel reads it.
  static thread_local std::string contract;
  const std::string base = cfg.self_planning ? "flashmla_dense" : cfg.variant;
  contract = "{\"extends\": \"" + base + "\", \"name\": \"" + name + "-" + cfg.variant +
             "\", \"semantics\": {\"invalid_index\": \"masked\", \"sources\": "
             "{\"invalid_index\": \"kernels/kut/cpu_kernel.h: a key whose cache row is outside "
             "the cache is never read\"}}}";
  info->abi_version = MLASIM_KUT_ABI_VERSION;
  info->name = name;
  info->ops = MLASIM_KUT_OP_BIT(MLASIM_KUT_OP_DECODE) | MLASIM_KUT_OP_BIT(MLASIM_KUT_OP_REDUCE);
  info->memory = MLASIM_KUT_MEMORY_HOST;
  const uint32_t floats = MLASIM_KUT_DTYPE_BIT(MLASIM_KUT_BF16) |
                          MLASIM_KUT_DTYPE_BIT(MLASIM_KUT_FP8_E4M3FN) |
                          MLASIM_KUT_DTYPE_BIT(MLASIM_KUT_FP32);
  info->q_dtypes = floats;
  info->kv_dtypes = floats;
  info->o_dtypes = MLASIM_KUT_DTYPE_BIT(MLASIM_KUT_BF16) | MLASIM_KUT_DTYPE_BIT(MLASIM_KUT_FP32);
  info->heads_multiple = 1;
  info->max_heads = 0;
  info->head_dim_qk_multiple = 1;
  info->max_head_dim_qk = 1024;
  info->head_dim_v_multiple = 1;
  info->max_head_dim_v = 1024;
  info->max_page_size = 0;
  info->dense = 1;
  info->sparse = 1;
  info->decode_contract = contract.c_str();
  info->reduce_contract = "builtin:mla_reduce_v1";
  if (cfg.self_planning) {  // FlashMLA's contract: no reduce call, dense page lists only
    info->ops = MLASIM_KUT_OP_BIT(MLASIM_KUT_OP_DECODE);
    info->sparse = 0;
    info->reduce_contract = "builtin:in_decode";
  }
  return MLASIM_KUT_OK;
}

inline int Run(const mlasim_kut_call* call, const Bugs& bugs) {
  if (call == nullptr || call->abi_version != MLASIM_KUT_ABI_VERSION ||
      call->struct_bytes != sizeof(mlasim_kut_call)) {
    LastError() = "call descriptor of another ABI version or size";
    return MLASIM_KUT_ERROR;
  }
  Config cfg;
  std::string why;
  if (!ParseConfig(call->config, &cfg, &why)) {
    LastError() = why;
    return MLASIM_KUT_UNSUPPORTED;
  }
  if (call->op == MLASIM_KUT_OP_DECODE) {
    DecodeRun(*call, cfg, bugs).Run();
    return MLASIM_KUT_OK;
  }
  if (call->op == MLASIM_KUT_OP_REDUCE) {
    RunReduce(*call, cfg.reverse_order);
    return MLASIM_KUT_OK;
  }
  LastError() = "unknown op " + std::to_string(call->op);
  return MLASIM_KUT_UNSUPPORTED;
}

}  // namespace mlasim::kut_cpu

// Defines the four exported entry points of a CPU kernel library named NAME with bugs BUGS
// (a mlasim::kut_cpu::Bugs expression).
#define MLASIM_KUT_CPU_LIBRARY(NAME, BUGS)                                                    \
  extern "C" __attribute__((visibility("default"))) uint32_t mlasim_kut_abi_version(void) {   \
    return MLASIM_KUT_ABI_VERSION;                                                            \
  }                                                                                           \
  extern "C" __attribute__((visibility("default"))) int mlasim_kut_describe(                  \
      const char* config, mlasim_kut_info* info) {                                            \
    return mlasim::kut_cpu::Describe(NAME, config, info);                                     \
  }                                                                                           \
  extern "C" __attribute__((visibility("default"))) int mlasim_kut_run(                       \
      const mlasim_kut_call* call) {                                                          \
    return mlasim::kut_cpu::Run(call, BUGS);                                                  \
  }                                                                                           \
  extern "C" __attribute__((visibility("default"))) const char* mlasim_kut_last_error(void) { \
    return mlasim::kut_cpu::LastError().c_str();                                              \
  }
