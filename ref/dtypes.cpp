// Rounding to the storage formats. One generic algorithm (RoundToGrid) serves every format
// narrower than a double: the value's quantum is 2^(e - mantissa_bits) for its binade e,
// clamped below at the smallest normal binade (which gives subnormals), and the scaled value is
// rounded to an integer with ties to even. Every step is exact in double arithmetic.
#include "ref/dtypes.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

namespace mlasim::ref {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

using internal::kFormats;

bool IsFp8(NumFormat f) {
  return f == NumFormat::kFp8E4m3fn || f == NumFormat::kFp8E4m3fnuz;
}

// Rounds 0 <= y < 2^52 to an integer, ties to even: adding 2^52 leaves no fraction bits, so the
// addition itself rounds, in the IEEE default mode (round to nearest, ties to even), which this
// project never changes (and builds without -ffast-math, which could fold the two operations).
double RoundHalfEven(double y) {
  constexpr double kNoFractionBits = 0x1p52;
  const volatile double shifted = y + kNoFractionBits;  // volatile: keep the rounding addition
  return shifted - kNoFractionBits;
}

// |x| rounded to the format's grid with an unbounded exponent range above (overflow is the
// caller's decision). x must be finite and > 0.
// 2^k as a double, for k in [-1022, 1023] (a normal power of two: multiplying by it is exact
// while the product stays normal).
double Pow2(int k) {
  const uint64_t bits = static_cast<uint64_t>(k + 1023) << 52;
  double p;
  std::memcpy(&p, &bits, sizeof p);
  return p;
}

// The binade of a finite a > 0: floor(log2(a)), read from the exponent field (a subnormal double
// reads as -1023, below every format's smallest normal binade, so the clamp below gives the
// same result as its true binade would).
int Binade(double a) {
  uint64_t bits;
  std::memcpy(&bits, &a, sizeof bits);
  return static_cast<int>((bits >> 52) & 0x7ff) - 1023;
}

double RoundMagnitude(const FormatInfo& f, double a) {
  const int binade = std::max(Binade(a), f.min_normal_exp);
  const int quantum_exp = binade - f.mantissa_bits;
  // exact: power-of-two scalings; |a| * 2^-quantum_exp < 2^(mantissa_bits + 1) stays normal, and
  // the rounded integer times 2^quantum_exp is on the format's grid (quantum_exp >= -1022 for
  // every format narrower than a double)
  const double scaled = a * Pow2(-quantum_exp);
  return RoundHalfEven(scaled) * Pow2(quantum_exp);
}

double Overflowed(const FormatInfo& f, double x, Fp8Overflow overflow) {
  if (f.has_inf) return std::copysign(kInf, x);
  if (overflow == Fp8Overflow::kSaturate) return std::copysign(f.max_finite, x);
  return std::copysign(kNaN, x);  // keeps the sign: e4m3fn encodes -NaN as 0xff
}

// Generic encoder for the small formats: sign | exponent field | fraction, from a value that is
// already on the format's grid (finite, |r| <= max) or NaN/inf.
uint32_t EncodeSmall(const FormatInfo& f, double r) {
  const uint32_t sign_bit = std::signbit(r) ? (1u << (f.bits - 1)) : 0u;
  const uint32_t exp_all_ones = (1u << f.exponent_bits) - 1u;
  if (std::isnan(r)) {
    if (f.format == NumFormat::kFp8E4m3fnuz) return 0x80u;
    if (f.format == NumFormat::kFp8E4m3fn) return sign_bit | 0x7fu;
    return sign_bit | (exp_all_ones << f.mantissa_bits) | (1u << (f.mantissa_bits - 1));
  }
  if (std::isinf(r)) return sign_bit | (exp_all_ones << f.mantissa_bits);
  const double a = std::fabs(r);
  if (a == 0.0) return f.has_negative_zero ? sign_bit : 0u;
  int e2 = 0;
  std::frexp(a, &e2);
  const int binade = e2 - 1;
  uint32_t exp_field = 0;
  double frac = 0;
  if (binade < f.min_normal_exp) {  // subnormal: fraction counts quanta of the smallest binade
    frac = std::ldexp(a, f.mantissa_bits - f.min_normal_exp);
  } else {
    exp_field = static_cast<uint32_t>(binade + f.exponent_bias);
    frac = std::ldexp(a, f.mantissa_bits - binade) - std::ldexp(1.0, f.mantissa_bits);
  }
  return sign_bit | (exp_field << f.mantissa_bits) | static_cast<uint32_t>(frac);
}

double DecodeSmall(const FormatInfo& f, uint32_t bits) {
  const uint32_t frac_mask = (1u << f.mantissa_bits) - 1u;
  const uint32_t exp_all_ones = (1u << f.exponent_bits) - 1u;
  const bool negative = (bits >> (f.bits - 1)) & 1u;
  const uint32_t exp_field = (bits >> f.mantissa_bits) & exp_all_ones;
  const uint32_t frac = bits & frac_mask;
  if (f.format == NumFormat::kFp8E4m3fnuz && bits == 0x80u) return kNaN;
  if (f.format == NumFormat::kFp8E4m3fn && exp_field == exp_all_ones && frac == frac_mask)
    return kNaN;
  if (f.has_inf && exp_field == exp_all_ones) {
    if (frac != 0) return kNaN;
    return negative ? -kInf : kInf;
  }
  double a = 0;
  if (exp_field == 0) {
    a = std::ldexp(static_cast<double>(frac), f.min_normal_exp - f.mantissa_bits);
  } else {
    a = std::ldexp(static_cast<double>(frac | (1u << f.mantissa_bits)),
                   static_cast<int>(exp_field) - f.exponent_bias - f.mantissa_bits);
  }
  return negative ? -a : a;
}

}  // namespace

const FormatInfo& GetFormatInfo(NumFormat format) {
  const auto i = static_cast<size_t>(format);
  MLASIM_ASSERT(i < std::size(kFormats), "unknown NumFormat");
  return kFormats[i];
}

const char* NumFormatName(NumFormat format) {
  return GetFormatInfo(format).name;
}

StatusOr<NumFormat> ParseNumFormat(std::string_view text, std::string_view field) {
  for (const FormatInfo& f : kFormats)
    if (text == f.name) return f.format;
  return InvalidArgumentError(std::string(field),
                              "unknown number format '" + std::string(text) +
                                  "' (expected fp64, fp32, bf16, fp16, fp8_e4m3fn, fp8_e4m3fnuz)");
}

NumFormat FormatForDType(DType dtype, Arch target) {
  switch (dtype) {
    case DType::kBf16: return NumFormat::kBf16;
    case DType::kFp16: return NumFormat::kFp16;
    case DType::kFp32: return NumFormat::kFp32;
    case DType::kFp8:
      return target == Arch::kGfx942 ? NumFormat::kFp8E4m3fnuz : NumFormat::kFp8E4m3fn;
  }
  return NumFormat::kFp32;
}

double internal::RoundToGrid(NumFormat format, double x, Fp8Overflow overflow) {
  if (format == NumFormat::kFp64) return x;
  if (format == NumFormat::kFp32) return static_cast<double>(static_cast<float>(x));
  const FormatInfo& f = GetFormatInfo(format);
  if (std::isnan(x)) return kNaN;
  if (std::isinf(x)) return Overflowed(f, x, overflow);
  const double a = std::fabs(x);
  if (a == 0.0) return f.has_negative_zero ? x : 0.0;
  const double r = RoundMagnitude(f, a);
  if (r > f.max_finite) return Overflowed(f, x, overflow);
  if (r == 0.0 && !f.has_negative_zero) return 0.0;
  return std::copysign(r, x);
}

uint8_t EncodeFp8(NumFormat format, double x, Fp8Overflow overflow) {
  MLASIM_ASSERT(IsFp8(format), "EncodeFp8 needs an fp8 format");
  return static_cast<uint8_t>(EncodeSmall(GetFormatInfo(format), RoundTo(format, x, overflow)));
}

double DecodeFp8(NumFormat format, uint8_t bits) {
  MLASIM_ASSERT(IsFp8(format), "DecodeFp8 needs an fp8 format");
  return DecodeSmall(GetFormatInfo(format), bits);
}

uint16_t EncodeBf16(double x) {
  return static_cast<uint16_t>(
      EncodeSmall(GetFormatInfo(NumFormat::kBf16), RoundTo(NumFormat::kBf16, x)));
}
double DecodeBf16(uint16_t bits) {
  return DecodeSmall(GetFormatInfo(NumFormat::kBf16), bits);
}
uint16_t EncodeFp16(double x) {
  return static_cast<uint16_t>(
      EncodeSmall(GetFormatInfo(NumFormat::kFp16), RoundTo(NumFormat::kFp16, x)));
}
double DecodeFp16(uint16_t bits) {
  return DecodeSmall(GetFormatInfo(NumFormat::kFp16), bits);
}

StatusOr<QuantizedTensor> Quantize(const std::vector<float>& x, NumFormat format, double scale,
                                   Fp8Overflow overflow) {
  if (!(std::isfinite(scale) && scale > 0))
    return InvalidArgumentError("scale", "must be finite and > 0 (value = stored * scale)");
  if (format == NumFormat::kFp64)
    return InvalidArgumentError("format", "fp64 does not fit the float storage of a tensor");
  QuantizedTensor t;
  t.format = format;
  t.scale = scale;
  t.stored.resize(x.size());
  const Rounder round(format, overflow);
  if (scale == 1.0) {  // x / 1 is x: no division per element (the same values)
    for (size_t i = 0; i < x.size(); ++i)
      t.stored[i] = static_cast<float>(round(static_cast<double>(x[i])));
  } else {
    for (size_t i = 0; i < x.size(); ++i)
      t.stored[i] = static_cast<float>(round(static_cast<double>(x[i]) / scale));
  }
  return t;
}

}  // namespace mlasim::ref
