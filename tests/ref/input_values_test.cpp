// ref/input_values.h: the counter-based values ref::BuildMlaInputs and the device generator
// (kernels/inputs.hip) share. Golden values at fixed indices, the stream equal to ref::SplitMix64,
// RoundToFormat equal to ref::RoundTo, EncodeExact equal to ref/dtypes.h's encoders, and
// BuildMlaInputs's q and cache equal to the pure functions at every element (its
// MlaValueSource says which).
#include "ref/input_values.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "ref/dtypes.h"
#include "ref/numerics.h"
#include "tests/ref/plan_builders.h"

namespace mlasim::ref {
namespace {

namespace v = values;

uint32_t Bits(float f) {
  return v::FloatBits(f);
}

// The campaign's streams (seed 7: KutCheckOptions::input_seed; salts q 1, KV 2).
TEST(InputValues, GoldenValuesAtFixedIndices) {
  const uint64_t q = v::StreamState(7, 1), kv = v::StreamState(7, 2);
  EXPECT_EQ(q, 0x6078bf180ff8632full);
  EXPECT_EQ(kv, 0x3e1bd7240451c38aull);
  EXPECT_EQ(Bits(v::StreamValue(q, 0, 1.0)), 0x3ee10964u);  // 0.43952477
  EXPECT_EQ(Bits(v::StreamValue(q, 1, 1.0)), 0xbf732d2cu);  // -0.949908018
  EXPECT_EQ(Bits(v::StreamValue(q, 575, 1.0)), 0x3e4406d7u);
  EXPECT_EQ(Bits(v::StreamValue(q, 1000000, 1.0)), 0x3ee5322cu);
  EXPECT_EQ(Bits(v::StreamValue(kv, 0, 1.0)), 0x3f044552u);
  EXPECT_EQ(Bits(v::StreamValue(kv, 1, 1.0)), 0x3f6d501fu);
  // rounded: element 1 of q in bf16, fp16, e4m3fn, e4m3fnuz
  const float x = v::StreamValue(q, 1, 1.0);
  EXPECT_EQ(Bits(v::RoundToFormat(x, v::kFormatBf16)), 0xbf730000u);     // -0.94921875
  EXPECT_EQ(Bits(v::RoundToFormat(x, v::kFormatFp16)), 0xbf732000u);     // -0.949707031
  EXPECT_EQ(Bits(v::RoundToFormat(x, v::kFormatFp8E4m3fn)), 0xbf700000u);  // -0.9375
  EXPECT_EQ(Bits(v::RoundToFormat(x, v::kFormatFp8E4m3fnuz)), 0xbf700000u);
  EXPECT_EQ(Bits(v::RoundToFormat(v::StreamValue(q, 1000000, 1.0), v::kFormatFp16)), 0x3ee54000u);
}

TEST(InputValues, StreamIsSplitMix64ReadAtACounter) {
  for (const uint64_t seed : {0ull, 7ull, 0xffffffffffffffffull})
    for (const uint64_t salt : {1ull, 2ull}) {
      SplitMix64 rng = SplitMix64::Stream(seed, salt);
      const uint64_t state = v::StreamState(seed, salt);
      for (uint64_t n = 0; n < 1000; ++n) {
        const double want = 0.5 * rng.Symmetric();
        ASSERT_EQ(Bits(v::StreamValue(state, n, 0.5)), Bits(static_cast<float>(want))) << n;
      }
    }
  // SplitMix64(0)'s first output (the published value) at counter 0 of state 0
  EXPECT_EQ(v::StreamBits(0, 0), 0xe220a8397b1dcdafull);
  EXPECT_EQ(v::StreamBits(0, 2), 0x06c45d188009454full);
}

// Floats that stress rounding: ties and near-ties at each format's grid, subnormals of every
// format and of float, the largest finite values and just past them, zeros, inf, NaN.
std::vector<float> HardFloats() {
  std::vector<float> out = {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::denorm_min(),
                            -std::numeric_limits<float>::denorm_min(),
                            std::numeric_limits<float>::min(), std::numeric_limits<float>::max(),
                            448.0f, 464.0f, 464.00003f, 470.0f, 480.0f, 240.0f, 247.0f, 248.0f,
                            65504.0f, 65519.0f, 65520.0f, 3.389e38f};
  for (int e = -150; e <= 128; ++e)
    for (const double m : {1.0, 1.0625, 1.125, 1.1875, 1.5, 1.75, 1.9375, 1.96875, 1.99})
      for (const double s : {1.0, -1.0}) {
        const double x = s * std::ldexp(m, e);
        if (std::fabs(x) <= std::numeric_limits<float>::max()) out.push_back(static_cast<float>(x));
        const float f = static_cast<float>(x);
        out.push_back(std::nextafter(f, 0.0f));
        out.push_back(std::nextafter(f, std::numeric_limits<float>::infinity()));
      }
  SplitMix64 rng(3);
  for (int i = 0; i < 200000; ++i) out.push_back(v::BitsFloat(static_cast<uint32_t>(rng.Next())));
  return out;
}

TEST(InputValues, RoundToFormatIsRefRoundTo) {
  const NumFormat formats[] = {NumFormat::kFp32, NumFormat::kBf16, NumFormat::kFp16,
                               NumFormat::kFp8E4m3fn, NumFormat::kFp8E4m3fnuz};
  int64_t checked = 0;
  for (const float x : HardFloats())
    for (const NumFormat f : formats) {
      const float want = static_cast<float>(RoundTo(f, x));
      const float got = v::RoundToFormat(x, static_cast<int32_t>(f));
      if (std::isnan(x)) {  // NaN in, NaN out (its payload is not a value)
        ASSERT_TRUE(std::isnan(got)) << NumFormatName(f);
        ASSERT_EQ(std::signbit(got), std::signbit(want)) << NumFormatName(f);
      } else {  // every bit, the NaN of an fp8 overflow included (quiet, with x's sign)
        ASSERT_EQ(Bits(got), Bits(want)) << x << " (" << Bits(x) << ") " << NumFormatName(f);
      }
      ++checked;
    }
  EXPECT_GT(checked, 1000000);
}

TEST(InputValues, EncodeExactMatchesDtypesEncoders) {
  unsigned char b[4];
  int64_t exact = 0;
  for (const float x : HardFloats()) {
    const float bf = v::RoundToFormat(x, v::kFormatBf16);
    ASSERT_TRUE(v::EncodeExact(bf, v::kDtypeBf16, b));
    const uint16_t bf_code = static_cast<uint16_t>(b[0] | b[1] << 8);
    if (!std::isnan(bf)) {
      EXPECT_EQ(bf_code, EncodeBf16(bf));
    }
    const float h = v::RoundToFormat(x, v::kFormatFp16);
    ASSERT_TRUE(v::EncodeExact(h, v::kDtypeFp16, b)) << h;
    if (!std::isnan(h)) {
      EXPECT_EQ(static_cast<uint16_t>(b[0] | b[1] << 8), EncodeFp16(h));
    }
    const float e = v::RoundToFormat(x, v::kFormatFp8E4m3fn);
    ASSERT_TRUE(v::EncodeExact(e, v::kDtypeFp8E4m3fn, b)) << e;
    // NaN (an overflow): sign | 0x7f, as the harness always encoded it (EncodeFp8 drops the sign)
    EXPECT_EQ(b[0], std::isnan(e) ? (std::signbit(e) ? 0xff : 0x7f)
                                  : EncodeFp8(NumFormat::kFp8E4m3fn, e));
    ASSERT_TRUE(v::EncodeExact(x, v::kDtypeFp32, b));
    uint32_t u;
    std::memcpy(&u, b, 4);
    EXPECT_EQ(u, Bits(x));
    // a value off a format's grid is not encoded, and the output stays as it was
    const bool on_bf16 = std::isnan(x) || Bits(bf) == Bits(x);
    b[0] = b[1] = 0x5A;
    EXPECT_EQ(v::EncodeExact(x, v::kDtypeBf16, b), on_bf16) << x;
    if (!on_bf16) {
      EXPECT_EQ(b[0], 0x5A);
    }
    exact += on_bf16;
  }
  EXPECT_GT(exact, 1000);
  // the codes of the edges
  ASSERT_TRUE(v::EncodeExact(448.0f, v::kDtypeFp8E4m3fn, b));
  EXPECT_EQ(b[0], 0x7e);
  EXPECT_FALSE(v::EncodeExact(480.0f, v::kDtypeFp8E4m3fn, b));  // 0x7f is NaN's code
  EXPECT_FALSE(v::EncodeExact(std::numeric_limits<float>::infinity(), v::kDtypeFp8E4m3fn, b));
  ASSERT_TRUE(v::EncodeExact(0x1p-9f, v::kDtypeFp8E4m3fn, b));  // the smallest subnormal
  EXPECT_EQ(b[0], 0x01);
  EXPECT_FALSE(v::EncodeExact(0x1p-10f, v::kDtypeFp8E4m3fn, b));  // e4m3fnuz's, not e4m3fn's
  ASSERT_TRUE(v::EncodeExact(-std::numeric_limits<float>::quiet_NaN(), v::kDtypeFp8E4m3fn, b));
  EXPECT_EQ(b[0], 0xff);
  ASSERT_TRUE(v::EncodeExact(std::nanf(""), v::kDtypeBf16, b));
  EXPECT_EQ(b[0] | b[1] << 8, 0x7fc0);
  ASSERT_TRUE(v::EncodeExact(std::nanf(""), v::kDtypeFp16, b));
  EXPECT_EQ(b[0] | b[1] << 8, 0x7e00);
  ASSERT_TRUE(v::EncodeExact(0x1p-24f, v::kDtypeFp16, b));  // fp16's smallest subnormal
  EXPECT_EQ(b[0] | b[1] << 8, 0x0001);
  EXPECT_FALSE(v::EncodeExact(0x1p-25f, v::kDtypeFp16, b));
  EXPECT_FALSE(v::EncodeExact(65520.0f, v::kDtypeFp16, b));
  EXPECT_FALSE(v::EncodeExact(1.0f, 0, b));  // not a storage type
  EXPECT_FALSE(v::EncodeExact(1.0f, 5, b));  // int32
}

// BuildMlaInputs's q and cache, element for element, from the pure functions.
void ExpectInputsFromSource(const PlanRequest& r, NumericsOptions o) {
  MlaValueSource src;
  auto in = BuildMlaInputs(r, o, &src);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  ASSERT_TRUE(src.plain);
  ASSERT_EQ(static_cast<int64_t>(in->q.size()), src.q_values);
  for (int64_t i = 0; i < src.q_values; ++i)
    ASSERT_EQ(Bits(in->q[i]), Bits(v::RoundToFormat(v::StreamValue(src.q_state, i, 1.0),
                                                    static_cast<int32_t>(src.q_format))))
        << i;
  const int32_t d = in->head_dim_qk;
  ASSERT_EQ(src.kv_row_token.size(), in->kv_cache.size() / d);
  int64_t nan_rows = 0;
  for (size_t row = 0; row < src.kv_row_token.size(); ++row) {
    const int64_t t = src.kv_row_token[row];
    nan_rows += t < 0;
    for (int32_t x = 0; x < d; ++x) {
      const float got = in->kv_cache[row * d + x];
      const uint32_t want =
          t < 0 ? v::kQuietNaNBits
                : Bits(v::RoundToFormat(v::StreamValue(src.kv_state, t * d + x, 1.0),
                                        static_cast<int32_t>(src.kv_format)));
      ASSERT_EQ(Bits(got), want) << "row " << row << " col " << x;
    }
  }
  EXPECT_GT(nan_rows, 0);  // unused page tails and the spare pages
  // without values: the same source, empty q and cache
  o.fill_values = false;
  MlaValueSource shape_src;
  auto shape = BuildMlaInputs(r, o, &shape_src);
  ASSERT_TRUE(shape.ok());
  EXPECT_TRUE(shape->q.empty());
  EXPECT_TRUE(shape->kv_cache.empty());
  EXPECT_EQ(shape_src.q_state, src.q_state);
  EXPECT_EQ(shape_src.kv_row_token, src.kv_row_token);
  EXPECT_EQ(shape->kv_indices, in->kv_indices);
  EXPECT_TRUE(ValidateMlaShape(*shape).ok());
  EXPECT_FALSE(ValidateMlaInputs(*shape).ok());
}

TEST(InputValues, BuildMlaInputsIsThePureFunctions) {
  NumericsOptions o;
  o.seed = 7;
  o.head_dim_qk = 40;
  o.head_dim_v = 32;
  PlanRequest dense = test::DenseRequest(Arch::kGfx950, 16, 2, {37, 0, 20, 129}, 4, 16);
  ExpectInputsFromSource(dense, o);
  dense.kv_dtype = DType::kFp8;  // e4m3fn on gfx950
  dense.q_dtype = DType::kFp16;
  ExpectInputsFromSource(dense, o);
  dense.target = Arch::kGfx942;  // e4m3fnuz
  ExpectInputsFromSource(dense, o);
  ExpectInputsFromSource(test::SparseRequest(Arch::kGfx950, 16, 2, {10, 40}, 8, 4), o);
}

// The cache as the CPU built it before the counter-based functions: one sequential
// ref::SplitMix64 stream over the requests' tokens in order, each request quantised at once.
std::vector<float> SequentialCache(const MlaInputs& in, const NumericsOptions& o, NumFormat kf) {
  const int32_t d = in.head_dim_qk;
  std::vector<float> cache(static_cast<size_t>(int64_t{in.num_pages} * in.page_size * d),
                           std::nanf(""));
  SplitMix64 rng = SplitMix64::Stream(o.seed, 2);
  for (int32_t b = 0; b < in.num_requests(); ++b) {
    const int64_t np = in.kv_indptr[b + 1] - in.kv_indptr[b];
    const int64_t tokens =
        in.topk >= 0 ? np : (np == 0 ? 0 : (np - 1) * in.page_size + in.kv_last_page_lens[b]);
    std::vector<float> vals(static_cast<size_t>(tokens * d));
    for (float& x : vals) x = static_cast<float>(o.amplitude * rng.Symmetric());
    for (int64_t j = 0; j < tokens; ++j) {
      const int64_t slot = in.kv_indptr[b] + j / in.page_size;
      const int64_t row = int64_t{in.kv_indices[slot]} * in.page_size + j % in.page_size;
      for (int32_t x = 0; x < d; ++x)
        cache[row * d + x] = static_cast<float>(RoundTo(kf, vals[j * d + x]));
    }
  }
  return cache;
}

TEST(InputValues, BuildMlaInputsKeepsTheSequentialStreamsValues) {
  NumericsOptions o;
  o.seed = 11;
  o.head_dim_qk = 24;
  o.head_dim_v = 16;
  for (PlanRequest r : {test::DenseRequest(Arch::kGfx950, 16, 2, {37, 0, 20, 129}, 4, 16),
                        test::SparseRequest(Arch::kGfx950, 16, 2, {10, 40}, 8, 4)}) {
    r.kv_dtype = DType::kFp8;
    auto in = BuildMlaInputs(r, o);
    ASSERT_TRUE(in.ok());
    const std::vector<float> want = SequentialCache(*in, o, NumFormat::kFp8E4m3fn);
    ASSERT_EQ(in->kv_cache.size(), want.size());
    EXPECT_EQ(std::memcmp(in->kv_cache.data(), want.data(), want.size() * sizeof(float)), 0);
    SplitMix64 q = SplitMix64::Stream(o.seed, 1);
    for (size_t i = 0; i < in->q.size(); ++i)
      ASSERT_EQ(Bits(in->q[i]),
                Bits(static_cast<float>(RoundTo(NumFormat::kBf16,
                                                static_cast<float>(q.Symmetric())))))
          << i;
  }
}

TEST(InputValues, KvRowTokensFollowThePageTable) {
  NumericsOptions o;
  o.seed = 7;
  o.head_dim_qk = 16;
  o.head_dim_v = 16;
  o.spare_pages = 1;
  // 2 requests of 20 and 3 tokens on pages of 16: tokens 0..19 (slots 0, 1), 20..22 (slot 2);
  // 1 spare page; every other row NaN
  const PlanRequest r = test::DenseRequest(Arch::kGfx950, 16, 1, {20, 3}, 4, 16);
  MlaValueSource src;
  auto in = BuildMlaInputs(r, o, &src);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  ASSERT_EQ(in->num_pages, 4);
  ASSERT_EQ(src.kv_row_token.size(), 64u);
  std::vector<int64_t> want(64, -1);
  for (int64_t t = 0; t < 23; ++t) {
    const int64_t slot = t < 20 ? t / 16 : 2, j = t < 20 ? t : t - 20;
    want[static_cast<size_t>(in->kv_indices[slot] * 16 + j % 16)] = t;
  }
  EXPECT_EQ(src.kv_row_token, want);
  // a non-plain option: the device does not reproduce it
  o.kv_scale = 0.5;
  ASSERT_TRUE(BuildMlaInputs(r, o, &src).ok());
  EXPECT_FALSE(src.plain);
}

}  // namespace
}  // namespace mlasim::ref
