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

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
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

namespace internal {
// Every format's numbers, indexed by NumFormat (the table GetFormatInfo reads).
inline constexpr FormatInfo kFormats[] = {
    {NumFormat::kFp64, "fp64", 64, 52, 11, 1023, -1022, 0x1.fffffffffffffp1023, true, true,
     0x1p-53},
    {NumFormat::kFp32, "fp32", 32, 23, 8, 127, -126, 0x1.fffffep127, true, true, 0x1p-24},
    {NumFormat::kBf16, "bf16", 16, 7, 8, 127, -126, 0x1.fep127, true, true, 0x1p-8},
    {NumFormat::kFp16, "fp16", 16, 10, 5, 15, -14, 65504.0, true, true, 0x1p-11},
    {NumFormat::kFp8E4m3fn, "fp8_e4m3fn", 8, 3, 4, 7, -6, 448.0, false, true, 0x1p-4},
    {NumFormat::kFp8E4m3fnuz, "fp8_e4m3fnuz", 8, 3, 4, 8, -7, 240.0, false, false, 0x1p-4},
};
}  // namespace internal

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
//
// Inline for the loops that round whole tensors: a value in the format's normal range whose
// rounding stays finite (nearly every value a tensor holds) is rounded on its bits, ties to even
// on the bits dropped (the same value as the grid's: the quantum of a normal binade is one unit
// of the kept bits, and a carry into the next binade is the value rounded up); every other value
// (zero, subnormal in the format, overflow, inf, NaN) takes internal::RoundToGrid.
namespace internal {
// RoundTo for every value: the binade's quantum, clamped at the smallest normal binade
// (subnormals), ties to even; overflow, NaN and zeros as RoundTo states. kFp64 / kFp32 as well.
double RoundToGrid(NumFormat format, double x, Fp8Overflow overflow);
}  // namespace internal

// RoundTo(format, ., overflow) for loops that round many values to one format (a tensor, a row
// of weights): what the format fixes (the fraction bits a double drops, the binades rounded on
// the bits, the largest finite value) decided once, at construction.
class Rounder {
 public:
  explicit Rounder(NumFormat format, Fp8Overflow overflow = Fp8Overflow::kNaN)
      : format_(format), overflow_(overflow) {
    const auto i = static_cast<size_t>(format);
    if (format == NumFormat::kFp64 || format == NumFormat::kFp32 ||
        i >= std::size(internal::kFormats))
      return;  // every value takes internal::RoundToGrid
    const FormatInfo& f = internal::kFormats[i];
    const int drop = 52 - f.mantissa_bits;  // fraction bits of a double below the format's
    on_bits_ = true;
    drop_ = drop;
    below_half_ = (uint64_t{1} << (drop - 1)) - 1;
    keep_ = ~((uint64_t{1} << drop) - 1);
    min_normal_exp_ = f.min_normal_exp;
    max_finite_ = f.max_finite;
  }
  double operator()(double x) const {
    if (on_bits_) {
      uint64_t bits;
      std::memcpy(&bits, &x, sizeof bits);
      const int binade = static_cast<int>((bits >> 52) & 0x7ff) - 1023;  // inf / NaN: 1024
      if (binade >= min_normal_exp_ && binade < 1024) {
        const uint64_t rounded = (bits + below_half_ + ((bits >> drop_) & 1u)) & keep_;
        double r;
        std::memcpy(&r, &rounded, sizeof r);
        if (std::fabs(r) <= max_finite_) return r;
      }
    }
    return internal::RoundToGrid(format_, x, overflow_);
  }

 private:
  NumFormat format_;
  Fp8Overflow overflow_;
  bool on_bits_ = false;  // a format narrower than float: normal values rounded on their bits
  int drop_ = 0;
  uint64_t below_half_ = 0;
  uint64_t keep_ = 0;
  int min_normal_exp_ = 0;
  double max_finite_ = 0;
};

inline double RoundTo(NumFormat format, double x, Fp8Overflow overflow = Fp8Overflow::kNaN) {
  return Rounder(format, overflow)(x);
}

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
