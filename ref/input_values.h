// File: ref/input_values.h
//
// The values of q and the KV cache that ref::BuildMlaInputs makes, as pure functions of
// (stream, element index), usable from host C++ and from device code (.hip files compiled by
// nvcc or clang -x hip): the CPU numerics (ref/numerics.cpp) and the device input generator
// (kernels/inputs.hip) call the same functions, so a buffer generated on the device holds the
// same bytes as the one the CPU builds.
//
//   value n of a stream = amplitude * (2 * (mix(state + (n + 1) * gamma) >> 11) * 2^-53 - 1)
//
// rounded once to float: SplitMix64 (Steele, Lea, Flood 2014) read at counter n, which is
// exactly the n-th output of ref::SplitMix64 started at `state` (the stream's state is
// ref::SplitMix64::Stream's: StreamState). Then the value is rounded to its storage format
// (RoundToFormat: ties to even, subnormals, overflow to inf or, for fp8, NaN as ref::RoundTo)
// and encoded in the kernel's storage type (EncodeExact: bf16, fp16, fp32, fp8 e4m3fn; false
// when the value is not exactly representable, so the harness picks a wider type).
//
// No library calls: integer and double arithmetic whose every step is exact or a single IEEE
// rounding (double -> float), so host and device agree bit for bit.
#pragma once

#include <cstdint>

#include "ref/host_device.h"

namespace mlasim::ref::values {

inline constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;  // SplitMix64's increment

// SplitMix64's output function of a state.
MLASIM_HOST_DEVICE inline uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The initial state of ref::SplitMix64::Stream(seed, salt): the first output of a SplitMix64
// seeded with seed ^ (salt * 0xD1B54A32D192ED03).
MLASIM_HOST_DEVICE inline uint64_t StreamState(uint64_t seed, uint64_t salt) {
  return Mix64((seed ^ (salt * 0xD1B54A32D192ED03ull)) + kGamma);
}

// Output n (0-based) of a SplitMix64 whose state is `state`.
MLASIM_HOST_DEVICE inline uint64_t StreamBits(uint64_t state, uint64_t n) {
  return Mix64(state + (n + 1) * kGamma);
}

// Value n of a stream: uniform in [-amplitude, amplitude), rounded to float (ref::SplitMix64::
// Symmetric() times amplitude, as a float).
MLASIM_HOST_DEVICE inline float StreamValue(uint64_t state, uint64_t n, double amplitude) {
  const double unit = static_cast<double>(StreamBits(state, n) >> 11) * 0x1p-53;
  const double symmetric = 2.0 * unit - 1.0;  // exact: unit is a multiple of 2^-53 in [0, 1)
  return static_cast<float>(amplitude * symmetric);
}

// ---- float bits ------------------------------------------------------------------------------
MLASIM_HOST_DEVICE inline uint32_t FloatBits(float f) {
  union {
    float f;
    uint32_t u;
  } x{};
  x.f = f;
  return x.u;
}
MLASIM_HOST_DEVICE inline float BitsFloat(uint32_t u) {
  union {
    uint32_t u;
    float f;
  } x{};
  x.u = u;
  return x.f;
}
inline constexpr uint32_t kQuietNaNBits = 0x7fc00000u;  // std::nanf("")

// The storage formats of ref::NumFormat, by their enum value (ref/dtypes.h: kFp64 0, kFp32 1,
// kBf16 2, kFp16 3, kFp8E4m3fn 4, kFp8E4m3fnuz 5), as a device function can take them.
enum Format : int32_t {
  kFormatFp64 = 0,
  kFormatFp32 = 1,
  kFormatBf16 = 2,
  kFormatFp16 = 3,
  kFormatFp8E4m3fn = 4,
  kFormatFp8E4m3fnuz = 5,
};

// Shape of a narrow format: stored fraction bits, smallest normal binade, largest finite value,
// whether it has inf (else overflow gives NaN), whether it has -0.
struct FormatShape {
  int32_t mantissa_bits;
  int32_t min_normal_exp;
  double max_finite;
  bool has_inf;
  bool has_negative_zero;
};
MLASIM_HOST_DEVICE inline FormatShape ShapeOf(int32_t format) {
  switch (format) {
    case kFormatBf16: return {7, -126, 0x1.fep127, true, true};
    case kFormatFp16: return {10, -14, 65504.0, true, true};
    case kFormatFp8E4m3fn: return {3, -6, 448.0, false, true};
    default: return {3, -7, 240.0, false, false};  // kFormatFp8E4m3fnuz
  }
}

// 2^k as a double for k in [-1022, 1023].
MLASIM_HOST_DEVICE inline double Pow2(int32_t k) {
  union {
    uint64_t u;
    double d;
  } x{};
  x.u = static_cast<uint64_t>(k + 1023) << 52;
  return x.d;
}

// x rounded to `format` (ties to even, subnormals; overflow: +-inf, or NaN keeping the sign for
// the fp8 formats; e4m3fnuz has no -0), as a float: ref::RoundTo(format, x) with the default
// Fp8Overflow::kNaN for every float x. kFormatFp32 and kFormatFp64 return x.
MLASIM_HOST_DEVICE inline float RoundToFormat(float x, int32_t format) {
  if (format == kFormatFp32 || format == kFormatFp64) return x;
  const uint32_t u = FloatBits(x);
  const uint32_t sign = u & 0x80000000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return BitsFloat(kQuietNaNBits);  // ref::RoundTo: NaN -> quiet NaN
  const FormatShape f = ShapeOf(format);
  const float overflowed = f.has_inf ? BitsFloat(sign | 0x7f800000u) : BitsFloat(sign | kQuietNaNBits);
  if (a == 0x7f800000u) return overflowed;
  if (a == 0) return f.has_negative_zero ? x : 0.0f;
  // a = significand x 2^(e - 150) with a 24-bit significand (hidden bit set unless subnormal)
  const int32_t biased = static_cast<int32_t>(a >> 23);
  const uint32_t significand = biased == 0 ? (a & 0x7fffffu) : ((a & 0x7fffffu) | 0x800000u);
  const int32_t e = (biased == 0 ? 1 : biased) - 150;  // exponent of the significand's last bit
  int32_t binade = biased == 0 ? -127 : biased - 127;  // below every format's smallest normal
  if (binade < f.min_normal_exp) binade = f.min_normal_exp;
  const int32_t quantum = binade - f.mantissa_bits;  // the grid: multiples of 2^quantum
  const int32_t shift = quantum - e;
  uint64_t q = significand;
  if (shift > 0) {
    if (shift > 25) {
      q = 0;  // below a quarter quantum
    } else {
      const uint32_t rem = significand & ((1u << shift) - 1u), half = 1u << (shift - 1);
      q = significand >> shift;
      if (rem > half || (rem == half && (q & 1u))) ++q;
    }
  }
  const double r = static_cast<double>(q) * Pow2(shift > 0 ? quantum : e);  // exact
  if (r > f.max_finite) return overflowed;
  if (r == 0.0 && !f.has_negative_zero) return 0.0f;
  const float m = static_cast<float>(r);  // exact: r is on a grid finer formats hold
  return BitsFloat(FloatBits(m) | sign);
}

// ---- encodings in the kernel's storage types (kernels/mlasim_kut.h dtype codes) ------------
inline constexpr int32_t kDtypeBf16 = 1;       // MLASIM_KUT_BF16
inline constexpr int32_t kDtypeFp16 = 2;       // MLASIM_KUT_FP16
inline constexpr int32_t kDtypeFp32 = 3;       // MLASIM_KUT_FP32
inline constexpr int32_t kDtypeFp8E4m3fn = 4;  // MLASIM_KUT_FP8_E4M3FN

MLASIM_HOST_DEVICE inline int32_t DtypeBytes(int32_t dtype) {
  return dtype == kDtypeFp8E4m3fn ? 1 : dtype == kDtypeFp32 ? 4 : 2;
}

// The code of f in a format with `mbits` fraction bits, exponent bias `bias` and smallest normal
// binade `min_exp`, when f is exactly one of its finite values (|f| <= max, checked by the
// caller): false otherwise. Sign bit at `sign_shift`.
MLASIM_HOST_DEVICE inline bool EncodeGrid(uint32_t u, int32_t mbits, int32_t bias, int32_t min_exp,
                                          int32_t sign_shift, uint32_t* out) {
  const uint32_t sign = (u >> 31) << sign_shift, a = u & 0x7fffffffu;
  if (a == 0) return *out = sign, true;
  if ((a >> 23) == 0) return false;  // float subnormals: below every narrow format's grid
  const int32_t e = static_cast<int32_t>(a >> 23) - 127;
  const uint32_t full = (a & 0x7fffffu) | 0x800000u;
  if (e >= min_exp) {
    if ((full & ((1u << (23 - mbits)) - 1u)) != 0) return false;
    const uint32_t m = (a & 0x7fffffu) >> (23 - mbits);
    return *out = sign | (static_cast<uint32_t>(e + bias) << mbits) | m, true;
  }
  const int32_t drop = 23 - mbits + (min_exp - e);  // subnormal: quanta of 2^(min_exp - mbits)
  if (drop > 23) return false;
  if ((full & ((1u << drop) - 1u)) != 0) return false;
  return *out = sign | (full >> drop), true;
}

// Writes v as `dtype` (DtypeBytes(dtype) bytes, little-endian) to out; false (out unchanged)
// when v is not exactly a value of that type. NaN encodes as 0x7fc0 (bf16), 0x7e00 (fp16), the
// float's own bits (fp32), sign | 0x7f (e4m3fn); +-inf has no e4m3fn code.
MLASIM_HOST_DEVICE inline bool EncodeExact(float v, int32_t dtype, unsigned char* out) {
  const uint32_t u = FloatBits(v), a = u & 0x7fffffffu;
  uint32_t code = 0;
  int32_t bytes = DtypeBytes(dtype);
  if (dtype == kDtypeFp32) {
    code = u;
  } else if (dtype == kDtypeBf16) {
    if (a > 0x7f800000u) {
      code = 0x7fc0u;
    } else {
      if ((u & 0xffffu) != 0) return false;
      code = u >> 16;
    }
  } else if (dtype == kDtypeFp16) {
    if (a > 0x7f800000u) {
      code = 0x7e00u;
    } else if (a == 0x7f800000u) {
      code = ((u >> 31) << 15) | 0x7c00u;
    } else {
      if (BitsFloat(a) > 65504.0f) return false;
      if (!EncodeGrid(u, 10, 15, -14, 15, &code)) return false;
    }
  } else if (dtype == kDtypeFp8E4m3fn) {
    if (a > 0x7f800000u) {
      code = ((u >> 31) << 7) | 0x7fu;
    } else {
      if (a >= 0x7f800000u || BitsFloat(a) > 448.0f) return false;
      if (!EncodeGrid(u, 3, 7, -6, 7, &code)) return false;
    }
  } else {
    return false;
  }
  for (int32_t i = 0; i < bytes; ++i) out[i] = static_cast<unsigned char>(code >> (8 * i));
  return true;
}

}  // namespace mlasim::ref::values
