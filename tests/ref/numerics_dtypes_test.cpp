// ref/dtypes.h: every fp8 code, the overflow/NaN/negative-zero rules of each format, and
// RoundTo against independent references (exhaustive nearest-value search for fp8, a software
// binary16 written from the IEEE 754 definition for fp16, cross-checked against the compiler's
// _Float16 where the target has one, the integer rounding trick for bf16).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "ref/dtypes.h"

namespace mlasim::ref {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A fixed 64-bit generator for test inputs (SplitMix64 steps; no std distributions).
struct TestRng {
  uint64_t s;
  uint64_t Next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Log-uniform magnitude in [2^lo, 2^hi) with a random sign.
  double LogUniform(int lo, int hi) {
    const double u = static_cast<double>(Next() >> 11) * 0x1p-53;
    const double m = std::exp2(lo + u * (hi - lo));
    return (Next() & 1) ? -m : m;
  }
};

TEST(NumericsDtypes, FormatTable) {
  EXPECT_EQ(GetFormatInfo(NumFormat::kFp8E4m3fn).max_finite, 448.0);
  EXPECT_EQ(GetFormatInfo(NumFormat::kFp8E4m3fnuz).max_finite, 240.0);
  EXPECT_EQ(GetFormatInfo(NumFormat::kFp8E4m3fnuz).exponent_bias, 8);
  EXPECT_EQ(GetFormatInfo(NumFormat::kFp16).max_finite, 65504.0);
  EXPECT_EQ(GetFormatInfo(NumFormat::kBf16).unit_roundoff, std::ldexp(1.0, -8));
  EXPECT_EQ(FormatForDType(DType::kFp8, Arch::kGfx942), NumFormat::kFp8E4m3fnuz);
  EXPECT_EQ(FormatForDType(DType::kFp8, Arch::kGfx950), NumFormat::kFp8E4m3fn);
  EXPECT_EQ(FormatForDType(DType::kFp8, Arch::kSm90), NumFormat::kFp8E4m3fn);
  EXPECT_EQ(FormatForDType(DType::kBf16, Arch::kGfx942), NumFormat::kBf16);
  for (NumFormat f : {NumFormat::kFp64, NumFormat::kFp32, NumFormat::kBf16, NumFormat::kFp16,
                      NumFormat::kFp8E4m3fn, NumFormat::kFp8E4m3fnuz}) {
    auto parsed = ParseNumFormat(NumFormatName(f), "--format");
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, f);
  }
  auto bad = ParseNumFormat("fp8", "--q-format");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().field(), "--q-format");
}

TEST(NumericsDtypes, E4m3fnEveryCode) {
  int nans = 0;
  for (int c = 0; c < 256; ++c) {
    const double v = DecodeFp8(NumFormat::kFp8E4m3fn, static_cast<uint8_t>(c));
    if (std::isnan(v)) {
      ++nans;
      EXPECT_TRUE(c == 0x7f || c == 0xff) << c;
      continue;
    }
    EXPECT_FALSE(std::isinf(v));
    EXPECT_LE(std::fabs(v), 448.0);
    EXPECT_EQ(EncodeFp8(NumFormat::kFp8E4m3fn, v), c) << "code " << c << " value " << v;
    EXPECT_EQ(RoundTo(NumFormat::kFp8E4m3fn, v), v);
  }
  EXPECT_EQ(nans, 2);
  EXPECT_EQ(DecodeFp8(NumFormat::kFp8E4m3fn, 0x7e), 448.0);
  EXPECT_EQ(DecodeFp8(NumFormat::kFp8E4m3fn, 0x01), std::ldexp(1.0, -9));
  EXPECT_EQ(DecodeFp8(NumFormat::kFp8E4m3fn, 0x08), std::ldexp(1.0, -6));
  EXPECT_EQ(DecodeFp8(NumFormat::kFp8E4m3fn, 0x38), 1.0);
  EXPECT_TRUE(std::signbit(DecodeFp8(NumFormat::kFp8E4m3fn, 0x80)));  // -0 exists
}

TEST(NumericsDtypes, E4m3fnuzEveryCode) {
  int nans = 0;
  for (int c = 0; c < 256; ++c) {
    const double v = DecodeFp8(NumFormat::kFp8E4m3fnuz, static_cast<uint8_t>(c));
    if (std::isnan(v)) {
      ++nans;
      EXPECT_EQ(c, 0x80);
      continue;
    }
    EXPECT_FALSE(std::signbit(v) && v == 0.0) << "fnuz has no -0";
    EXPECT_LE(std::fabs(v), 240.0);
    EXPECT_EQ(EncodeFp8(NumFormat::kFp8E4m3fnuz, v), c) << "code " << c << " value " << v;
  }
  EXPECT_EQ(nans, 1);
  EXPECT_EQ(DecodeFp8(NumFormat::kFp8E4m3fnuz, 0x7f), 240.0);
  EXPECT_EQ(DecodeFp8(NumFormat::kFp8E4m3fnuz, 0xff), -240.0);
  EXPECT_EQ(DecodeFp8(NumFormat::kFp8E4m3fnuz, 0x01), std::ldexp(1.0, -10));
  EXPECT_EQ(DecodeFp8(NumFormat::kFp8E4m3fnuz, 0x40), 1.0);
}

TEST(NumericsDtypes, Fp8OverflowIsNaNLikePyTorchUnlessSaturating) {
  const NumFormat fn = NumFormat::kFp8E4m3fn, fnuz = NumFormat::kFp8E4m3fnuz;
  EXPECT_EQ(RoundTo(fn, 448.0), 448.0);
  EXPECT_EQ(RoundTo(fn, 464.0), 448.0);  // midpoint 448|480: ties to the even 448
  EXPECT_TRUE(std::isnan(RoundTo(fn, 464.0001)));
  EXPECT_TRUE(std::isnan(RoundTo(fn, 470.0)));
  EXPECT_TRUE(std::isnan(RoundTo(fn, -1e6)));
  EXPECT_TRUE(std::isnan(RoundTo(fn, kInf)));
  EXPECT_EQ(EncodeFp8(fn, 470.0), 0x7f);
  EXPECT_EQ(EncodeFp8(fn, -470.0), 0xff);
  EXPECT_EQ(RoundTo(fn, 1e6, Fp8Overflow::kSaturate), 448.0);
  EXPECT_EQ(RoundTo(fn, -kInf, Fp8Overflow::kSaturate), -448.0);
  EXPECT_TRUE(std::isnan(RoundTo(fn, std::nan(""), Fp8Overflow::kSaturate)));
  EXPECT_EQ(RoundTo(fnuz, 247.9), 240.0);
  EXPECT_TRUE(std::isnan(RoundTo(fnuz, 248.0)));  // midpoint 240|256: ties to the even 256
  EXPECT_TRUE(std::isnan(RoundTo(fnuz, -256.0)));
  EXPECT_EQ(EncodeFp8(fnuz, 300.0), 0x80);
  EXPECT_EQ(EncodeFp8(fnuz, -300.0), 0x80);
  EXPECT_EQ(RoundTo(fnuz, -1e9, Fp8Overflow::kSaturate), -240.0);
}

TEST(NumericsDtypes, Fp8NegativeZeroAndTies) {
  const NumFormat fn = NumFormat::kFp8E4m3fn, fnuz = NumFormat::kFp8E4m3fnuz;
  EXPECT_EQ(EncodeFp8(fnuz, -0.0), 0x00);
  EXPECT_EQ(EncodeFp8(fnuz, -1e-9), 0x00);
  EXPECT_FALSE(std::signbit(RoundTo(fnuz, -1e-9)));
  EXPECT_EQ(EncodeFp8(fn, -0.0), 0x80);
  EXPECT_EQ(EncodeFp8(fn, -1e-9), 0x80);
  EXPECT_EQ(RoundTo(fn, 1.0 + 1.0 / 16), 1.0);        // tie: 1.000 (even) vs 1.001
  EXPECT_EQ(RoundTo(fn, 1.0 + 3.0 / 16), 1.25);       // tie: 1.001 vs 1.010 (even)
  EXPECT_EQ(RoundTo(fn, std::ldexp(1.0, -10)), 0.0);  // half the smallest subnormal: to 0
  EXPECT_EQ(RoundTo(fn, 3 * std::ldexp(1.0, -10)), std::ldexp(1.0, -8));  // 1.5 quanta -> 2
  EXPECT_EQ(RoundTo(fnuz, std::ldexp(1.0, -11)), 0.0);
}

// The fp8 value nearest to x by exhaustive search over all finite codes; ties go to the code
// with an even fraction (the last bit of the code).
double NearestFp8(NumFormat f, double x) {
  double best = std::nan("");
  int best_code = -1;
  for (int c = 0; c < 256; ++c) {
    const double v = DecodeFp8(f, static_cast<uint8_t>(c));
    if (std::isnan(v)) continue;
    if (best_code < 0) {
      best = v, best_code = c;
      continue;
    }
    const double d = std::fabs(v - x), db = std::fabs(best - x);
    if (d < db || (d == db && v != best && (c & 1) == 0 && (best_code & 1) == 1))
      best = v, best_code = c;
  }
  return best;
}

TEST(NumericsDtypes, Fp8MatchesExhaustiveNearestInRange) {
  TestRng rng{7};
  for (NumFormat f : {NumFormat::kFp8E4m3fn, NumFormat::kFp8E4m3fnuz}) {
    const double max = GetFormatInfo(f).max_finite;
    for (int i = 0; i < 20000; ++i) {
      const double x = rng.LogUniform(-13, 8);
      if (std::fabs(x) > max) continue;
      const double want = NearestFp8(f, x);
      const double got = RoundTo(f, x);
      ASSERT_EQ(got, want) << NumFormatName(f) << " x=" << x;
    }
  }
}

// IEEE 754 binary16 from its definition: 1 sign bit, 5 exponent bits (bias 15), 10 fraction
// bits; exponent 0 is subnormal (fraction x 2^-24), exponent 31 is inf / NaN.
double SoftFp16Value(uint16_t code) {
  const int exponent = (code >> 10) & 0x1f, fraction = code & 0x3ff;
  double magnitude;
  if (exponent == 0x1f) {
    magnitude = fraction == 0 ? kInf : std::nan("");
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<double>(fraction), -24);
  } else {
    magnitude = std::ldexp(static_cast<double>(1024 + fraction), exponent - 25);
  }
  return (code & 0x8000) ? -magnitude : magnitude;
}

// The binary16 code of x rounded to nearest, ties to even: a binary search over the positive
// finite codes 0x0000..0x7bff (their values ascend with the code). Beyond the largest finite
// value 65504 IEEE rounds to inf from 65520 on (65504 + half its spacing of 32; the tie goes to
// the even 2^16, i.e. inf). NaN gives the quiet NaN 0x7e00 with the input's sign.
uint16_t SoftFp16Code(double x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  if (std::isnan(x)) return sign | 0x7e00;
  const double a = std::fabs(x);
  if (a >= 65520.0) return sign | 0x7c00;
  uint16_t lo = 0, hi = 0x7bff;  // invariant: value(lo) <= a, and a < value(hi) unless lo == hi
  if (a >= SoftFp16Value(hi)) return sign | hi;
  while (hi - lo > 1) {
    const uint16_t mid = static_cast<uint16_t>((lo + hi) / 2);
    (SoftFp16Value(mid) <= a ? lo : hi) = mid;
  }
  const double below = a - SoftFp16Value(lo), above = SoftFp16Value(hi) - a;
  const uint16_t nearest = below < above ? lo : above < below ? hi : (lo % 2 == 0 ? lo : hi);
  return sign | nearest;
}

TEST(NumericsDtypes, SoftFp16ReferenceKnownCodes) {
  EXPECT_EQ(SoftFp16Value(0x3c00), 1.0);
  EXPECT_EQ(SoftFp16Value(0x7bff), 65504.0);
  EXPECT_EQ(SoftFp16Value(0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(SoftFp16Value(0x0400), std::ldexp(1.0, -14));
  EXPECT_EQ(SoftFp16Value(0xc000), -2.0);
  EXPECT_EQ(SoftFp16Value(0x7c00), kInf);
  EXPECT_EQ(SoftFp16Code(1.0 + std::ldexp(1.0, -11)), 0x3c00);      // tie: to the even 1.0
  EXPECT_EQ(SoftFp16Code(1.0 + 3 * std::ldexp(1.0, -11)), 0x3c02);  // tie: to the even 0x3c02
  EXPECT_EQ(SoftFp16Code(std::ldexp(1.0, -25)), 0x0000);  // half the smallest subnormal: to 0
  EXPECT_EQ(SoftFp16Code(std::ldexp(1.5, -25)), 0x0001);
  EXPECT_EQ(SoftFp16Code(65519.99), 0x7bff);
  EXPECT_EQ(SoftFp16Code(-65520.0), 0xfc00);
}

// Every binary16 code decodes to the definition's value, and every finite one encodes back.
TEST(NumericsDtypes, Fp16EveryCodeMatchesTheDefinition) {
  for (uint32_t c = 0; c <= 0xffff; ++c) {
    const uint16_t code = static_cast<uint16_t>(c);
    const double want = SoftFp16Value(code);
    const double got = DecodeFp16(code);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << "code " << c;
      continue;
    }
    ASSERT_EQ(got, want) << "code " << c;
    ASSERT_EQ(std::signbit(got), std::signbit(want)) << "code " << c;
    ASSERT_EQ(EncodeFp16(want), code) << "code " << c;
  }
}

TEST(NumericsDtypes, Fp16RoundingMatchesTheSoftwareReference) {
  TestRng rng{11};
  for (int i = 0; i < 200000; ++i) {
    const double x = rng.LogUniform(-27, 17);
    const uint16_t code = SoftFp16Code(x);
    ASSERT_EQ(EncodeFp16(x), code) << "x=" << x;
    ASSERT_EQ(RoundTo(NumFormat::kFp16, x), SoftFp16Value(code)) << "x=" << x;
    ASSERT_EQ(DecodeFp16(code), SoftFp16Value(code)) << "x=" << x;
  }
  EXPECT_EQ(RoundTo(NumFormat::kFp16, 65519.99), 65504.0);
  EXPECT_EQ(RoundTo(NumFormat::kFp16, 65520.0), kInf);
  EXPECT_EQ(EncodeFp16(std::nan("")), 0x7e00);
}

// The software reference itself against the compiler's binary16 conversion, on targets where
// the compiler has one (g++ >= 12 and clang >= 15 on x86-64 define __FLT16_MAX__; clang 14 does
// not, and there this test says so instead of passing silently).
TEST(NumericsDtypes, SoftFp16ReferenceMatchesCompilerFloat16) {
#if defined(__FLT16_MAX__)
  TestRng rng{17};
  for (int i = 0; i < 200000; ++i) {
    const double x = rng.LogUniform(-27, 17);
    const _Float16 h = static_cast<_Float16>(x);
    uint16_t bits;
    std::memcpy(&bits, &h, 2);
    ASSERT_EQ(SoftFp16Code(x), bits) << "x=" << x;
  }
#else
  GTEST_SKIP() << "this compiler has no _Float16 on this target; the software reference is "
                  "checked against the compiler in the g++ build (make verify)";
#endif
}

TEST(NumericsDtypes, Bf16MatchesIntegerRoundingOfFloatBits) {
  TestRng rng{13};
  for (int i = 0; i < 200000; ++i) {
    const float x = static_cast<float>(rng.LogUniform(-140, 128));
    if (std::isinf(x)) continue;
    uint32_t u;
    std::memcpy(&u, &x, 4);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    float want;
    std::memcpy(&want, &rounded, 4);
    ASSERT_EQ(RoundTo(NumFormat::kBf16, x), static_cast<double>(want)) << "x=" << x;
    ASSERT_EQ(EncodeBf16(x), static_cast<uint16_t>(rounded >> 16));
    ASSERT_EQ(DecodeBf16(static_cast<uint16_t>(rounded >> 16)), static_cast<double>(want));
  }
  EXPECT_EQ(EncodeBf16(std::nan("")), 0x7fc0);
  EXPECT_EQ(RoundTo(NumFormat::kBf16, 3.4e38), kInf);
}

// RoundTo's inline path (the bits of a value in the format's normal range, ties to even) gives
// the generic grid's value for every value it takes, and hands every other one to the grid:
// random doubles over every binade from below each format's subnormals to past its overflow,
// each format's exact ties (the bits dropped exactly half a unit, even and odd kept bits), the
// values next to its largest finite value and its smallest normal one, and the specials.
TEST(NumericsDtypes, RoundToEqualsTheGenericGridForEveryValue) {
  const auto same = [](double a, double b) {
    return (std::isnan(a) && std::isnan(b)) || (a == b && std::signbit(a) == std::signbit(b));
  };
  TestRng rng{29};
  for (const FormatInfo& f : internal::kFormats) {
    // (fp64 and fp32 have no inline path; a double past a float's range converted to float
    // would be undefined behaviour, which the sanitizer build reports.)
    if (f.format == NumFormat::kFp64 || f.format == NumFormat::kFp32) continue;
    std::vector<double> xs = {0.0, -0.0, kInf, -kInf, std::nan(""), f.max_finite, -f.max_finite,
                              std::nextafter(f.max_finite, kInf), std::ldexp(1.0, f.min_normal_exp),
                              std::nextafter(std::ldexp(1.0, f.min_normal_exp), 0.0),
                              std::numeric_limits<double>::denorm_min(), 1e300, -1e-300};
    // Ties: a kept fraction k (even and odd) plus exactly half a unit, in several binades.
    for (int binade : {f.min_normal_exp, f.min_normal_exp + 1, 0, 3, f.exponent_bias}) {
      for (uint64_t k : {uint64_t{0}, uint64_t{1}, uint64_t{2}, (uint64_t{1} << f.mantissa_bits) - 1}) {
        const double unit = std::ldexp(1.0, binade - f.mantissa_bits);
        const double tie = std::ldexp(1.0, binade) + static_cast<double>(k) * unit + unit / 2;
        xs.insert(xs.end(), {tie, -tie, std::nextafter(tie, 0.0), std::nextafter(tie, kInf)});
      }
    }
    // One unit-and-a-half past the largest finite value: where rounding up overflows.
    const double top_unit = std::ldexp(1.0, std::ilogb(f.max_finite) - f.mantissa_bits);
    xs.insert(xs.end(), {f.max_finite + top_unit / 2, std::nextafter(f.max_finite + top_unit / 2, 0.0)});
    for (int i = 0; i < 200000; ++i)
      xs.push_back(rng.LogUniform(f.min_normal_exp - f.mantissa_bits - 4,
                                  std::min(std::ilogb(f.max_finite) + 3, 1023)));
    for (const Fp8Overflow overflow : {Fp8Overflow::kNaN, Fp8Overflow::kSaturate}) {
      for (const double x : xs) {
        const double fast = RoundTo(f.format, x, overflow);
        const double grid = internal::RoundToGrid(f.format, x, overflow);
        ASSERT_TRUE(same(fast, grid)) << f.name << " x=" << std::hexfloat << x << " inline " << fast
                                      << " grid " << grid;
      }
    }
  }
}

TEST(NumericsDtypes, QuantizeAppliesPerTensorScale) {
  auto q = Quantize({1.0f, 100.0f, 1000.0f, -3.0f}, NumFormat::kFp8E4m3fn, 2.0);
  ASSERT_TRUE(q.ok());
  // 1000/2 = 500 is past 448 after rounding: NaN, as PyTorch's cast.
  EXPECT_EQ(q->stored[0], 0.5f);
  EXPECT_EQ(q->stored[1], 48.0f);
  EXPECT_TRUE(std::isnan(q->stored[2]));
  EXPECT_EQ(q->stored[3] * q->scale, -3.0);
  auto sat = Quantize({1000.0f}, NumFormat::kFp8E4m3fn, 2.0, Fp8Overflow::kSaturate);
  ASSERT_TRUE(sat.ok());
  EXPECT_EQ(sat->stored[0], 448.0f);
  auto bad = Quantize({1.0f}, NumFormat::kBf16, 0.0);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().field(), "scale");
  EXPECT_EQ(Quantize({1.0f}, NumFormat::kFp64, 1.0).status().field(), "format");
}

}  // namespace
}  // namespace mlasim::ref
