// gpu_api.h - the plain C++ interface to mlasim's GPU code. No GPU headers: host code compiled by
// g++ includes this, and the implementation lives in kernels/*.hip (GPU_BACKEND=CUDA or HIP) or in
// kernels/gpu_none.cpp (GPU_BACKEND=NONE, where available() is false and the rest throws).
//
// All sizes are in bytes. Every call is synchronous: it returns after the device has finished.
// Errors: a failing HIP runtime call throws std::runtime_error whose message names the call
// (for example "hipMalloc(&p, bytes) failed: hipErrorOutOfMemory (out of memory)").
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ref/attention.h"
#include "ref/decode_update.h"
#include "ref/host_device.h"  // MLASIM_HOST_DEVICE: functions usable on both sides of a .hip file
#include "ref/metadata.h"
#include "ref/numerics.h"

namespace mlasim::gpu {

// True when this build has a GPU backend and at least one device is visible. Never throws, so
// tests can write `if (!gpu::available()) GTEST_SKIP();`.
bool available();

// Where mlasim's own GPU kernel library is (libmlasim_kut_gpu.so: the decode kernels behind the
// kernel-under-test ABI, kernels/mlasim_kut.h): $MLASIM_KUT_GPU_LIBRARY when set, else beside
// the running binary, else in ../lib from it; "" when there is none (a GPU_BACKEND=NONE build).
std::string kut_library_path();

// Devices visible to this process (0 in a GPU_BACKEND=NONE build or without a usable driver).
// Never throws.
int device_count();

// Name of the current device (hipDeviceProp_t::name), or "none" in a GPU_BACKEND=NONE build.
// Throws std::runtime_error when a GPU backend is built but no device is usable.
std::string device_name();

// Where a sentinel tail no longer holds its pattern. Offsets are bytes from the start of the tail.
// When the tail is intact: bad_bytes == 0 and first_bad_byte == last_bad_byte == -1.
struct SentinelScan {
  long long first_bad_byte;  // lowest offset whose byte differs from the pattern, or -1
  long long last_bad_byte;   // highest offset whose byte differs from the pattern, or -1
  long long bad_bytes;       // how many bytes differ from the pattern
};

// The sentinel pattern: byte i of a tail holds 0xA5 ^ (i & 0xFF). It varies with i, so a shifted
// copy of the tail, a memset or a run of zeros all show up as damage.
MLASIM_HOST_DEVICE inline unsigned char sentinel_byte(std::size_t i) {
  return static_cast<unsigned char>(0xA5u ^ (i & 0xFFu));
}

// Fills `tail_bytes` bytes at device pointer `dev_tail` with the sentinel pattern (byte i =
// 0xA5 ^ (i & 0xFF)). tail_bytes == 0 does nothing. Throws std::invalid_argument when dev_tail is
// null and tail_bytes > 0, std::runtime_error when the kernel launch or a HIP call fails.
void fill_sentinel(void* dev_tail, std::size_t tail_bytes);

// Compares `tail_bytes` bytes at device pointer `dev_tail` with the sentinel pattern and reports
// the first and last differing offsets and the count. Same errors as fill_sentinel.
SentinelScan scan_sentinel(const void* dev_tail, std::size_t tail_bytes);

// One sentinel region for the batched calls below: `bytes` bytes at device pointer `p` (byte i
// of the region holds sentinel_byte(i)).
struct SentinelRegion {
  void* p;
  std::size_t bytes;
};

// fill_sentinel without waiting for the kernel: ordered before later work on the default stream
// (every copy and launch of this API), so a worker issues all its fills and waits once. Same
// errors as fill_sentinel, except that a fault of the kernel itself shows at the next wait.
void fill_sentinel_async(void* dev_tail, std::size_t tail_bytes);

// scan_sentinel over every region: out[i] is region i's scan. One upload of the region table,
// one launch and one copy back for all of them (a worker scans ~34 regions per kernel call, and
// each wait costs the most when several processes share the device). Throws
// std::invalid_argument for a null pointer with bytes > 0, std::runtime_error when a HIP call
// fails.
void scan_sentinels(const SentinelRegion* regions, std::size_t count, SentinelScan* out);

// device_fill without waiting for the kernel (ordered as fill_sentinel_async).
void device_fill_async(void* dev_dst, std::size_t bytes, unsigned char value);

// Device memory from a per-process cache: a block of at least `bytes` bytes (sizes rounded up to
// a power of two from 4 KiB), taken from the blocks device_release gave back when one of that
// size is free, else from hipMalloc. Contents are undefined. Returns nullptr for 0 bytes. The
// cache keeps at most 4 GiB of free blocks (a release beyond that frees). Thread-safe. Errors as
// device_alloc.
void* device_acquire(std::size_t bytes);

// Gives a block from device_acquire back to the cache (nullptr does nothing).
void device_release(void* dev_ptr);

// Allocates `bytes` bytes of device memory (hipMalloc); contents are undefined. Returns nullptr
// for 0 bytes. Throws std::runtime_error on failure (including out of memory).
void* device_alloc(std::size_t bytes);

// Frees memory from device_alloc (hipFree). nullptr is allowed and does nothing.
// Throws std::runtime_error on failure.
void device_free(void* dev_ptr);

// Copies `bytes` bytes from host memory `host_src` to device memory `dev_dst` (hipMemcpy).
// Throws std::runtime_error on failure.
void copy_to_device(void* dev_dst, const void* host_src, std::size_t bytes);

// Copies `bytes` bytes from device memory `dev_src` to host memory `host_dst` (hipMemcpy).
// Throws std::runtime_error on failure.
void copy_to_host(void* host_dst, const void* dev_src, std::size_t bytes);

// Sets `bytes` bytes at device pointer `dev_dst` to `value` (a kernel on the null stream; the
// call returns after it finished). 0 bytes does nothing. Throws std::runtime_error on failure.
void device_fill(void* dev_dst, std::size_t bytes, unsigned char value);

// Waits for all work on the current device (hipDeviceSynchronize). Throws std::runtime_error
// naming the error when a kernel failed (an illegal address: the context is lost after that).
void device_synchronize();

// Guard-page allocation (driver virtual memory: reserve, create, map, set access). The buffer is
// placed so that its last byte is the last byte of the mapped range; the next granule is reserved
// but not mapped, so any access past the end faults (CUDA: illegal address, which poisons the
// context: run such calls in a child process). Contents are undefined.
struct GuardedAllocation {
  void* ptr = nullptr;  // the buffer: [ptr, ptr + bytes)
  std::size_t bytes = 0;
  std::size_t mapped_bytes = 0;   // mapped range (bytes rounded up to the granularity)
  std::size_t granularity = 0;    // the unmapped guard after the range (2 MiB on the H200)
  std::uintptr_t mapped_end = 0;  // == ptr + bytes: the first unmapped address
};
// Throws std::invalid_argument for 0 bytes, std::runtime_error when a driver call fails.
GuardedAllocation device_alloc_guarded(std::size_t bytes);
// Frees a guarded allocation by its ptr (nullptr does nothing); driver errors are ignored, so it
// is safe after a fault. Throws std::invalid_argument for a pointer it did not return.
void device_free_guarded(void* ptr);
// device_alloc_guarded from a per-process cache of guarded mappings: a mapping of a power-of-two
// number of granules at least `bytes` wide, reused when a released one of that size is free (no
// driver calls then); the buffer still ends at the last mapped byte (mapped_bytes - bytes may
// exceed a granule: the slack before the buffer is mapped). At most 4 GiB of free mappings are
// kept. Errors as device_alloc_guarded.
GuardedAllocation device_acquire_guarded(std::size_t bytes);
// Gives a buffer from device_acquire_guarded back to the cache (nullptr does nothing). Throws
// std::invalid_argument for a pointer it did not return.
void device_release_guarded(void* ptr);
// The driver's minimum mapping granularity on the current device.
std::size_t guard_page_granularity();

// ---------------------------------------------------------------------------------------------
// GPU planner (kernels/planner.hip): aiter's v1.2 fast-mode planner as a one-workgroup kernel.
// The host takes the reference's decisions (ref::DecidePlan: clusters, folding, dispatch); the
// payload sum, the walk (one lane, serial planner; all lanes after a one-lane scan, parallel
// planner) and every store run on the device. Buffers are poisoned with ref::Plan::kPoison before
// the call, so each returned vector compares element for element with ref::Plan's data.
struct GpuPlan {
  std::vector<int32_t> work_indptr, work_info, reduce_indptr, reduce_final_map, reduce_partial_map;
  bool parallel = false;     // which planner kernel ran
  int32_t num_tiles = 0;     // tiles the walk counted
  int32_t payload = 0;       // cost units per cluster computed on the device
  int32_t oob_stores = 0;    // stores the kernel dropped because they fell outside a buffer
  bool walk_failed = false;  // the serial walk hit its iteration bound
  double kernel_us = 0;      // median of 5 batches of timing_iterations launches, us (0: not timed)
};

// Plans `request` into buffers of `sizes` (choice as in ref::PlannerOptions). Throws
// std::invalid_argument with the reference's message for a request it refuses,
// std::runtime_error for HIP failures. timing_iterations > 0 also times back-to-back launches
// (kernel_us: the median of 5 batches of that many launches, each a batch mean).
GpuPlan plan_mla_metadata(const ref::PlanRequest& request, const ref::MetadataSizes& sizes,
                          ref::PlannerChoice choice, int timing_iterations = 0);
// Same, sized with ref::GetMlaMetadataInfoV1 for batch = kv_indptr.size() - 1.
GpuPlan plan_mla_metadata(const ref::PlanRequest& request, ref::PlannerChoice choice,
                          int timing_iterations = 0);

// decode_update_mla_metadata_v1 on the device, applied to `plan`'s buffers in place (their data
// vectors; cells and input_violations are not touched). The caller checks preconditions first
// (ref::DecodeUpdateMlaMetadataV1 on a copy); reads past kv_indptr / num_reject_tokens give 0.
void decode_update_mla_metadata(const ref::DecodeUpdateRequest& request, ref::Plan& plan);

// ---------------------------------------------------------------------------------------------
// Persistent MLA decode + reduce (kernels/decode.hip). bf16 q and KV (or fp8 e4m3fn: KV, and q
// with it; DecodeOptions), fp32 accumulation, P fed to the matrix product in bf16 (fp16 with fp8
// KV), o written in bf16, lse and partial rows in fp32.
enum class ZeroKvVariant : uint8_t {
  kAsm,   // zero-KV work items read their q rows and write o = 0 / lse = -inf (or partial rows)
  kOpus,  // zero-KV work items return before touching anything
  kHk,    // zero-KV work items read q, write nothing
};

struct DecodeOptions {
  ZeroKvVariant variant = ZeroKvVariant::kAsm;
  int64_t q_alloc_rows = -1;  // q rows allocated (-1: inputs.q_rows()); the kernel reads past
  int64_t o_alloc_rows = -1;  // o/lse rows allocated (-1: inputs.q_rows())
  int64_t tail_rows = 8;      // sentinel rows after q, o, lse and the partial buffers
  bool run_reduce = true;
  // > 0: also time the decode, the reduce and the pair (medians of 5 batches of this many
  // back-to-back launches, after one warm-up launch; CUDA/HIP events).
  int timing_iterations = 0;
  // Guard-page mode: "q" or "o" places that buffer (no sentinel tail) with device_alloc_guarded,
  // so an access past its end faults; "" (default): every buffer has a sentinel tail.
  std::string guard_buffer;
  // NVIDIA decode kernel, for tuning runs and tests: 0 = the default (bf16 KV: 10 where heads are
  // a multiple of 64, 9 where they are a multiple of 32, else 8; fp8 KV: 9 where heads are a
  // multiple of 32, else 1; where the kernel library is not built for sm_90a, bf16 7 and 4, fp8
  // 1; fp8 q with fp8 KV: 1 on sm_90a builds, else (and with bf16 KV) the portable kernel; the
  // fastest measured on the H200, docs/performance.md "Session 11", "Session
  // 19", "Session 20": 10 against 9 at 64, 128 and 256 heads, 192 heads unmeasured); 6 = the
  // warp-specialised kernel (2 producer warps stream 64-key chunks with cp.async into 2 stages, 3
  // for fp8; 8 consumer warps); 1..4 = the lock-step mma kernel with (keys per chunk x stages)
  // 32 x 3, 32 x 4, 32 x 5, 64 x 2 (fp8 KV: 1, 2 = 64 x 4, 64 x 5 with the fp8 bytes read
  // directly as mma operands, 3 = 64 x 3 and 4 = 64 x 2 with each chunk widened to fp16 in shared
  // memory first); 5 = the portable kernel; 7 = the lock-step 64 x 2 kernel with two m16 tiles (32
  // q rows of one token) per pass, for heads a multiple of 32 and bf16 KV (else the kernel library
  // refuses the call as unsupported); 8 / 9 = the warpgroup-mma kernel (kernels/decode/sm90/
  // wgmma.h) with 16 / 32 q rows per pass (9: heads a multiple of 32), bf16 KV in a ring of
  // 18 blocks of 8 KB, fp8 KV widened into two 16-bit chunks; 10 = the warpgroup-mma kernel with 64
  // heads of one token as the mma's M (kernels/decode/sm90/heads_m.h; heads a multiple of 64,
  // bf16 KV, a workgroup per 64 heads of a cluster); 8-10: sm_90a builds only (else refused as
  // unsupported). Head dims other than 576 / 512 always run the portable kernel (as the AMD
  // build does).
  int tiling = 0;
  // KV cache format on the device: bf16, or fp8_e4m3fn (1 byte per element; every
  // inputs.kv_cache value must then be an e4m3fn value, else std::invalid_argument). With fp8 KV
  // the NVIDIA kernels run fp16 mma: the fp8 bytes widened exactly to fp16 (in shared memory, or
  // per fragment for tilings 1-2), q converted to fp16 once per group, P rounded to fp16; o stays
  // bf16. (The portable kernel widens the fp8 rows to bf16 in shared memory.)
  ref::NumFormat kv_format = ref::NumFormat::kBf16;
  // q format on the device: bf16, or fp8_e4m3fn (1 byte per element; every inputs.q value must
  // then be an e4m3fn value, else std::invalid_argument), as an engine that keeps q in the KV
  // cache's dtype calls it (ATOM#287). With fp8 KV at 576 / 512 on sm_90a builds, tilings 0-2
  // compute S on e4m3 mma from the fp8 bytes of q and K (exact products, accumulated by the
  // tensor cores into fp32 registers); P V as with bf16 q. Tiling 0 otherwise, and tiling 5, run
  // the portable kernel, which widens q to bf16; other tilings refuse fp8 q as unsupported.
  ref::NumFormat q_format = ref::NumFormat::kBf16;
};

// What a sentinel tail showed after a call: rows (of the buffer's row size) past its end.
struct TailDamage {
  std::string buffer;      // "o", "lse", "partial_o", "partial_lse", "q"
  int64_t rows = 0;        // rows the buffer holds (its end)
  int64_t first_row = -1;  // first damaged row, counted from the buffer's start
  int64_t last_row = -1;
  int64_t bad_bytes = 0;
};

struct DecodeResult {
  std::vector<double> o;    // [o rows (inputs.q_rows()), H, Dv]; NaN where nothing was written
  std::vector<double> lse;  // [o rows, H]
  std::vector<TailDamage> tails;  // only damaged tails
  // Rows the kernel touched (an access log kept with atomics): -1 when none.
  int64_t q_rows_read_min = -1, q_rows_read_max = -1;
  int64_t o_rows_written_min = -1, o_rows_written_max = -1;
  // Timings (timing_iterations > 0), microseconds per launch: the decode alone, the reduce alone,
  // and decode + reduce back to back (the reduce launched as a programmatic dependent on NVIDIA).
  double decode_us = 0, reduce_us = 0, decode_reduce_us = 0;
  std::string kernel;       // which decode kernel ran (DecodeOptions::tiling)
  GuardedAllocation guard;  // the guarded buffer's placement (guard_buffer set), else empty
};

// Runs the plan's work items (one workgroup per cluster) and the reduce. inputs: as built by
// ref::BuildMlaInputs (values exactly representable in bf16; head_dim_qk <= 576, head_dim_v <=
// head_dim_qk, multiples of 16; num_heads a multiple of 16; no head folding). Outputs are
// poisoned (NaN / 0xFF) before the call. Throws std::invalid_argument for shapes it does not run.
DecodeResult run_mla_decode(const ref::MlaInputs& inputs, const ref::Plan& plan,
                            const DecodeOptions& options = {});

// ---------------------------------------------------------------------------------------------
// The plain fp32 reference of MLA decode on the device (kernels/reference.hip), written for
// obviousness more than speed: one workgroup per (q row, head); pass 1 takes the maximum logit
// over the row's visible keys, pass 2 walks the keys in chunks of the workgroup's size (each
// key's exp(s - max) into shared memory, its dot product by one warp whose lanes read the key's
// row side by side, then each thread a few output columns summing p_j v_j). The semantics of ref::RunMonolithic (ref/attention.h): dense rows see their
// request's keys up to the causal limit (bottom-right aligned), sparse rows the valid entries of
// their top-k list; a row with no visible key gets o = 0, lse = -inf. Nothing is rounded: q, KV,
// P, o and the sums stay fp32. Returns o [q_rows, H, Dv] and lse [q_rows, H] in the caller's
// layout. Throws std::invalid_argument for inputs ref::ValidateMlaInputs refuses,
// std::runtime_error for device errors.
ref::AttentionOutput reference_attention(const ref::MlaInputs& inputs);

// ---------------------------------------------------------------------------------------------
// Inputs generated on the device (kernels/inputs.hip) from the counter-based streams of
// ref/input_values.h, bit for bit what ref::BuildMlaInputs builds on the host (its
// ref::MlaValueSource says where each value comes from), without a host round trip.
struct GeneratedTensor {
  uint64_t state = 0;      // the stream (ref::MlaValueSource q_state / kv_state)
  double amplitude = 1.0;  // values uniform in [-amplitude, amplitude) before rounding
  int32_t format = 1;      // ref::values::Format (ref::NumFormat's value) the values round to
  int64_t rows = 0;        // rows of the tensor
  int32_t cols = 0;        // values per row
  // Empty: row r holds stream values [r * cols, (r + 1) * cols). Else one entry per row: row r
  // holds stream row row_stream[r] (values row_stream[r] * cols + x), or NaN where it is < 0.
  std::vector<int64_t> row_stream;
};

// What a generated tensor holds: which storage types hold every value exactly (bit d set, d a
// kernels/mlasim_kut.h dtype: MLASIM_KUT_BF16, FP16, FP32, FP8_E4M3FN, as ref::values::
// EncodeExact says), and max |v| over the finite values of columns [0, abs_max_cols).
struct GeneratedStats {
  uint32_t exact_dtypes = 0;
  float abs_max = 0;
};
// Throws std::invalid_argument for a bad shape (negative rows, cols < 0, row_stream of another
// length), std::runtime_error for device errors.
GeneratedStats inspect_generated(const GeneratedTensor& t, int32_t abs_max_cols);

// Writes the first `elements` values of `t` (row-major), encoded as `dtype` (a kernels/
// mlasim_kut.h dtype), to device memory `dev_dst`; elements past rows x cols are zero bytes.
// A value the dtype does not hold exactly is written as 0xFF bytes (check inspect_generated
// first). Throws std::invalid_argument for another dtype, a null dev_dst with elements > 0 or a
// bad shape, std::runtime_error for device errors.
void fill_generated(const GeneratedTensor& t, int32_t dtype, void* dev_dst, int64_t elements);

// Compares `elements` elements of `dtype` at dev_src with what fill_generated writes: the bytes
// that differ and the first of them (-1 when none). Errors as fill_generated.
struct GeneratedDiff {
  int64_t changed_bytes = 0;
  int64_t first_byte = -1;
};
GeneratedDiff diff_generated(const GeneratedTensor& t, int32_t dtype, const void* dev_src,
                             int64_t elements);

// reference_attention over generated inputs: `shape` holds everything but q and kv_cache (as
// ref::BuildMlaInputs leaves them with fill_values false; ref::ValidateMlaShape), `q` and `kv`
// generate them on the device as fp32 (the stored values: the same numbers reference_attention
// reads from the host). Same results and errors as reference_attention.
ref::AttentionOutput reference_attention(const ref::MlaInputs& shape, const GeneratedTensor& q,
                                         const GeneratedTensor& kv);

// The reference with its o left on the device, for a comparison there (compare_on_device): a
// fuzzing campaign compares millions of o elements per call, which cost more to download and
// widen to double on the host than to compare where they are. `host` holds q_rows, num_heads,
// head_dim_v and lse [q_rows, H] (o empty); `o` is [q_rows, H, Dv] fp32 device memory from
// device_acquire, released with the object. Neither copied nor moved (held by unique_ptr).
struct DeviceAttention {
  DeviceAttention() = default;
  DeviceAttention(const DeviceAttention&) = delete;
  DeviceAttention& operator=(const DeviceAttention&) = delete;
  ~DeviceAttention();
  ref::AttentionOutput host;
  float* o = nullptr;
};
// reference_attention over generated inputs (same semantics, values and errors), o kept on the
// device.
std::unique_ptr<DeviceAttention> reference_attention_on_device(const ref::MlaInputs& shape,
                                                               const GeneratedTensor& q,
                                                               const GeneratedTensor& kv);

// ref::CompareTensors on the device: the first `n` elements of `dev_actual` (`dtype`
// MLASIM_KUT_BF16 or MLASIM_KUT_FP32, widened exactly) against fp32 `dev_expected`, element i
// skipped where `skip_groups[i / group]` is set (host memory, ceil(n / group) flags; nullptr:
// none). Counts, first indices, max_abs / max_rel and their indices are exactly
// CompareTensors'; cos_diff sums the same terms in double in a fixed order of its own (blocks
// of a grid that depends on n only), so it is deterministic and equal to the host's up to the
// rounding of a reordered sum, and `passed` is the host's except when cos_diff is within that
// rounding of its tolerance. Throws std::invalid_argument for another dtype, group < 1, n < 0
// or a null pointer with n > 0; std::runtime_error for device errors.
ref::CompareResult compare_on_device(const void* dev_actual, int32_t dtype,
                                     const float* dev_expected, int64_t n, int32_t group,
                                     const uint8_t* skip_groups, const ref::Tolerance& tol);

// Device-to-device copy bandwidth in GB/s (read + write bytes / time) over `bytes`.
double measure_copy_bandwidth(std::size_t bytes, int iterations);

// Read bandwidth in GB/s (rows.size() x row_bytes / time) of reading the rows `rows` (ids into a
// cache of `cache_rows` rows of `row_bytes` bytes, a positive multiple of 16) once each in list
// order, nothing else read or written: the ceiling a decode that reads exactly those rows (a
// dense request's pages in order, a sparse token's top-k rows) can reach. Timed as the decode
// is (the median of 5 batches of `iterations` launches). Throws std::invalid_argument for a bad row_bytes / cache_rows or a row
// id outside the cache; 0 for an empty list.
double measure_row_read_bandwidth(const std::vector<int32_t>& rows, int64_t cache_rows,
                                  int32_t row_bytes, int iterations);

}  // namespace mlasim::gpu
