// File: tools/io/case_dir.h
//
// Case directories: what `mlasim.capture(dir, call_name, config=..., **tensors)` writes
// (python/mlasim/capture.py) and `mlasim check CASE_DIR` reads. A case directory holds
//
//   manifest.json   {"format": "mlasim-case", "schema_version": 1, "call": NAME,
//                    "versions": {"mlasim": ..., "python": ..., "numpy": ..., "torch": ...},
//                    "config": {... engine config; "planner": get_mla_metadata_v1's scalars ...},
//                    "tensors": {NAME: {"file", "dtype", "descr", "shape", "strides", "nbytes",
//                                       "data_ptr", "device"}, ...}}
//   NAME.npy        one per tensor, C order, the bytes of the tensor (bf16 / fp8 as raw bits)
//
// The format is documented in docs/python.md ("Case directories"). Reading is strict and bounded
// (issue 19): every manifest field is type- and range-checked, every .npy header is compared with
// its manifest entry and the file size with the header before any tensor data is read, and data
// is read only on request, up to a limit. Every error is InvalidArgument naming the file and the
// field: "CASE/manifest.json:tensors.q.shape", "CASE/q.npy:header.descr".
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "ref/status.h"
#include "tools/io/npy_reader.h"

namespace mlasim::io {

inline constexpr const char* kCaseFormat = "mlasim-case";
inline constexpr int32_t kCaseSchemaVersion = 1;
inline constexpr const char* kCaseManifestName = "manifest.json";

// One tensor dtype a case can hold: its name (torch's, without "torch."), the .npy type string
// the file stores it as, and its size. bfloat16 and the fp8 types have no numpy dtype: their
// raw bits are stored as <u2 / |u1. This table is the one description read by the Python capture
// (through the bindings) and by this reader.
struct CaseDType {
  const char* name;   // "bfloat16"
  const char* descr;  // "<u2"
  int32_t itemsize;   // 2
};
const std::vector<CaseDType>& CaseDTypes();
const CaseDType* FindCaseDType(std::string_view name);

// Bounds on a case directory. The defaults keep `mlasim check` within a few hundred MiB.
struct CaseLimits {
  int64_t max_manifest_bytes = int64_t{4} << 20;
  int32_t max_tensors = 256;
  int32_t max_name_chars = 128;                // tensor names, call name, file names
  int64_t max_load_bytes = int64_t{64} << 20;  // data of one tensor read into memory
  int64_t max_stride = int64_t{1} << 40;       // |stride| in elements
  NpyLimits npy;
};

struct CaseTensor {
  std::string name;    // key in manifest "tensors"
  std::string file;    // "q.npy", a plain file name inside the case directory
  std::string dtype;   // a CaseDTypes() name
  std::string descr;   // the .npy type string (the table's for dtype)
  std::string device;  // "cpu", "cuda:0", ...
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // elements, as torch's stride(); may be negative for numpy views
  int64_t nbytes = 0;            // prod(shape) * itemsize: the data bytes of the .npy
  uint64_t data_ptr = 0;         // address of element 0 in the capturing process
  int32_t itemsize = 0;
  // Bytes the elements occupy around data_ptr: [data_ptr + span_begin, data_ptr + span_end).
  // span_begin < 0 only with negative strides; both 0 for an empty tensor.
  int64_t span_begin = 0, span_end = 0;
  NpyHeader header;  // set by OpenCase, equal to the manifest's descr and shape
};

struct CaseManifest {
  int32_t schema_version = 0;
  std::string call;
  nlohmann::json versions;          // object of strings; "mlasim" required
  nlohmann::json config;            // object, free-form except "planner" (tools/io/case_plan.h)
  std::vector<CaseTensor> tensors;  // sorted by name
  const CaseTensor* Find(std::string_view name) const;
  // The KV cache under any of its names (kKvCacheNames, in that order), or null.
  const CaseTensor* FindKvCache() const;
};

// The names a case may capture the KV cache under: aiter's kv_buffer, then kv_cache, kv.
inline constexpr const char* kKvCacheNames[] = {"kv_buffer", "kv_cache", "kv"};

// Where a case's files come from: a directory, or memory (tests and the fuzz harness).
class CaseFiles {
 public:
  virtual ~CaseFiles() = default;
  // The path shown in errors: "DIR/q.npy" for a directory, the bare name for memory.
  virtual std::string Display(const std::string& name) const = 0;
  // Size in bytes. Errors (field Display(name)): missing, a directory, unreadable.
  virtual StatusOr<int64_t> Size(const std::string& name) const = 0;
  // Exactly `bytes` bytes at `offset` (the caller has checked them against Size).
  virtual StatusOr<std::string> Read(const std::string& name, int64_t offset,
                                     int64_t bytes) const = 0;
  // The directory a relative path the case names (config.contract) resolves against: the case's
  // own ("" for a case in memory: the working directory).
  virtual std::string Directory() const { return ""; }
};

class DiskCaseFiles final : public CaseFiles {
 public:
  explicit DiskCaseFiles(std::string dir) : dir_(std::move(dir)) {}
  // The directory exists and is a directory. Errors name the directory.
  Status CheckDirectory() const;
  std::string Display(const std::string& name) const override;
  StatusOr<int64_t> Size(const std::string& name) const override;
  StatusOr<std::string> Read(const std::string& name, int64_t offset, int64_t bytes) const override;
  std::string Directory() const override { return dir_; }

 private:
  std::string dir_;
};

class MemoryCaseFiles final : public CaseFiles {
 public:
  std::map<std::string, std::string> files;
  std::string Display(const std::string& name) const override { return name; }
  StatusOr<int64_t> Size(const std::string& name) const override;
  StatusOr<std::string> Read(const std::string& name, int64_t offset, int64_t bytes) const override;
};

// Parses and checks manifest.json's text (reads no .npy). `display` is the manifest's path for
// errors ("CASE/manifest.json"); fields follow it after a colon ("...:tensors.q.nbytes").
StatusOr<CaseManifest> ParseCaseManifest(const std::string& text, const std::string& display,
                                         const CaseLimits& limits = {});

// Reads and checks manifest.json and every .npy header: magic, version, header dict, descr,
// fortran_order (must be False), shape against the manifest, and each file's size against its
// header (a truncated or padded file is an error). Reads no tensor data.
StatusOr<CaseManifest> OpenCase(const CaseFiles& files, const CaseLimits& limits = {});

// The data bytes of one tensor of an opened case (little-endian, C order), refusing tensors
// above limits.max_load_bytes (field "...:tensors.NAME.nbytes").
StatusOr<std::string> ReadTensorData(const CaseFiles& files, const CaseTensor& tensor,
                                     const CaseLimits& limits = {});

// The elements of an int32 tensor of rank `ranks` (any rank when empty). Errors name
// "manifest.json:tensors.NAME.dtype" / ".shape" with what was expected and why (`purpose`).
StatusOr<std::vector<int32_t>> ReadInt32Tensor(const CaseFiles& files, const CaseTensor& tensor,
                                               const std::vector<int32_t>& ranks,
                                               const std::string& purpose,
                                               const CaseLimits& limits = {});

// "0x7f00deadbeef" (lowercase, no padding), the manifest's data_ptr form.
std::string HexAddress(uint64_t address);

}  // namespace mlasim::io
