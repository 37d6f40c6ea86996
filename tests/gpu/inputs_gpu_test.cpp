// kernels/inputs.hip: q and the KV cache generated on the device, byte for byte against what the
// host builds (ref::BuildMlaInputs, encoded as the harness encodes it), NaN-poisoned unused KV
// rows and every storage type (bf16, fp16, fp32, fp8 e4m3fn) included; the stats the harness
// picks storage types and tolerances from; the input check; the GPU reference over generated
// inputs against the one over uploaded inputs. Every test skips without a device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/gpu_api.h"
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
    ref::NumericsOptions o;
    o.seed = 7;
    o.fill_values = false;
    ref::MlaValueSource src;
    auto shape = ref::BuildMlaInputs(r, o, &src);
    ASSERT_TRUE(shape.ok());
    const ref::AttentionOutput want = gpu::reference_attention(b.in);
    const ref::AttentionOutput got = gpu::reference_attention(*shape, QTensor(b), KvTensor(b));
    ASSERT_EQ(got.o.size(), want.o.size());
    EXPECT_EQ(std::memcmp(got.o.data(), want.o.data(), want.o.size() * sizeof(double)), 0);
    EXPECT_EQ(std::memcmp(got.lse.data(), want.lse.data(), want.lse.size() * sizeof(double)), 0);
  }
}

}  // namespace
}  // namespace mlasim
