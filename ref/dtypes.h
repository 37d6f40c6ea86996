// File: ref/dtypes.h
//
// The number formats MLA decode stores its inputs in, rounded exactly as the formats do, and
// per-tensor scales (value = stored * scale). Used by the CPU numerics reference
// (ref/attention.h) to produce the same input values a GPU kernel would see.
//
//   format          bits  significand  exp bias  max finite   inf  NaN encodings    -0
//   fp32            32    24           127       3.4e38       yes  many             yes
//   bf16            16    8            127       3.39e38      yes  many             yes
//   fp16            16    11           15        65504        yes  many             yes
//   fp8 e4m3fn      8     4            7         448          no   0x7f, 0xff       yes
//   fp8 e4m3fnuz    8     4            8         240          no   0x80 only        no
//
// Rounding is round-to-nearest, ties to even, with subnormals. Overflow (a value whose rounded
// magnitude exceeds the largest finite value): bf16/fp16/fp32 give +-inf as IEEE 754 does; the
// fp8 formats have no infinity and give NaN by default, which is what PyTorch's
// `tensor.to(torch.float8_e4m3fn / float8_e4m3fnuz)` does (it does not saturate: 470 -> NaN,
// 464 -> 448 for e4m3fn; 248 -> NaN, 247 -> 240 for e4m3fnuz; +-inf -> NaN).
// Fp8Overflow::kSaturate clamps to +-max instead (what quantisation kernels do when they clamp
// before the cast). e4m3fnuz has no negative zero: a negative value that rounds to zero is +0.
//
// Which fp8 a target uses: aiter uses float8_e4m3fnuz on gfx942 and float8_e4m3fn on gfx950
// (aiter-mla-metadata.md §15); NVIDIA sm90 uses e4m3fn.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "ref/status.h"
#include "ref/target.h"

namespace mlasim::ref {

enum class NumFormat : uint8_t { kFp64, kFp32, kBf16, kFp16, kFp8E4m3fn, kFp8E4m3fnuz };

enum class Fp8Overflow : uint8_t {
  kNaN,       // PyTorch's cast: out of range (after rounding) and +-inf become NaN
  kSaturate,  // clamp to +-max finite; +-inf -> +-max; NaN stays NaN
};

struct FormatInfo {
  NumFormat format;
  const char* name;       // "bf16", "fp8_e4m3fn", ...
  int32_t bits;           // storage width
  int32_t mantissa_bits;  // stored fraction bits (significand precision - 1)
  int32_t exponent_bits;
  int32_t exponent_bias;
  int32_t min_normal_exp;  // unbiased exponent of the smallest normal value
  double max_finite;
  bool has_inf;
  bool has_negative_zero;
  // Unit roundoff u = 2^-(mantissa_bits + 1): the largest relative error of one rounding to
  // nearest of a value in the normal range.
  double unit_roundoff;
};

const FormatInfo& GetFormatInfo(NumFormat format);
const char* NumFormatName(NumFormat format);
// Accepts the names of FormatInfo::name ("fp32", "bf16", "fp16", "fp8_e4m3fn", "fp8_e4m3fnuz",
// "fp64"). Errors: InvalidArgument(field).
StatusOr<NumFormat> ParseNumFormat(std::string_view text, std::string_view field);

// The format a planner dtype means on a target: kFp8 is e4m3fnuz on gfx942 and e4m3fn on
// gfx950 and sm90 (aiter-mla-metadata.md §15).
NumFormat FormatForDType(DType dtype, Arch target);

// Rounds x to the nearest value of `format` (ties to even), returned as a double (exact: every
// value of these formats is a double). NaN -> NaN. kFp64 returns x unchanged; kFp32 is the
// C++ double -> float conversion. `overflow` applies to the fp8 formats only.
double RoundTo(NumFormat format, double x, Fp8Overflow overflow = Fp8Overflow::kNaN);

// Bit encodings. EncodeFp8/DecodeFp8 need an fp8 format (others: MLASIM_ASSERT). NaN encodes
// as 0x7f (e4m3fn, 0xff when negative) and 0x80 (e4m3fnuz); IEEE NaNs as the quiet NaN
// 0x7fc0 (bf16) / 0x7e00 (fp16) with the sign of the input.
uint8_t EncodeFp8(NumFormat format, double x, Fp8Overflow overflow = Fp8Overflow::kNaN);
double DecodeFp8(NumFormat format, uint8_t bits);
uint16_t EncodeBf16(double x);
double DecodeBf16(uint16_t bits);
uint16_t EncodeFp16(double x);
double DecodeFp16(uint16_t bits);

// A tensor quantised with one scale: value[i] = stored[i] * scale. `stored` holds the values
// of `format` exactly (every format here fits in a float).
struct QuantizedTensor {
  NumFormat format = NumFormat::kFp32;
  double scale = 1.0;
  std::vector<float> stored;
};

// stored[i] = RoundTo(format, x[i] / scale). Errors: InvalidArgument("scale") unless scale is
// finite and > 0; InvalidArgument("format") for kFp64 (a float cannot hold it).
StatusOr<QuantizedTensor> Quantize(const std::vector<float>& x, NumFormat format, double scale,
                                   Fp8Overflow overflow = Fp8Overflow::kNaN);

}  // namespace mlasim::ref
