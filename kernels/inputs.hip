// inputs.hip - q and the KV cache generated on the device (kernels/gpu_api.h GeneratedTensor):
// each element is a pure function of (stream, element index) from ref/input_values.h, the same
// functions ref::BuildMlaInputs calls on the host, so the bytes match the CPU's bit for bit and
// a campaign never builds the inputs on the host nor copies them over. HIP names only (nvcc
// builds it through hip_compat.h).
#include "kernels/hip_compat.h"  // first: the HIP/CUDA names the other headers use

#include "kernels/gpu_api.h"
#include "ref/input_values.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace mlasim::gpu {
namespace {

namespace values = ref::values;

constexpr int kBlock = 256;
constexpr int64_t kMaxGrid = 8192;  // grid-stride loops cover the rest
constexpr int kDtypes = 4;          // bf16, fp16, fp32, fp8 e4m3fn (mlasim_kut.h codes 1..4)

struct GenParams {
  uint64_t state;
  double amplitude;
  int32_t format;
  int64_t rows;
  int32_t cols;
  const int64_t* row_stream;  // null: row r is stream row r
};

// The value of element (row, col) as a float: rounded to the tensor's format, or NaN for a row
// no stream row fills.
__device__ float value_at(const GenParams& P, int64_t row, int32_t col) {
  int64_t stream_row = row;
  if (P.row_stream != nullptr) {
    stream_row = P.row_stream[row];
    if (stream_row < 0) return values::BitsFloat(values::kQuietNaNBits);
  }
  const uint64_t n = static_cast<uint64_t>(stream_row) * static_cast<uint64_t>(P.cols) +
                     static_cast<uint64_t>(col);
  return values::RoundToFormat(values::StreamValue(P.state, n, P.amplitude), P.format);
}

// The bytes of element i (DtypeBytes(dtype) of them in out): the encoded value, zero past the
// tensor, 0xFF when the dtype does not hold the value.
__device__ void element_bytes(const GenParams& P, int32_t dtype, int64_t i, unsigned char* out) {
  const int32_t nb = values::DtypeBytes(dtype);
  if (i >= P.rows * P.cols) {
    for (int32_t k = 0; k < nb; ++k) out[k] = 0;
    return;
  }
  const float v = value_at(P, i / P.cols, static_cast<int32_t>(i % P.cols));
  if (!values::EncodeExact(v, dtype, out))
    for (int32_t k = 0; k < nb; ++k) out[k] = 0xFF;
}

__global__ void __launch_bounds__(kBlock)
    inspect_kernel(GenParams P, int32_t abs_max_cols, unsigned int* result) {
  // result[0]: dtypes some value is not exact in (bit d); result[1]: max |v| bits (finite)
  const int64_t n = P.rows * P.cols;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  unsigned int inexact = 0, abs_max = 0;
  unsigned char scratch[4];
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const int32_t col = static_cast<int32_t>(i % P.cols);
    const float v = value_at(P, i / P.cols, col);
    for (int32_t d = 1; d <= kDtypes; ++d)
      if (!values::EncodeExact(v, d, scratch)) inexact |= 1u << d;
    const unsigned int a = values::FloatBits(v) & 0x7fffffffu;
    if (col < abs_max_cols && a < 0x7f800000u && a > abs_max) abs_max = a;
  }
  if (inexact != 0) atomicOr(&result[0], inexact);
  if (abs_max != 0) atomicMax(&result[1], abs_max);
}

__global__ void __launch_bounds__(kBlock)
    fill_kernel(GenParams P, int32_t dtype, unsigned char* dst, int64_t elements) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int32_t nb = values::DtypeBytes(dtype);
  unsigned char bytes[4];
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < elements;
       i += stride) {
    element_bytes(P, dtype, i, bytes);
    for (int32_t k = 0; k < nb; ++k) dst[i * nb + k] = bytes[k];
  }
}

__global__ void __launch_bounds__(kBlock) diff_kernel(GenParams P, int32_t dtype,
                                                      const unsigned char* src, int64_t elements,
                                                      unsigned long long* result) {
  // result[0]: first differing byte (atomicMin, starts at ~0), result[1]: differing bytes
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int32_t nb = values::DtypeBytes(dtype);
  unsigned long long first = ~0ull, count = 0;
  unsigned char bytes[4];
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < elements;
       i += stride) {
    element_bytes(P, dtype, i, bytes);
    for (int32_t k = 0; k < nb; ++k) {
      if (src[i * nb + k] == bytes[k]) continue;
      const unsigned long long at = static_cast<unsigned long long>(i * nb + k);
      if (at < first) first = at;
      ++count;
    }
  }
  if (count != 0) {
    atomicMin(&result[0], first);
    atomicAdd(&result[1], count);
  }
}

unsigned grid_for(int64_t n) {
  return static_cast<unsigned>(std::max<int64_t>(
      1, std::min<int64_t>((n + kBlock - 1) / kBlock, kMaxGrid)));
}

void check_dtype(int32_t dtype, const char* fn) {
  if (dtype < 1 || dtype > kDtypes)
    throw std::invalid_argument(std::string(fn) + ": dtype " + std::to_string(dtype) +
                                " is not bf16, fp16, fp32 or fp8_e4m3fn");
}

// The tensor's parameters with row_stream on the device (freed by the destructor).
class DeviceParams {
 public:
  DeviceParams(const GeneratedTensor& t, const char* fn) {
    if (t.rows < 0 || t.cols < 0 ||
        (!t.row_stream.empty() && static_cast<int64_t>(t.row_stream.size()) != t.rows))
      throw std::invalid_argument(std::string(fn) + ": rows " + std::to_string(t.rows) +
                                  ", cols " + std::to_string(t.cols) + ", row_stream of " +
                                  std::to_string(t.row_stream.size()) +
                                  " entries (needs rows >= 0, cols >= 0, 0 or rows entries)");
    p_ = GenParams{t.state, t.amplitude, t.format, t.rows, t.cols, nullptr};
    if (!t.row_stream.empty()) {
      rows_ = static_cast<int64_t*>(device_alloc(t.row_stream.size() * sizeof(int64_t)));
      copy_to_device(rows_, t.row_stream.data(), t.row_stream.size() * sizeof(int64_t));
      p_.row_stream = rows_;
    }
  }
  ~DeviceParams() { (void)hipFree(rows_); }
  DeviceParams(const DeviceParams&) = delete;
  DeviceParams& operator=(const DeviceParams&) = delete;
  const GenParams& get() const { return p_; }

 private:
  GenParams p_{};
  int64_t* rows_ = nullptr;
};

}  // namespace

GeneratedStats inspect_generated(const GeneratedTensor& t, int32_t abs_max_cols) {
  const DeviceParams P(t, "inspect_generated");
  GeneratedStats out;
  const int64_t n = t.rows * t.cols;
  if (n == 0) {
    out.exact_dtypes = 0x1Eu;  // bits 1..4: an empty tensor is exact in every type
    return out;
  }
  auto* result = static_cast<unsigned int*>(device_alloc(2 * sizeof(unsigned int)));
  unsigned int host[2] = {0, 0};
  try {
    copy_to_device(result, host, sizeof host);
    hipLaunchKernelGGL(inspect_kernel, dim3(grid_for(n)), dim3(kBlock), 0, 0, P.get(),
                       abs_max_cols, result);
    HIP_CHECK(hipGetLastError());
    copy_to_host(host, result, sizeof host);
  } catch (...) {
    (void)hipFree(result);
    throw;
  }
  device_free(result);
  out.exact_dtypes = 0x1Eu & ~host[0];
  out.abs_max = values::BitsFloat(host[1]);
  return out;
}

void fill_generated(const GeneratedTensor& t, int32_t dtype, void* dev_dst, int64_t elements) {
  check_dtype(dtype, "fill_generated");
  if (elements < 0 || (dev_dst == nullptr && elements > 0))
    throw std::invalid_argument("fill_generated: " + std::to_string(elements) +
                                " elements at a null or with a negative count");
  const DeviceParams P(t, "fill_generated");
  if (elements == 0) return;
  hipLaunchKernelGGL(fill_kernel, dim3(grid_for(elements)), dim3(kBlock), 0, 0, P.get(), dtype,
                     static_cast<unsigned char*>(dev_dst), elements);
  HIP_CHECK(hipGetLastError());
  HIP_CHECK(hipDeviceSynchronize());
}

GeneratedDiff diff_generated(const GeneratedTensor& t, int32_t dtype, const void* dev_src,
                             int64_t elements) {
  check_dtype(dtype, "diff_generated");
  if (elements < 0 || (dev_src == nullptr && elements > 0))
    throw std::invalid_argument("diff_generated: " + std::to_string(elements) +
                                " elements at a null or with a negative count");
  const DeviceParams P(t, "diff_generated");
  GeneratedDiff out;
  if (elements == 0) return out;
  auto* result = static_cast<unsigned long long*>(device_alloc(2 * sizeof(unsigned long long)));
  unsigned long long host[2] = {~0ull, 0};
  try {
    copy_to_device(result, host, sizeof host);
    hipLaunchKernelGGL(diff_kernel, dim3(grid_for(elements)), dim3(kBlock), 0, 0, P.get(), dtype,
                       static_cast<const unsigned char*>(dev_src), elements, result);
    HIP_CHECK(hipGetLastError());
    copy_to_host(host, result, sizeof host);
  } catch (...) {
    (void)hipFree(result);
    throw;
  }
  device_free(result);
  out.changed_bytes = static_cast<int64_t>(host[1]);
  out.first_byte = host[1] == 0 ? -1 : static_cast<int64_t>(host[0]);
  return out;
}

}  // namespace mlasim::gpu
