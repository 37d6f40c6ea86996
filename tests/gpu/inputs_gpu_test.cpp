// kernels/inputs.hip: q and the KV cache generated on the device, byte for byte against what the
// host builds (ref::BuildMlaInputs, encoded as the harness encodes it), NaN-poisoned unused KV
// rows and every storage type (bf16, fp16, fp32, fp8 e4m3fn) included; the stats the harness
// picks storage types and tolerances from; the input check; the GPU reference over generated
// inputs against the one over uploaded inputs. Every test skips without a device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/gpu_api.h"
#include "kernels/mlasim_kut.h"
#include "ref/input_values.h"
#include "ref/numerics.h"
#include "tests/ref/plan_builders.h"

namespace mlasim {
namespace {

namespace v = ref::values;

#define SKIP_WITHOUT_GPU() \
  if (!gpu::available()) GTEST_SKIP() << "no GPU device (GPU_BACKEND=NONE or none visible)"

struct Built {
  ref::MlaInputs in;
  ref::MlaValueSource src;
};
Built Build(const ref::PlanRequest& r, int32_t d = 576, int32_t dv = 512) {
  ref::NumericsOptions o;
  o.seed = 7;
  o.head_dim_qk = d;
  o.head_dim_v = dv;
  Built b;
  auto in = ref::BuildMlaInputs(r, o, &b.src);
  EXPECT_TRUE(in.ok()) << in.status().ToString();
  if (in.ok()) b.in = std::move(*in);
  return b;
}

// `r`'s inputs without values (what the device generator fills): everything but q and the cache.
ref::MlaInputs ShapeOnly(const ref::PlanRequest& r) {
  ref::NumericsOptions o;
  o.seed = 7;
  o.fill_values = false;
  ref::MlaValueSource src;
  auto shape = ref::BuildMlaInputs(r, o, &src);
  EXPECT_TRUE(shape.ok()) << shape.status().ToString();
  return shape.ok() ? std::move(*shape) : ref::MlaInputs{};
}

gpu::GeneratedTensor QTensor(const Built& b) {
  gpu::GeneratedTensor t;
  t.state = b.src.q_state;
  t.amplitude = b.src.amplitude;
  t.format = static_cast<int32_t>(b.src.q_format);
  t.rows = b.in.q_rows();
  t.cols = b.in.num_heads * b.in.head_dim_qk;
  return t;
}
gpu::GeneratedTensor KvTensor(const Built& b) {
  gpu::GeneratedTensor t;
  t.state = b.src.kv_state;
  t.amplitude = b.src.amplitude;
  t.format = static_cast<int32_t>(b.src.kv_format);
  t.rows = int64_t{b.in.num_pages} * b.in.page_size;
  t.cols = b.in.head_dim_qk;
  t.row_stream = b.src.kv_row_token;
  return t;
}

// The host's bytes: `values` encoded as dtype, then zero up to `elements` (or cut there).
std::vector<unsigned char> HostBytes(const std::vector<float>& values, int32_t dtype,
                                     int64_t elements) {
  const int eb = v::DtypeBytes(dtype);
  std::vector<unsigned char> out(static_cast<size_t>(elements * eb), 0);
  for (int64_t i = 0; i < elements && i < static_cast<int64_t>(values.size()); ++i)
    if (!v::EncodeExact(values[i], dtype, out.data() + i * eb))
      for (int k = 0; k < eb; ++k) out[i * eb + k] = 0xFF;
  return out;
}

std::vector<unsigned char> DeviceBytes(const gpu::GeneratedTensor& t, int32_t dtype,
                                       int64_t elements) {
  const size_t n = static_cast<size_t>(elements * v::DtypeBytes(dtype));
  void* d = gpu::device_alloc(std::max<size_t>(n, 1));
  gpu::fill_generated(t, dtype, d, elements);
  std::vector<unsigned char> out(n);
  gpu::copy_to_host(out.data(), d, n);
  gpu::device_free(d);
  return out;
}

int64_t FirstDifference(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b) {
  if (a.size() != b.size()) return -2;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return static_cast<int64_t>(i);
  return -1;
}

// Every dtype for q and the cache of one request, the device's bytes against the host's.
void ExpectSameBytes(const ref::PlanRequest& r) {
  const Built b = Build(r);
  const gpu::GeneratedTensor q = QTensor(b), kv = KvTensor(b);
  for (const int32_t dtype : {v::kDtypeBf16, v::kDtypeFp16, v::kDtypeFp32, v::kDtypeFp8E4m3fn}) {
    // q with fewer rows than modelled (cut) and more (zero-padded), and the cache
    for (const int64_t elements : {q.rows * q.cols, (q.rows - 1) * q.cols, (q.rows + 3) * q.cols})
      ASSERT_EQ(FirstDifference(DeviceBytes(q, dtype, elements), HostBytes(b.in.q, dtype, elements)),
                -1)
          << "q dtype " << dtype << " elements " << elements;
    const int64_t kv_elems = kv.rows * kv.cols;
    ASSERT_EQ(FirstDifference(DeviceBytes(kv, dtype, kv_elems),
                              HostBytes(b.in.kv_cache, dtype, kv_elems)),
              -1)
        << "kv dtype " << dtype;
  }
}

TEST(GpuInputs, DeviceBytesAreTheHostBytes) {
  SKIP_WITHOUT_GPU();
  ref::PlanRequest r = ref::test::DenseRequest(ref::Arch::kGfx950, 16, 2, {37, 0, 20, 129}, 4, 16);
  ExpectSameBytes(r);  // bf16 q and KV
  r.q_dtype = ref::DType::kFp16;
  r.kv_dtype = ref::DType::kFp8;  // e4m3fn on gfx950
  ExpectSameBytes(r);
  r.target = ref::Arch::kGfx942;  // e4m3fnuz: off e4m3fn's grid below 2^-6 (0xFF bytes there)
  ExpectSameBytes(r);
  ExpectSameBytes(ref::test::SparseRequest(ref::Arch::kGfx950, 16, 2, {10, 40}, 8, 4));
  ExpectSameBytes(ref::test::DenseRequest(ref::Arch::kGfx950, 128, 4, {1000, 3, 64}, 8, 64));
}

TEST(GpuInputs, UnusedKvRowsHoldNaN) {
  SKIP_WITHOUT_GPU();
  const Built b = Build(ref::test::DenseRequest(ref::Arch::kGfx950, 16, 1, {20, 3}, 4, 16), 16, 16);
  const gpu::GeneratedTensor kv = KvTensor(b);
  const std::vector<unsigned char> bytes = DeviceBytes(kv, v::kDtypeBf16, kv.rows * kv.cols);
  int64_t nan_rows = 0;
  for (int64_t row = 0; row < kv.rows; ++row) {
    if (b.src.kv_row_token[row] >= 0) continue;
    ++nan_rows;
    for (int32_t x = 0; x < kv.cols; ++x) {
      const size_t at = static_cast<size_t>((row * kv.cols + x) * 2);
      ASSERT_EQ(bytes[at] | bytes[at + 1] << 8, 0x7fc0) << row;
    }
  }
  EXPECT_EQ(nan_rows, 80 - 23);  // 5 pages of 16 rows (2 spare), 23 tokens
}

TEST(GpuInputs, StatsAreTheHostsChoice) {
  SKIP_WITHOUT_GPU();
  ref::PlanRequest r = ref::test::DenseRequest(ref::Arch::kGfx942, 16, 2, {37, 20}, 4, 16);
  r.kv_dtype = ref::DType::kFp8;
  const Built b = Build(r);
  const gpu::GeneratedStats qs = gpu::inspect_generated(QTensor(b), 0);
  const gpu::GeneratedStats ks = gpu::inspect_generated(KvTensor(b), b.in.head_dim_v);
  auto exact = [](const std::vector<float>& vals) {
    uint32_t m = 0;
    unsigned char buf[4];
    for (int32_t d = 1; d <= 4; ++d) {
      bool all = true;
      for (float x : vals) all = all && v::EncodeExact(x, d, buf);
      if (all) m |= 1u << d;
    }
    return m;
  };
  EXPECT_EQ(qs.exact_dtypes, exact(b.in.q));
  EXPECT_EQ(ks.exact_dtypes, exact(b.in.kv_cache));
  EXPECT_TRUE(qs.exact_dtypes & (1u << v::kDtypeBf16));
  EXPECT_TRUE(qs.exact_dtypes & (1u << v::kDtypeFp32));
  EXPECT_FALSE(qs.exact_dtypes & (1u << v::kDtypeFp8E4m3fn));
  float vmax = 0;
  for (int64_t row = 0; row < int64_t{b.in.num_pages} * b.in.page_size; ++row)
    for (int32_t x = 0; x < b.in.head_dim_v; ++x) {
      const float f = b.in.kv_cache[row * b.in.head_dim_qk + x];
      if (std::isfinite(f)) vmax = std::max(vmax, std::fabs(f));
    }
  EXPECT_EQ(v::FloatBits(ks.abs_max), v::FloatBits(vmax));
  EXPECT_GT(vmax, 0.9f);
}

TEST(GpuInputs, DiffFindsEveryChangedByte) {
  SKIP_WITHOUT_GPU();
  const Built b = Build(ref::test::DenseRequest(ref::Arch::kGfx950, 16, 2, {37, 20}, 4, 16));
  const gpu::GeneratedTensor q = QTensor(b);
  const int64_t n = q.rows * q.cols;
  void* d = gpu::device_alloc(static_cast<size_t>(n * 2));
  gpu::fill_generated(q, v::kDtypeBf16, d, n);
  EXPECT_EQ(gpu::diff_generated(q, v::kDtypeBf16, d, n).changed_bytes, 0);
  EXPECT_EQ(gpu::diff_generated(q, v::kDtypeBf16, d, n).first_byte, -1);
  const unsigned char junk[3] = {0x00, 0x11, 0x22};
  gpu::copy_to_device(static_cast<unsigned char*>(d) + 1001, junk, 3);
  const gpu::GeneratedDiff diff = gpu::diff_generated(q, v::kDtypeBf16, d, n);
  std::vector<unsigned char> host = HostBytes(b.in.q, v::kDtypeBf16, n);
  int64_t want = 0;
  for (int k = 0; k < 3; ++k) want += host[1001 + k] != junk[k];
  EXPECT_EQ(diff.changed_bytes, want);
  EXPECT_GE(diff.first_byte, 1001);
  EXPECT_LE(diff.first_byte, 1003);
  gpu::device_free(d);
  EXPECT_THROW(gpu::fill_generated(q, 5, d, n), std::invalid_argument);  // int32: not a value type
  EXPECT_THROW(gpu::fill_generated(q, v::kDtypeBf16, nullptr, 1), std::invalid_argument);
  gpu::GeneratedTensor bad = q;
  bad.row_stream = {1, 2};  // neither empty nor one entry per row
  EXPECT_THROW(gpu::inspect_generated(bad, 0), std::invalid_argument);
}

TEST(GpuInputs, ReferenceOverGeneratedInputsIsTheUploadedOne) {
  SKIP_WITHOUT_GPU();
  for (const ref::PlanRequest& r :
       {ref::test::DenseRequest(ref::Arch::kGfx950, 16, 2, {37, 0, 300}, 4, 16),
        ref::test::SparseRequest(ref::Arch::kGfx950, 16, 2, {10, 40}, 8, 4)}) {
    const Built b = Build(r);
    const ref::MlaInputs shape = ShapeOnly(r);
    const ref::AttentionOutput want = gpu::reference_attention(b.in);
    const ref::AttentionOutput got = gpu::reference_attention(shape, QTensor(b), KvTensor(b));
    ASSERT_EQ(got.o.size(), want.o.size());
    EXPECT_EQ(std::memcmp(got.o.data(), want.o.data(), want.o.size() * sizeof(double)), 0);
    EXPECT_EQ(std::memcmp(got.lse.data(), want.lse.data(), want.lse.size() * sizeof(double)), 0);
  }
}


// ---- gpu::compare_on_device: ref::CompareTensors where the data is -------------------------------

// bf16 bits of `f` (round to nearest even; the tests' values are finite or NaN / inf already).
uint16_t Bf16Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return 0x7fc0;
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}
double FromBf16(uint16_t b) {
  const uint32_t u = uint32_t{b} << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// n expected values and an actual tensor (bf16 or fp32) near them, with NaN / inf pairs that
// match and that do not, exact zeros, and two elements that tie for the largest error.
struct CompareCase {
  std::vector<float> expected;
  std::vector<uint16_t> actual_bf16;
  std::vector<float> actual_fp32;
  std::vector<double> actual, expected_d;  // what CompareTensors takes
  std::vector<uint8_t> skip_groups;
};
CompareCase MakeCompareCase(int64_t n, int32_t group, bool fp32, uint64_t seed) {
  ref::SplitMix64 rng(seed);
  CompareCase c;
  const float inf = INFINITY, nan = NAN;
  for (int64_t i = 0; i < n; ++i) {
    float y = static_cast<float>(rng.Symmetric() * 4.0);
    float x = y + static_cast<float>(rng.Symmetric() * 1e-3);
    switch (rng.Below(40)) {
      case 0: x = nan; break;             // NaN mismatch
      case 1: y = nan, x = nan; break;    // the same anomaly: not counted
      case 2: x = inf; break;             // inf mismatch
      case 3: x = inf, y = inf; break;    // the same infinity
      case 4: x = -inf, y = inf; break;   // opposite infinities
      case 5: y = 0; break;               // no relative error
      case 6: x = y; break;               // exact
      default: break;
    }
    c.expected.push_back(y);
    c.actual_bf16.push_back(Bf16Bits(x));
    c.actual_fp32.push_back(x);
  }
  if (n >= 8) {  // a tie for max_abs (and max_rel) far apart: the first index must win
    c.expected[n / 3] = 1.0f, c.expected[n - 2] = 1.0f;
    c.actual_fp32[n / 3] = 9.0f, c.actual_fp32[n - 2] = 9.0f;
    c.actual_bf16[n / 3] = Bf16Bits(9.0f), c.actual_bf16[n - 2] = Bf16Bits(9.0f);
  }
  for (int64_t i = 0; i < n; ++i) {
    c.actual.push_back(fp32 ? c.actual_fp32[i] : FromBf16(c.actual_bf16[i]));
    c.expected_d.push_back(c.expected[i]);
  }
  for (int64_t g = 0; g < (n + group - 1) / group; ++g) c.skip_groups.push_back(rng.Below(7) == 0);
  return c;
}

void ExpectSameComparison(const ref::CompareResult& got, const ref::CompareResult& want,
                          const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(got.elements, want.elements);
  EXPECT_EQ(got.nan_mismatches, want.nan_mismatches);
  EXPECT_EQ(got.inf_mismatches, want.inf_mismatches);
  EXPECT_EQ(got.first_anomaly_mismatch, want.first_anomaly_mismatch);
  EXPECT_EQ(got.max_abs, want.max_abs);
  EXPECT_EQ(got.max_abs_index, want.max_abs_index);
  EXPECT_EQ(got.max_rel, want.max_rel);
  EXPECT_EQ(got.max_rel_index, want.max_rel_index);
  EXPECT_EQ(got.tolerance_violations, want.tolerance_violations);
  EXPECT_EQ(got.first_violation, want.first_violation);
  // a reordered double sum of <= 262,221 terms
  EXPECT_NEAR(got.cos_diff, want.cos_diff, 1e-9 * std::max(want.cos_diff, 1e-300));
  EXPECT_EQ(got.passed, want.passed);
}

// Device copies of a test's vectors, freed at the end of the test.
struct DeviceCopies {
  std::vector<void*> ptrs;
  template <class T>
  T* Upload(const std::vector<T>& v) {
    void* p = gpu::device_alloc(std::max<size_t>(v.size(), 1) * sizeof(T));
    ptrs.push_back(p);
    gpu::copy_to_device(p, v.data(), v.size() * sizeof(T));
    return static_cast<T*>(p);
  }
  ~DeviceCopies() {
    for (void* p : ptrs) gpu::device_free(p);
  }
};

TEST(GpuCompare, IsCompareTensorsOnTheDevice) {
  SKIP_WITHOUT_GPU();
  // 0, 1, one block, one past it, and past the grid's 1024 blocks of 256 (the stride loop).
  for (const int64_t n : {int64_t{0}, int64_t{1}, int64_t{255}, int64_t{256}, int64_t{257},
                          int64_t{1024} * 256 + 77})
    for (const int32_t group : {1, 512})
      for (const bool fp32 : {false, true})
        for (const bool with_skip : {false, true}) {
          const CompareCase c = MakeCompareCase(n, group, fp32, 11 + n + group);
          DeviceCopies d;
          const void* actual =
              fp32 ? static_cast<const void*>(d.Upload(c.actual_fp32)) : d.Upload(c.actual_bf16);
          const float* expected = d.Upload(c.expected);
          ref::Tolerance tol{2e-3, 1e-3, 1e-6};
          std::vector<uint8_t> skip_elems;
          for (int64_t i = 0; i < n; ++i) skip_elems.push_back(c.skip_groups[i / group]);
          const ref::CompareResult want =
              ref::CompareTensors(c.actual.data(), c.expected_d.data(), n, tol,
                                  with_skip ? skip_elems.data() : nullptr);
          const ref::CompareResult got = gpu::compare_on_device(
              actual, fp32 ? MLASIM_KUT_FP32 : MLASIM_KUT_BF16, expected, n, group,
              with_skip ? c.skip_groups.data() : nullptr, tol);
          ExpectSameComparison(got, want,
                               "n " + std::to_string(n) + " group " + std::to_string(group) +
                                   (fp32 ? " fp32" : " bf16") + (with_skip ? " skip" : ""));
          if (n > 1000) {  // the case exercises every rule
            EXPECT_GT(want.nan_mismatches, 0);
            EXPECT_GT(want.inf_mismatches, 0);
            EXPECT_GT(want.tolerance_violations, 0);
            if (!with_skip) {
              EXPECT_EQ(want.max_abs_index, n / 3);
            }
          }
        }
}

TEST(GpuCompare, PassesWhereTheHostPasses) {
  SKIP_WITHOUT_GPU();
  std::vector<float> y;
  ref::SplitMix64 rng(3);
  for (int i = 0; i < 5000; ++i) y.push_back(static_cast<float>(rng.Symmetric()));
  std::vector<float> x = y;
  x[4321] += 1e-4f;
  DeviceCopies d;
  const float *dx = d.Upload(x), *dy = d.Upload(y);
  const std::vector<double> xd(x.begin(), x.end()), yd(y.begin(), y.end());
  for (const double atol : {1e-3, 1e-5}) {  // one passes, one fails on element 4321 alone
    const ref::Tolerance tol{atol, 0, 1};
    const ref::CompareResult want = ref::CompareTensors(xd.data(), yd.data(), 5000, tol);
    const ref::CompareResult got =
        gpu::compare_on_device(dx, MLASIM_KUT_FP32, dy, 5000, 1, nullptr, tol);
    ExpectSameComparison(got, want, "atol " + std::to_string(atol));
    EXPECT_EQ(got.passed, atol > 1e-4);
    EXPECT_EQ(got.first_violation, atol > 1e-4 ? -1 : 4321);
    EXPECT_EQ(got.max_abs_index, 4321);
  }
}

TEST(GpuCompare, RefusesWhatItCannotCompare) {
  SKIP_WITHOUT_GPU();
  DeviceCopies d;
  const float* p = d.Upload(std::vector<float>(4, 1.0f));
  const ref::Tolerance tol;
  auto message = [&](int32_t dtype, const float* a, int64_t n, int32_t group) -> std::string {
    try {
      gpu::compare_on_device(a, dtype, p, n, group, nullptr, tol);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(message(MLASIM_KUT_FP16, p, 4, 1),
            "compare_on_device: dtype " + std::to_string(MLASIM_KUT_FP16) +
                " is neither bf16 nor fp32");
  EXPECT_EQ(message(MLASIM_KUT_FP32, p, 4, 0), "compare_on_device: group 0, n 4");
  EXPECT_EQ(message(MLASIM_KUT_FP32, p, -1, 1), "compare_on_device: group 1, n -1");
  EXPECT_EQ(message(MLASIM_KUT_FP32, nullptr, 1, 1), "compare_on_device: null pointer");
  EXPECT_EQ(message(MLASIM_KUT_FP32, nullptr, 0, 1), "");  // nothing to read
  EXPECT_EQ(gpu::compare_on_device(nullptr, MLASIM_KUT_FP32, nullptr, 0, 1, nullptr, tol).elements, 0);
}

// The reference whose o stays on the device: the o reference_attention downloads, compared
// with itself on the device (every pair, no error) and its lse the host's.
TEST(GpuCompare, ReferenceOnTheDeviceIsTheDownloadedOne) {
  SKIP_WITHOUT_GPU();
  const ref::PlanRequest r = ref::test::DenseRequest(ref::Arch::kGfx950, 16, 2, {37, 0, 300}, 4, 16);
  const Built b = Build(r);
  const ref::MlaInputs shape = ShapeOnly(r);
  const ref::AttentionOutput want = gpu::reference_attention(b.in);
  const auto dev = gpu::reference_attention_on_device(shape, QTensor(b), KvTensor(b));
  EXPECT_TRUE(dev->host.o.empty());
  EXPECT_EQ(dev->host.lse, want.lse);
  const int64_t n = static_cast<int64_t>(want.o.size());
  std::vector<float> o32(want.o.begin(), want.o.end());
  DeviceCopies d;
  const float* host_copy = d.Upload(o32);
  const ref::CompareResult c = gpu::compare_on_device(host_copy, MLASIM_KUT_FP32, dev->o, n,
                                                      shape.head_dim_v, nullptr, ref::Tolerance{});
  EXPECT_EQ(c.elements, n);
  EXPECT_EQ(c.max_abs, 0.0);
  EXPECT_EQ(c.max_abs_index, -1);
  EXPECT_EQ(c.nan_mismatches + c.inf_mismatches + c.tolerance_violations, 0);
  EXPECT_TRUE(c.passed);
}


// The GPU reference against the CPU's monolithic attention (the truth it stands in for) within
// the tolerances of two fp32 computations of the same sums: dense and causal rows, a request
// with no keys (o = 0, lse = -inf on both sides), pages of 16, and sparse top-k rows.
TEST(GpuReference, MatchesTheCpuMonolithicAttention) {
  SKIP_WITHOUT_GPU();
  ref::PlanRequest causal = ref::test::DenseRequest(ref::Arch::kGfx950, 16, 4, {700, 3, 0, 64}, 8);
  causal.is_causal = true;
  for (const ref::PlanRequest& r :
       {ref::test::DenseRequest(ref::Arch::kGfx950, 16, 2, {37, 0, 300}, 4, 16),
        ref::test::DenseRequest(ref::Arch::kGfx950, 128, 1, {1, 2047, 513}, 8), causal,
        ref::test::SparseRequest(ref::Arch::kGfx950, 16, 2, {10, 40}, 8, 4),
        ref::test::SparseRequest(ref::Arch::kGfx950, 32, 3, {3000, 1, 2049}, 2048, 4)}) {
    const Built b = Build(r);
    const ref::AttentionPrecision fp32;
    const auto mono = ref::RunMonolithic(b.in, fp32);
    ASSERT_TRUE(mono.ok()) << mono.status().ToString();
    const ref::AttentionOutput got = gpu::reference_attention(b.in);
    const ref::OutputTolerances tol = ref::TolerancesFor(b.in, *mono, fp32);
    const ref::CompareResult co = ref::CompareTensors(
        got.o.data(), mono->o.data(), static_cast<int64_t>(mono->o.size()), tol.o);
    const ref::CompareResult cl = ref::CompareTensors(
        got.lse.data(), mono->lse.data(), static_cast<int64_t>(mono->lse.size()), tol.lse);
    EXPECT_TRUE(co.passed) << "o: max_abs " << co.max_abs << " at " << co.max_abs_index
                           << ", atol " << tol.o.atol << ", violations "
                           << co.tolerance_violations << ", anomalies "
                           << co.nan_mismatches + co.inf_mismatches;
    EXPECT_TRUE(cl.passed) << "lse: max_abs " << cl.max_abs << " at " << cl.max_abs_index
                           << ", anomalies " << cl.nan_mismatches + cl.inf_mismatches;
    EXPECT_EQ(co.elements, static_cast<int64_t>(mono->o.size()));
    EXPECT_GT(co.max_abs, 0.0);  // two computations: not the same bits everywhere
  }
}

}  // namespace
}  // namespace mlasim
